package settlement_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/dbengine"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// TestSettleBatchSkipsAHeldOrderRowAtEverySize: on a server that honours
// FOR UPDATE SKIP LOCKED (MySQL, MariaDB), a batch of any size with one
// event of a trade whose order row another transaction holds commits
// every other trade (existing order rows and new ones) while the row is
// still held, without waiting for it, and settles the held trade, exactly
// once and on the row as its holder committed it, after the release. The
// holder locks the row by primary key (as a batch of fewer than eight
// events does) or by the unique key (as a larger batch does) and changes
// it, so that a decision made on the row as it was before shows. The free
// trades must be settled well within innodb_lock_wait_timeout: a batch
// that waits for the row fails the test and logs the statement that
// waits, the lock it waits for and the one that blocks it. Every
// statement of the batch must reach only the rows it locked: on a small
// order table MariaDB reads the table whole for an UPDATE … JOIN that is
// not confined to the batch's ids by primary key, and waits for the held
// row (batches of 8 and 32 did, here).
func TestSettleBatchSkipsAHeldOrderRowAtEverySize(t *testing.T) {
	db := sqldbtest.MustMySQL(t)
	ctx := context.Background()
	if sqldbtest.Engine(t, db).Engine == dbengine.TiDB {
		// TiDB cannot skip a held row; TestSettleBatchNeverDecidesOnAHeldOrderRow
		// covers its wait.
		t.Skip("TiDB waits for a held order row by design")
	}
	var lockWait int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT @@innodb_lock_wait_timeout").Scan(&lockWait))
	// Well below the server's lock wait: a batch that waits for the held
	// row is still waiting when this runs out.
	patience := min(10*time.Second, time.Duration(lockWait)*time.Second/3)

	chans := channels.Codes()
	seq := 7000
	for _, n := range []int{1, 2, 8, 32, 256} {
		for _, holdBy := range []string{"primary key", "unique key"} {
			t.Run(fmt.Sprintf("%d events, row held by %s", n, holdBy), func(t *testing.T) {
				// A database of its own: a small order table, which the
				// optimizer is most tempted to read whole.
				db := sqldbtest.MustMySQL(t)
				h := newHarness(t, db)
				// The held trade is paid; the batch refunds it (cumulative
				// 1000). The other trades alternate: an existing paid order
				// the batch refunds (300), a new one the batch pays.
				held := channelstest.NewTrade(channels.SQB, seq)
				seq++
				h.deliver(t, channelstest.PaymentEnvelope(held, channelstest.Delivery{}), int64(seq))
				var paid [][]byte
				evs := make([]channels.Event, 0, n)
				heldAt := n / 2
				for i := 0; i < n; i++ {
					if i == heldAt {
						evs = append(evs, h.decode(t, channelstest.RefundEnvelope(held, refundAt(held, "R1", 0, 1000, 1), channelstest.Delivery{})))
						continue
					}
					tr := channelstest.NewTrade(chans[i%len(chans)], seq)
					seq++
					if i%2 == 0 {
						evs = append(evs, h.decode(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{})))
						continue
					}
					paid = append(paid, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
					r := refundAt(tr, "R1", 0, 300, 1)
					if tr.Channel == channels.WeChat {
						r = refundAt(tr, "R1", 300, 0, 1)
					}
					evs = append(evs, h.decode(t, channelstest.RefundEnvelope(tr, r, channelstest.Delivery{})))
				}
				if len(paid) > 0 {
					for _, d := range h.deliverBatch(t, paid, int64(seq)) {
						require.Equal(t, idempotent.OutcomePosted, d.result.Outcome)
					}
				}
				keys := make([]string, len(evs))
				for i, ev := range evs {
					h.acquire(t, ev, int64(seq+i))
					keys[i] = string(ev.Key)
				}

				// The holder is another settler of the held trade: it has
				// locked the order row and recorded a cumulative refund of
				// 100 there, not yet committed.
				id := order(t, db, held).ID
				holder, err := db.BeginTx(ctx, nil)
				require.NoError(t, err)
				defer func() { _ = holder.Rollback() }()
				var holderThread int64
				require.NoError(t, holder.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&holderThread))
				lock := holder.NewSelect().Table("ss_channel_order").Column("id")
				if holdBy == "primary key" {
					lock = lock.Where("id = ?", id)
				} else {
					lock = lock.Where("tenant_id = ? AND channel_code = ? AND channel_trade_no = ?",
						held.TenantID, string(held.Channel), held.TradeNo)
				}
				var locked int64
				require.NoError(t, lock.For("UPDATE").Scan(ctx, &locked))
				require.Equal(t, id, locked)
				_, err = holder.ExecContext(ctx, "UPDATE ss_channel_order SET refunded_amount = 100, max_cumulative_refund = 100, "+
					"status = 'PARTIALLY_REFUNDED' WHERE id = ?", id)
				require.NoError(t, err)

				batchCtx, cancel := context.WithTimeout(ctx, 2*patience)
				defer cancel()
				type outcome struct {
					res []settlement.Result
					err error
				}
				done := make(chan outcome, 1)
				start := time.Now()
				go func() {
					res, err := h.svc.SettleBatch(batchCtx, evs)
					done <- outcome{res, err}
				}()

				// Every free trade settles while the row is held; the held
				// trade's event waits.
				settled := func() int {
					var c int
					require.NoError(t, db.NewSelect().Table("ss_channel_idempotent").ColumnExpr("COUNT(*)").
						Where("tenant_id = ? AND idempotent_key IN (?) AND status = ?", held.TenantID, bun.List(keys), string(idempotent.StatusSettled)).
						Scan(ctx, &c))
					return c
				}
				deadline := time.Now().Add(patience)
				for settled() < n-1 {
					select {
					case o := <-done:
						if n > 1 {
							t.Fatalf("SettleBatch returned before the free trades were seen settled: %+v, %v", o.res, o.err)
						}
						t.Fatalf("SettleBatch of the held trade alone returned while its row was held: %+v, %v", o.res, o.err)
					default:
					}
					if time.Now().After(deadline) {
						logLockWaits(t, db, holderThread)
						t.Fatalf("after %v, %d of %d free events settled while the order row was held", patience, settled(), n-1)
					}
					time.Sleep(2 * time.Millisecond) // polling interval, not synchronisation
				}
				freeAfter := time.Since(start)
				// The free trades committed, the batch's transaction of the
				// held trade's event now waits for the row: seen as a lock
				// wait in this test's database.
				waiting := func() int {
					var c int
					require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.innodb_trx t "+
						"JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id "+
						"WHERE p.db = DATABASE() AND t.trx_state = 'LOCK WAIT'").Scan(&c))
					return c
				}
				// InnoDB refreshes information_schema.innodb_trx only after
				// 100ms without a read: poll it more slowly than that.
				if !assert.Eventually(t, func() bool { return waiting() == 1 }, patience, 150*time.Millisecond,
					"the held trade's event waits for its row in a transaction of its own") {
					logLockWaits(t, db, holderThread)
					t.FailNow()
				}
				assert.Equal(t, idempotent.StatusAcquired, mustClaim(t, h, evs[heldAt]).Status, "the held trade's event waits for its row")
				select {
				case o := <-done:
					t.Fatalf("SettleBatch returned while the row was held: %+v, %v", o.res, o.err)
				default:
				}
				t.Logf("%d events, row held by %s: %d free events settled in %v while the row was held",
					n, holdBy, n-1, freeAfter.Round(time.Millisecond))

				require.NoError(t, holder.Commit())
				o := <-done
				require.NoError(t, o.err)
				require.Len(t, o.res, n)
				for i, r := range o.res {
					assert.False(t, r.FenceLost, evs[i].Key)
					assert.Equal(t, idempotent.OutcomePosted, r.Outcome, evs[i].Key)
					assert.Equal(t, idempotent.StatusSettled, mustClaim(t, h, evs[i]).Status, evs[i].Key)
					assert.Equal(t, 2, ledgerRows(t, db, evs[i].Key), "one balanced posting for %s", evs[i].Key)
				}
				// Decided on the row as the holder committed it: cumulative
				// 1000 after 100 moves 900.
				assert.Equal(t, int64(900), o.res[heldAt].Amount)
				ord := order(t, db, held)
				assert.Equal(t, int64(1000), ord.RefundedAmount)
				assert.Equal(t, int64(1000), ord.MaxCumulativeRefund)
			})
		}
	}
}

