package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/paycallback/paycallback/internal/merchantbinding"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

func paymentCmd() command {
	return command{
		name:    "payment",
		summary: "payment registration: register",
		description: `Payment registration: a payment is registered by its merchant order number
before the channel is asked for it, so that the worker knows which payments
to expect, and the querier can ask the channel about one whose callback
never comes. Services register by message (content type
application/vnd.paycb.registration+json on the input topic); this is the
operator's way to do the same.`,
		verbs: []command{
			paymentRegisterCmd(),
		},
	}
}

func paymentRegisterCmd() command {
	return command{
		name:     "register",
		summary:  "register a payment before asking the channel for it",
		synopsis: "--tenant N --channel CH --merchant-id M --merchant-order-no X --amount FEN --expires-at T [--created-at T]",
		description: `Records the payment as REGISTERED in a transaction of its own, exactly as the
registration message does; when a payment of that merchant order number is
already posted, it is recorded SUCCEEDED at once. Registering the same
payment again (same merchant, amount and expiry) changes nothing ("already
registered"). With PAYCB_TENANT_MERCHANTS_FILE set, --merchant-id must be
bound to --tenant. Times are RFC 3339; --created-at defaults to now.
Recorded in the audit trail (a log line and an ss_operator_audit row).`,
		exits: []exitStatus{
			{exitUsage, "a usage or configuration error: a flag missing or invalid (an expiry not after the creation or more than 30 days after it), no DSN"},
			{exitRefused, "refused: the merchant is not bound to the tenant, or the order is registered with another merchant, amount or expiry"},
		},
		setup: paymentRegisterCommand,
	}
}

func paymentRegisterCommand(fs *flag.FlagSet) runFunc {
	tenant := fs.Int64("tenant", 0, "tenant ID (required)")
	channel := fs.String("channel", "", channels.CodeList()+" (required)")
	merchant := fs.String("merchant-id", "", "the merchant as the merchant binding names it (WeChat mchid or sub_mchid, Alipay seller_id, Shouqianba terminal_sn) (required)")
	orderNo := fs.String("merchant-order-no", "", "the merchant order number (out_trade_no, client_sn); case-sensitive (required)")
	amount := fs.Int64("amount", 0, "payment amount in fen, positive: 1 is ¥0.01 (required)")
	expires := fs.String("expires-at", "", "when the order stops being payable, RFC 3339 (required)")
	created := fs.String("created-at", "", "when the order was created, RFC 3339 (default now)")
	return func(ctx context.Context, env *environment, _ []string) error {
		if err := requireFlags("payment register",
			required{"--amount", given(fs, "amount")}, required{"--channel", *channel != ""}, required{"--expires-at", *expires != ""},
			required{"--merchant-id", *merchant != ""}, required{"--merchant-order-no", *orderNo != ""},
			required{"--tenant", *tenant != 0}); err != nil {
			return err
		}
		expiresAt, err := time.Parse(time.RFC3339Nano, *expires)
		if err != nil {
			return usagef("payment register: --expires-at %q is not an RFC 3339 time", *expires)
		}
		createdAt := time.Now().UTC()
		if *created != "" {
			if createdAt, err = time.Parse(time.RFC3339Nano, *created); err != nil {
				return usagef("payment register: --created-at %q is not an RFC 3339 time", *created)
			}
		}
		req := settlement.PaymentRequest{
			TenantID: *tenant, Channel: channels.Channel(*channel), MerchantID: *merchant, MerchantOrderNo: *orderNo,
			Amount: *amount, Currency: channels.CurrencyCNY, CreatedAt: createdAt, ExpiresAt: expiresAt,
		}
		if err := req.Validate(); err != nil {
			return usagef("payment register: %w", err)
		}
		if path := env.cfg.Worker.TenantMerchantsFile; path != "" {
			f, err := merchantbinding.Load(path)
			if err != nil {
				return usagef("payment register: worker.tenant_merchants_file (PAYCB_TENANT_MERCHANTS_FILE): %v", err)
			}
			if owner, ok := f.Current().TenantOf(req.Channel, req.MerchantID); !ok || owner != req.TenantID {
				return &exitError{code: exitRefused, err: fmt.Errorf("payment register refused: %s merchant %s is not bound to tenant %d in %s",
					req.Channel, channels.Quote(req.MerchantID), req.TenantID, path)}
			}
		}
		db, err := openDB(ctx, env)
		if err != nil {
			return err
		}
		defer func() { _ = db.Close() }()
		svc, err := settlement.New(db, idempotent.NewStore(db), env.logger, nil)
		if err != nil {
			return env.audit(ctx, db, "", fmt.Errorf("payment register: %w", err))
		}
		reg, err := svc.RegisterPayment(ctx, req)
		switch {
		case errors.Is(err, settlement.ErrRegistrationConflict):
			return env.audit(ctx, db, "", &exitError{code: exitRefused, err: fmt.Errorf("payment register refused: %w", err)})
		case err != nil:
			return env.audit(ctx, db, "", fmt.Errorf("payment register: %w", err))
		}
		out := newPrinter(env)
		state := "registered"
		if reg.Existing {
			state = "already registered"
		}
		line := fmt.Sprintf("%s: tenant %d %s merchant %s order %s amount %d expires %s status %s",
			state, reg.TenantID, reg.Channel, reg.MerchantID, reg.MerchantOrderNo, reg.Amount,
			reg.ExpiresAt.Format(time.RFC3339), reg.Status)
		if reg.TradeNo != nil {
			line += " trade " + *reg.TradeNo
		}
		out.println(line)
		return env.audit(ctx, db, line, out.err)
	}
}
