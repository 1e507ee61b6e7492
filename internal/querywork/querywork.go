package querywork

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/querier"
	"github.com/paycallback/paycallback/internal/queryplan"
	"github.com/paycallback/paycallback/internal/registrations"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// ErrLeaseLost is returned by Record when the registration is no longer
// leased to the recording querier by the lease the item came from: its
// lease ran out (and perhaps another querier holds it now). Nothing was
// written.
var ErrLeaseLost = errors.New("the registration's lease is no longer this querier's")

// Backstop settles open payment registrations whose payment is already
// posted (*settlement.Service).
type Backstop interface {
	SettleFromOrders(ctx context.Context, limit int) (int, error)
}

// Store is the querier's work on a database pool.
type Store struct {
	db       *bun.DB
	policy   queryplan.Policy
	backstop Backstop
	// turn alternates which kind takes the larger half of a lease.
	turn atomic.Uint64
}

// New returns a Store on db. policy gives the first wait of a registration
// never asked; backstop runs before every lease (nil: none, for tests of
// the lease alone).
func New(db *bun.DB, policy queryplan.Policy, backstop Backstop) *Store {
	return &Store{db: db, policy: policy, backstop: backstop}
}

var openStatuses = []string{string(settlement.RegistrationRegistered), string(settlement.RegistrationAbnormal)}

// table is one kind's registration table: its name and the column its
// first wait counts from (the worker's clock in both).
type table struct {
	kind  channels.QueryKind
	name  string
	since string
}

var (
	payments = table{kind: channels.QueryPayment, name: "ss_payment_registration", since: "registered_at"}
	refunds  = table{kind: channels.QueryRefund, name: "ss_refund_request", since: "created_at"}
)

// Lease returns up to limit open registrations (REGISTERED or ABNORMAL,
// not stopped) due at now — their next ask at or before now, or, never
// asked, their first wait (queryplan.Policy.First) over — whose lease is
// free or ran out, leased to owner until now+lease, oldest due first
// within each kind. Payments and refunds share the limit: each kind may
// take half of it (the larger half going to payments and refunds by
// turns), and what one leaves the other takes, so that a backlog of
// payments never starves the refunds nor the other way round. A refund is
// leased only when its trade's order names the merchant its payment was
// bound for: the query is sent for that merchant, and without one it
// could not be.
func (s *Store) Lease(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]querier.Item, error) {
	if limit < 1 {
		return nil, nil
	}
	if s.backstop != nil {
		if _, err := s.backstop.SettleFromOrders(ctx, 0); err != nil {
			return nil, fmt.Errorf("settle registrations already paid before leasing: %w", err)
		}
	}
	now = now.UTC()
	token, err := newToken()
	if err != nil {
		return nil, err
	}
	order := []table{payments, refunds}
	if s.turn.Add(1)%2 == 0 {
		order = []table{refunds, payments}
	}
	// The first kind its half, the second the rest, then the first kind
	// what the second left.
	var out []querier.Item
	for i, t := range []table{order[0], order[1], order[0]} {
		want := limit - len(out)
		if i == 0 {
			want = (limit + 1) / 2
		}
		if want <= 0 {
			break
		}
		items, err := s.lease(ctx, t, owner, token, now, lease, want)
		if err != nil {
			return out, err
		}
		out = append(out, items...)
	}
	return out, nil
}

// due adds the conditions of a registration to ask about at now, lease
// free, to q (the columns of t, unqualified).
func (s *Store) due(t table, now time.Time) func(q bun.QueryBuilder) bun.QueryBuilder {
	return func(q bun.QueryBuilder) bun.QueryBuilder {
		return q.Where(t.name+".status IN (?)", bun.List(openStatuses)).
			Where(t.name+".query_stopped = 0").
			WhereGroup(" AND ", func(q bun.QueryBuilder) bun.QueryBuilder {
				return q.Where(t.name+".query_next_at <= ?", now).
					WhereGroup(" OR ", func(q bun.QueryBuilder) bun.QueryBuilder {
						return q.Where(t.name+".query_next_at IS NULL").Where(t.name+"."+t.since+" <= ?", now.Add(-s.policy.FirstWait))
					})
			}).
			WhereGroup(" AND ", func(q bun.QueryBuilder) bun.QueryBuilder {
				return q.Where(t.name+".lease_until IS NULL").WhereOr(t.name+".lease_until < ?", now)
			})
	}
}

// leasedRow is a registration read back after its lease.
type leasedRow struct {
	ID              int64     `bun:"id"`
	TenantID        int64     `bun:"tenant_id"`
	Channel         string    `bun:"channel_code"`
	MerchantID      *string   `bun:"merchant_id"`
	MerchantOrderNo *string   `bun:"merchant_order_no"`
	TradeNo         *string   `bun:"channel_trade_no"`
	RefundNo        string    `bun:"refund_no"`
	Since           time.Time `bun:"since"`
	ExpiresAt       time.Time `bun:"expires_at"`
	Retries         int       `bun:"query_retries"`
}

