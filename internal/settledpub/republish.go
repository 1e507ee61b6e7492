package settledpub

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// RepublishRange selects the settled events Republish sends again: those
// settled in [From, To), of Tenant when not zero and of Channel when not
// empty.
type RepublishRange struct {
	From, To time.Time
	Tenant   int64
	Channel  string
}

// republishPage is how many rows one read of Republish takes.
const republishPage = 500

// Republish publishes again, with their stored bytes (so the same event_id,
// trade_seq and value), the published settled events of r, each trade's
// in trade_seq order, a page at a time, and returns how many it sent. It
// sends only published events: an unpublished one is the publisher's and
// the sweeper's, which keep its trade's order. It marks nothing. A failed
// write stops it; what it returned was sent.
func Republish(ctx context.Context, db bun.IDB, w Writer, r RepublishRange) (int, error) {
	if !r.From.Before(r.To) {
		return 0, fmt.Errorf("republish: the range [%s, %s) is empty", r.From.Format(time.RFC3339), r.To.Format(time.RFC3339))
	}
	sent := 0
	var after *row
	for {
		q := db.NewSelect().Table(outboxTable).
			Column("id", "tenant_id", "idempotent_key", "channel_code", "channel_trade_no", "trade_seq", "value", "settled_at").
			Where("published = 1").Where("settled_at >= ?", r.From.UTC()).Where("settled_at < ?", r.To.UTC())
		if r.Tenant != 0 {
			q = q.Where("tenant_id = ?", r.Tenant)
		}
		if r.Channel != "" {
			q = q.Where("channel_code = ?", r.Channel)
		}
		if after != nil {
			q = q.Where("(tenant_id, channel_code, channel_trade_no, trade_seq) > (?, ?, ?, ?)",
				after.TenantID, after.Channel, after.TradeNo, after.TradeSeq)
		}
		var rows []row
		if err := q.OrderExpr("tenant_id, channel_code, channel_trade_no, trade_seq").Limit(republishPage).
			Scan(ctx, &rows); err != nil {
			return sent, fmt.Errorf("republish: read settled events after %d: %w", sent, err)
		}
		if len(rows) == 0 {
			return sent, nil
		}
		n, err := write(ctx, w, rows)
		sent += n
		if err != nil {
			return sent, fmt.Errorf("republish: %w", err)
		}
		after = &rows[len(rows)-1]
	}
}
