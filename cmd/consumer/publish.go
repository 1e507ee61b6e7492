package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/ops"
	"github.com/paycallback/paycallback/pkg/channels"
)

// maxPublishCount bounds --count: a smoke test, not a load test.
const maxPublishCount = 100000

func publishCmd() command {
	return command{
		name:     "publish",
		summary:  "publish a generated realistic test stream to the broker and topic (smoke tests)",
		synopsis: "--tenant N [--channels CH,...] [--count N] [--seed N] [--allow-existing-tenant] [--json]",
		description: `Publishes a realistic stream of test callbacks for one tenant to the configured
broker and input topic, for a smoke test of a deployment: the demo's
generator with --count trades, each paid, about half refunded in one to three
parts, each notification delivered one to three times as the channels do.
Every trade number starts with TEST, the seed and a dash (TEST1764725133-…), so
test trades stand apart from real ones; nothing in the stream should be
dead-lettered. WeChat callbacks are encrypted with the tenant's current APIv3
key from the configuration. Once the workers have consumed it, every event
is SETTLED and "consumer trade" shows any of its trades.

The tenant must have no claims yet, so that test money never mixes with a
real tenant's books: publish reads the database for that (one row at most)
and refuses a tenant with claims. Without a database configured it cannot
check, and refuses too. --allow-existing-tenant skips the check. The topic
is never created. A publish, and a refusal for a tenant with claims, is
recorded in the audit trail.`,
		exits: []exitStatus{
			{exitUsage, "a usage or configuration error: no --tenant, an unknown channel or one the workers do not accept (PAYCB_CHANNELS), WECHAT without an APIv3 key for the tenant, a --count out of range"},
			{exitRefused, "refused as unsafe: the tenant already has claims, or no database is configured to check, and --allow-existing-tenant was not given"},
		},
		setup: publishCommand,
	}
}

func publishCommand(fs *flag.FlagSet) runFunc {
	tenant := fs.Int64("tenant", 0, "the tenant every test callback belongs to (required)")
	chans := fs.String("channels", "", "channels to pay through, comma-separated (default the accepted channels, PAYCB_CHANNELS)")
	count := fs.Int("count", 10, fmt.Sprintf("how many trades to generate (1 to %d)", maxPublishCount))
	seed := fs.Uint64("seed", 0, "the generator's seed, also in every trade number (default the current Unix time)")
	allow := fs.Bool("allow-existing-tenant", false, "publish even when the tenant has claims, or without a database to check")
	asJSON := fs.Bool("json", false, "print what was published as JSON")
	return func(ctx context.Context, env *environment, _ []string) error {
		if *tenant <= 0 {
			return usagef("publish: --tenant is required (a positive tenant ID)")
		}
		if *count < 1 || *count > maxPublishCount {
			return usagef("publish: --count %d is out of range (1 to %d)", *count, maxPublishCount)
		}
		accepted, err := channels.ParseChannels(env.cfg.Worker.Channels)
		if err != nil {
			return usagef("publish: worker.channels: %w", err)
		}
		picked := accepted
		if *chans != "" {
			if picked, err = channels.ParseChannels(strings.Split(*chans, ",")); err != nil {
				return usagef("publish: --channels: %w", err)
			}
			for _, ch := range picked {
				if !slices.Contains(accepted, ch) {
					return usagef("publish: --channels: the workers do not accept %s (PAYCB_CHANNELS is %s): it would be dead-lettered", ch, strings.Join(env.cfg.Worker.Channels, ","))
				}
			}
		}
		opts := demo.TestOptions{TenantID: *tenant, Channels: picked, Trades: *count, Seed: *seed}
		if keys := env.cfg.WeChat.KeysFor(*tenant); len(keys) > 0 {
			opts.WeChatKey = keys[0].Reveal() // the current key
		}
		stream, prefix, err := demo.TestStream(opts)
		if errors.Is(err, demo.ErrNoWeChatKey) {
			return usagef("publish: no WeChat APIv3 key for tenant %d: configure one (PAYCB_WECHAT_APIV3_KEY or a tenant key) or leave WECHAT out of --channels", *tenant)
		}
		if err != nil {
			return usagef("publish: %w", err)
		}

		db, closeDB := env.auditDB(ctx)
		defer closeDB()
		if !*allow {
			if !env.cfg.DB.DSN.IsSet() {
				return &exitError{code: exitRefused, err: fmt.Errorf("publish refused: no database configured to check that tenant %d has no claims; set PAYCB_DB_DSN or give --allow-existing-tenant", *tenant)}
			}
			if db == nil {
				return fmt.Errorf("publish: cannot check tenant %d: the database cannot be opened", *tenant)
			}
			if err := ops.CheckTestTenant(ctx, db, *tenant); errors.Is(err, ops.ErrTenantHasClaims) {
				return env.audit(ctx, db, "", &exitError{code: exitRefused, err: fmt.Errorf("publish refused: %w: test callbacks would mix with its books; choose a tenant without claims or give --allow-existing-tenant", err)})
			} else if err != nil {
				return fmt.Errorf("publish: %w", err)
			}
		}
		k, err := opsKafka(ctx, env)
		if err != nil {
			return err
		}
		msgs := make([]kafkaops.Message, len(stream.Messages))
		example := ""
		for i, m := range stream.Messages {
			msgs[i] = kafkaops.Message{Key: m.Key, Value: m.Value}
			if example == "" && m.Key != nil {
				example = string(m.Key)
			}
		}
		rep := publishReport{
			Topic: k.Topic, TenantID: *tenant, Prefix: prefix, Trades: stream.Trades, Messages: len(msgs),
			Events: stream.Events, Paid: stream.Paid[*tenant], Refunded: stream.Refunded[*tenant], Example: example,
		}
		for _, ch := range picked {
			rep.Channels = append(rep.Channels, string(ch))
		}
		detail := fmt.Sprintf("tenant %d: %d messages (%d trades, %d events) to %s, trade numbers %s…", *tenant, rep.Messages, rep.Trades, rep.Events, k.Topic, prefix)
		if err := ops.Publish(ctx, k, msgs); err != nil {
			return env.audit(ctx, db, "", err)
		}
		out := newPrinter(env)
		if *asJSON {
			out.json(rep)
		} else {
			printPublish(out, rep)
		}
		return env.audit(ctx, db, detail, out.err)
	}
}

// publishReport is what publish wrote.
type publishReport struct {
	Topic    string   `json:"topic"`
	TenantID int64    `json:"tenant_id"`
	Channels []string `json:"channels"`
	// Prefix starts every trade number of the run.
	Prefix   string `json:"prefix"`
	Trades   int    `json:"trades"`
	Messages int    `json:"messages"`
	// Events is the claims the run must leave, all SETTLED.
	Events int `json:"events"`
	// Paid and Refunded are in fen: what the tenant's ledger must gain.
	Paid     int64 `json:"paid"`
	Refunded int64 `json:"refunded"`
	// Example is one message key, CHANNEL:TRADE_NO.
	Example string `json:"example"`
}

func printPublish(out *printer, r publishReport) {
	out.printf("published %d messages to %s for tenant %d: %d trades on %s, %d events (paid %d, refunded %d fen)\n",
		r.Messages, r.Topic, r.TenantID, r.Trades, strings.Join(r.Channels, ","), r.Events, r.Paid, r.Refunded)
	out.printf("every trade number starts with %s\n", r.Prefix)
	if ch, no, ok := strings.Cut(r.Example, ":"); ok {
		out.printf("once consumed, each event is SETTLED; e.g. consumer trade --tenant %d --channel %s --trade-no %s\n", r.TenantID, ch, no)
	}
}
