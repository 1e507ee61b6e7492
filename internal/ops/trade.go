package ops

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// ErrInvalidTrade is returned, wrapped, when the deadletters.TradeQuery
// given to Trade does not name a trade: no tenant, an unknown channel, or a
// trade number that no key can hold.
var ErrInvalidTrade = errors.New("invalid trade")

// validateTrade returns an error wrapping ErrInvalidTrade when q does not
// name a trade.
func validateTrade(q deadletters.TradeQuery) error {
	if q.TenantID <= 0 {
		return fmt.Errorf("%w: tenant must be positive", ErrInvalidTrade)
	}
	if !q.Channel.Valid() {
		return fmt.Errorf("%w: channel %q is not %s", ErrInvalidTrade, q.Channel, channels.CodeList())
	}
	if _, err := idempotent.NewPaymentKey(string(q.Channel), q.TradeNo); err != nil {
		return fmt.Errorf("%w: trade number: %w", ErrInvalidTrade, err)
	}
	return nil
}

// TradeClaim is one claim of the trade (an ss_channel_idempotent row).
type TradeClaim struct {
	ID              int64      `bun:"id" json:"id"`
	Key             string     `bun:"idempotent_key" json:"key"`
	EventType       string     `bun:"event_type" json:"event_type"`
	Status          string     `bun:"status" json:"status"`
	Outcome         *string    `bun:"settle_outcome" json:"outcome"`
	Fingerprint     string     `bun:"fingerprint" json:"fingerprint"`
	SourceTopic     string     `bun:"source_topic" json:"source_topic"`
	SourcePartition int        `bun:"source_partition" json:"source_partition"`
	SourceOffset    int64      `bun:"source_offset" json:"source_offset"`
	Attempts        int        `bun:"attempts" json:"attempts"`
	LastError       *string    `bun:"last_error" json:"last_error"`
	DeadLetteredAt  *time.Time `bun:"dead_lettered_at" json:"dead_lettered_at"`
	CreatedAt       time.Time  `bun:"created_at" json:"created_at"`
	SettledAt       *time.Time `bun:"settled_at" json:"settled_at"`
}

// TradeOrder is the trade's ss_channel_order row.
type TradeOrder struct {
	ID              int64      `bun:"id" json:"id"`
	MerchantOrderNo string     `bun:"merchant_order_no" json:"merchant_order_no"`
	Amount          int64      `bun:"amount" json:"amount"`
	PaidAmount      int64      `bun:"paid_amount" json:"paid_amount"`
	RefundedAmount  int64      `bun:"refunded_amount" json:"refunded_amount"`
	Currency        string     `bun:"currency" json:"currency"`
	Status          string     `bun:"status" json:"status"`
	PaidAt          *time.Time `bun:"paid_at" json:"paid_at"`
	LastRefundAt    *time.Time `bun:"last_refund_at" json:"last_refund_at"`
	CreatedAt       time.Time  `bun:"created_at" json:"created_at"`
	UpdatedAt       time.Time  `bun:"updated_at" json:"updated_at"`
}

// TradeLedgerRow is one ss_ledger_entry row of the trade.
type TradeLedgerRow struct {
	ID        int64     `bun:"id" json:"id"`
	Key       string    `bun:"idempotent_key" json:"key"`
	Account   string    `bun:"account" json:"account"`
	Direction string    `bun:"direction" json:"direction"`
	Amount    int64     `bun:"amount" json:"amount"`
	Currency  string    `bun:"currency" json:"currency"`
	CreatedAt time.Time `bun:"created_at" json:"created_at"`
}

// TradeRegistration is one refund pre-registration of the trade (an
// ss_refund_request row).
type TradeRegistration struct {
	ID        int64     `bun:"id" json:"id"`
	RefundNo  string    `bun:"refund_no" json:"refund_no"`
	Amount    int64     `bun:"amount" json:"amount"`
	Status    string    `bun:"status" json:"status"`
	Key       *string   `bun:"idempotent_key" json:"key"`
	CreatedAt time.Time `bun:"created_at" json:"created_at"`
	UpdatedAt time.Time `bun:"updated_at" json:"updated_at"`
}

