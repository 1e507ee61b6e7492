package main

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/ops"
	"github.com/paycallback/paycallback/pkg/channels"
)

func tradeCmd() command {
	return command{
		name:     "trade",
		summary:  "everything held about one trade, in time order",
		synopsis: "--tenant N --channel CH --trade-no X [--since DURATION|TIME] [--json]",
		description: `Prints everything this system holds about one trade, in time order: each
claim (key, status, outcome, fingerprint, source topic/partition/offset,
attempts, last error, created and settled times), the order row, each ledger
row, the payment registration (by the trade number its payment recorded, or
the order's merchant order number), each refund registration, each query the
querier sent about it and the channel's answer, each settled
event still in the outbox
(trade_seq, key, published or not), and each dead letter that names the trade:
its ss_dead_letter rows, and the messages of the dead-letter topic written
since --since whose decoded event, or failing that whose Kafka key
(CHANNEL:TRADE_NO), names it. A channel's retry of a callback leaves no row
of its own: it shows as nothing beyond its claim. Only reads; safe while
workers run.`,
		exits: []exitStatus{
			{exitUsage, "a usage or configuration error: a missing --tenant, --channel or --trade-no, an unknown channel, a negative --since, no DSN"},
		},
		setup: tradeCommand,
	}
}

func tradeCommand(fs *flag.FlagSet) runFunc {
	tenant := fs.Int64("tenant", 0, "the tenant ID (required)")
	channel := fs.String("channel", "", "the channel: "+channels.CodeList()+" (required)")
	tradeNo := fs.String("trade-no", "", "the channel's trade number: transaction_id, trade_no or sn (required)")
	since := fs.String("since", "168h", "scan the dead-letter topic from this long ago (a duration) or from this RFC 3339 time; 0 skips the scan")
	asJSON := fs.Bool("json", false, "print the history as JSON")
	return func(ctx context.Context, env *environment, _ []string) error {
		q := deadletters.TradeQuery{TenantID: *tenant, Channel: channels.Channel(*channel), TradeNo: *tradeNo}
		switch {
		case *tenant <= 0:
			return usagef("trade: --tenant is required (a positive tenant ID)")
		case *channel == "":
			return usagef("trade: --channel is required (%s)", channels.CodeList())
		case *tradeNo == "":
			return usagef("trade: --trade-no is required")
		case !q.Channel.Valid():
			return usagef("trade: --channel %q is not %s", *channel, channels.CodeList())
		}
		scan, from, err := parseSince(*since, time.Now())
		if err != nil {
			return usagef("trade: %w", err)
		}
		db, err := openDB(ctx, env)
		if err != nil {
			return err
		}
		defer func() { _ = db.Close() }()
		if scan {
			k, err := opsKafka(ctx, env)
			if err != nil {
				return err
			}
			q.Kafka, q.Since = &k, from
			q.Decoder = channels.NewDecoder(wechatKeys(env.cfg.WeChat))
		}
		h, err := ops.Trade(ctx, db, q)
		if err != nil {
			return fmt.Errorf("trade: %w", err)
		}
		out := newPrinter(env)
		if *asJSON {
			out.json(h)
			return out.err
		}
		printTrade(out, h)
		return out.err
	}
}

// wechatKeys are the configured APIv3 keys as the decoder takes them.
func wechatKeys(w config.WeChat) channels.StaticKeys {
	keys := channels.StaticKeys{Default: w.APIv3Key.Reveal(), Tenants: map[int64][]string{}}
	for tenant, k := range w.APIv3Keys {
		keys.Tenants[tenant] = k.Reveal() // current key first
	}
	return keys
}

// parseSince reads --since: a duration back from now or an RFC 3339 time.
// scan is false for a zero duration.
func parseSince(v string, now time.Time) (scan bool, from time.Time, err error) {
	if d, derr := time.ParseDuration(v); derr == nil {
		if d < 0 {
			return false, time.Time{}, fmt.Errorf("--since %s is negative", v)
		}
		return d > 0, now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return false, time.Time{}, fmt.Errorf("--since: %q is neither a duration such as 168h nor an RFC 3339 time", v)
	}
	return true, t, nil
}

func printTrade(out *printer, h ops.TradeHistory) {
	out.printf("trade %s:%s of tenant %d\n", h.Channel, h.TradeNo, h.TenantID)
	order := "none"
	if h.Order != nil {
		order = h.Order.Status
	}
	scanned := "dead-letter topic not scanned"
	if h.Scanned != "" {
		scanned = "scanned " + h.Scanned
	}
	unpublished := 0
	for _, e := range h.SettledEvents {
		if e.PublishedAt == nil {
			unpublished++
		}
	}
	out.printf("claims %d, order %s, ledger rows %d, payment registrations %d, refund registrations %d, settled events %d (%d not published), dead letters %d (%s)\n",
		len(h.Claims), order, len(h.Ledger), len(h.PaymentRegistrations), len(h.Registrations), len(h.SettledEvents), unpublished, len(h.DeadLetters), scanned)
	if h.Empty() {
		out.println("nothing is held about this trade")
		return
	}
	if h.Cancel != nil {
		out.printf("cancelled (CANCELED): %s\n", h.Cancel.Effect)
	}
	out.println()
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, e := range h.Timeline {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\n", e.At.UTC().Format("2006-01-02T15:04:05.000000Z"), e.What, e.Summary)
	}
	out.flush(tw)
}
