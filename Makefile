# The targets CI and developers run. `make test` is the README's test command.
GO        ?= go
PKGS      ?= ./...
FUZZTIME  ?= 30s
GOLANGCI  ?= github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
GOBIN     := $(shell $(GO) env GOPATH)/bin

.PHONY: all build test lint bench bench-go bench-e2e bench-backlog bench-query bench-outbox-rows run fuzz vet sim sim-long soak \
	kafka-up kafka-down tidb-up tidb-down galera-up galera-down test-kafka test-tidb test-galera test-engines

# The version and revision the binary reports (consumer version,
# paycb_build_info, the start-up line), also when built without VCS data.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BUILD_LDFLAGS = -X github.com/paycallback/paycallback/internal/buildinfo.version=$(VERSION) -X github.com/paycallback/paycallback/internal/buildinfo.revision=$(REVISION)

all: build test

build:
	$(GO) build -ldflags "$(BUILD_LDFLAGS)" -o bin/consumer ./cmd/consumer

## test: the whole suite, race detector on, against real MariaDB (TEST_MYSQL_DSN).
test:
	$(GO) vet $(PKGS)
	# The Apache Kafka suite's files (make test-kafka) build here too.
	$(GO) vet -tags enginekafka $(PKGS)
	$(GO) test -race -count=1 -timeout 20m $$($(GO) list $(PKGS) | grep -v '/internal/sim$$')
	# The seeded fault simulation's fixed seeds, printing each seed's
	# faults and the lost/posted-twice figures.
	$(GO) test -race -count=1 -timeout 5m -run '^TestSim$$' -v ./internal/sim/

vet:
	$(GO) vet $(PKGS)

## lint: golangci-lint, pinned.
lint:
	@test -x $(GOBIN)/golangci-lint || $(GO) install $(GOLANGCI)
	$(GOBIN)/golangci-lint run $(PKGS)

## bench: the Go micro-benchmarks, then the end-to-end benchmark (one after
## the other even under make -j: they would skew each other's figures).
bench:
	$(MAKE) bench-go
	$(MAKE) bench-e2e
	$(MAKE) bench-query

## bench-go: Go benchmarks, benchstat-friendly output in bench/results/go.txt.
bench-go:
	@mkdir -p bench/results
	$(GO) test -run '^$$' -bench . -benchmem -count 3 ./pkg/... | tee bench/results/go.txt

## bench-e2e: the end-to-end harness (transport ceiling, raw rows, the rule
## floor, the per-event floor, per-message and batched pipelines, replay,
## paced latency: batched with one and with two worker processes, and
## per message, beside the paced read floor: reading and decoding alone) against
## MariaDB (PAYCB_BENCH_DSN or TEST_MYSQL_DSN, default root@127.0.0.1:3306),
## each row in messages/s and distinct events/s with worker and database CPU
## (from /proc, when the server runs here) and statements per event, and the
## goals evaluated; table in bench/results/e2e.txt.
## BENCH_FLAGS passes flags, e.g. BENCH_FLAGS=--trades=30 for a quick run.
BENCH_FLAGS ?=
bench-e2e:
	$(GO) run ./cmd/paycb-bench -v --out bench/results/e2e.txt $(BENCH_FLAGS)

## bench-backlog: the memory goal's measurement alone: BACKLOG generated
## messages (at least; default 1,000,000) produced to a kfake-broker process,
## then one batched consumer (PAYCB_BATCH_MAX=256) over all of them; reports
## elapsed, messages/s and distinct events/s, CPU and statements per event,
## and the peak RSS of the worker and of the broker, with the ledger's sanity
## checks; table in bench/results/backlog.txt. Takes
## several minutes at the default size. BENCH_FLAGS passes flags too.
BACKLOG ?= 1000000
bench-backlog:
	$(GO) run ./cmd/paycb-bench -v --backlog $(BACKLOG) --out bench/results/backlog.txt $(BENCH_FLAGS)

