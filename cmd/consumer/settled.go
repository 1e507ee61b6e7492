package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/kafkaconn"
	"github.com/paycallback/paycallback/internal/settledpub"
	"github.com/paycallback/paycallback/pkg/channels"
)

func settledCmd() command {
	return command{
		name:    "settled",
		summary: "settled events for the systems downstream: republish a range",
		description: `Settled events (PAYCB_SETTLED_TOPIC) are written with each settlement and
published by the workers; they stay re-publishable for PAYCB_SETTLED_RETENTION.`,
		verbs: []command{settledRepublishCmd()},
	}
}

func settledRepublishCmd() command {
	return command{
		name:     "republish",
		summary:  "publish the settled events of a time range again, same ids and bytes",
		synopsis: "--from T --to T [--tenant N] [--channel CH]",
		description: `Publishes again to PAYCB_SETTLED_TOPIC the settled events settled in
[--from, --to) (RFC 3339 times), of one tenant and one channel when given:
the stored values as they are, so the same event_id and trade_seq, each
trade's events in trade_seq order. For a downstream system that lost its
own state: one that drops a trade_seq it has already applied takes them
harmlessly. Only published events are sent (an unpublished one is the
workers'); events older than PAYCB_SETTLED_RETENTION may be purged. Safe
while workers run. Recorded in the audit trail.`,
		exits: []exitStatus{
			{exitUsage, "a usage or configuration error: --from or --to missing or not RFC 3339, an empty range, an unknown channel, settled events off (PAYCB_SETTLED_TOPIC=none), no DSN"},
		},
		setup: settledRepublishCommand,
	}
}

func settledRepublishCommand(fs *flag.FlagSet) runFunc {
	from := fs.String("from", "", "the range's start, RFC 3339, included (required)")
	to := fs.String("to", "", "the range's end, RFC 3339, excluded (required)")
	tenant := fs.Int64("tenant", 0, "only this tenant's events")
	channel := fs.String("channel", "", "only this channel's events (WECHAT, ALIPAY, SQB)")
	return func(ctx context.Context, env *environment, _ []string) error {
		var r settledpub.RepublishRange
		var err error
		if r.From, err = parseTime("from", *from); err != nil {
			return usagef("settled republish: %s", err.Error())
		}
		if r.To, err = parseTime("to", *to); err != nil {
			return usagef("settled republish: %s", err.Error())
		}
		switch {
		case r.From.IsZero() || r.To.IsZero():
			return usagef("settled republish: --from and --to are required")
		case !r.From.Before(r.To):
			return usagef("settled republish: --from %s is not before --to %s", *from, *to)
		case *tenant < 0:
			return usagef("settled republish: --tenant %d is negative", *tenant)
		case !env.cfg.Settled.Enabled():
			return usagef("settled republish: settled events are off (PAYCB_SETTLED_TOPIC=%s)", config.SettledOff)
		}
		r.Tenant = *tenant
		if *channel != "" {
			chs, err := channels.ParseChannels([]string{*channel})
			if err != nil {
				return usagef("settled republish: --channel: %s", err.Error())
			}
			r.Channel = string(chs[0])
		}
		conn, err := kafkaconn.New(env.cfg.Kafka)
		if err != nil {
			return &exitError{code: exitUsage, err: err}
		}
		defer conn.Close()
		db, err := openDB(ctx, env)
		if err != nil {
			return err
		}
		defer func() { _ = db.Close() }()
		w := settledpub.NewKafkaWriter(env.cfg.Kafka.Brokers, env.cfg.Settled.Topic, conn.Transport(), env.logger, 0)
		defer func() { _ = w.Close() }()
		n, err := settledpub.Republish(ctx, db, w, r)
		out := newPrinter(env)
		out.printf("republished %d settled events settled in [%s, %s) to %s\n", n,
			r.From.Format(time.RFC3339), r.To.Format(time.RFC3339), env.cfg.Settled.Topic)
		return env.audit(ctx, db, fmt.Sprintf("republished %d settled events settled in [%s, %s) tenant %d channel %q to %s",
			n, r.From.Format(time.RFC3339), r.To.Format(time.RFC3339), r.Tenant, r.Channel, env.cfg.Settled.Topic), errors.Join(err, out.err))
	}
}
