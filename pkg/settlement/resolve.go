package settlement

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

// An operator's decision on a refund registration mismatch: the
// discrepancies of refund_unregistered and refund_mismatch that reconcile
// would report about one refund (and, on Alipay and Shouqianba, about its
// trade's cumulative total, which names no refund) are recorded in
// ss_refund_resolution with their fingerprint. Reconcile then lists a
// discrepancy found with the same check and fingerprint as resolved; one
// that differs in anything (another check, another amount or state) is
// open again. The registration itself is never changed: its status stays
// what the channel's callbacks made it.

// MaxResolutionNote is the longest note ResolveRefund accepts, in bytes.
const MaxResolutionNote = 1024

// maxResolvedBy bounds ResolveRequest.By (ss_refund_resolution.resolved_by).
const maxResolvedBy = 255

// ErrRefundUnknown is wrapped by ResolveRefund's error when the refund has
// neither a registration nor a refund callback claimed for the tenant,
// channel and trade named: nothing is known of it.
var ErrRefundUnknown = errors.New("no such refund")

// ErrNothingToResolve is wrapped by ResolveRefund's error when reconcile
// finds no open mismatch of the refund: none at all, or only ones resolved
// already. Nothing is recorded.
var ErrNothingToResolve = errors.New("no open refund mismatch")

// Resolution is an operator's decision on one discrepancy (one
// ss_refund_resolution row).
type Resolution struct {
	ID int64 `json:"id" bun:"id"`
	// NamedRefundNo is the refund the operator named; it is the
	// discrepancy's refund, or for a trade's cumulative mismatch one of
	// the trade's refunds.
	NamedRefundNo string `json:"named_refund_no" bun:"named_refund_no"`
	// Note says what was decided and why.
	Note string `json:"note" bun:"note"`
	// ResolvedBy says who decided (the operating-system user and host).
	ResolvedBy string    `json:"resolved_by" bun:"resolved_by"`
	ResolvedAt time.Time `json:"resolved_at" bun:"resolved_at"`
}

// ResolvedDiscrepancy is a discrepancy found as an operator resolved it:
// same check, same fingerprint.
type ResolvedDiscrepancy struct {
	Discrepancy
	Resolution Resolution `json:"resolution"`
}

// ResolveRequest names the refund whose mismatch an operator resolves, and
// the decision.
type ResolveRequest struct {
	TenantID int64
	Channel  channels.Channel
	TradeNo  string
	// RefundNo is compared byte for byte, as in the refund's key.
	RefundNo string
	// Note says what was decided and why: required, at most
	// MaxResolutionNote bytes.
	Note string
	// By says who decided (e.g. "alice@ops-host"): required, at most 255
	// bytes.
	By string
	// RefundsPreregistered is PAYCB_REFUNDS_PREREGISTERED: only when true
	// is a refund without a registration a discrepancy to resolve.
	RefundsPreregistered bool
	// Now is when the decision is recorded; zero means time.Now.
	Now time.Time
}

// Validate checks r before it reaches the database; the error wraps
// ErrInvalidRequest.
func (r ResolveRequest) Validate() error {
	if err := r.refund().validRefund(); err != nil {
		return err
	}
	switch note := strings.TrimSpace(r.Note); {
	case note == "":
		return fmt.Errorf("%w: the note is empty: say what was decided and why (e.g. who confirmed the amount at the channel)", ErrInvalidRequest)
	case len(r.Note) > MaxResolutionNote:
		return fmt.Errorf("%w: the note is %d bytes, at most %d", ErrInvalidRequest, len(r.Note), MaxResolutionNote)
	case !utf8.ValidString(r.Note):
		return fmt.Errorf("%w: the note is not UTF-8", ErrInvalidRequest)
	}
	if strings.TrimSpace(r.By) == "" || len(r.By) > maxResolvedBy {
		return fmt.Errorf("%w: who resolves (%q) must be 1 to %d bytes", ErrInvalidRequest, r.By, maxResolvedBy)
	}
	return nil
}

func (r ResolveRequest) key() (idempotent.Key, error) { return r.refund().key() }

// refund is the refund r is about, as a RefundRequest without an amount.
func (r ResolveRequest) refund() RefundRequest {
	return RefundRequest{TenantID: r.TenantID, Channel: r.Channel, TradeNo: r.TradeNo, RefundNo: r.RefundNo}
}

