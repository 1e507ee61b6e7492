package statementbook

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/statementauth"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/statements"
)

// PublishItem is one missing_in_ledger item of a statement reconciliation
// and what PublishMissing did about it. Amounts are in fen.
type PublishItem struct {
	TradeNo  string `json:"trade_no"`
	RefundNo string `json:"refund_no,omitempty"`
	// Key is the idempotency key of the event; empty for a per-trade refund
	// total of a cumulative channel, which is no single event.
	Key string `json:"key,omitempty"`
	// LineNo is the statement line the item comes from (the first line's
	// for a per-trade refund total).
	LineNo int `json:"line_no,omitempty"`
	// Amount is the statement's amount: a payment's order total, a
	// refund's own amount, a per-trade refund total.
	Amount int64 `json:"amount"`
	// OrderTotal is the order total the event carries (a refund's comes
	// from the trade's payment line or its order row); 0 when none was
	// built.
	OrderTotal int64 `json:"order_total,omitempty"`
	// Fingerprint is the fingerprint of the event built, or of the one
	// published before.
	Fingerprint string `json:"fingerprint,omitempty"`
	// PublishedAt is when the event was published: now, or by an earlier
	// run (from the statement StatementSHA1).
	PublishedAt   *time.Time `json:"published_at,omitempty"`
	StatementSHA1 string     `json:"statement_sha1,omitempty"`
	// Reason says why nothing was published: what the statement cannot
	// tell, or the claim the worker already holds.
	Reason string `json:"reason,omitempty"`
	// Query says, for a needs_query item, what the querier (consumer
	// query run) does about it: asking and its last answer, or why it
	// cannot ask (see queryWork).
	Query string `json:"query,omitempty"`
}

// PublishReport is what PublishMissing did with a day's missing_in_ledger
// items, each in exactly one list, by statement line.
type PublishReport struct {
	TenantID int64  `json:"tenant_id"`
	Channel  string `json:"channel"`
	Day      string `json:"day"`
	Topic    string `json:"topic"`
	// StatementSHA1 is the SHA-1 of the file last imported that changed
	// the day the events were rebuilt from; StatementVersion the version of
	// the day's lines (DayVersion), which must be the report's.
	StatementSHA1    string `json:"statement_sha1"`
	StatementVersion string `json:"statement_version"`
	// Published were published now, each once, to Topic.
	Published []PublishItem `json:"published"`
	// AlreadyPublished were published by an earlier run with the same
	// fingerprint: nothing is published again.
	AlreadyPublished []PublishItem `json:"already_published"`
	// Claimed have a claim already (the callback or an earlier publication
	// reached the worker) but no posting: publishing adds nothing; see
	// `consumer trade` and `consumer orphans`.
	Claimed []PublishItem `json:"claimed"`
	// NeedsQuery cannot be rebuilt exactly from the statement: the
	// channel's query API must tell what the callback would have said.
	NeedsQuery []PublishItem `json:"needs_query"`
}

// Summary is one line saying how many items landed in each list.
func (r PublishReport) Summary() string {
	return fmt.Sprintf("tenant %d %s %s (statement sha1 %s): published %d to %s, already published %d, claimed %d, needs the query API %d",
		r.TenantID, r.Channel, r.Day, r.StatementSHA1, len(r.Published), r.Topic, len(r.AlreadyPublished), len(r.Claimed), len(r.NeedsQuery))
}

// statementPublish is a row of ss_statement_publish: one event published
// from a statement, by tenant and idempotency key.
type statementPublish struct {
	bun.BaseModel `bun:"table:ss_statement_publish"`

	ID            int64     `bun:"id,pk,autoincrement"`
	TenantID      int64     `bun:"tenant_id"`
	Key           string    `bun:"idempotent_key"`
	ChannelCode   string    `bun:"channel_code"`
	StatementDay  string    `bun:"statement_day"`
	StatementSHA1 string    `bun:"statement_sha1"`
	LineNo        int       `bun:"line_no"`
	Fingerprint   string    `bun:"fingerprint"`
	Topic         string    `bun:"topic"`
	PublishedAt   time.Time `bun:"published_at"`
	// SignatureKeyID is the statement key that signed the event; nil when
	// it was published unsigned, before statement events were signed.
	SignatureKeyID *string `bun:"signature_key_id"`
}

