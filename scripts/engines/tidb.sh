#!/usr/bin/env bash
# TiDB for the engine suite: tidb-server on its embedded storage (unistore),
# 127.0.0.1:4000, user root, no password.
#
#   tidb.sh up     build tidb-server once (pinned by scripts/engines/tidb/),
#                  start it, set TIDB_TXN_MODE (pessimistic, the default, or
#                  optimistic) globally, print the address. TIDB_SERVER_VERSION
#                  sets the server's server-version (what VERSION() reports,
#                  e.g. 8.0.40, as operators set it for MySQL clients); unset,
#                  TiDB's own ("8.0.11-TiDB-…")
#   tidb.sh down   stop the server up started (its pid file), nothing else
#   tidb.sh test   up, the engine suite in pessimistic then optimistic mode,
#                  then once more (pessimistic) on the server restarted with
#                  TIDB_SERVER_VERSION=8.0.40 (TIDB_TEST_SERVER_VERSION sets
#                  another), where the worker must still know it is on TiDB;
#                  down (when up started it), else the server is restarted
#                  as it was
#
# Everything it makes lives in $ENGINES_DIR/tidb (default .engines/tidb):
# the binary and its build stamp, data/, tidb.log, tidb.pid, and tidb.toml
# (the config file holding server-version, while one is set).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ENGINES_DIR=${ENGINES_DIR:-$ROOT/.engines}
DIR=$ENGINES_DIR/tidb
BIN=$DIR/tidb-server
STAMP=$DIR/tidb-server.stamp
PIDFILE=$DIR/tidb.pid
LOG=$DIR/tidb.log
CONFIG=$DIR/tidb.toml
HOST=127.0.0.1
PORT=${TIDB_PORT:-4000}
STATUS_PORT=${TIDB_STATUS_PORT:-10080}
MODULE=$ROOT/scripts/engines/tidb
DSN="root@tcp($HOST:$PORT)/"

log() { echo "tidb: $*" >&2; }

# stamp is what the binary was built from: the wrapper module's go.mod and
# go.sum and the Go version.
stamp() {
	{ cat "$MODULE/go.mod" "$MODULE/go.sum"; go version; } | sha256sum | cut -d' ' -f1
}

build() {
	mkdir -p "$DIR"
	if [[ -x $BIN && -f $STAMP && $(cat "$STAMP") == "$(stamp)" ]]; then
		return
	fi
	log "building tidb-server (pinned in scripts/engines/tidb; about 12 minutes on 2 cores with a cold cache)"
	local start=$SECONDS
	(cd "$MODULE" && go build -mod=mod -tags codes -o "$BIN.tmp" github.com/pingcap/tidb/cmd/tidb-server)
	mv "$BIN.tmp" "$BIN"
	stamp >"$STAMP"
	log "built $BIN in $((SECONDS - start))s"
}

# sql runs statements on the server with the MariaDB/MySQL command-line
# client.
sql() {
	local client
	client=$(command -v mariadb || command -v mysql) || {
		log "needs the mariadb (or mysql) command-line client"
		return 1
	}
	"$client" --protocol=tcp -h "$HOST" -P "$PORT" -u root --connect-timeout=2 -N -B -e "$1"
}

running() {
	[[ -f $PIDFILE ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null
}

set_mode() {
	local mode=$1
	case $mode in
	pessimistic | optimistic) ;;
	*)
		log "TIDB_TXN_MODE must be pessimistic or optimistic, not '$mode'"
		return 2
		;;
	esac
	# Global: every session opened from now on starts in this mode.
	sql "SET GLOBAL tidb_txn_mode = '$mode'"
	log "transaction mode: $(sql 'SELECT @@GLOBAL.tidb_txn_mode')"
}

# configured_version prints the server-version the running server was
# started with ("" for none: TiDB's own).
configured_version() {
	[[ -f $CONFIG ]] || return 0
	sed -n 's/^server-version = "\(.*\)"$/\1/p' "$CONFIG"
}

# check_version fails loudly unless VERSION() is the server-version asked
# for: a setting that did not take would leave "TiDB" in the banner, and
# the suite would not try what it means to try.
check_version() {
	local want=$1 got
	[[ -n $want ]] || return 0
	got=$(sql 'SELECT VERSION()')
	if [[ $got != "$want" || $got == *TiDB* ]]; then
		log "FAILED: server-version $want did not take: VERSION() is '$got' (see $CONFIG and $LOG)"
		return 1
	fi
	log "VERSION() is '$got', as server-version says"
}

