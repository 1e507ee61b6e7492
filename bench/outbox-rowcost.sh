#!/usr/bin/env bash
# The outbox's per-row cost to the database server, alone: ROWS settled-event
# rows of 400-byte values inserted 128 to a statement (as a settling
# transaction writes them), then marked published 128 to a statement (as
# the publisher marks them), in the layout before migration 0018 (published_at
# NULL until published, idx_settled_pending and idx_settled_time) and after it
# (published and a placeholder published_at, idx_settled_state). It reports
# the server's CPU per row for each step, from /proc/<pid>/stat of the
# server process, which must run on this machine. The pipeline's own figures
# are make bench-e2e's; this isolates what one row costs.
#
# KEYS=random scatters the rows' keys and trades over their indexes, as the
# channels' trade numbers are, where the default writes them in order (each
# index's new entries at its right edge).
#
#   bench/outbox-rowcost.sh            # or: make bench-outbox-rows
#   ROWS=24000 REPS=3 KEYS=random MYSQL='mariadb -h127.0.0.1 -uroot' DB_PID=$(pidof mariadbd)
set -euo pipefail
ROWS=${ROWS:-24000}
REPS=${REPS:-3}
KEYS=${KEYS:-ordered}
MYSQL=${MYSQL:-mariadb --protocol=tcp -h127.0.0.1 -uroot}
DB_PID=${DB_PID:-$(pidof mariadbd || pidof mysqld)}
DB=paycb_outbox_rowcost
tick=$(getconf CLK_TCK)
work=$(mktemp -d)
trap 'rm -rf "$work"; $MYSQL -e "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1 || true' EXIT

cpu() { awk '{print $14 + $15}' "/proc/$DB_PID/stat"; }

columns="id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT, tenant_id BIGINT NOT NULL,
  idempotent_key VARBINARY(191) NOT NULL, channel_code VARBINARY(16) NOT NULL,
  channel_trade_no VARBINARY(64) NOT NULL, trade_seq BIGINT NOT NULL, event_type VARCHAR(32) NOT NULL,
  source VARCHAR(16) NOT NULL, value BLOB NOT NULL, settled_at DATETIME(6) NOT NULL,
  published_at DATETIME(6) NULL, lease_owner VARBINARY(32) NULL, lease_until DATETIME(6) NULL,
  PRIMARY KEY (id), UNIQUE KEY uk_settled_event (tenant_id, idempotent_key),
  UNIQUE KEY uk_settled_trade_seq (tenant_id, channel_code, channel_trade_no, trade_seq)"

table() {
	case $1 in
	before) echo "CREATE TABLE ob ($columns,
  KEY idx_settled_pending (published_at, settled_at, tenant_id, channel_code, channel_trade_no, trade_seq),
  KEY idx_settled_time (settled_at, tenant_id, channel_code)) ENGINE=InnoDB" ;;
	after) echo "CREATE TABLE ob ($columns, published TINYINT NOT NULL DEFAULT 0,
  KEY idx_settled_state (published, settled_at)) ENGINE=InnoDB" ;;
	esac
}

# statements LAYOUT STEP: the SQL of one step, 128 rows to a statement.
statements() {
	awk -v layout="$1" -v step="$2" -v n="$ROWS" -v keys="$KEYS" 'BEGIN {
		v = sprintf("%400s", ""); gsub(/ /, "x", v)
		for (b = 0; b < n; b += 128) {
			s = ""
			for (i = b; i < b + 128 && i < n; i++) {
				if (step == "insert") {
					# Bijections of the row number and of its trade number: every
					# key and every (trade, trade_seq) stays distinct.
					k = keys == "random" ? (i * 2654435761) % 4294967296 : i
					t = keys == "random" ? (int(i / 2) * 2654435761) % 4294967296 : int(i / 2)
					r = sprintf("(1,%c%s%010d%c,%cWECHAT%c,%c4200000000%010d%c,%d,%cPAYMENT_RECEIVED%c,%ccallback%c,%c%s%c,NOW(6)%s)",
						39, "WECHAT:T:PAYMENT_RECEIVED:", k, 39, 39, 39, 39, t, 39, 1 + i % 2, 39, 39, 39, 39, 39, v, 39,
						layout == "after" ? ",0,\0471970-01-01 00:00:00\047" : "")
				} else {
					r = i + 1
				}
				s = s (s == "" ? "" : ",") r
			}
			if (step == "insert") {
				print "INSERT INTO ob (tenant_id,idempotent_key,channel_code,channel_trade_no,trade_seq,event_type,source,value,settled_at" \
					(layout == "after" ? ",published,published_at" : "") ") VALUES " s ";"
			} else if (layout == "after") {
				print "UPDATE ob SET published = 1, published_at = NOW(6), lease_owner = NULL, lease_until = NULL WHERE id IN (" s ") AND published = 0;"
			} else {
				print "UPDATE ob SET published_at = NOW(6), lease_owner = NULL, lease_until = NULL WHERE id IN (" s ") AND published_at IS NULL;"
			}
		}
	}'
}

$MYSQL -e "CREATE DATABASE IF NOT EXISTS $DB"
echo "server pid $DB_PID, $ROWS rows ($KEYS keys), 128 a statement, server CPU per row (us)"
printf '%-4s %-7s %8s %8s %8s\n' rep layout insert mark total
for rep in $(seq 1 "$REPS"); do
	for layout in before after; do
		$MYSQL "$DB" -e "DROP TABLE IF EXISTS ob; $(table "$layout")"
		line=""
		total=0
		for step in insert mark; do
			statements "$layout" "$step" >"$work/$step.sql"
			a=$(cpu)
			$MYSQL "$DB" <"$work/$step.sql" >/dev/null
			b=$(cpu)
			us=$(awk -v a="$a" -v b="$b" -v t="$tick" -v n="$ROWS" 'BEGIN { printf "%.1f", (b - a) * 1e6 / t / n }')
			total=$(awk -v x="$total" -v y="$us" 'BEGIN { printf "%.1f", x + y }')
			line="$line $(printf '%8s' "$us")"
		done
		printf '%-4s %-7s%s %8s\n' "$rep" "$layout" "$line" "$total"
	done
done