// TradePaymentRegistration is the payment registration of the trade (an
// ss_payment_registration row): the one its payment made SUCCEEDED, or the
// one of its order's merchant order number.
type TradePaymentRegistration struct {
	ID              int64     `bun:"id" json:"id"`
	MerchantID      string    `bun:"merchant_id" json:"merchant_id"`
	MerchantOrderNo string    `bun:"merchant_order_no" json:"merchant_order_no"`
	Amount          int64     `bun:"amount" json:"amount"`
	Currency        string    `bun:"currency" json:"currency"`
	Status          string    `bun:"status" json:"status"`
	TradeNo         *string   `bun:"channel_trade_no" json:"channel_trade_no"`
	CreatedAt       time.Time `bun:"created_at" json:"created_at"`
	ExpiresAt       time.Time `bun:"expires_at" json:"expires_at"`
	RegisteredAt    time.Time `bun:"registered_at" json:"registered_at"`
	UpdatedAt       time.Time `bun:"updated_at" json:"updated_at"`
}

// TradeDeadLetter is one dead letter that names the trade
// (deadletters.TradeLetter).
type TradeDeadLetter = deadletters.TradeLetter

// TradeSettledEvent is one of the trade's settled events
// (ss_settled_outbox), without its value.
type TradeSettledEvent struct {
	TradeSeq    int64      `bun:"trade_seq" json:"trade_seq"`
	Key         string     `bun:"idempotent_key" json:"idempotent_key"`
	EventType   string     `bun:"event_type" json:"event_type"`
	Source      string     `bun:"source" json:"source"`
	SettledAt   time.Time  `bun:"settled_at" json:"settled_at"`
	PublishedAt *time.Time `bun:"published_at" json:"published_at"`
}

// TradeEvent is one line of a trade's timeline.
type TradeEvent struct {
	At time.Time `json:"at"`
	// What is "claim", "order", "ledger", "registration", "cancel" (a
	// Shouqianba cancel's effect), "settled_event" or "dead_letter".
	What string `json:"what"`
	// Summary is one line that says everything held about the entry.
	Summary string `json:"summary"`
}

// TradeHistory is everything held about one trade.
type TradeHistory struct {
	TenantID      int64               `json:"tenant_id"`
	Channel       channels.Channel    `json:"channel"`
	TradeNo       string              `json:"trade_no"`
	Claims        []TradeClaim        `json:"claims"`
	Order         *TradeOrder         `json:"order"`
	Ledger        []TradeLedgerRow    `json:"ledger"`
	Registrations []TradeRegistration `json:"registrations"`
	// PaymentRegistrations are the trade's payment registration, found by
	// the trade number its payment recorded or by its order's merchant
	// order number (normally one; none when the payment was not
	// registered).
	PaymentRegistrations []TradePaymentRegistration `json:"payment_registrations"`
	DeadLetters          []TradeDeadLetter          `json:"dead_letters"`
	// SettledEvents are the trade's settled events still in the outbox,
	// in trade_seq order, each with when it was published (null: not yet).
	SettledEvents []TradeSettledEvent `json:"settled_events"`
	// Queries are the querier's queries about the trade (ss_query_log), by
	// its trade number or its payment registration's merchant order
	// number, in the order they were asked.
	Queries []TradeChannelQuery `json:"queries"`
	// Scanned names the dead-letter topic scan: the topic and from when;
	// empty when no topic was scanned.
	Scanned string `json:"scanned,omitempty"`
	// Cancel is the trade's Shouqianba cancel (a CANCELED order) and what
	// it did; nil when the trade has none.
	Cancel *TradeCancel `json:"cancel,omitempty"`
	// Timeline is every entry above in time order.
	Timeline []TradeEvent `json:"timeline"`
}

// TradeChannelQuery is one query the querier sent about the trade and
// what the channel answered.
type TradeChannelQuery struct {
	Kind            string    `bun:"kind" json:"kind"`
	MerchantOrderNo string    `bun:"merchant_order_no" json:"merchant_order_no"`
	RefundNo        string    `bun:"refund_no" json:"refund_no,omitempty"`
	AskedAt         time.Time `bun:"asked_at" json:"asked_at"`
	Answer          string    `bun:"answer" json:"answer"`
	RawState        string    `bun:"raw_state" json:"raw_state"`
	Detail          string    `bun:"detail" json:"detail,omitempty"`
	Published       bool      `bun:"published" json:"published"`
	Querier         string    `bun:"querier" json:"querier"`
}

