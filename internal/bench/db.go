package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/settlement"
	"github.com/paycallback/paycallback/schema"
)

// databases creates the run's databases on one server and drops them all at
// the end. Every name starts with one random prefix, paycb_bench_<hex>_.
type databases struct {
	server *mysql.Config
	prefix string
	mu     sync.Mutex
	names  []string
}

func newDatabases(serverDSN string) (*databases, error) {
	cfg, err := sqldb.MySQLConfig(serverDSN)
	if err != nil {
		return nil, err
	}
	cfg.DBName = ""
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("random database name: %w", err)
	}
	return &databases{server: cfg, prefix: "paycb_bench_" + hex.EncodeToString(b[:]) + "_"}, nil
}

// create makes a fresh, migrated database named prefix+suffix and returns its
// DSN and a pool on it (the caller closes the pool).
func (d *databases) create(ctx context.Context, suffix string) (string, *bun.DB, error) {
	name := d.prefix + suffix
	admin, err := sqldb.OpenMySQL(d.server.FormatDSN())
	if err != nil {
		return "", nil, err
	}
	defer func() { _ = admin.Close() }()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4"); err != nil {
		return "", nil, fmt.Errorf("create database %s on %s: %w", name, d.server.Addr, err)
	}
	d.mu.Lock()
	d.names = append(d.names, name)
	d.mu.Unlock()
	cfg := d.server.Clone()
	cfg.DBName = name
	dsn := cfg.FormatDSN()
	db, err := sqldb.OpenMySQL(dsn)
	if err != nil {
		return "", nil, err
	}
	if _, err := schema.Migrate(ctx, db); err != nil {
		_ = db.Close()
		return "", nil, fmt.Errorf("migrate %s: %w", name, err)
	}
	return dsn, db, nil
}