// ResolveRefund records the operator's decision on the refund's open
// mismatches: each discrepancy that reconcile reports now about the refund
// under refund_mismatch, and under refund_unregistered when
// RefundsPreregistered, together with its trade's cumulative
// refund_mismatch (Alipay, Shouqianba), gets one ss_refund_resolution row
// with its fingerprint, all in one transaction; it returns them. The
// refund registration is not changed.
//
// Errors: ErrInvalidRequest (refused before the database); ErrRefundUnknown
// when the refund has no registration and no claimed callback;
// ErrNothingToResolve when no open mismatch is found (the message says
// whether one was resolved already, and by whom), also when another
// resolution of the same finding committed meanwhile. Anything else is a
// database error: nothing was recorded, and running it again is safe.
func ResolveRefund(ctx context.Context, db *bun.DB, req ResolveRequest) ([]ResolvedDiscrepancy, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("resolve refund %s: %w", req.RefundNo, err)
	}
	key, _ := req.key()
	what := fmt.Sprintf("tenant %d %s trade %s refund %s", req.TenantID, req.Channel, req.TradeNo, req.RefundNo)
	now := req.Now
	if now.IsZero() {
		now = time.Now()
	}
	now = now.UTC().Truncate(time.Microsecond)

	registered, claimed, err := refundKnown(ctx, db, req, key)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", what, err)
	}
	if !registered && !claimed {
		return nil, fmt.Errorf("resolve %s: %w: neither a registration nor a refund callback of it is held "+
			"(check the tenant, the channel, the trade and the refund number: they are compared byte for byte)", what, ErrRefundUnknown)
	}

	checks := []string{CheckRefundMismatch}
	if req.RefundsPreregistered {
		checks = []string{CheckRefundUnregistered, CheckRefundMismatch}
	}
	rep := ReconcileReport{At: now, Examined: map[string]int{}, Discrepancies: []Discrepancy{}, Resolved: []ResolvedDiscrepancy{}}
	r := &reconciler{
		db: db, o: ReconcileOptions{OpenAfter: 24 * time.Hour, RefundsPreregistered: req.RefundsPreregistered}, now: now, rep: &rep,
		refund: &refundScope{tenant: req.TenantID, channel: req.Channel, tradeNo: req.TradeNo, key: key},
	}
	if err := r.run(ctx, checks); err != nil {
		return nil, fmt.Errorf("resolve %s: %w", what, err)
	}
	// The trade's registrations were read: keep this refund's findings and
	// the trade's own (a cumulative total names no refund).
	rep.Discrepancies = slices.DeleteFunc(rep.Discrepancies, func(d Discrepancy) bool {
		return d.Fingerprint == "" || (d.RefundNo != req.RefundNo && d.RefundNo != "")
	})
	if err := r.applyResolutions(ctx); err != nil {
		return nil, fmt.Errorf("resolve %s: %w", what, err)
	}
	if len(rep.Discrepancies) == 0 {
		return nil, fmt.Errorf("resolve %s: %w", what, nothingToResolve(req, registered, rep.Resolved))
	}

	out := make([]ResolvedDiscrepancy, 0, len(rep.Discrepancies))
	err = db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		out = out[:0]
		for _, d := range rep.Discrepancies {
			res, err := tx.NewRaw(`INSERT INTO ss_refund_resolution
  (tenant_id, channel_code, channel_trade_no, refund_no, check_name, fingerprint, named_refund_no, detail, note, resolved_by, resolved_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				d.TenantID, d.Channel, d.TradeNo, d.RefundNo, d.Check, d.Fingerprint, req.RefundNo, d.Detail, req.Note, req.By, now).Exec(ctx)
			if err != nil {
				if err = idempotent.ClassifyDuplicate(err); errors.Is(err, idempotent.ErrDuplicateKey) {
					return fmt.Errorf("%w: %s %q was resolved meanwhile by another run (see consumer reconcile)", ErrNothingToResolve, d.Check, d.Fingerprint)
				}
				return fmt.Errorf("record the resolution of %s: %w", d.Check, err)
			}
			id, err := res.LastInsertId()
			if err != nil {
				return fmt.Errorf("record the resolution of %s: read its id: %w", d.Check, err)
			}
			out = append(out, ResolvedDiscrepancy{Discrepancy: d, Resolution: Resolution{
				ID: id, NamedRefundNo: req.RefundNo, Note: req.Note, ResolvedBy: req.By, ResolvedAt: now,
			}})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", what, err)
	}
	return out, nil
}

// refundKnown reports whether the refund has a registration and whether a
// callback of it was claimed.
func refundKnown(ctx context.Context, db bun.IDB, req ResolveRequest, key idempotent.Key) (registered, claimed bool, err error) {
	_, err = selectRegistration(ctx, db, req.TenantID, req.Channel, req.TradeNo, req.RefundNo, false)
	switch {
	case err == nil:
		registered = true
	case !errors.Is(err, errNoRegistration):
		return false, false, err
	}
	var n int
	if err := db.NewRaw(`SELECT COUNT(*) FROM ss_channel_idempotent WHERE tenant_id = ? AND idempotent_key = ?`,
		req.TenantID, string(key)).Scan(ctx, &n); err != nil {
		return false, false, fmt.Errorf("read the claim %s: %w", key, err)
	}
	return registered, n > 0, nil
}

// nothingToResolve explains why a refund has no open mismatch.
func nothingToResolve(req ResolveRequest, registered bool, resolved []ResolvedDiscrepancy) error {
	if len(resolved) > 0 {
		parts := make([]string, len(resolved))
		for i, d := range resolved {
			parts[i] = fmt.Sprintf("%s (%s) resolved at %s by %s: %q", d.Check, d.Fingerprint,
				d.Resolution.ResolvedAt.UTC().Format(time.RFC3339), d.Resolution.ResolvedBy, d.Resolution.Note)
		}
		return fmt.Errorf("%w: what reconcile finds is resolved already: %s", ErrNothingToResolve, strings.Join(parts, "; "))
	}
	if !registered && !req.RefundsPreregistered {
		return fmt.Errorf("%w: the refund has no registration, which is not a discrepancy while "+
			"refunds are not expected to be pre-registered (PAYCB_REFUNDS_PREREGISTERED=false)", ErrNothingToResolve)
	}
	return fmt.Errorf("%w: reconcile finds none for this refund (nothing to resolve)", ErrNothingToResolve)
}

// resolutionKey is what matches a discrepancy with a resolution.
type resolutionKey struct {
	tenant                                     int64
	channel, trade, refund, check, fingerprint string
}

// applyResolutions moves every discrepancy with a fingerprint that an
// operator resolved (same refund, check and fingerprint) from
// Discrepancies to Resolved.
func (r *reconciler) applyResolutions(ctx context.Context) error {
	type trade struct {
		tenant         int64
		channel, trade string
	}
	var trades []trade
	seen := map[trade]bool{}
	for _, d := range r.rep.Discrepancies {
		t := trade{d.TenantID, d.Channel, d.TradeNo}
		if d.Fingerprint != "" && d.TradeNo != "" && !seen[t] {
			seen[t] = true
			trades = append(trades, t)
		}
	}
	if len(trades) == 0 {
		return nil
	}
	index := map[resolutionKey]Resolution{}
	for chunk := range slices.Chunk(trades, 200) {
		conds := make([]string, len(chunk))
		args := make([]any, 0, 3*len(chunk))
		for i, t := range chunk {
			conds[i] = "(tenant_id = ? AND channel_code = ? AND channel_trade_no = ?)"
			args = append(args, t.tenant, t.channel, t.trade)
		}
		var rows []struct {
			Resolution
			TenantID    int64  `bun:"tenant_id"`
			Channel     string `bun:"channel_code"`
			TradeNo     string `bun:"channel_trade_no"`
			RefundNo    string `bun:"refund_no"`
			Check       string `bun:"check_name"`
			Fingerprint string `bun:"fingerprint"`
		}
		err := r.db.NewRaw(`SELECT id, tenant_id, channel_code, channel_trade_no, refund_no, check_name, fingerprint,
  named_refund_no, note, resolved_by, resolved_at
FROM ss_refund_resolution WHERE `+strings.Join(conds, " OR ")+` ORDER BY id`, args...).Scan(ctx, &rows)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("reconcile: read the refund resolutions of %d trades: %w", len(chunk), err)
		}
		for _, row := range rows {
			row.ResolvedAt = row.ResolvedAt.UTC()
			index[resolutionKey{row.TenantID, row.Channel, row.TradeNo, row.RefundNo, row.Check, row.Fingerprint}] = row.Resolution
		}
	}
	open := r.rep.Discrepancies[:0]
	for _, d := range r.rep.Discrepancies {
		if res, ok := index[resolutionKey{d.TenantID, d.Channel, d.TradeNo, d.RefundNo, d.Check, d.Fingerprint}]; ok && d.Fingerprint != "" {
			r.rep.Resolved = append(r.rep.Resolved, ResolvedDiscrepancy{Discrepancy: d, Resolution: res})
			continue
		}
		open = append(open, d)
	}
	r.rep.Discrepancies = open
	return nil
}