// TradeCancel is a Shouqianba trade's cancel: its claim (key
// SQB:<sn>:REFUND_SUCCEEDED:CANCEL) and its effect. A cancel nets the trade
// to zero: it reverses the payment posted, moves nothing when none is, and
// a payment settled after it is reversed at once under its key.
type TradeCancel struct {
	Key     string `json:"key"`
	Status  string `json:"status"`
	Outcome string `json:"outcome"`
	// Reversed is the fen posted under the cancel's key (merchant_payable
	// debits).
	Reversed int64 `json:"reversed"`
	// PendingPayment: the cancel moved nothing because no payment was
	// posted; a payment settled later is reversed at once.
	PendingPayment bool `json:"pending_payment"`
	// Effect says the above in words.
	Effect string `json:"effect"`
}

// cancelOf works out the trade's cancel from its claims, order row and
// ledger rows; nil when the trade's channel has no cancel (only
// Shouqianba has) or the trade has no cancel claim.
func (h TradeHistory) cancelOf() *TradeCancel {
	if !h.Channel.HasCancel() {
		return nil
	}
	key, err := channels.CancelKey(h.Channel, h.TradeNo)
	if err != nil {
		return nil
	}
	for _, c := range h.Claims {
		if c.Key != string(key) {
			continue
		}
		out := &TradeCancel{Key: c.Key, Status: c.Status, Outcome: deref(c.Outcome)}
		for _, l := range h.Ledger {
			if l.Key == c.Key && l.Account == settlement.AccountMerchantPayable && l.Direction == string(settlement.Debit) {
				out.Reversed += l.Amount
			}
		}
		paid := h.Order != nil && h.Order.PaidAmount > 0
		switch {
		case c.Status != string(idempotent.StatusSettled):
			out.Effect = "cancel claimed, not settled yet"
		case out.Reversed > 0:
			out.Effect = fmt.Sprintf("cancel reversed %d fen: the trade nets to zero", out.Reversed)
		case !paid:
			out.PendingPayment = true
			out.Effect = "cancel moved nothing, pending a payment: no payment is posted; one settled later is reversed at once"
		default:
			out.Effect = "cancel moved nothing: the refunds had already returned the payment"
		}
		return out
	}
	return nil
}

// Empty reports whether nothing at all is held about the trade.
func (h TradeHistory) Empty() bool {
	return len(h.Claims) == 0 && h.Order == nil && len(h.Ledger) == 0 && len(h.Registrations) == 0 &&
		len(h.PaymentRegistrations) == 0 && len(h.DeadLetters) == 0 && len(h.Queries) == 0
}

