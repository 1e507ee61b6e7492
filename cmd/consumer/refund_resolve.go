package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/paycallback/paycallback/internal/audit"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/settlement"
)

func refundResolveCmd() command {
	return command{
		name:     "resolve",
		summary:  "record an operator's decision on a refund registration mismatch",
		synopsis: "--tenant N --channel CH --trade-no X --refund-no R --note TEXT",
		description: `Records, in ss_refund_resolution, that an operator has dealt with what
consumer reconcile finds now about the refund: refund_mismatch (another
amount, a CLOSED registration that succeeded, a registration left open
after its callback, ...) and, when PAYCB_REFUNDS_PREREGISTERED is true,
refund_unregistered; on Alipay and Shouqianba also the trade's cumulative
refund_mismatch, which names no refund. --note says what was decided and
why (required, at most 1024 bytes). Each finding is recorded with its
fingerprint (the amounts and states found); reconcile then lists it as
resolved, not as a discrepancy, for as long as it is found the same. A
later, different mismatch of the refund (another amount, a registration
added, the trade's total moved) is open again.

The registration is not changed: its status stays what the channel's
callbacks made it. Recorded in the audit trail (a log line and an
ss_operator_audit row) with the note.`,
		exits: []exitStatus{
			{exitUsage, "a usage or configuration error: a flag missing or invalid, an empty note, no refund of that number known for the tenant, channel and trade, no DSN"},
			{exitRefused, "refused: reconcile finds no open mismatch of the refund (none, or resolved already); nothing is recorded"},
		},
		setup: refundResolveCommand,
	}
}

func refundResolveCommand(fs *flag.FlagSet) runFunc {
	tenant := fs.Int64("tenant", 0, "tenant ID (required)")
	channel := fs.String("channel", "", channels.CodeList()+" (required)")
	tradeNo := fs.String("trade-no", "", "the channel's trade number (required)")
	refundNo := fs.String("refund-no", "", "the refund number, as the channel reports it; case-sensitive (required)")
	note := fs.String("note", "", "what was decided and why, e.g. \"refund made by hand in the merchant portal; finance confirmed 2026-12-03\" (required)")
	return func(ctx context.Context, env *environment, _ []string) error {
		if err := requireFlags("refund resolve",
			required{"--channel", *channel != ""}, required{"--note", given(fs, "note")}, required{"--refund-no", *refundNo != ""},
			required{"--tenant", *tenant != 0}, required{"--trade-no", *tradeNo != ""}); err != nil {
			return err
		}
		who, host := audit.Who()
		req := settlement.ResolveRequest{
			TenantID: *tenant, Channel: channels.Channel(*channel), TradeNo: *tradeNo, RefundNo: *refundNo,
			Note: *note, By: who + "@" + host, RefundsPreregistered: env.cfg.Worker.RefundsPreregistered,
		}
		if err := req.Validate(); err != nil {
			return usagef("refund resolve: %w", err)
		}
		db, err := openDB(ctx, env)
		if err != nil {
			return err
		}
		defer func() { _ = db.Close() }()
		res, err := settlement.ResolveRefund(ctx, db, req)
		switch {
		case errors.Is(err, settlement.ErrRefundUnknown):
			return env.audit(ctx, db, "", usagef("refund resolve: %w", err))
		case errors.Is(err, settlement.ErrNothingToResolve):
			return env.audit(ctx, db, "", &exitError{code: exitRefused, err: fmt.Errorf("refund resolve refused: %w", err)})
		case err != nil:
			return env.audit(ctx, db, "", fmt.Errorf("refund resolve: %w", err))
		}
		out := newPrinter(env)
		lines := make([]string, len(res))
		for i, d := range res {
			about := "refund " + d.RefundNo
			if d.RefundNo == "" {
				about = "the trade's cumulative total"
			}
			lines[i] = fmt.Sprintf("resolved: tenant %d %s trade %s %s: %s: %s [%s] (#%d)",
				d.TenantID, d.Channel, d.TradeNo, about, d.Check, d.Detail, d.Fingerprint, d.Resolution.ID)
			out.println(lines[i])
		}
		out.println("the registration is left as the channel made it; reconcile lists what was resolved as resolved while it is found the same")
		return env.audit(ctx, db, strings.Join(lines, "; ")+"; note: "+*note, out.err)
	}
}