// ErrStatementChanged is wrapped by PublishMissing's error when the day's
// statement held is not the one the report was made from (a corrected file
// was imported in between): reconcile again.
var ErrStatementChanged = errors.New("the day's statement changed since it was reconciled")

// Topic is the worker's input topic, which PublishMissing writes to.
type Topic struct {
	// Name is the topic's name, reported as PublishReport.Topic.
	Name string
	// Publish writes msgs to the topic in order, each keyed message to its
	// key's partition, and returns once all in-sync replicas acknowledged
	// every one; it never creates the topic (the commands use ops.Publish).
	Publish func(ctx context.Context, msgs []kafkaops.Message) error
}

// PublishMissing publishes to the input topic to, for each
// missing_in_ledger item of rep that the day's statement describes exactly,
// the canonical event the channel's callback would have produced (same key,
// same fingerprint; channels.NewStatementEvent), in an envelope of content
// type application/vnd.paycb.statement+json keyed CHANNEL:trade_no like the
// callbacks, so the worker claims it like any callback and a callback
// arriving later is a duplicate. What is rebuilt exactly: payments of every
// channel (the line's order total and merchant order number), and WeChat
// refunds whose order total is known from a payment line of the trade in
// any imported statement or from the trade's order row (the two must
// agree). Refunds of Alipay and Shouqianba are reported as needing the
// query API and never published: their callbacks report the total refunded
// so far.
//
// Each event is signed with the current key of signing: its message carries
// the header x-paycb-statement-signature (statementauth.HeaderSignature),
// the key id and the HMAC-SHA256 of the whole message value, without which
// the worker dead-letters it unauthenticated. With no key it fails at
// once, wrapping statementauth.ErrNoKeys, publishing nothing.
//
// It is idempotent per item: a key published before (ss_statement_publish)
// is not published again, nor is a key that already has a claim; except
// that a key published unsigned (before statement events were signed: no
// signature_key_id), with the same fingerprint and still unclaimed, is
// published again, signed, since the workers dead-letter the unsigned one
// unauthenticated. A row is
// written for each event once the broker acknowledged it; should writing it
// fail, the next run publishes the event again and the worker counts it a
// duplicate. The events carry the statement line's time as occurred_at and
// now as received_at. It fails, publishing nothing, when the topic is
// missing or the statement held for the day is no longer rep's.
func PublishMissing(ctx context.Context, db *bun.DB, to Topic, rep StatementReport, signing statementauth.Keys, now time.Time) (PublishReport, error) {
	ch := channels.Channel(rep.Channel)
	out := PublishReport{
		TenantID: rep.TenantID, Channel: rep.Channel, Day: rep.Day, Topic: to.Name,
		Published: []PublishItem{}, AlreadyPublished: []PublishItem{}, Claimed: []PublishItem{}, NeedsQuery: []PublishItem{},
	}
	if signing.Len() == 0 {
		return out, fmt.Errorf("publish missing: %w: the events would be dead-lettered unauthenticated; set PAYCB_STATEMENT_KEY_FILE", statementauth.ErrNoKeys)
	}
	var missing []StatementItem
	for _, it := range rep.Items {
		if it.Category == StatementMissingInLedger {
			missing = append(missing, it)
		}
	}
	file, lines, version, err := publishLines(ctx, db, rep.TenantID, ch, rep.Day)
	if err != nil {
		return out, err
	}
	out.StatementSHA1, out.StatementVersion = file.SHA1, version
	if len(missing) == 0 {
		return out, nil
	}
	if version != rep.StatementVersion {
		return out, fmt.Errorf("publish missing: the day's statement held is version %s, the reconciliation compared %s: %w",
			version, cmp.Or(rep.StatementVersion, "none"), ErrStatementChanged)
	}

	totals, err := orderTotals(ctx, db, rep.TenantID, ch, missing, lines)
	if err != nil {
		return out, err
	}
	type candidate struct {
		item PublishItem
		ev   channels.Event
	}
	var cands []candidate
	for _, it := range missing {
		pi := PublishItem{TradeNo: it.TradeNo, RefundNo: it.RefundNo, Key: it.Key, LineNo: it.LineNo}
		if it.StatementAmount != nil {
			pi.Amount = *it.StatementAmount
		}
		ev, reason := rebuild(ch, rep.TenantID, it, lines, totals, now)
		if reason != "" {
			pi.Reason = reason
			out.NeedsQuery = append(out.NeedsQuery, pi)
			continue
		}
		pi.OrderTotal, pi.Fingerprint = ev.OrderTotal, ev.Fingerprint
		cands = append(cands, candidate{pi, ev})
	}

	keys := make([]string, len(cands))
	for i, c := range cands {
		keys[i] = string(c.ev.Key)
	}
	published, err := publishedKeys(ctx, db, rep.TenantID, keys)
	if err != nil {
		return out, err
	}
	claimed, err := claimedKeys(ctx, db, rep.TenantID, keys)
	if err != nil {
		return out, err
	}
	var todo []candidate
	resign := map[string]bool{} // published unsigned before: published again, signed
	for _, c := range cands {
		key := string(c.ev.Key)
		if p, ok := published[key]; ok && p.SignatureKeyID == nil && p.Fingerprint == c.ev.Fingerprint {
			if _, claimedToo := claimed[key]; !claimedToo {
				// Published before statement events were signed, and
				// not claimed: the workers dead-lettered it
				// unauthenticated (or will). Publish it again, signed.
				resign[key] = true
				todo = append(todo, c)
				continue
			}
		}
		if p, ok := published[key]; ok {
			c.item.PublishedAt, c.item.StatementSHA1 = ptrTime(p.PublishedAt), p.StatementSHA1
			if p.Fingerprint != c.ev.Fingerprint {
				c.item.Reason = fmt.Sprintf("published on %s from statement %s (line %d) with fingerprint %s; the statement now gives %s: "+
					"the statement was corrected since; query the channel", p.PublishedAt.UTC().Format(time.RFC3339), p.StatementSHA1, p.LineNo, p.Fingerprint, c.ev.Fingerprint)
				c.item.Fingerprint = p.Fingerprint
				out.NeedsQuery = append(out.NeedsQuery, c.item)
				continue
			}
			out.AlreadyPublished = append(out.AlreadyPublished, c.item)
			continue
		}
		if status, ok := claimed[key]; ok {
			c.item.Reason = "the worker holds a claim for the key (" + status + ") but nothing is posted: see consumer trade and consumer orphans"
			out.Claimed = append(out.Claimed, c.item)
			continue
		}
		todo = append(todo, c)
	}
	if len(todo) > 0 {
		// Payments first, then refunds, each in line order: a refund never
		// overtakes its payment on the trade's partition.
		slices.SortStableFunc(todo, func(a, b candidate) int {
			if a.ev.Type != b.ev.Type {
				return strings.Compare(string(a.ev.Type), string(b.ev.Type)) // PAYMENT_RECEIVED < REFUND_SUCCEEDED
			}
			return a.item.LineNo - b.item.LineNo
		})
		msgs := make([]kafkaops.Message, len(todo))
		for i, c := range todo {
			value, err := channels.StatementEnvelope(c.ev, now)
			if err != nil {
				return out, fmt.Errorf("publish missing: %s: %w", c.ev.Key, err)
			}
			sig, err := signing.Sign(value)
			if err != nil {
				return out, fmt.Errorf("publish missing: sign %s: %w", c.ev.Key, err)
			}
			msgs[i] = kafkaops.Message{
				Key: []byte(string(ch) + ":" + c.ev.TradeNo), Value: value,
				Headers: []kafka.Header{{Key: statementauth.HeaderSignature, Value: []byte(sig)}},
			}
		}
		if err := to.Publish(ctx, msgs); err != nil {
			return out, fmt.Errorf("publish missing: %w", err)
		}
		at := now.UTC().Truncate(time.Microsecond)
		var recordErr error
		for _, c := range todo {
			src := lines[lineKey(c.item.TradeNo, c.item.RefundNo)].SourceSHA1
			c.item.PublishedAt, c.item.StatementSHA1 = ptrTime(at), src
			out.Published = append(out.Published, c.item)
			keyID := signing.CurrentID()
			row := statementPublish{
				TenantID: rep.TenantID, Key: string(c.ev.Key), ChannelCode: string(ch), StatementDay: rep.Day,
				StatementSHA1: src, LineNo: c.item.LineNo, Fingerprint: c.ev.Fingerprint, Topic: to.Name, PublishedAt: at,
				SignatureKeyID: &keyID,
			}
			var err error
			if resign[string(c.ev.Key)] {
				_, err = db.NewUpdate().Model(&row).Column("statement_day", "statement_sha1", "line_no", "topic", "published_at", "signature_key_id").
					Where("tenant_id = ?", row.TenantID).Where("idempotent_key = ?", row.Key).Where("signature_key_id IS NULL").Exec(ctx)
			} else {
				_, err = db.NewInsert().Model(&row).Exec(ctx)
			}
			if err := idempotent.ClassifyDuplicate(err); err != nil && !errors.Is(err, idempotent.ErrDuplicateKey) && recordErr == nil {
				recordErr = fmt.Errorf("publish missing: published %s, but could not record it (a rerun publishes it again; the worker counts it a duplicate): %w", c.ev.Key, err)
			}
			// A duplicate key: a concurrent run published and recorded it too.
		}
		if recordErr != nil {
			return out, recordErr
		}
	}
	for _, l := range [][]PublishItem{out.Published, out.AlreadyPublished, out.Claimed, out.NeedsQuery} {
		slices.SortStableFunc(l, func(a, b PublishItem) int { return a.LineNo - b.LineNo })
	}
	if err := queryWork(ctx, db, rep.TenantID, ch, out.NeedsQuery, lines, now); err != nil {
		return out, err
	}
	return out, nil
}