// Trade gathers everything held about one trade: its claims (keys
// <CHANNEL>:<trade no>:…, found by a range scan of the unique index), its
// order row, its ledger rows, its refund registrations, its ss_dead_letter
// rows and, when q.Kafka is set, the dead letters written since q.Since
// whose decoded event, or failing that whose Kafka key, names the trade.
// It only reads. The SQL is the same on MySQL and SQLite. An invalid query
// is an error wrapping ErrInvalidTrade; a missing dead-letter topic one
// wrapping ErrTopicNotFound.
func Trade(ctx context.Context, db bun.IDB, q deadletters.TradeQuery) (TradeHistory, error) {
	h := TradeHistory{
		TenantID: q.TenantID, Channel: q.Channel, TradeNo: q.TradeNo,
		Claims: []TradeClaim{}, Ledger: []TradeLedgerRow{}, Registrations: []TradeRegistration{}, DeadLetters: []TradeDeadLetter{},
		SettledEvents: []TradeSettledEvent{}, PaymentRegistrations: []TradePaymentRegistration{}, Queries: []TradeChannelQuery{},
	}
	if err := validateTrade(q); err != nil {
		return h, err
	}
	ch, no := string(q.Channel), q.TradeNo
	// Every key of the trade starts with "<CHANNEL>:<trade no>:" and the
	// trade number holds no ':', so the keys are exactly those in
	// [prefix, prefix with its ':' replaced by ';'), compared byte by byte.
	lo, hi := ch+":"+no+":", ch+":"+no+";"
	if err := db.NewSelect().TableExpr("ss_channel_idempotent").
		Column("id", "idempotent_key", "event_type", "status", "settle_outcome", "fingerprint", "source_topic",
			"source_partition", "source_offset", "attempts", "last_error", "dead_lettered_at", "created_at", "settled_at").
		Where("tenant_id = ?", q.TenantID).Where("idempotent_key >= ?", lo).Where("idempotent_key < ?", hi).
		OrderExpr("created_at, id").Scan(ctx, &h.Claims); err != nil {
		return h, fmt.Errorf("read claims of %s:%s: %w", ch, no, err)
	}
	var orders []TradeOrder
	if err := db.NewSelect().TableExpr("ss_channel_order").
		Column("id", "merchant_order_no", "amount", "paid_amount", "refunded_amount", "currency", "status",
			"paid_at", "last_refund_at", "created_at", "updated_at").
		Where("tenant_id = ?", q.TenantID).Where("channel_code = ?", ch).Where("channel_trade_no = ?", no).
		Scan(ctx, &orders); err != nil {
		return h, fmt.Errorf("read order %s:%s: %w", ch, no, err)
	}
	if len(orders) > 0 {
		h.Order = &orders[0]
	}
	if err := db.NewSelect().TableExpr("ss_ledger_entry").
		Column("id", "idempotent_key", "account", "direction", "amount", "currency", "created_at").
		Where("tenant_id = ?", q.TenantID).Where("channel_code = ?", ch).Where("channel_trade_no = ?", no).
		OrderExpr("created_at, id").Scan(ctx, &h.Ledger); err != nil {
		return h, fmt.Errorf("read ledger of %s:%s: %w", ch, no, err)
	}
	if err := db.NewSelect().TableExpr("ss_refund_request").
		Column("id", "refund_no", "amount", "status", "idempotent_key", "created_at", "updated_at").
		Where("tenant_id = ?", q.TenantID).Where("channel_code = ?", ch).Where("channel_trade_no = ?", no).
		OrderExpr("created_at, id").Scan(ctx, &h.Registrations); err != nil {
		return h, fmt.Errorf("read refund registrations of %s:%s: %w", ch, no, err)
	}
	pq := db.NewSelect().TableExpr("ss_payment_registration").
		Column("id", "merchant_id", "merchant_order_no", "amount", "currency", "status", "channel_trade_no",
			"created_at", "expires_at", "registered_at", "updated_at").
		Where("tenant_id = ?", q.TenantID).Where("channel_code = ?", ch)
	if h.Order != nil && h.Order.MerchantOrderNo != "" {
		pq = pq.WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			return q.Where("channel_trade_no = ?", no).WhereOr("merchant_order_no = ?", h.Order.MerchantOrderNo)
		})
	} else {
		pq = pq.Where("channel_trade_no = ?", no)
	}
	if err := pq.OrderExpr("registered_at, id").Scan(ctx, &h.PaymentRegistrations); err != nil {
		return h, fmt.Errorf("read payment registrations of %s:%s: %w", ch, no, err)
	}
	if err := db.NewSelect().TableExpr("ss_settled_outbox").
		Column("trade_seq", "idempotent_key", "event_type", "source", "settled_at").
		// published_at holds a placeholder until published is set.
		ColumnExpr("CASE WHEN published = 1 THEN published_at END AS published_at").
		Where("tenant_id = ?", q.TenantID).Where("channel_code = ?", ch).Where("channel_trade_no = ?", no).
		OrderExpr("trade_seq").Scan(ctx, &h.SettledEvents); err != nil {
		return h, fmt.Errorf("read settled events of %s:%s: %w", ch, no, err)
	}
	orderNos := []string{}
	for _, r := range h.PaymentRegistrations {
		orderNos = append(orderNos, r.MerchantOrderNo)
	}
	lq := db.NewSelect().TableExpr("ss_query_log").
		Column("kind", "merchant_order_no", "refund_no", "asked_at", "answer", "raw_state", "detail", "published", "querier").
		Where("tenant_id = ?", q.TenantID).Where("channel_code = ?", ch).
		WhereGroup(" AND ", func(sq *bun.SelectQuery) *bun.SelectQuery {
			sq = sq.Where("channel_trade_no = ?", no)
			if len(orderNos) > 0 {
				sq = sq.WhereOr("merchant_order_no IN (?)", bun.List(orderNos))
			}
			return sq
		})
	if err := lq.OrderExpr("asked_at, id").Scan(ctx, &h.Queries); err != nil {
		return h, fmt.Errorf("read the queries of %s:%s: %w", ch, no, err)
	}
	letters, err := deadletters.ForTrade(ctx, db, q)
	if err != nil {
		return h, err
	}
	h.DeadLetters = letters
	if q.Kafka != nil {
		h.Scanned = q.Kafka.DLQTopic
		if !q.Since.IsZero() {
			h.Scanned += " since " + q.Since.UTC().Format(time.RFC3339)
		}
	}
	h.normalise()
	h.Cancel = h.cancelOf()
	h.Timeline = h.timeline()
	return h, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// normalise puts every time in UTC, whatever the driver returned.
