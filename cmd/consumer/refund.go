package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

func refundCmd() command {
	return command{
		name:    "refund",
		summary: "refund pre-registration: register, resolve",
		description: `Refund pre-registration: a refund is registered, committed, before the
channel is asked to make it, so that its callback can be checked against it.
A callback that disagrees with its registration (or, with
PAYCB_REFUNDS_PREREGISTERED=true, has none) is a consumer reconcile
discrepancy until an operator resolves it with a note.`,
		verbs: []command{
			refundRegisterCmd(),
			refundResolveCmd(),
		},
	}
}

func refundRegisterCmd() command {
	return command{
		name:     "register",
		summary:  "pre-register a refund before asking the channel to make it",
		synopsis: "--tenant N --channel CH --trade-no X --refund-no R --amount FEN",
		description: `Records the refund as REGISTERED in a transaction of its own; once this
command exits 0 the channel may be asked to refund. Registering the same
refund again with the same amount changes nothing ("already registered").
Recorded in the audit trail (a log line and an ss_operator_audit row).`,
		exits: []exitStatus{
			{exitUsage, "a usage or configuration error: a flag missing or invalid, no DSN"},
			{exitRefused, "refused: the trade has no posted payment, the amount exceeds the refundable remainder, or the refund number is registered with another amount"},
		},
		setup: refundRegisterCommand,
	}
}

func refundRegisterCommand(fs *flag.FlagSet) runFunc {
	tenant := fs.Int64("tenant", 0, "tenant ID (required)")
	channel := fs.String("channel", "", channels.CodeList()+" (required)")
	tradeNo := fs.String("trade-no", "", "the channel's trade number (required)")
	refundNo := fs.String("refund-no", "", "the refund number the channel will be given and report back; case-sensitive (required)")
	amount := fs.Int64("amount", 0, "refund amount in fen, positive: 1 is ¥0.01 (required)")
	return func(ctx context.Context, env *environment, _ []string) error {
		req := settlement.RefundRequest{TenantID: *tenant, Channel: channels.Channel(*channel), TradeNo: *tradeNo, RefundNo: *refundNo, Amount: *amount}
		if err := requireFlags("refund register",
			required{"--amount", given(fs, "amount")}, required{"--channel", *channel != ""}, required{"--refund-no", *refundNo != ""},
			required{"--tenant", *tenant != 0}, required{"--trade-no", *tradeNo != ""}); err != nil {
			return err
		}
		if err := req.Validate(); err != nil {
			return usagef("refund register: %w", err)
		}
		db, err := openDB(ctx, env)
		if err != nil {
			return err
		}
		defer func() { _ = db.Close() }()
		svc, err := settlement.New(db, idempotent.NewStore(db), env.logger, nil)
		if err != nil {
			return env.audit(ctx, db, "", fmt.Errorf("refund register: %w", err))
		}
		reg, err := svc.RegisterRefund(ctx, req)
		switch {
		case errors.Is(err, settlement.ErrNotPaid), errors.Is(err, settlement.ErrExceedsRefundable), errors.Is(err, settlement.ErrRefundNoReused):
			return env.audit(ctx, db, "", &exitError{code: exitRefused, err: fmt.Errorf("refund register refused: %w", err)})
		case err != nil:
			return env.audit(ctx, db, "", fmt.Errorf("refund register: %w", err))
		}
		out := newPrinter(env)
		state := "registered"
		if reg.Existing {
			state = "already registered"
		}
		line := fmt.Sprintf("%s: tenant %d %s trade %s refund %s amount %d status %s",
			state, reg.TenantID, reg.Channel, reg.TradeNo, reg.RefundNo, reg.Amount, reg.Status)
		out.println(line)
		return env.audit(ctx, db, line, out.err)
	}
}

// given reports whether the flag name was set on the command line (an
// explicit --amount 0 is given, and then explained, not "required").
func given(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