// rebuild builds the event the statement item describes, or says why it
// cannot.
func rebuild(ch channels.Channel, tenant int64, it StatementItem, lines map[string]statementLine, totals map[string]orderTotal, now time.Time) (channels.Event, string) {
	if it.Key == "" {
		return channels.Event{}, cumulativeReason(ch)
	}
	l, ok := lines[lineKey(it.TradeNo, it.RefundNo)]
	if !ok || l.LineNo != it.LineNo || it.StatementAmount == nil || l.Amount != *it.StatementAmount {
		return channels.Event{}, fmt.Sprintf("statement line %d is no longer the item's (a corrected statement was imported): reconcile again", it.LineNo)
	}
	ev := channels.Event{
		TenantID: tenant, Channel: ch, TradeNo: l.TradeNo, MerchantOrderNo: l.MerchantOrderNo,
		OccurredAt: l.ChannelTime, ReceivedAt: now, RawStatus: l.Status, StatementMerchant: l.MerchantID,
	}
	switch statements.Kind(l.Kind) {
	case statements.KindPayment, statements.KindOrder:
		if statements.LineCanceled(ch, l.Status) {
			// A cancelled order says nothing about whether it was paid, and
			// nets to zero either way: there is no payment to publish.
			return channels.Event{}, fmt.Sprintf("the order is %s: it nets the trade to zero whether or not it was paid, "+
				"so no payment is published for it; query the order (%s) if its trade is in doubt", l.Status, orderQuery(ch))
		}
		ev.Type, ev.OrderTotal = idempotent.PaymentReceived, l.Amount
	case statements.KindRefund:
		if ch.Cumulative() {
			return channels.Event{}, cumulativeReason(ch)
		}
		t := totals[l.TradeNo]
		switch {
		case t.statement == 0 && t.order == 0:
			return channels.Event{}, "the order total is unknown: no payment line of the trade in the imported statements and no order row; " +
				"import the statement of the payment's day, or query the refund (" + refundQuery(ch) + ")"
		case t.statement != 0 && t.order != 0 && t.statement != t.order:
			return channels.Event{}, fmt.Sprintf("the order total disagrees: %d fen on the statement's payment line, %d fen on the order row; "+
				"query the refund (%s)", t.statement, t.order, refundQuery(ch))
		case t.conflict:
			return channels.Event{}, "the statements' payment lines of the trade disagree on the order total; query the refund (" + refundQuery(ch) + ")"
		}
		ev.OrderTotal = max(t.statement, t.order)
		ev.Type, ev.RefundNo, ev.RefundAmount = idempotent.RefundSucceeded, l.RefundNo, l.Amount
	default:
		return channels.Event{}, fmt.Sprintf("statement line %d of kind %s is not an event", l.LineNo, l.Kind)
	}
	rebuilt, err := channels.NewStatementEvent(ev)
	if err != nil {
		return channels.Event{}, "cannot be rebuilt from the statement line: " + err.Error()
	}
	if string(rebuilt.Key) != it.Key {
		return channels.Event{}, fmt.Sprintf("the line builds key %s, the reconciliation reported %s: reconcile again", rebuilt.Key, it.Key)
	}
	return rebuilt, ""
}