func (h *TradeHistory) normalise() {
	utc := func(t *time.Time) {
		if t != nil {
			*t = t.UTC()
		}
	}
	for i := range h.Claims {
		c := &h.Claims[i]
		c.CreatedAt = c.CreatedAt.UTC()
		utc(c.SettledAt)
		utc(c.DeadLetteredAt)
	}
	if o := h.Order; o != nil {
		o.CreatedAt, o.UpdatedAt = o.CreatedAt.UTC(), o.UpdatedAt.UTC()
		utc(o.PaidAt)
		utc(o.LastRefundAt)
	}
	for i := range h.Ledger {
		h.Ledger[i].CreatedAt = h.Ledger[i].CreatedAt.UTC()
	}
	for i := range h.Registrations {
		r := &h.Registrations[i]
		r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	}
	for i := range h.PaymentRegistrations {
		r := &h.PaymentRegistrations[i]
		r.CreatedAt, r.ExpiresAt = r.CreatedAt.UTC(), r.ExpiresAt.UTC()
		r.RegisteredAt, r.UpdatedAt = r.RegisteredAt.UTC(), r.UpdatedAt.UTC()
	}
	for i := range h.DeadLetters {
		d := &h.DeadLetters[i]
		d.At = d.At.UTC()
		utc(d.ClosedAt)
	}
	for i := range h.SettledEvents {
		e := &h.SettledEvents[i]
		e.SettledAt = e.SettledAt.UTC()
		utc(e.PublishedAt)
	}
	for i := range h.Queries {
		h.Queries[i].AskedAt = h.Queries[i].AskedAt.UTC()
	}
}

