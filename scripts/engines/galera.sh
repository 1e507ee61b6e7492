#!/usr/bin/env bash
# Three MariaDB Galera nodes on loopback for the Galera suite:
# 127.0.0.1:3311, 3312 and 3313, user root without a password over TCP.
#
#   galera.sh up     start the cluster (or the nodes of it that are down),
#                    wait until it has three Synced members, print the addresses
#   galera.sh down   stop the nodes this script started, and wait for them
#   galera.sh test   up, the Galera suite, down (also when the suite fails)
#
# Everything lives under $ENGINES_DIR/galera/nodeN (data, socket, pid file,
# error log, option file made from galera/node.cnf.in). A MariaDB on 3306
# keeps running beside it. When no node is running, `up` starts a fresh
# cluster: the nodes' data from an earlier run is discarded.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
ENGINES_DIR="${ENGINES_DIR:-$repo/.engines}"
base="$ENGINES_DIR/galera"
provider=/usr/lib/galera/libgalera_smm.so
nodes=(1 2 3)
wait_secs="${GALERA_WAIT_SECS:-180}"

port() { echo $((3310 + $1)); }
gcomm() { echo $((4557 + 10 * $1)); }
dir() { echo "$base/node$1"; }
addrs() { echo "127.0.0.1:3311,127.0.0.1:3312,127.0.0.1:3313"; }

# sql N STATEMENT: runs STATEMENT on node N over TCP as root, tab-separated
# values without column names.
sql() {
	mariadb --no-defaults --protocol=tcp -h127.0.0.1 -P"$(port "$1")" -uroot -N -B -e "$2"
}

# status N NAME: the value of node N's status variable NAME.
status() {
	sql "$1" "SHOW GLOBAL STATUS LIKE '$2'" 2>/dev/null | cut -f2
}

# pid N: the pid of node N's mariadbd when it runs, else nothing.
pid() {
	local f
	f="$(dir "$1")/mysqld.pid"
	[ -s "$f" ] || return 0
	local p
	p="$(cat "$f")"
	if kill -0 "$p" 2>/dev/null && grep -q mariadbd "/proc/$p/comm" 2>/dev/null; then
		echo "$p"
	fi
}

fail() {
	echo "galera: $*" >&2
	for n in "${nodes[@]}"; do
		local log
		log="$(dir "$n")/error.log"
		if [ -f "$log" ]; then
			echo "--- node$n: last lines of $log" >&2
			tail -n 30 "$log" >&2
		fi
	done
	exit 1
}

# install: Debian's galera-4 provider and rsync (the state transfer's
# method), when missing and run as root.
install() {
	if [ -e "$provider" ] && command -v rsync >/dev/null 2>&1; then
		return
	fi
	if [ "$(id -u)" != 0 ]; then
		fail "$provider or rsync is missing: apt-get install galera-4 rsync (as root)"
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq galera-4 rsync
}

# run_as: mariadbd runs as root only when told which user to drop to; the
# state transfer daemon then runs as that user too, so the node's
# directories belong to it.
run_as() {
	if [ "$(id -u)" = 0 ]; then echo mysql; else id -un; fi
}

# prepare N: a fresh directory and option file for node N, its data
# directory empty (a joiner receives the whole state by rsync).
prepare() {
	local n=$1 d
	d="$(dir "$n")"
	rm -rf "$d"
	mkdir -p "$d/data"
	sed -e "s|@DIR@|$d|g" -e "s|@N@|$n|g" -e "s|@PORT@|$(port "$n")|g" \
		-e "s|@GCOMM@|$(gcomm "$n")|g" -e "s|@IST@|$(($(gcomm "$n") + 1))|g" \
		-e "s|@SST@|$(($(gcomm "$n") + 2))|g" "$here/galera/node.cnf.in" >"$d/my.cnf"
	if [ "$(id -u)" = 0 ]; then
		chown -R mysql:mysql "$d"
	fi
}

# start N [options]: starts node N's mariadbd in the background.
start() {
	local n=$1 d
	shift
	d="$(dir "$n")"
	# The error log holds everything; nothing useful reaches stdout.
	setsid mariadbd --defaults-file="$d/my.cnf" --user="$(run_as)" "$@" >>"$d/stdout.log" 2>&1 </dev/null &
}

# wait_synced N: waits until node N answers and reports itself Synced.
wait_synced() {
	local n=$1 i
	for ((i = 0; i < wait_secs * 2; i++)); do
		if [ "$(status "$n" wsrep_local_state_comment)" = Synced ]; then
			return 0
		fi
		if [ -z "$(pid "$n")" ] && [ "$i" -gt 20 ]; then
			fail "node$n (port $(port "$n")) exited while starting"
		fi
		sleep 0.5
	done
	fail "node$n (port $(port "$n")) not Synced after ${wait_secs}s"
}

# wait_size: waits until every node counts three members.
wait_size() {
	local i n ok
	for ((i = 0; i < wait_secs * 2; i++)); do
		ok=1
		for n in "${nodes[@]}"; do
			[ "$(status "$n" wsrep_cluster_size)" = 3 ] || ok=0
		done
		[ "$ok" = 1 ] && return 0
		sleep 0.5
	done
	fail "cluster size is not 3 after ${wait_secs}s"
}