// drop drops the database create made as prefix+suffix, now rather than at
// dropAll.
func (d *databases) drop(ctx context.Context, suffix string) error {
	name := d.prefix + suffix
	d.mu.Lock()
	d.names = slices.DeleteFunc(d.names, func(n string) bool { return n == name })
	d.mu.Unlock()
	admin, err := sqldb.OpenMySQL(d.server.FormatDSN())
	if err != nil {
		return err
	}
	defer func() { _ = admin.Close() }()
	if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// dropAll drops every database create made; it keeps going past errors and
// returns the first.
func (d *databases) dropAll(ctx context.Context) error {
	d.mu.Lock()
	names := d.names
	d.names = nil
	d.mu.Unlock()
	if len(names) == 0 {
		return nil
	}
	admin, err := sqldb.OpenMySQL(d.server.FormatDSN())
	if err != nil {
		return err
	}
	defer func() { _ = admin.Close() }()
	var first error
	for _, name := range names {
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil && first == nil {
			first = fmt.Errorf("drop database %s: %w", name, err)
		}
	}
	return first
}

// serverInfo describes the database server and its durability settings,
// which decide what a commit costs.
func serverInfo(ctx context.Context, db bun.IDB) (string, error) {
	var version string
	var flush, syncBinlog int
	err := db.QueryRowContext(ctx, "SELECT VERSION(), @@innodb_flush_log_at_trx_commit, @@sync_binlog").Scan(&version, &flush, &syncBinlog)
	if err != nil {
		return "", fmt.Errorf("read server settings: %w", err)
	}
	return fmt.Sprintf("%s, innodb_flush_log_at_trx_commit=%d, sync_binlog=%d", version, flush, syncBinlog), nil
}

// storageEvent is one distinct money event of the stream with what its
// rows need.
type storageEvent struct {
	ev        channels.Event
	json      string
	partition int
	offset    int64 // the message's offset in its partition
}

// distinctEvents decodes values and keeps the first occurrence of each
// (tenant, idempotency key): the events the pipeline claims and settles.
func distinctEvents(values [][]byte) ([]storageEvent, error) {
	dec := channels.NewDecoder(keys())
	seen := map[string]bool{}
	var out []storageEvent
	var offsets [Partitions]int64
	for _, v := range values {
		res, err := dec.Decode(v)
		if err != nil || res.Ignored {
			continue // dead letters and ignored notifications write no rows
		}
		id := fmt.Sprintf("%d|%s", res.Event.TenantID, res.Event.Key)
		if seen[id] {
			continue
		}
		seen[id] = true
		js, err := encodeEvent(res.Event)
		if err != nil {
			return nil, err
		}
		h := fnv.New32a()
		_, _ = h.Write([]byte(string(res.Event.Channel) + ":" + res.Event.TradeNo))
		p := int(h.Sum32() % Partitions)
		out = append(out, storageEvent{ev: res.Event, json: js, partition: p, offset: offsets[p]})
		offsets[p]++
	}
	return out, nil
}

// rawRows writes, for every event, the rows the pipeline writes for it (a
// claim row, an order upsert, a debit and a credit ledger row) as
// multi-row INSERTs of batch events per transaction, in stream order, on
// one connection: what storing an event costs with no rule to follow. It
// returns the elapsed time.
func rawRows(ctx context.Context, conn bun.Conn, events []storageEvent, batch int) (time.Duration, error) {
	start := time.Now()
	for rest := events; len(rest) > 0; {
		n := min(batch, len(rest))
		if err := insertBatch(ctx, conn, rest[:n]); err != nil {
			return 0, err
		}
		rest = rest[n:]
	}
	return time.Since(start), nil
}

func insertBatch(ctx context.Context, conn bun.Conn, events []storageEvent) error {
	now := time.Now().UTC()
	var claims, orders, ledger strings.Builder
	var claimArgs, orderArgs, ledgerArgs []any
	claims.WriteString("INSERT INTO ss_channel_idempotent (tenant_id, idempotent_key, event_type, status, settle_outcome, " +
		"fingerprint, event_json, source_topic, source_partition, source_offset, created_at, settled_at) VALUES ")
	orders.WriteString("INSERT INTO ss_channel_order (tenant_id, channel_code, channel_trade_no, merchant_order_no, amount, " +
		"paid_amount, refunded_amount, currency, status, created_at, updated_at) VALUES ")
	ledger.WriteString("INSERT INTO ss_ledger_entry (tenant_id, idempotent_key, channel_code, channel_trade_no, account, " +
		"direction, amount, currency, created_at) VALUES ")
	for i, e := range events {
		ev := e.ev
		if i > 0 {
			claims.WriteString(", ")
			orders.WriteString(", ")
			ledger.WriteString(", ")
		}
		claims.WriteString("(?, ?, ?, 'SETTLED', 'POSTED', ?, ?, 'bench', ?, ?, ?, ?)")
		claimArgs = append(claimArgs, ev.TenantID, []byte(ev.Key), string(ev.Type), ev.Fingerprint, e.json, e.partition, e.offset, now, now)

		paid, refunded := ev.OrderTotal, int64(0)
		debit, credit := settlement.ReceivableAccount(ev.Channel), settlement.AccountMerchantPayable
		amount := ev.OrderTotal
		if ev.RefundNo != "" {
			paid, refunded = 0, max(ev.RefundAmount, ev.CumulativeRefunded)
			debit, credit = credit, debit
			amount = refunded
		}
		orders.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, 'PAID', ?, ?)")
		orderArgs = append(orderArgs, ev.TenantID, []byte(ev.Channel), []byte(ev.TradeNo), []byte(ev.MerchantOrderNo),
			ev.OrderTotal, paid, refunded, ev.Currency, now, now)

		ledger.WriteString("(?, ?, ?, ?, ?, 'DEBIT', ?, ?, ?), (?, ?, ?, ?, ?, 'CREDIT', ?, ?, ?)")
		for _, acct := range []string{debit, credit} {
			ledgerArgs = append(ledgerArgs, ev.TenantID, []byte(ev.Key), []byte(ev.Channel), []byte(ev.TradeNo), []byte(acct),
				amount, ev.Currency, now)
		}
	}
	orders.WriteString(" ON DUPLICATE KEY UPDATE paid_amount = paid_amount + VALUES(paid_amount), " +
		"refunded_amount = refunded_amount + VALUES(refunded_amount), updated_at = VALUES(updated_at)")

	err := conn.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.ExecContext(ctx, claims.String(), claimArgs...); err != nil {
			return fmt.Errorf("insert claims: %w", err)
		}
		if _, err := tx.ExecContext(ctx, orders.String(), orderArgs...); err != nil {
			return fmt.Errorf("upsert orders: %w", err)
		}
		if _, err := tx.ExecContext(ctx, ledger.String(), ledgerArgs...); err != nil {
			return fmt.Errorf("insert ledger rows: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("raw rows, batch of %d events: %w", len(events), err)
	}
	return nil
}