// cumulativeReason says why a refund of a cumulative channel is not
// published, and which query tells the truth.
func cumulativeReason(ch channels.Channel) string {
	api := "the channel's refund query"
	if ch.Cumulative() {
		api = refundQuery(ch)
	}
	return fmt.Sprintf("%s callbacks report the total refunded so far, the statement each refund's own amount: "+
		"the callback cannot be rebuilt from it; query %s", ch, api)
}

// refundQuery names the channel API that tells a refund
// (channels.Spec.RefundQuery), or says there is one.
func refundQuery(ch channels.Channel) string {
	if spec, ok := channels.Lookup(ch); ok && spec.RefundQuery != "" {
		return spec.RefundQuery
	}
	return "the channel's refund query"
}

// orderQuery names the channel API that tells an order's state
// (channels.Spec.OrderQuery), or says there is one.
func orderQuery(ch channels.Channel) string {
	if spec, ok := channels.Lookup(ch); ok && spec.OrderQuery != "" {
		return spec.OrderQuery
	}
	return "the channel's order query"
}

// orderTotal is what is known of a trade's order total: from the payment
// lines of imported statements (conflict when they disagree) and from the
// order row; 0 when unknown.
type orderTotal struct {
	statement, order int64
	conflict         bool
}

// orderTotals looks up the order totals of the trades of the WeChat refund
// items: the day's own payment lines, payment lines of every imported
// statement of the tenant and channel, and the order rows.
func orderTotals(ctx context.Context, db bun.IDB, tenant int64, ch channels.Channel, items []StatementItem, lines map[string]statementLine) (map[string]orderTotal, error) {
	out := map[string]orderTotal{}
	if ch.Cumulative() {
		return out, nil
	}
	var trades []string
	for _, it := range items {
		if it.RefundNo != "" && it.Key != "" {
			trades = append(trades, it.TradeNo)
		}
	}
	if len(trades) == 0 {
		return out, nil
	}
	slices.Sort(trades)
	trades = slices.Compact(trades)
	note := func(trade string, amount int64) {
		t := out[trade]
		if t.statement != 0 && t.statement != amount {
			t.conflict = true
		}
		t.statement = amount
		out[trade] = t
	}
	for _, l := range lines {
		if statements.Kind(l.Kind) == statements.KindPayment && slices.Contains(trades, l.TradeNo) {
			note(l.TradeNo, l.Amount)
		}
	}
	for chunk := range slices.Chunk(trades, 500) {
		var paid []struct {
			TradeNo string `bun:"channel_trade_no"`
			Amount  int64  `bun:"amount"`
		}
		if err := db.NewSelect().ColumnExpr("l.channel_trade_no, l.amount").
			TableExpr("ss_statement_entry AS l").
			Join("JOIN ss_statement_file AS f ON f.id = l.file_id").
			Where("f.tenant_id = ?", tenant).Where("f.channel_code = ?", string(ch)).
			Where("l.kind = ?", string(statements.KindPayment)).Where("l.channel_trade_no IN (?)", bun.List(chunk)).
			Scan(ctx, &paid); err != nil {
			return nil, fmt.Errorf("publish missing: read the trades' payment lines: %w", err)
		}
		for _, p := range paid {
			note(p.TradeNo, p.Amount)
		}
		var orders []struct {
			TradeNo string `bun:"channel_trade_no"`
			Amount  int64  `bun:"amount"`
		}
		if err := db.NewSelect().ColumnExpr("channel_trade_no, amount").TableExpr("ss_channel_order").
			Where("tenant_id = ?", tenant).Where("channel_code = ?", string(ch)).Where("channel_trade_no IN (?)", bun.List(chunk)).
			Scan(ctx, &orders); err != nil {
			return nil, fmt.Errorf("publish missing: read the trades' orders: %w", err)
		}
		for _, o := range orders {
			t := out[o.TradeNo]
			t.order = o.Amount
			out[o.TradeNo] = t
		}
	}
	return out, nil
}

