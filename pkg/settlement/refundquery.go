package settlement

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/pkg/channels"
)

// RefundQuery is what the querier (consumer query run) knows of one refund:
// whether a registration makes it the querier's work, whether the querier
// can ask about it, and the last answer it got (ss_query_log). Reconcile
// reports it beside refund_open and statement needs_query items.
type RefundQuery struct {
	// Registered: an ss_refund_request row names the refund.
	Registered bool
	Status     RegistrationStatus
	// Merchant is the bound merchant of the trade's order the refund query
	// is sent for; empty when there is none, and the querier cannot ask.
	Merchant string
	// Asks is how many queries were sent; Stopped says the plan stopped
	// asking; NextAt is the next ask (nil: never asked, due its first
	// wait after CreatedAt).
	Asks      int
	Stopped   bool
	NextAt    *time.Time
	CreatedAt time.Time
	// Last is the last query sent (nil: none).
	Last *RefundQueryAnswer
}

// RefundQueryAnswer is one answer of ss_query_log.
type RefundQueryAnswer struct {
	AskedAt   time.Time `bun:"asked_at"`
	Answer    string    `bun:"answer"`
	RawState  string    `bun:"raw_state"`
	Detail    string    `bun:"detail"`
	Published bool      `bun:"published"`
}

// Asking reports whether the querier asks about the refund on its
// schedule: registered, open, not stopped, with a merchant to ask for.
func (q RefundQuery) Asking() bool {
	return q.Registered && q.Status.Open() && !q.Stopped && q.Merchant != ""
}

// String says in one sentence what the querier does about the refund and,
// when it asked, its last answer.
func (q RefundQuery) String() string {
	var s string
	switch {
	case !q.Registered:
		return "not the querier's work: no refund registration names it"
	case q.Status == RegistrationSucceeded:
		s = "settled (registration SUCCEEDED)"
	case !q.Status.Open():
		s = fmt.Sprintf("the querier stopped: registration %s", q.Status)
	case q.Merchant == "":
		return "the querier cannot ask: no order of the trade names a bound merchant to send the refund query for " +
			"(PAYCB_TENANT_MERCHANTS_FILE binds it when the payment is settled); query the refund by hand"
	case q.Stopped:
		s = fmt.Sprintf("the querier stopped asking after %s; the registration is %s", queries(q.Asks), q.Status)
	case q.Asks == 0:
		s = "the querier asks after its first wait; not asked yet"
	default:
		s = fmt.Sprintf("the querier is asking (%s so far", queries(q.Asks))
		if q.NextAt != nil {
			s += ", next at " + q.NextAt.UTC().Format(time.RFC3339)
		}
		s += ")"
	}
	if q.Last != nil {
		s += fmt.Sprintf("; last answer %s", q.Last.Answer)
		if q.Last.RawState != "" {
			s += " (" + q.Last.RawState + ")"
		}
		s += " at " + q.Last.AskedAt.UTC().Format(time.RFC3339)
		if q.Last.Published {
			s += ", published for the worker"
		}
		if q.Last.Detail != "" {
			s += ": " + q.Last.Detail
		}
	}
	return s
}

// RefundQueryOf reads what the querier knows of a tenant's refund on a
// channel: its registration's querier columns, the trade's bound merchant
// and the last query sent about it.
func RefundQueryOf(ctx context.Context, db bun.IDB, tenantID int64, ch channels.Channel, tradeNo, refundNo string) (RefundQuery, error) {
	var row struct {
		Status    string         `bun:"status"`
		Asks      int            `bun:"query_count"`
		Stopped   bool           `bun:"query_stopped"`
		NextAt    *time.Time     `bun:"query_next_at"`
		CreatedAt time.Time      `bun:"created_at"`
		Merchant  sql.NullString `bun:"bound_merchant_id"`
	}
	err := db.NewSelect().TableExpr("ss_refund_request AS r").
		ColumnExpr("r.status, r.query_count, r.query_stopped, r.query_next_at, r.created_at, o.bound_merchant_id").
		Join("LEFT JOIN ss_channel_order AS o ON o.tenant_id = r.tenant_id AND o.channel_code = r.channel_code AND o.channel_trade_no = r.channel_trade_no").
		Where("r.tenant_id = ?", tenantID).Where("r.channel_code = ?", string(ch)).
		Where("r.channel_trade_no = ?", tradeNo).Where("r.refund_no = ?", refundNo).
		Limit(1).Scan(ctx, &row)
	if errors.Is(err, sql.ErrNoRows) {
		return RefundQuery{}, nil
	}
	if err != nil {
		return RefundQuery{}, fmt.Errorf("read the querier's state of refund %s/%s/%s: %w", ch, tradeNo, refundNo, err)
	}
	q := RefundQuery{
		Registered: true, Status: RegistrationStatus(row.Status), Merchant: row.Merchant.String,
		Asks: row.Asks, Stopped: row.Stopped, CreatedAt: row.CreatedAt.UTC(),
	}
	if row.NextAt != nil {
		t := row.NextAt.UTC()
		q.NextAt = &t
	}
	var last []RefundQueryAnswer
	if err := db.NewSelect().Table("ss_query_log").
		Column("asked_at", "answer", "raw_state", "detail", "published").
		Where("tenant_id = ?", tenantID).Where("channel_code = ?", string(ch)).
		Where("channel_trade_no = ?", tradeNo).Where("refund_no = ?", refundNo).
		Where("kind = ?", string(channels.QueryRefund)).
		OrderExpr("asked_at DESC, id DESC").Limit(1).Scan(ctx, &last); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return RefundQuery{}, fmt.Errorf("read the last query of refund %s/%s/%s: %w", ch, tradeNo, refundNo, err)
	}
	if len(last) == 1 {
		last[0].AskedAt = last[0].AskedAt.UTC()
		q.Last = &last[0]
	}
	return q, nil
}

// queries is "1 query" or "n queries".
func queries(n int) string {
	if n == 1 {
		return "1 query"
	}
	return fmt.Sprintf("%d queries", n)
}
