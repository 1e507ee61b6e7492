#!/usr/bin/env bash
# One Apache Kafka broker (KRaft, a single node that is broker and
# controller) on loopback, for the Kafka engine suite and for trying the
# worker against the real thing.
#
#   kafka.sh up                 fetch the jars once (Maven), format once, start; prints the address
#   kafka.sh down               stop the broker this script started (its pid file), wait for it to exit
#   kafka.sh kill               SIGKILL that broker (a crash; up starts it again on the same data)
#   kafka.sh up-second          a second broker (broker only, 127.0.0.1:19094) in the same cluster,
#                               fresh data and a node ID never used before each time (a dead
#                               node's registration can outlive a controller restart), so that
#                               a test can make replicated topics
#   kafka.sh kill-second        SIGKILL the second broker (the controller fences it, shrinking ISRs)
#   kafka.sh test               up, the Kafka engine suite, then down if this run started it
#   kafka.sh consumer-groups …  Kafka's kafka-consumer-groups tool against the broker's jars
#
# Everything lives under $ENGINES_DIR/kafka (default: .engines/kafka in the
# repository): libs/ (the jars, fetched by scripts/engines/kafka/pom.xml),
# data/ (the log and metadata directories), broker.log, broker.pid,
# server.properties and bin/kafka-consumer-groups.sh.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
ENGINES_DIR=${ENGINES_DIR:-$ROOT/.engines}
KAFKA_DIR=$ENGINES_DIR/kafka
LIBS=$KAFKA_DIR/libs
DATA=$KAFKA_DIR/data
LOG=$KAFKA_DIR/broker.log
PIDFILE=$KAFKA_DIR/broker.pid
PROPS=$KAFKA_DIR/server.properties
DATA2=$KAFKA_DIR/data2
LOG2=$KAFKA_DIR/broker2.log
PIDFILE2=$KAFKA_DIR/broker2.pid
PROPS2=$KAFKA_DIR/server2.properties
POM=$HERE/kafka/pom.xml

HOST=127.0.0.1
PORT=${KAFKA_PORT:-19092}
CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-19093}
SECOND_PORT=${KAFKA_SECOND_PORT:-19094}
ADDR=$HOST:$PORT
# How long up waits for the broker to answer.
START_TIMEOUT=${KAFKA_START_TIMEOUT:-120}

log() { echo "kafka.sh: $*" >&2; }
die() {
	log "$*"
	exit 1
}

version() {
	sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM"
}

# fetch copies the pinned broker, tools and their dependencies into libs/,
# once per version.
fetch() {
	local v
	v=$(version)
	[ -n "$v" ] || die "no <kafka.version> in $POM"
	if [ -f "$LIBS/.version" ] && [ "$(cat "$LIBS/.version")" = "$v" ]; then
		return
	fi
	command -v mvn >/dev/null || die "mvn not found: install Maven (and a JDK 17 or later)"
	log "fetching Apache Kafka $v with Maven into $LIBS"
	rm -rf "$LIBS.tmp"
	mkdir -p "$KAFKA_DIR"
	if ! (cd "$HERE/kafka" && mvn -B dependency:copy-dependencies -DoutputDirectory="$LIBS.tmp") >"$KAFKA_DIR/fetch.log" 2>&1; then
		tail -n 30 "$KAFKA_DIR/fetch.log" >&2
		die "mvn dependency:copy-dependencies failed for Apache Kafka $v (log: $KAFKA_DIR/fetch.log)"
	fi
	rm -rf "$LIBS"
	mv "$LIBS.tmp" "$LIBS"
	echo "$v" >"$LIBS/.version"
}

# java_cp runs a main class from libs/ with a small heap and quiet logging.
java_cp() {
	java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp "$LIBS/*" \
		-Dorg.slf4j.simpleLogger.defaultLogLevel=warn "$@"
}

# consumer_groups is kafka-consumer-groups.sh, run from the jars.
consumer_groups() {
	java_cp org.apache.kafka.tools.consumer.group.ConsumerGroupCommand "$@"
}

write_config() {
	mkdir -p "$DATA" "$KAFKA_DIR/bin"
	cat >"$PROPS" <<EOF
# Written by scripts/engines/kafka.sh: one KRaft node, broker and controller.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$HOST:$CONTROLLER_PORT
listeners=PLAINTEXT://$HOST:$PORT,CONTROLLER://$HOST:$CONTROLLER_PORT
advertised.listeners=PLAINTEXT://$HOST:$PORT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$DATA/logs
metadata.log.dir=$DATA/metadata
# The worker never creates topics; neither may the broker on its behalf.
auto.create.topics.enable=false
num.partitions=1
default.replication.factor=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# A broker that stops heartbeating is fenced (and leaves every ISR) within
# seconds, not the default 9.
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=3000
# A small machine: few threads.
num.network.threads=2
num.io.threads=2
background.threads=2
num.recovery.threads.per.data.dir=1
log.cleaner.threads=1
EOF
	cat >"$KAFKA_DIR/bin/kafka-consumer-groups.sh" <<EOF
#!/bin/sh
# kafka-consumer-groups.sh from the jars scripts/engines/kafka.sh fetched.
exec java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp '$LIBS/*' -Dorg.slf4j.simpleLogger.defaultLogLevel=warn org.apache.kafka.tools.consumer.group.ConsumerGroupCommand "\$@"
EOF
	chmod +x "$KAFKA_DIR/bin/kafka-consumer-groups.sh"
}