func (s *Store) lease(ctx context.Context, t table, owner string, token string, now time.Time, lease time.Duration, limit int) ([]querier.Item, error) {
	sel := s.db.NewSelect().Table(t.name).Column(t.name + ".id").ApplyQueryBuilder(s.due(t, now))
	if t == refunds {
		sel = sel.Where("EXISTS (SELECT 1 FROM ss_channel_order AS o WHERE o.tenant_id = ss_refund_request.tenant_id AND o.channel_code = ss_refund_request.channel_code AND o.channel_trade_no = ss_refund_request.channel_trade_no AND o.bound_merchant_id IS NOT NULL AND o.bound_merchant_id <> '')")
	}
	var ids []int64
	err := sel.OrderExpr("COALESCE("+t.name+".query_next_at, "+t.name+"."+t.since+"), "+t.name+".id").
		Limit(int64(limit)).Scan(ctx, &ids)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("find due %s registrations: %w", strings.ToLower(string(t.kind)), err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	if _, err := s.db.NewUpdate().Table(t.name).
		Set("lease_owner = ?", owner).Set("lease_token = ?", token).Set("lease_until = ?", now.Add(lease)).
		Where(t.name+".id IN (?)", bun.List(ids)).ApplyQueryBuilder(s.due(t, now)).
		Exec(ctx); err != nil {
		return nil, fmt.Errorf("lease %d %s registrations: %w", len(ids), strings.ToLower(string(t.kind)), err)
	}
	var rows []leasedRow
	read := s.db.NewSelect().TableExpr(t.name+" AS r").
		ColumnExpr("r.id, r.tenant_id, r.channel_code, r.query_retries").
		ColumnExpr("r."+t.since+" AS since").
		Where("r.id IN (?)", bun.List(ids)).Where("r.lease_token = ?", token).
		OrderExpr("r.id")
	if t == payments {
		read = read.ColumnExpr("r.merchant_id, r.merchant_order_no, r.expires_at")
	} else {
		read = read.ColumnExpr("o.bound_merchant_id AS merchant_id, o.merchant_order_no, r.channel_trade_no, r.refund_no").
			Join("LEFT JOIN ss_channel_order AS o ON o.tenant_id = r.tenant_id AND o.channel_code = r.channel_code AND o.channel_trade_no = r.channel_trade_no")
	}
	if err := read.Scan(ctx, &rows); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("read the leased %s registrations: %w", strings.ToLower(string(t.kind)), err)
	}
	out := make([]querier.Item, 0, len(rows))
	for _, r := range rows {
		target := channels.QueryTarget{
			TenantID: r.TenantID, Channel: channels.Channel(r.Channel), Kind: t.kind,
			MerchantID: deref(r.MerchantID), MerchantOrderNo: deref(r.MerchantOrderNo), TradeNo: deref(r.TradeNo), RefundNo: r.RefundNo,
		}
		reg := queryplan.Registration{Kind: t.kind, CreatedAt: r.Since.UTC(), Retries: r.Retries}
		if t == payments {
			reg.ExpiresAt = r.ExpiresAt.UTC()
		}
		out = append(out, querier.Item{ID: itemID(t.kind, r.ID, token), Target: target, Registration: reg})
	}
	return out, nil
}

