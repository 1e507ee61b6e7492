package deploy_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
)

// readyz returns the worker's /readyz status and body.
func readyz(addr string) (int, string, error) {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, "", fmt.Errorf("get /readyz: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// TestPrometheusSeesAStalledPartition: with one order row locked by hand
// (a second MariaDB session holding SELECT … FOR UPDATE) and messages
// behind that order's refund on its partition, a real Prometheus scraping
// the worker sees that partition's lag and stall within seconds while the
// other partitions drain; /readyz names the partition and the lock wait.
// Once the lock is released everything settles, exactly once, and the
// stall returns to zero.
func TestPrometheusSeesAStalledPartition(t *testing.T) {
	bin := requireTool(t, "prometheus")
	const partitions = 4
	w := runWorker(t, partitions, func(c *config.Config) {
		c.DB.StatementTimeout = 2 * time.Second // a lock wait ends after 1s
		c.Worker.LagInterval = 200 * time.Millisecond
		c.Worker.StallThreshold = time.Second
		c.Worker.ShutdownTimeout = 2 * time.Second
	})
	ctx := context.Background()
	produce := func(msgs ...kafkaops.Message) {
		t.Helper()
		require.NoError(t, kafkaops.Produce(ctx, w.brokers, topic, msgs))
	}
	payment := func(tr channelstest.Trade) kafkaops.Message {
		return kafkaops.Message{Key: []byte(tr.TradeNo), Value: channelstest.AlipayPayment(tr, channelstest.Delivery{Attempt: 1})}
	}

	locked := channelstest.NewTrade(channels.Alipay, 900)
	stuck := kafkaops.PartitionOf([]byte(locked.TradeNo), partitions)
	produce(payment(locked))
	w.waitConsumed(t)

	db, err := sqldb.OpenMySQL(w.dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	tx, err := db.DB.BeginTx(ctx, &sql.TxOptions{})
	require.NoError(t, err)
	released := false
	release := func() {
		if !released {
			released = true
			require.NoError(t, tx.Rollback())
		}
	}
	t.Cleanup(release)
	var orderID int64
	require.NoError(t, tx.QueryRowContext(ctx,
		"SELECT id FROM ss_channel_order WHERE tenant_id = ? AND channel_code = ? AND channel_trade_no = ? FOR UPDATE",
		locked.TenantID, string(locked.Channel), locked.TradeNo).Scan(&orderID))

	refund := kafkaops.Message{Key: []byte(locked.TradeNo), Value: channelstest.AlipayRefund(locked,
		channelstest.Refund{No: "RF900", Amount: 1000}, channelstest.Delivery{Attempt: 1})}
	onStuck, elsewhere := []kafkaops.Message{refund}, []kafkaops.Message{}
	for seq := 901; len(onStuck) < 6 || len(elsewhere) < 6; seq++ {
		tr := channelstest.NewTrade(channels.Alipay, seq)
		if p := kafkaops.PartitionOf([]byte(tr.TradeNo), partitions); p == stuck && len(onStuck) < 6 {
			onStuck = append(onStuck, payment(tr))
		} else if p != stuck && len(elsewhere) < 6 {
			elsewhere = append(elsewhere, payment(tr))
		}
	}
	produce(onStuck...)
	produce(elsewhere...)

	base := startPrometheus(t, bin, w.addr)
	p := strconv.Itoa(stuck)
	expect := func(what, q string, check func(v float64) bool) {
		t.Helper()
		poll(t, 30*time.Second, what+": "+q, func() (bool, string) {
			v, ok, err := query(base, q)
			switch {
			case err != nil:
				return false, err.Error()
			case !ok:
				return false, "no single sample"
			default:
				return check(v), fmt.Sprint("got ", v)
			}
		})
	}
	expect("the stuck partition's lag", `paycb_consumer_lag{job="paycallback",partition="`+p+`"}`,
		func(v float64) bool { return v == float64(len(onStuck)) })
	expect("the stuck partition's stall", `paycb_partition_stalled_seconds{job="paycallback",partition="`+p+`"}`,
		func(v float64) bool { return v >= 2 })
	expect("the other partitions drain", `sum(paycb_consumer_lag{job="paycallback",partition!="`+p+`"})`,
		func(v float64) bool { return v == 0 })
	expect("the other partitions move", `max(paycb_partition_stalled_seconds{job="paycallback",partition!="`+p+`"})`,
		func(v float64) bool { return v == 0 })
	expect("every partition reported", `count(paycb_partition_stalled_seconds{job="paycallback"})`,
		func(v float64) bool { return v == partitions })

	poll(t, 30*time.Second, "/readyz to name the partition and the lock wait", func() (bool, string) {
		status, body, err := readyz(w.addr)
		if err != nil {
			return false, err.Error()
		}
		return status == http.StatusServiceUnavailable && strings.Contains(body, "partition "+p+" stalled") &&
			strings.Contains(body, "Lock wait timeout exceeded"), fmt.Sprintf("%d %s", status, body)
	})

	release()
	w.waitConsumed(t)
	expect("the stall returns to zero", `max(paycb_partition_stalled_seconds{job="paycallback"})`,
		func(v float64) bool { return v == 0 })
	expect("the lag returns to zero", `sum(paycb_consumer_lag{job="paycallback"})`,
		func(v float64) bool { return v == 0 })
	expect("each event acquired once", `sum(paycb_events_total{job="paycallback",outcome="acquired"})`,
		func(v float64) bool { return v == float64(1+len(onStuck)+len(elsewhere)) })
	poll(t, 30*time.Second, "/readyz to pass", func() (bool, string) {
		status, body, err := readyz(w.addr)
		if err != nil {
			return false, err.Error()
		}
		return status == http.StatusOK, fmt.Sprintf("%d %s", status, body)
	})

	var postings, settled int
	require.NoError(t, db.DB.QueryRowContext(ctx,
		"SELECT COUNT(*) FROM ss_ledger_entry WHERE channel_trade_no = ?", locked.TradeNo).Scan(&postings))
	assert.Equal(t, 4, postings, "the payment and the refund, each posted once (a debit and a credit)")
	require.NoError(t, db.DB.QueryRowContext(ctx,
		"SELECT COUNT(*) FROM ss_channel_idempotent WHERE status = 'SETTLED'").Scan(&settled))
	assert.Equal(t, 1+len(onStuck)+len(elsewhere), settled)
}