# bootstrap: node 1 with a fresh data directory as a new cluster, root
# reachable over TCP without a password.
bootstrap() {
	prepare 1
	local d
	d="$(dir 1)"
	if ! out="$(mariadb-install-db --no-defaults --datadir="$d/data" --user="$(run_as)" \
		--auth-root-authentication-method=normal --skip-test-db 2>&1)"; then
		echo "$out" >&2
		fail "mariadb-install-db failed for node1"
	fi
	start 1 --wsrep-new-cluster
	wait_synced 1
	# Debian's root@localhost may authenticate by unix socket only; the
	# tests connect over TCP (as 127.0.0.1, names unresolved). Account
	# statements replicate, and the joiners copy node 1's state anyway.
	mariadb --no-defaults -S "$d/mysqld.sock" -uroot -e "
		ALTER USER root@localhost IDENTIFIED VIA mysql_native_password USING PASSWORD('') OR unix_socket;
		CREATE USER IF NOT EXISTS root@'127.0.0.1' IDENTIFIED VIA mysql_native_password USING PASSWORD('');
		GRANT ALL PRIVILEGES ON *.* TO root@'127.0.0.1' WITH GRANT OPTION;"
}

up() {
	install
	mkdir -p "$base"
	local running=() n
	for n in "${nodes[@]}"; do
		[ -n "$(pid "$n")" ] && running+=("$n")
	done
	if [ "${#running[@]}" = 0 ]; then
		bootstrap
	fi
	for n in "${nodes[@]}"; do
		if [ -z "$(pid "$n")" ]; then
			prepare "$n"
			start "$n"
			# One joiner at a time: each takes a full state transfer.
			wait_synced "$n"
		fi
	done
	wait_size
	for n in "${nodes[@]}"; do
		wait_synced "$n"
		sql "$n" "SELECT 1" >/dev/null || fail "node$n does not take root over TCP"
	done
	echo "galera: 3 nodes Synced, user root, no password: $(addrs)"
}

down() {
	local n p pids=()
	# Joiners first, node 1 last: the last node left marks itself safe to
	# bootstrap from.
	for n in 3 2 1; do
		p="$(pid "$n")"
		if [ -n "$p" ]; then
			kill -TERM "$p"
			pids+=("$p")
		fi
	done
	local i
	for p in "${pids[@]}"; do
		for ((i = 0; i < 120; i++)); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.5
		done
		if kill -0 "$p" 2>/dev/null; then
			echo "galera: mariadbd $p did not stop in 60s, killing it" >&2
			kill -KILL "$p" 2>/dev/null || true
		fi
	done
	echo "galera: stopped ${#pids[@]} node(s)"
}