up() {
	local mode=${TIDB_TXN_MODE:-pessimistic}
	local version=${TIDB_SERVER_VERSION:-}
	if [[ ! $version =~ ^[A-Za-z0-9._+-]*$ ]]; then
		log "TIDB_SERVER_VERSION may hold letters, digits and . _ + - only, not '$version'"
		return 2
	fi
	build
	if running; then
		log "already running (pid $(cat "$PIDFILE"))"
		if [[ -n $version && $version != "$(configured_version)" ]]; then
			log "it runs with server-version '$(configured_version)', not '$version': tidb.sh down first"
			return 1
		fi
	else
		if (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null; then
			log "$HOST:$PORT is taken by another process; not starting"
			return 1
		fi
		mkdir -p "$DIR/data"
		local config=()
		if [[ -n $version ]]; then
			printf 'server-version = "%s"\n' "$version" >"$CONFIG"
			config=(-config "$CONFIG")
		else
			rm -f "$CONFIG"
		fi
		# setsid: the server outlives the make that started it.
		setsid "$BIN" "${config[@]}" -store=unistore -path "$DIR/data" -host "$HOST" -P "$PORT" \
			-status "$STATUS_PORT" -status-host "$HOST" -log-file "$LOG" -log-slow-query "$DIR/tidb-slow.log" \
			</dev/null >>"$DIR/tidb.out" 2>&1 &
		echo $! >"$PIDFILE"
		local deadline=$((SECONDS + 120))
		until sql "SELECT 1" >/dev/null 2>&1; do
			if ! running; then
				log "tidb-server exited at start; see $LOG and $DIR/tidb.out"
				rm -f "$PIDFILE"
				return 1
			fi
			if ((SECONDS > deadline)); then
				log "tidb-server did not answer within 120s; see $LOG"
				down
				return 1
			fi
			sleep 0.5
		done
	fi
	check_version "$version"
	set_mode "$mode"
	log "$(sql 'SELECT VERSION()')"
	echo "TiDB serving $HOST:$PORT (user root, no password): TEST_MYSQL_DSN='$DSN'"
}

down() {
	if [[ ! -f $PIDFILE ]]; then
		log "not started by tidb.sh up; nothing to stop"
		return 0
	fi
	local pid
	pid=$(cat "$PIDFILE")
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid"
		local deadline=$((SECONDS + 60))
		while kill -0 "$pid" 2>/dev/null; do
			if ((SECONDS > deadline)); then
				log "pid $pid ignored SIGTERM for 60s; killing it"
				kill -KILL "$pid" 2>/dev/null || true
				break
			fi
			sleep 0.2
		done
	fi
	rm -f "$PIDFILE"
	log "stopped (pid $pid)"
}

# The cases whose guarantees rest on the engine's behaviour: claims and
# the fence, settlement under concurrency (a held order row, cumulative
# refunds), migrations, and end to end on kfake: the mixed stream with
# exact outcomes, duplicates racing across partitions, crashes between
# claim and settle, a rebalance, dead letters, replay, orphans.
suite() {
	local mode=$1
	log "suite, $mode mode, VERSION() '$(sql 'SELECT VERSION()')'"
	set_mode "$mode"
	export TEST_MYSQL_DSN=$DSN
	# What the tests that depend on the engine expect dbengine.Detect to
	# say (internal/sqldb/sqldbtest.Engine), whatever VERSION() says.
	export TEST_MYSQL_ENGINE=tidb
	cd "$ROOT"
	go test -race -count=1 -timeout 10m -run '^(TestDetectTellsTheEngineByWhatTheServerIs|TestDetectFailsRatherThanGuesses)$' ./pkg/dbengine/
	go test -race -count=1 -timeout 10m -run '^TestMeterCountsStatementsTheEngineWay$' ./internal/bench/
	go test -race -count=1 -timeout 10m -run '^TestMigratePrintsTheEngineFirst$' ./cmd/consumer/
	local claims='TestClassifyDuplicate|TestIsDeadlock|TestIsRetryableConflict|TestAcquire|TestAcquireMany|TestAcquireManyAndLookupMany|TestConcurrentAcquireHasExactlyOneWinner|TestConcurrentOverlappingBatchesClaimEachKeyOnce|TestSettleFence|TestOrphans|TestKeyColumnComparesByteForByte|TestOverLongValuesAreErrorsNotDuplicates|TestFailureBookkeeping|TestSettleManyAcrossTenants|TestAcquireManyReadsBackByTenant'
	# An INSERT inside an old snapshot meets the committed key at once in
	# pessimistic mode; an optimistic transaction meets it only at COMMIT.
	[[ $mode == pessimistic ]] && claims="$claims|TestAcquireReadsBackTheLatestCommittedClaim"
	go test -race -count=1 -timeout 20m -run "^($claims)\$" ./pkg/idempotent/
	# Settlement, and the settled events each of its paths writes (the
	# outbox) in its own transaction.
	go test -race -count=1 -timeout 20m \
		-run '^(TestSkipLockedFollowsTheServer|TestSettle|TestSettleBatch|TestConcurrentSettles|TestConcurrentBatchesCreateTrades|TestConcurrentArrival|TestSettleBatchNeverDecidesOnAHeldOrderRow|TestSettleMergedFailsAtOnceOnARowTiDBHolds|TestReconcileJoinsTheLedgerByItsKey|TestPaymentRegistrationIsSettledInEitherOrder|TestPaymentRegistrationRacesItsPayment|TestSettleFromOrdersSettlesARegistrationThatMissedItsPayment|TestSettledEventsOfEveryPath|TestSettledEventRolledBackWithItsSettlement|TestSettledEventsAreOneInsertPerTransaction|TestSettledEventsOff)$' \
		./pkg/settlement/
	# Registrations: stored, listed and moved conditionally; recorded by the
	# pipeline; a registration and its payment in either order (with the
	# backstop, since a locking read here may miss a concurrent insert).
	go test -race -count=1 -timeout 20m -run '^(TestOpenMovesAndStats|TestCloserClosesOnAClosedAnswer)$' ./internal/registrations/
	go test -race -count=1 -timeout 20m -run '^(TestRegistrationMessagesAreRecordedOnceAndMoveNoMoney|TestRegistrationOfAnotherTenantsMerchantIsTenantMismatch)$' ./internal/pipeline/
	# A ledger row that a bug wrote without its claim (or a claim whose
	# postings are already there) must be met by the
	# INSERT, not at COMMIT: optimistic transactions check unique keys at
	# COMMIT unless tidb_constraint_check_in_place is on (docs/operations.md).
	local bypass=$DSN
	[[ $mode == optimistic ]] && bypass="$DSN?tidb_constraint_check_in_place=1"
	TEST_MYSQL_DSN=$bypass go test -race -count=1 -timeout 10m -run '^(TestLedgerBypass|TestSettledEventOfAnAlreadyPostedClaim)$' ./pkg/settlement/
	go test -race -count=1 -timeout 10m -run '^(TestMigrateIsIdempotent|TestCheckComparesAppliedWithEmbeddedMigrations|TestConcurrentMigrate|TestMigrate.*Lock|TestMigrationLock.*|TestQueryWorkMigrationRunsAgain|TestSettledPublishedMigration)$' ./schema/
	go test -race -count=1 -timeout 20m \
		-run '^(TestMixedStreamIsSettledExactlyOnce|TestRestartAfterDyingBetweenClaimAndSettle|TestTwoWorkersJoiningAndLeavingSettleEveryEventOnce|TestDuplicateOfAnInFlightClaimHoldsOnlyTheOffset|TestMessagesThatCanNeverSucceedAreDeadLetteredAndThePartitionMovesOn|TestSweeperSettlesAnOrphanWhoseMessageNeverComesBack|TestSweeperDeadLettersAnOrphanThatSettlesAsOverRefund|TestConcurrentCumulativeRefundsOfOneTradeFromTwoPartitions|TestSettledEventsPublishedRightAfterCommit|TestSettledTopicRefused|TestSettledEventsOff|TestRegistrationsEndToEnd|TestAClosedAnswerClosesItsRegistration)$' \
		./internal/app/
	# Settled events: published after the commit in trade order, the
	# sweeper's lease under many sweepers at once (conditional UPDATEs that
	# wait in pessimistic mode and conflict at COMMIT in optimistic mode).
	go test -race -count=1 -timeout 20m \
		-run '^(TestPublisherPublishesASettlementsRows|TestPublisherKeepsTradeOrder|TestPublisherTriesAgainWhatAnotherWorkersEventHeld|TestPendingOfReadsTheNamedTradesOnly|TestBrokerRefusingTheTopic|TestConcurrentSweepers|TestRepublish)$' \
		./internal/settledpub/
	# The merge of several partitions' batches into one transaction: its
	# statements, its lookup of every key, a poisoned event, crashes at
	# each step, and the offsets property with merging on; query answers
	# claimed beside their callbacks (both orders, two events, a race); the
	# settled events of every pipeline path (their source) and at its fault
	# points.
	go test -race -count=1 -timeout 20m \
		-run '^(TestMergedRoundSettlesManyPartitionsInOneTransaction|TestMergedRoundLooksUpEveryKeyWhenOneBatchDoes|TestPoisonedEventInAMergedRoundHoldsOnlyItsPartition|TestCrashInAMergedRoundLeavesOrphansTheSweeperSettlesOnce|TestOffsetsNeverPassAnUnsettledMessage|TestQueryAnswerAndCallbackSettleOnce|TestUnauthenticatedAnswersClaimNothing|TestQueryAnswerProvingTwoEvents|TestTwoEventAnswerIsDoneOnlyWhenBothAre|TestTwoEventAnswerWithOneConflict|TestAnswerAndCallbackRace|TestAlipayRefundAnswers|TestSettledEventsNameTheirSource|TestSettledEventsAtTheFaultPoints)$' \
		./internal/pipeline/ ./internal/consumer/
	# The queriers' shared per-merchant budget: many takers on two pools
	# (row lock in pessimistic mode, write conflicts at COMMIT in
	# optimistic mode, run again).
	go test -race -count=1 -timeout 10m -run '^(TestTakeSpendsTheBurstThenWaits|TestThrottledBacksOffEveryQuerier|TestQueriersTogetherNeverExceedTheBudget)$' ./internal/querybudget/
	# The querier's work: leases by conditional UPDATE and token (lock
	# wait in pessimistic mode, write conflict at COMMIT in optimistic
	# mode), never one registration to two queriers.
	go test -race -count=1 -timeout 10m -run '^(TestLeaseFollowsTheFirstWaitAndRecordMovesOn|TestASettledRegistrationIsNeverLeased|TestRefundsAreLeasedForTheirTradesMerchant|TestPaymentsDoNotStarveRefunds|TestTwoStoresNeverLeaseOneRegistrationTwice)$' ./internal/querywork/
	# consumer query run against the fake WeChat, and with the worker: a
	# payment that never called back settled through the query once; a
	# statement needs_query refund registered once (its unique key met at
	# COMMIT in optimistic mode) and settled through the query.
	go test -race -count=1 -timeout 10m -run '^(TestQueryRunAsksAndPublishes|TestQuerierAndWorkerSettleAPaymentWithNoCallback|TestQuerierSettlesStatementNeedsQueryRefunds)$' ./cmd/consumer/
	go test -race -count=1 -timeout 20m \
		-run '^(TestReplayThroughTheWorker|TestOrphans|TestReconcile|TestReconcileNamesTheAlteredRow|TestRefundOpenSaysWhatTheQuerierDoes|TestPurgeDeletesOldPublishedSettledEvents)$' ./internal/ops/
	go test -race -count=1 -timeout 20m \
		-run '^(TestDeadLettersThroughTheWorker|TestStore|TestRedriveLinks|TestRedriveThatFailsAgainSupersedesItsOriginal|TestDeadLetterTheTopicLostIsListedAndClosable)$' ./internal/deadletters/
	# kill -9 restarts of the real binary, short size: the soak reaches an
	# outside server through TEST_MYSQL_NODES (here the one TiDB server),
	# with no Galera session variable (TiDB refuses wsrep_sync_wait).
	TEST_MYSQL_NODES="$HOST:$PORT" TEST_WSREP_SYNC_WAIT=off \
		go test -count=1 -timeout 20m -run '^TestKillNineSoak$' ./internal/soak/
}

test_suite() {
	local started=0
	if ! running; then
		started=1
		# A fresh store: nothing left from an earlier run.
		rm -rf "$DIR/data"
		trap 'down' EXIT
	fi
	# The server-version to run the first two suites with (and, when the
	# server was running already, to restart it with at the end): the one
	# it runs with, or else TIDB_SERVER_VERSION.
	local before=${TIDB_SERVER_VERSION:-}
	((started)) || before=$(configured_version)
	TIDB_TXN_MODE=pessimistic TIDB_SERVER_VERSION=$before up
	local start=$SECONDS
	suite pessimistic
	suite optimistic
	log "suite passed in both modes in $((SECONDS - start))s"

	# Once more on a TiDB whose VERSION() looks like MySQL's, as operators
	# set it: the worker must still know it is on TiDB (its SKIP LOCKED
	# returns a held row unlocked).
	local version=${TIDB_TEST_SERVER_VERSION:-8.0.40}
	down
	((started)) || trap "down; TIDB_SERVER_VERSION='$before' up" EXIT
	TIDB_TXN_MODE=pessimistic TIDB_SERVER_VERSION=$version up
	start=$SECONDS
	export TEST_TIDB_SERVER_VERSION=$version
	suite pessimistic
	unset TEST_TIDB_SERVER_VERSION
	log "suite passed with server-version $version in $((SECONDS - start))s"
	down
	trap - EXIT
	if ((!started)); then
		TIDB_TXN_MODE=${TIDB_TXN_MODE:-pessimistic} TIDB_SERVER_VERSION=$before up
	fi
}

case ${1:-} in
up) up ;;
down) down ;;
test) test_suite ;;
build) build ;;
*)
	echo "usage: $0 up|down|test|build" >&2
	exit 2
	;;
esac