// publishLines reads the statement held for the day, its lines by
// lineKey (the first by line number where two share one) and their
// version.
func publishLines(ctx context.Context, db bun.IDB, tenant int64, ch channels.Channel, day string) (statementFile, map[string]statementLine, string, error) {
	var file statementFile
	err := db.NewSelect().Model(&file).
		Where("tenant_id = ?", tenant).Where("channel_code = ?", string(ch)).Where("statement_day = ?", day).
		Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return file, nil, "", fmt.Errorf("publish missing: tenant %d %s %s: %w", tenant, ch, day, ErrNoStatement)
	}
	if err != nil {
		return file, nil, "", fmt.Errorf("publish missing: read the statement held: %w", err)
	}
	var rows []statementLine
	if err := db.NewSelect().Model(&rows).Where("file_id = ?", file.ID).OrderExpr("line_no, source_sha1").Scan(ctx); err != nil {
		return file, nil, "", fmt.Errorf("publish missing: read the statement's lines: %w", err)
	}
	lines := make(map[string]statementLine, len(rows))
	for _, r := range rows {
		k := lineKey(r.TradeNo, r.RefundNo)
		if _, ok := lines[k]; !ok {
			lines[k] = r
		}
	}
	return file, lines, dayVersion(rows), nil
}

// lineKey names the line of a day an item comes from: its trade and
// refund numbers (a day merged from several files has no line numbers of
// its own).
func lineKey(trade, refund string) string { return trade + "\x00" + refund }