// timeline lists every entry in time order; entries at the same instant
// keep the order registration, claim, order, ledger (and cancel, settled
// event), dead letter.
func (h TradeHistory) timeline() []TradeEvent {
	type entry struct {
		TradeEvent
		rank int
	}
	var es []entry
	add := func(at time.Time, what string, rank int, format string, a ...any) {
		es = append(es, entry{TradeEvent{At: at, What: what, Summary: fmt.Sprintf(format, a...)}, rank})
	}
	for _, r := range h.PaymentRegistrations {
		trade := "no trade yet"
		if r.TradeNo != nil {
			trade = "trade " + *r.TradeNo
		}
		add(r.RegisteredAt, "registration", 0, "payment %s registered by merchant %s: %d %s, expires %s, status %s, %s (updated %s)",
			r.MerchantOrderNo, r.MerchantID, r.Amount, r.Currency, stamp(r.ExpiresAt), r.Status, trade, stamp(r.UpdatedAt))
	}
	for _, qy := range h.Queries {
		subject := qy.MerchantOrderNo
		if qy.RefundNo != "" {
			subject = "refund " + qy.RefundNo
		}
		s := fmt.Sprintf("%s query of %s by %s: %s", strings.ToLower(qy.Kind), orDash(subject), qy.Querier, qy.Answer)
		if qy.RawState != "" {
			s += " (" + qy.RawState + ")"
		}
		if qy.Published {
			s += ", published for the worker"
		}
		if qy.Detail != "" {
			s += "; " + oneLine(qy.Detail)
		}
		add(qy.AskedAt, "query", 0, "%s", s)
	}
	for _, r := range h.Registrations {
		add(r.CreatedAt, "registration", 0, "refund %s registered: %d, status %s (updated %s)",
			r.RefundNo, r.Amount, r.Status, stamp(r.UpdatedAt))
	}
	for _, c := range h.Claims {
		settled := "not settled"
		if c.SettledAt != nil {
			settled = "settled " + stamp(*c.SettledAt)
		}
		s := fmt.Sprintf("%s %s %s, %s; fingerprint %s; source %s/%d@%d; attempts %d",
			c.Key, c.Status, orDash(deref(c.Outcome)), settled, shortHash(c.Fingerprint), c.SourceTopic, c.SourcePartition, c.SourceOffset, c.Attempts)
		if e := deref(c.LastError); e != "" {
			s += "; last error: " + oneLine(e)
		}
		if c.DeadLetteredAt != nil {
			s += "; dead-lettered " + stamp(*c.DeadLetteredAt)
		}
		add(c.CreatedAt, "claim", 1, "%s", s)
	}
	if o := h.Order; o != nil {
		add(o.CreatedAt, "order", 2, "order %s: amount %d %s, paid %d, refunded %d, status %s (updated %s)",
			o.MerchantOrderNo, o.Amount, o.Currency, o.PaidAmount, o.RefundedAmount, o.Status, stamp(o.UpdatedAt))
	}
	for _, l := range h.Ledger {
		add(l.CreatedAt, "ledger", 3, "%s %s %s %d %s", l.Key, l.Direction, l.Account, l.Amount, l.Currency)
	}
	if c := h.Cancel; c != nil {
		for _, cl := range h.Claims {
			if cl.Key == c.Key {
				at := cl.CreatedAt
				if cl.SettledAt != nil {
					at = *cl.SettledAt
				}
				add(at, "cancel", 3, "%s (%s %s)", c.Effect, c.Status, orDash(c.Outcome))
			}
		}
	}
	for _, e := range h.SettledEvents {
		published := "not published yet"
		if e.PublishedAt != nil {
			published = "published " + stamp(*e.PublishedAt)
		}
		add(e.SettledAt, "settled_event", 3, "settled event %d: %s %s (%s), %s", e.TradeSeq, e.Key, e.EventType, e.Source, published)
	}
	for _, d := range h.DeadLetters {
		s := fmt.Sprintf("%s from %s", d.Kind, d.Source)
		if d.Position != "" {
			s += " at " + d.Position
		}
		if d.IdempotentKey != "" {
			s += "; key " + d.IdempotentKey + " fingerprint " + shortHash(d.Fingerprint)
		} else if d.MessageKey != "" {
			s += "; message key " + d.MessageKey
		}
		s += "; matched by " + d.MatchedBy
		switch {
		case d.ClosedAt != nil:
			s += fmt.Sprintf("; closed %s by %s: %s", stamp(*d.ClosedAt), orDash(d.ClosedBy), oneLine(d.CloseNote))
		case d.Recorded:
			s += "; open"
		}
		if d.Error != "" {
			s += "; error: " + oneLine(d.Error)
		}
		add(d.At, "dead_letter", 4, "%s", s)
	}
	sort.SliceStable(es, func(i, j int) bool {
		if !es[i].At.Equal(es[j].At) {
			return es[i].At.Before(es[j].At)
		}
		return es[i].rank < es[j].rank
	})
	out := make([]TradeEvent, len(es))
	for i, e := range es {
		out[i] = e.TradeEvent
	}
	return out
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z") }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shortHash is the first 12 characters of a fingerprint.
func shortHash(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return orDash(s)
}

// oneLine puts s on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