// logLockWaits logs what the server's transactions are doing and which
// lock waits for which, besides the holder's (thread holderThread): the
// evidence of a batch that waits for a row it should have skipped.
func logLockWaits(tb testing.TB, db *bun.DB, holderThread int64) {
	tb.Helper()
	ctx := context.Background()
	dump := func(title, query string, args ...any) {
		rows, err := db.QueryContext(ctx, query, args...)
		if err != nil {
			tb.Logf("%s: %v", title, err)
			return
		}
		defer func() { _ = rows.Close() }()
		cols, err := rows.Columns()
		if err != nil {
			tb.Logf("%s: %v", title, err)
			return
		}
		var b strings.Builder
		b.WriteString(title + ":\n  " + strings.Join(cols, " | ") + "\n")
		for rows.Next() {
			vals := make([]sql.NullString, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				tb.Logf("%s: %v", title, err)
				return
			}
			parts := make([]string, len(vals))
			for i, v := range vals {
				parts[i] = v.String
				if len(parts[i]) > 300 {
					parts[i] = parts[i][:300] + "…"
				}
			}
			b.WriteString("  " + strings.Join(parts, " | ") + "\n")
		}
		if err := rows.Err(); err != nil {
			tb.Logf("%s: %v", title, err)
			return
		}
		tb.Log(b.String())
	}
	tb.Logf("holder thread %d", holderThread)
	dump("transactions", "SELECT trx_mysql_thread_id, trx_state, trx_started, trx_wait_started, trx_rows_locked, trx_query "+
		"FROM information_schema.innodb_trx ORDER BY trx_started")
	dump("lock waits", "SELECT r.trx_mysql_thread_id AS waiting_thread, r.trx_query AS waiting_query, "+
		"rl.lock_mode AS wants, rl.lock_type, rl.lock_index, rl.lock_data AS wanted_record, "+
		"b.trx_mysql_thread_id AS blocking_thread, bl.lock_mode AS held, b.trx_query AS blocking_query "+
		"FROM information_schema.innodb_lock_waits w "+
		"JOIN information_schema.innodb_trx r ON r.trx_id = w.requesting_trx_id "+
		"JOIN information_schema.innodb_trx b ON b.trx_id = w.blocking_trx_id "+
		"JOIN information_schema.innodb_locks rl ON rl.lock_id = w.requested_lock_id "+
		"JOIN information_schema.innodb_locks bl ON bl.lock_id = w.blocking_lock_id")
	var typ, name, status string
	if err := db.QueryRowContext(ctx, "SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status); err != nil {
		tb.Logf("innodb status: %v", err)
		return
	}
	if i := strings.Index(status, "TRANSACTIONS\n------------"); i >= 0 {
		status = status[i:]
	}
	tb.Logf("SHOW ENGINE INNODB STATUS, transactions:\n%s", status)
}