// Record writes what became of item, in one transaction conditional on
// owner still holding the lease item came from: the query's log row (when
// one was sent), the next ask or the stop, the transient failures in a
// row, the count of asks, the registration's new status (through the
// registrations store's moves) and the lease's release. When the lease is
// no longer owner's it changes nothing and returns ErrLeaseLost.
func (s *Store) Record(ctx context.Context, owner string, item querier.Item, rec querier.Record) error {
	kind, id, token, err := parseItemID(item.ID)
	if err != nil {
		return err
	}
	t := payments
	if kind == channels.QueryRefund {
		t = refunds
	}
	return s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		up := tx.NewUpdate().Table(t.name).
			Set("query_retries = ?", rec.Retries).
			Set("lease_owner = NULL").Set("lease_token = NULL").Set("lease_until = NULL")
		if rec.Decision.Stop {
			up = up.Set("query_next_at = NULL").Set("query_stopped = 1")
		} else {
			up = up.Set("query_next_at = ?", rec.Decision.Next.UTC())
		}
		if rec.Asked {
			up = up.Set("query_count = query_count + 1")
		}
		res, err := up.Where("id = ?", id).Where("lease_owner = ?", owner).Where("lease_token = ?", token).Exec(ctx)
		if err != nil {
			return fmt.Errorf("record the query of %s registration %d: %w", strings.ToLower(string(kind)), id, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("record the query of %s registration %d: %w", strings.ToLower(string(kind)), id, err)
		} else if n == 0 {
			return fmt.Errorf("record the query of %s registration %d: %w", strings.ToLower(string(kind)), id, ErrLeaseLost)
		}
		if rec.Asked {
			tg := item.Target
			if _, err := tx.NewInsert().Table("ss_query_log").Model(&map[string]any{
				"tenant_id": tg.TenantID, "channel_code": string(tg.Channel), "kind": string(tg.Kind),
				"merchant_id": tg.MerchantID, "merchant_order_no": tg.MerchantOrderNo, "channel_trade_no": tg.TradeNo,
				"refund_no": tg.RefundNo, "asked_at": rec.AskedAt.UTC(), "answer": clip(rec.Answer, 32),
				"raw_state": clip(rec.RawState, 64), "detail": clip(rec.Detail, 512), "published": boolInt(rec.Published),
				"querier": clip(owner, 64),
			}).Exec(ctx); err != nil {
				return fmt.Errorf("log the query of %s registration %d: %w", strings.ToLower(string(kind)), id, err)
			}
		}
		if rec.Decision.Status == "" {
			return nil
		}
		regs := &registrations.Store{DB: tx}
		to := settlement.RegistrationStatus(rec.Decision.Status)
		if kind == channels.QueryPayment {
			_, err = regs.SetPaymentStatus(ctx, item.Target.TenantID, item.Target.Channel, item.Target.MerchantOrderNo, to)
		} else {
			_, err = regs.SetRefundStatus(ctx, item.Target.TenantID, item.Target.Channel, item.Target.TradeNo, item.Target.RefundNo, to)
		}
		if err != nil {
			return fmt.Errorf("record the query of %s registration %d: %w", strings.ToLower(string(kind)), id, err)
		}
		return nil
	})
}

// LogEntry is one query sent, as ss_query_log keeps it.
type LogEntry struct {
	TenantID        int64     `bun:"tenant_id"`
	Channel         string    `bun:"channel_code"`
	Kind            string    `bun:"kind"`
	MerchantID      string    `bun:"merchant_id"`
	MerchantOrderNo string    `bun:"merchant_order_no"`
	TradeNo         string    `bun:"channel_trade_no"`
	RefundNo        string    `bun:"refund_no"`
	AskedAt         time.Time `bun:"asked_at"`
	Answer          string    `bun:"answer"`
	RawState        string    `bun:"raw_state"`
	Detail          string    `bun:"detail"`
	Published       bool      `bun:"published"`
	Querier         string    `bun:"querier"`
}

// Log returns the queries sent about a tenant's order on a channel, by its
// merchant order number or the channel's trade number (either may be
// empty), oldest first.
func Log(ctx context.Context, db bun.IDB, tenantID int64, ch channels.Channel, merchantOrderNo, tradeNo string) ([]LogEntry, error) {
	var out []LogEntry
	q := db.NewSelect().Table("ss_query_log").
		Column("tenant_id", "channel_code", "kind", "merchant_id", "merchant_order_no", "channel_trade_no", "refund_no",
			"asked_at", "answer", "raw_state", "detail", "published", "querier").
		Where("tenant_id = ?", tenantID).Where("channel_code = ?", string(ch)).
		WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			if merchantOrderNo != "" {
				q = q.WhereOr("merchant_order_no = ?", merchantOrderNo)
			}
			if tradeNo != "" {
				q = q.WhereOr("channel_trade_no = ?", tradeNo)
			}
			if merchantOrderNo == "" && tradeNo == "" {
				q = q.Where("1 = 0")
			}
			return q
		}).OrderExpr("asked_at, id")
	if err := q.Scan(ctx, &out); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("read the query log of %s/%s%s: %w", ch, merchantOrderNo, tradeNo, err)
	}
	for i := range out {
		out[i].AskedAt = out[i].AskedAt.UTC()
	}
	return out, nil
}

// itemID names a leased registration: its kind, row id and the lease's
// token, so that Record acts on that lease only.
func itemID(kind channels.QueryKind, id int64, token string) string {
	return string(kind) + ":" + strconv.FormatInt(id, 10) + ":" + token
}

func parseItemID(s string) (channels.QueryKind, int64, string, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 || (parts[0] != string(channels.QueryPayment) && parts[0] != string(channels.QueryRefund)) || parts[2] == "" {
		return "", 0, "", fmt.Errorf("querywork: %q is not an item this store leased", s)
	}
	id, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return "", 0, "", fmt.Errorf("querywork: %q is not an item this store leased: %w", s, err)
	}
	return channels.QueryKind(parts[0]), id, parts[2], nil
}

// newToken is a lease round's random token.
func newToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("lease token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// clip cuts s to at most n bytes on a rune boundary, to fit its column.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