# suite: the tests whose guarantees depend on the engine, with the test
# connections spread over the three nodes (sqldbtest's round-robin dialer,
# wsrep_sync_wait=1 unless TEST_WSREP_SYNC_WAIT says otherwise), kfake for
# Kafka. GALERA_RUN narrows every step to one
# -run pattern.
suite() {
	cd "$repo"
	export TEST_MYSQL_NODES TEST_MYSQL_DSN="root@tcp(127.0.0.1:3311)/"
	TEST_MYSQL_NODES="$(addrs)"
	local go="${GO:-go}" only="${GALERA_RUN:-}"
	gotest() { # gotest RUN [SKIP] PACKAGE...
		local run=$1 skip=$2
		shift 2
		echo "galera suite: go test -run '${only:-$run}' ${skip:+-skip '$skip' }$*"
		"$go" test -race -count=1 -timeout 20m -run "${only:-$run}" ${skip:+-skip "$skip"} "$@"
	}
	# The migration lock and the round-robin dialer.
	gotest . '' ./schema/ ./internal/sqldb/sqldbtest/
	# The claim store and settlement. Left out: tests whose premise is one
	# server's row locks (a lock held, or a session killed, on one node is
	# invisible to another; the cluster fails the loser at COMMIT with 1213
	# instead of making it wait) or one server's instant visibility (an
	# insert meets a row another node committed only once its own node has
	# applied it). Their cluster counterparts run here:
	# TestOneKeyInsertedFromTwoSessions, TestConcurrentAcquireRetriedOn…,
	# TestConcurrentSettlersRetriedOn… and TestAnOrderRowHeldElsewhere…
	gotest . 'TestConcurrentAcquireHasExactlyOneWinner/mysql|TestAcquireOnAKilledConnectionIsAnError|TestAcquireReadsBackTheLatestCommittedClaim' ./pkg/idempotent/
	gotest . 'TestSettleBatchLeavesBusyOrdersToASecondTransaction|TestSettleBatchReportsAPartlySettledBatch|TestSettleBatchNeverDecidesOnAHeldOrderRow|TestSettleBatchSkipsAHeldOrderRowAtEverySize|TestSettleMergedLeavesAHeldTradeToItsCaller' ./pkg/settlement/
	# Registrations: stored, listed and moved conditionally, recorded by the
	# pipeline; a registration and its payment on two nodes in either order
	# (with the backstop: a locking read on one node misses another's insert).
	gotest 'TestOpenMovesAndStats|TestCloserClosesOnAClosedAnswer' '' ./internal/registrations/
	gotest 'TestRegistrationMessagesAreRecordedOnceAndMoveNoMoney|TestRegistrationOfAnotherTenantsMerchantIsTenantMismatch' '' ./internal/pipeline/
	# End to end on kfake: the mixed stream with exact outcomes, every event
	# raced from two partitions, deaths between claim and settle, two
	# workers joining and leaving, the dead-letter kinds, orphans.
	gotest 'TestMixedStreamIsSettledExactlyOnce|TestEveryEventRacedFromTwoPartitionsSettlesOnce|TestRestartAfterDyingBetweenClaimAndSettle|TestSettleCommitWithUnknownOutcome|TestTwoWorkersJoiningAndLeaving|TestMessagesThatCanNeverSucceed|TestAChannelLeftOut|TestDuplicateOfAnInFlightClaim|TestSweeper|TestSettled|TestRegistrationsEndToEnd|TestAClosedAnswerClosesItsRegistration' '' ./internal/app/
	# Settled events: the publisher's trade order and the sweeper's lease
	# with many sweepers on several nodes (certification fails the losing
	# claim with 1213).
	gotest 'TestPublisherPublishesASettlementsRows|TestPublisherKeepsTradeOrder|TestPublisherTriesAgainWhatAnotherWorkersEventHeld|TestPendingOfReadsTheNamedTradesOnly|TestBrokerRefusingTheTopic|TestConcurrentSweepers|TestRepublish' '' ./internal/settledpub/
	# Merged rounds of several partitions' batches: statements, the lookup
	# of every key, a poisoned event, crashes at each step, the offsets
	# property with merging on; the settled events of every pipeline path
	# (their source) and at its fault points; query answers
	# claimed beside their callbacks (both orders, two events, a race).
	gotest 'TestMergedRoundSettlesManyPartitionsInOneTransaction|TestMergedRoundLooksUpEveryKeyWhenOneBatchDoes|TestPoisonedEventInAMergedRoundHoldsOnlyItsPartition|TestCrashInAMergedRoundLeavesOrphansTheSweeperSettlesOnce|TestOffsetsNeverPassAnUnsettledMessage|TestQueryAnswerAndCallbackSettleOnce|TestUnauthenticatedAnswersClaimNothing|TestQueryAnswerProvingTwoEvents|TestTwoEventAnswerIsDoneOnlyWhenBothAre|TestTwoEventAnswerWithOneConflict|TestAnswerAndCallbackRace|TestAlipayRefundAnswers|TestSettledEventsNameTheirSource|TestSettledEventsAtTheFaultPoints' '' ./internal/pipeline/ ./internal/consumer/
	# The queriers' shared per-merchant budget, its takers spread over the
	# nodes (certification fails a losing spend with 1213: run again).
	gotest 'TestTakeSpendsTheBurstThenWaits|TestThrottledBacksOffEveryQuerier|TestQueriersTogetherNeverExceedTheBudget' '' ./internal/querybudget/
	# The querier's work: leases spread over the nodes (certification
	# fails a losing lease: the next round tries again).
	gotest 'TestLeaseFollowsTheFirstWaitAndRecordMovesOn|TestASettledRegistrationIsNeverLeased|TestRefundsAreLeasedForTheirTradesMerchant|TestPaymentsDoNotStarveRefunds|TestTwoStoresNeverLeaseOneRegistrationTwice' '' ./internal/querywork/
	# consumer query run, alone and with the worker, on the cluster; a
	# statement needs_query refund registered once and settled through it.
	gotest 'TestQueryRunAsksAndPublishes|TestQuerierAndWorkerSettleAPaymentWithNoCallback|TestQuerierSettlesStatementNeedsQueryRefunds' '' ./cmd/consumer/
	# Replay and dead letters through the operator commands, orphans.
	gotest 'TestReplayThroughTheWorker|TestReplayPlanAndApply|TestOrphans|TestPurgeDeletesOldPublishedSettledEvents' '' ./internal/ops/
	gotest 'TestDeadLettersThroughTheWorker|TestStore|TestRedriveLinks|TestRedriveThatFailsAgainSupersedesItsOriginal|TestDeadLetterTheTopicLostIsListedAndClosable' '' ./internal/deadletters/
	# kill -9: the real binary, each restart on the next node (no -race:
	# the soak builds its own binaries).
	echo "galera suite: go test -run '^TestKillNineSoak$' ./internal/soak/"
	local soak='^TestKillNineSoak$'
	"$go" test -count=1 -timeout 20m -run "${only:-$soak}" ./internal/soak/
}

case "${1:-}" in
up) up ;;
down) down ;;
test)
	trap down EXIT
	up
	suite
	;;
*)
	echo "usage: $0 up|down|test" >&2
	exit 2
	;;
esac