// publishedKeys reads the publication records of the keys.
func publishedKeys(ctx context.Context, db bun.IDB, tenant int64, keys []string) (map[string]statementPublish, error) {
	out := map[string]statementPublish{}
	for chunk := range slices.Chunk(keys, 500) {
		var rows []statementPublish
		if err := db.NewSelect().Model(&rows).Where("tenant_id = ?", tenant).Where("idempotent_key IN (?)", bun.List(chunk)).
			Scan(ctx); err != nil {
			return nil, fmt.Errorf("publish missing: read what was published before: %w", err)
		}
		for _, r := range rows {
			out[r.Key] = r
		}
	}
	return out, nil
}

// claimedKeys reads which keys have a claim, with its status and outcome.
func claimedKeys(ctx context.Context, db bun.IDB, tenant int64, keys []string) (map[string]string, error) {
	out := map[string]string{}
	for chunk := range slices.Chunk(keys, 500) {
		var rows []struct {
			Key     string  `bun:"idempotent_key"`
			Status  string  `bun:"status"`
			Outcome *string `bun:"settle_outcome"`
		}
		if err := db.NewSelect().ColumnExpr("idempotent_key, status, settle_outcome").TableExpr("ss_channel_idempotent").
			Where("tenant_id = ?", tenant).Where("idempotent_key IN (?)", bun.List(chunk)).Scan(ctx, &rows); err != nil {
			return nil, fmt.Errorf("publish missing: read the keys' claims: %w", err)
		}
		for _, r := range rows {
			s := r.Status
			if r.Outcome != nil && *r.Outcome != "" {
				s += "/" + *r.Outcome
			}
			out[r.Key] = s
		}
	}
	return out, nil
}

func ptrTime(t time.Time) *time.Time { return &t }