# format writes the metadata directory once (kafka-storage format); a
# formatted directory keeps its topics across restarts.
format() {
	[ -f "$DATA/metadata/meta.properties" ] && return
	local id
	id=$(java_cp kafka.tools.StorageTool random-uuid)
	java_cp kafka.tools.StorageTool format --cluster-id "$id" --config "$PROPS" >"$KAFKA_DIR/format.log" 2>&1 ||
		{
			tail -n 20 "$KAFKA_DIR/format.log" >&2
			die "kafka-storage format failed (log: $KAFKA_DIR/format.log)"
		}
}

# our_pid prints the pid from the pid file when that process is still the
# broker this script started.
our_pid() {
	local pidfile=${1:-$PIDFILE} props=${2:-$PROPS}
	[ -f "$pidfile" ] || return 1
	local pid
	pid=$(cat "$pidfile")
	[ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "kafka.Kafka $props" || return 1
	echo "$pid"
}

port_open() {
	(exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null
}

# answers is true once the broker has started and serves its listener.
answers() {
	grep -q "Kafka Server started" "$LOG" 2>/dev/null && port_open "$PORT"
}

up() {
	if pid=$(our_pid); then
		answers || wait_answers "$pid"
		log "already running (pid $pid)"
		echo "$ADDR"
		return
	fi
	rm -f "$PIDFILE"
	if port_open "$PORT" || port_open "$CONTROLLER_PORT"; then
		die "$HOST:$PORT or $HOST:$CONTROLLER_PORT is already in use by a process this script did not start"
	fi
	command -v java >/dev/null || die "java not found: install a JDK 17 or later"
	fetch
	write_config
	format
	: >"$LOG"
	# setsid: the broker outlives the shell that started it (make kafka-up).
	setsid java -Xms128m -Xmx512m -XX:+UseSerialGC -XX:ActiveProcessorCount=2 \
		-Djava.awt.headless=true -Dorg.slf4j.simpleLogger.defaultLogLevel=info \
		-Dorg.slf4j.simpleLogger.showDateTime=true -cp "$LIBS/*" \
		kafka.Kafka "$PROPS" >>"$LOG" 2>&1 </dev/null &
	echo $! >"$PIDFILE"
	wait_answers "$!"
	log "Apache Kafka $(cat "$LIBS/.version") up (pid $(cat "$PIDFILE"), log $LOG)"
	echo "$ADDR"
}

wait_answers() {
	local pid=$1 deadline=$((SECONDS + START_TIMEOUT))
	until answers; do
		if ! kill -0 "$pid" 2>/dev/null; then
			tail -n 40 "$LOG" >&2
			rm -f "$PIDFILE"
			die "the broker exited during start-up (log above, $LOG)"
		fi
		if [ "$SECONDS" -ge "$deadline" ]; then
			tail -n 40 "$LOG" >&2
			die "the broker did not answer on $ADDR within ${START_TIMEOUT}s (log above, $LOG)"
		fi
		sleep 0.5
	done
}

# up_second starts a second node, a broker only, in the cluster node 1
# formed, under a node ID of its own each time.
up_second() {
	local pid
	if pid=$(our_pid "$PIDFILE2" "$PROPS2"); then
		log "second broker already running (pid $pid)"
		echo "$HOST:$SECOND_PORT"
		return
	fi
	our_pid >/dev/null || die "the first broker is not running: kafka.sh up"
	local id
	id=$(sed -n 's/^cluster.id=//p' "$DATA/metadata/meta.properties")
	[ -n "$id" ] || die "no cluster.id in $DATA/metadata/meta.properties"
	local node
	node=$(($(cat "$KAFKA_DIR/second.id" 2>/dev/null || echo 1) + 1))
	echo "$node" >"$KAFKA_DIR/second.id"
	rm -rf "$DATA2"
	mkdir -p "$DATA2"
	cat >"$PROPS2" <<EOF
# Written by scripts/engines/kafka.sh: a second node, a broker only.
process.roles=broker
node.id=$node
controller.quorum.voters=1@$HOST:$CONTROLLER_PORT
listeners=PLAINTEXT://$HOST:$SECOND_PORT
advertised.listeners=PLAINTEXT://$HOST:$SECOND_PORT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$DATA2/logs
auto.create.topics.enable=false
broker.heartbeat.interval.ms=500
num.network.threads=1
num.io.threads=1
background.threads=1
num.recovery.threads.per.data.dir=1
log.cleaner.enable=false
EOF
	java_cp kafka.tools.StorageTool format --cluster-id "$id" --config "$PROPS2" >"$KAFKA_DIR/format2.log" 2>&1 ||
		die "kafka-storage format of the second broker failed (log: $KAFKA_DIR/format2.log)"
	: >"$LOG2"
	setsid java -Xms64m -Xmx256m -XX:+UseSerialGC -XX:ActiveProcessorCount=1 \
		-Djava.awt.headless=true -Dorg.slf4j.simpleLogger.defaultLogLevel=info \
		-Dorg.slf4j.simpleLogger.showDateTime=true -cp "$LIBS/*" \
		kafka.Kafka "$PROPS2" >>"$LOG2" 2>&1 </dev/null &
	pid=$!
	echo "$pid" >"$PIDFILE2"
	local deadline=$((SECONDS + START_TIMEOUT))
	until grep -q "Kafka Server started" "$LOG2" 2>/dev/null && port_open "$SECOND_PORT"; do
		if ! kill -0 "$pid" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
			tail -n 40 "$LOG2" >&2
			die "the second broker did not start (log above, $LOG2)"
		fi
		sleep 0.5
	done
	log "second broker up (node $node, pid $pid, log $LOG2)"
	echo "$HOST:$SECOND_PORT"
}

kill_second() {
	local pid
	if pid=$(our_pid "$PIDFILE2" "$PROPS2"); then
		kill -KILL "$pid"
		while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
		log "second broker killed (pid $pid)"
	fi
	rm -f "$PIDFILE2"
}

down() {
	kill_second
	local pid
	if ! pid=$(our_pid); then
		rm -f "$PIDFILE"
		log "not running"
		return
	fi
	kill -TERM "$pid"
	local deadline=$((SECONDS + 60))
	while kill -0 "$pid" 2>/dev/null; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			log "pid $pid did not stop within 60s: SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
		fi
		sleep 0.2
	done
	rm -f "$PIDFILE"
	log "stopped (pid $pid)"
}

# crash SIGKILLs the broker this script started and waits until it is gone.
crash() {
	local pid
	pid=$(our_pid) || die "not running"
	kill -KILL "$pid"
	while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
	rm -f "$PIDFILE"
	log "killed (pid $pid)"
}

# suite runs the cases that depend on the broker's behaviour against it:
# the shared end-to-end cases (which use kfake under make test) and the
# cases built only with the enginekafka tag.
suite() {
	cd "$ROOT"
	export PAYCB_TEST_KAFKA_BROKERS=$ADDR
	export PAYCB_TEST_KAFKA_CONSUMER_GROUPS=$KAFKA_DIR/bin/kafka-consumer-groups.sh
	export PAYCB_TEST_KAFKA_SCRIPT=$HERE/kafka.sh
	local app='^(TestMixedStreamIsSettledExactlyOnce|TestEveryEventRacedFromTwoPartitionsSettlesOnce|TestCommittedOffsetIsTheNextToRead|TestRestartAfterDyingBetweenClaimAndSettle|TestGracefulShutdownCommitsWhatWasFinishedAndNothingMore|TestTwoWorkersJoiningAndLeavingSettleEveryEventOnce|TestMessagesThatCanNeverSucceedAreDeadLetteredAndThePartitionMovesOn|TestDuplicateOfAnInFlightClaimHoldsOnlyTheOffset|TestSweeperSettlesAnOrphanWhoseMessageNeverComesBack|TestSweeperDeadLettersAnOrphanThatSettlesAsOverRefund|TestApacheKafka.*)$'
	local ops='^(TestReplayThroughTheWorker|TestStatusWhileTheWorkerRuns|TestStatusShowsAStalledPartition|TestApacheKafka.*)$'
	local dlq='^(TestDeadLettersThroughTheWorker|TestDeadLettersListAndRedrive)$'
	go test -race -count=1 -timeout 20m -tags enginekafka -run "$app" ./internal/app/
	go test -race -count=1 -timeout 10m -tags enginekafka -run "$ops" ./internal/ops/
	go test -race -count=1 -timeout 10m -tags enginekafka -run "$dlq" ./internal/deadletters/
	# The kill -9 soak, short: the consumer binary SIGKILLed and restarted
	# against the broker (5,000 events: on Apache Kafka a smaller stream can
	# run out before the third kill).
	go test -count=1 -timeout 20m -run '^TestKillNineSoak$' ./internal/soak/ -args -soak.events=5000 -soak.kills=3
}

test_suite() {
	local started=
	if ! our_pid >/dev/null; then
		# Not running: the suite gets a cluster formatted afresh, so that
		# nothing an earlier run left (topics, groups, dead nodes) is in it.
		started=1
		rm -rf "$DATA" "$DATA2" "$KAFKA_DIR/second.id"
		trap 'down' EXIT
	fi
	up >/dev/null
	suite
	if [ -n "$started" ]; then
		trap - EXIT
		down
	fi
}

case "${1:-}" in
up) up ;;
down) down ;;
kill) crash ;;
up-second) up_second ;;
kill-second) kill_second ;;
test) test_suite ;;
consumer-groups)
	shift
	consumer_groups --bootstrap-server "$ADDR" "$@"
	;;
*)
	echo "usage: $0 up|down|kill|up-second|kill-second|test|consumer-groups ARGS..." >&2
	exit 2
	;;
esac