## bench-query: the active query's row alone: WeChat payments registered
## through the input topic at 1,000/s with no callback, a querier process
## (first wait 1s) asking a fake WeChat (TLS, RSA-2048 signed requests and
## answers), the batched worker settling the answers; reports
## registered->settled p50/p99 against first wait + 1s, queries/s, the
## querier's CPU and statements per query, the worker's, the fake's and the
## database's CPU per query, and the cost of one RSA-2048 request signature;
## table in bench/results/query.txt. BENCH_FLAGS passes flags too (e.g.
## BENCH_FLAGS='--query-rate=200 --query-duration=2s' for a quick run).
bench-query:
	$(GO) run ./cmd/paycb-bench -v --query --out bench/results/query.txt $(BENCH_FLAGS)

## bench-outbox-rows: the outbox row's server CPU per insert and mark, in the
## layouts before and after migration 0018 (a local MariaDB; ROWS, REPS).
bench-outbox-rows:
	bench/outbox-rowcost.sh

## run: the embedded demo; nothing to install beyond Go.
run:
	$(GO) run ./cmd/consumer demo

## fuzz: every fuzz target for FUZZTIME each.
fuzz:
	@for pkg in $$($(GO) list ./...); do \
		for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "fuzz $$pkg $$t"; \
			$(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

## sim: the seeded fault simulation. SEED=n plays one seed's stream and fault
## schedule again, REPEAT times (timing varies, so a failure is re-run to see
## whether it reproduces); without SEED, the fixed CI seeds.
SEED   ?=
REPEAT ?= 3
sim:
	$(GO) test -race -count=1 -timeout 30m -run '^TestSim$$' -v ./internal/sim/ -args \
		$(if $(SEED),-sim.seed=$(SEED) -sim.repeat=$(REPEAT))

## sim-long: SEEDS seeds from START (defaults 200 from 1000).
SEEDS ?= 200
START ?= 1000
sim-long:
	$(GO) test -race -count=1 -timeout 3h -run '^TestSim$$' ./internal/sim/ -args -sim.seeds=$(SEEDS) -sim.start=$(START)

## soak: the kill -9 soak: bin/consumer and kfake-broker as subprocesses,
## MariaDB, SOAK_EVENTS events, SIGKILLed SOAK_KILLS times at random moments
## (each time restarted), then the invariants. `make test` runs the short
## default (about 2,000 events, 3 kills).
SOAK_EVENTS ?= 50000
SOAK_KILLS  ?= 20
soak:
	$(GO) test -count=1 -timeout 90m -v -run '^TestKillNineSoak$$' ./internal/soak/ -args \
		-soak.events=$(SOAK_EVENTS) -soak.kills=$(SOAK_KILLS)

## Engines for tests (docs/contract.md, "Engines for tests"): real engines on
## loopback, each fetched or built once into ENGINES_DIR (downloads, builds,
## data, logs and pid files; never committed). Each *-up returns once the
## engine answers and prints its address; each *-down stops only what its
## *-up started. scripts/engines/<engine>.sh holds the steps.
ENGINES_DIR ?= $(CURDIR)/.engines
export ENGINES_DIR

## kafka-up / kafka-down: one Apache Kafka broker (KRaft), 127.0.0.1:19092.
kafka-up:
	scripts/engines/kafka.sh up
kafka-down:
	scripts/engines/kafka.sh down

## tidb-up / tidb-down: tidb-server on its embedded storage, 127.0.0.1:4000;
## TIDB_TXN_MODE=optimistic or pessimistic (the default); TIDB_SERVER_VERSION
## sets its server-version (what VERSION() reports, e.g. 8.0.40).
tidb-up:
	scripts/engines/tidb.sh up
tidb-down:
	scripts/engines/tidb.sh down

## galera-up / galera-down: three MariaDB Galera nodes, 127.0.0.1:3311-3313.
galera-up:
	scripts/engines/galera.sh up
galera-down:
	scripts/engines/galera.sh down

## test-kafka, test-tidb, test-galera: each engine suite, starting (and
## afterwards stopping) what it needs; test-engines runs all three.
## test-tidb runs once more on TiDB restarted with a MySQL-looking
## server-version (8.0.40, or TIDB_TEST_SERVER_VERSION).
test-kafka:
	scripts/engines/kafka.sh test
test-tidb:
	scripts/engines/tidb.sh test
test-galera:
	scripts/engines/galera.sh test
test-engines: test-kafka test-tidb test-galera
