package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

func refundCommand(*flag.FlagSet) runFunc {
	subs := []subcommand{
		{"register", "pre-register a refund before asking the channel to make it", refundRegisterCommand},
	}
	return func(ctx context.Context, env *environment, args []string) error {
		return dispatch(ctx, env, "refund", subs, args)
	}
}

func refundRegisterCommand(fs *flag.FlagSet) runFunc {
	tenant := fs.Int64("tenant", 0, "tenant ID (required)")
	channel := fs.String("channel", "", "WECHAT, ALIPAY or SQB (required)")
	tradeNo := fs.String("trade-no", "", "the channel's trade number (required)")
	refundNo := fs.String("refund-no", "", "the refund number the channel will be given and report back; case-sensitive (required)")
	amount := fs.Int64("amount", 0, "refund amount in fen (required)")
	return func(ctx context.Context, env *environment, _ []string) error {
		req := settlement.RefundRequest{TenantID: *tenant, Channel: channels.Channel(*channel), TradeNo: *tradeNo, RefundNo: *refundNo, Amount: *amount}
		if err := req.Validate(); err != nil {
			return fmt.Errorf("refund register: %w", err)
		}
		db, err := openDB(ctx, env)
		if err != nil {
			return err
		}
		defer func() { _ = db.Close() }()
		svc, err := settlement.New(db, idempotent.NewStore(db), env.logger, nil)
		if err != nil {
			return fmt.Errorf("refund register: %w", err)
		}
		reg, err := svc.RegisterRefund(ctx, req)
		if err != nil {
			return fmt.Errorf("refund register: %w", err)
		}
		out := newPrinter(env)
		state := "registered"
		if reg.Existing {
			state = "already registered"
		}
		out.printf("%s: tenant %d %s trade %s refund %s amount %d status %s\n",
			state, reg.TenantID, reg.Channel, reg.TradeNo, reg.RefundNo, reg.Amount, reg.Status)
		return out.err
	}
}
