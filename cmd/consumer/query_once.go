package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/paycallback/paycallback/internal/channelkeys"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/merchantbinding"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/ops"
	"github.com/paycallback/paycallback/internal/querier"
	"github.com/paycallback/paycallback/internal/queryclient"
	"github.com/paycallback/paycallback/internal/querycreds"
	"github.com/paycallback/paycallback/internal/statementauth"
	"github.com/paycallback/paycallback/pkg/channels"
)

func queryOnceCmd() command {
	return command{
		name:     "once",
		summary:  "ask the channel about one order or refund now and print the decoded answer",
		synopsis: "--tenant N --channel CH (--merchant-order-no X | --trade-no X) [--refund-no R] [--merchant-id M] [--publish] [--json]",
		description: `Asks the channel now, as the querier would, about the payment of an order
(by --merchant-order-no or --trade-no; both may be given, the channel is
sent the trade number where it takes either) or, with --refund-no, about
that refund of it; reads the answer through the channel's own verification
(its signature with PAYCB_CHANNEL_PUBLIC_KEYS_FILE for WeChat and Alipay;
Shouqianba's answers are unsigned: TLS to PAYCB_QUERY_SQB_URL is all there
is) and prints it: the answer label of paycb_query_requests_total, the
outcome, the channel's own state, a sentence of detail and each event the
answer proves (key, type, amounts in fen). Nothing is recorded and no
database is used.

The merchant asked: --merchant-id when given, else the tenant's one
merchant of the channel that has an entry in PAYCB_QUERY_CREDENTIALS_FILE
(and, when PAYCB_TENANT_MERCHANTS_FILE is set, is bound to the tenant there);
none or several is a usage error naming them. A merchant without
credentials for the tenant, or bound to another tenant, cannot be asked:
exit 2, nothing sent.

--publish publishes an answer that proves a payment or refund to the input
topic (PAYCB_KAFKA_TOPIC, which must exist) as the querier does: the
channel's answer as received, signed with the current statement key
(PAYCB_STATEMENT_KEY_FILE, required); the worker verifies both signatures
and settles it through the claim, a duplicate when the callback came
first. Any other answer is printed and not published. A publication is
recorded in the audit trail (a log line, and an ss_operator_audit row when
a DSN is configured).

Exit 0 whenever the channel answered and the answer verified, whatever it
says (paid, not yet, closed, not found, rate limited, an error code).`,
		exits: []exitStatus{
			{exitFailure, "no answer (connection, TLS, timeout, a redirect, a body too large), an answer that does not verify or cannot be read (printed, never published), or with --publish: the broker, a missing input topic"},
			{exitUsage, "a usage or configuration error: a flag missing or invalid, PAYCB_QUERY_CREDENTIALS_FILE unset or invalid, no credentials for the tenant's merchant, a merchant bound to another tenant, no PAYCB_CHANNEL_PUBLIC_KEYS_FILE for a channel that signs its answers, --publish without PAYCB_STATEMENT_KEY_FILE"},
		},
		setup: queryOnceCommand,
	}
}

// queryOnceJSON is the --json form of the report.
type queryOnceJSON struct {
	TenantID        int64            `json:"tenant_id"`
	Channel         channels.Channel `json:"channel"`
	Kind            string           `json:"kind"`
	MerchantID      string           `json:"merchant_id"`
	MerchantOrderNo string           `json:"merchant_order_no,omitempty"`
	TradeNo         string           `json:"trade_no,omitempty"`
	RefundNo        string           `json:"refund_no,omitempty"`
	AskedAt         time.Time        `json:"asked_at"`
	HTTPStatus      int              `json:"http_status,omitempty"`
	// Verified is false when the answer did not verify or could not be
	// read; Error then says why.
	Verified  bool             `json:"verified"`
	Error     string           `json:"error,omitempty"`
	Answer    string           `json:"answer"`
	Outcome   string           `json:"outcome,omitempty"`
	RawState  string           `json:"raw_state,omitempty"`
	Detail    string           `json:"detail,omitempty"`
	Events    []queryOnceEvent `json:"events"`
	Published bool             `json:"published"`
	// NotPublished says why --publish published nothing.
	NotPublished string `json:"not_published,omitempty"`
}

// queryOnceEvent is one event an answer proves, amounts in fen.
type queryOnceEvent struct {
	Key                string    `json:"key"`
	Type               string    `json:"type"`
	TradeNo            string    `json:"trade_no"`
	MerchantOrderNo    string    `json:"merchant_order_no,omitempty"`
	RefundNo           string    `json:"refund_no,omitempty"`
	OrderTotal         int64     `json:"order_total"`
	RefundAmount       int64     `json:"refund_amount,omitempty"`
	CumulativeRefunded int64     `json:"cumulative_refunded,omitempty"`
	OccurredAt         time.Time `json:"occurred_at"`
}

func queryOnceCommand(fs *flag.FlagSet) runFunc {
	tenant := fs.Int64("tenant", 0, "tenant ID (required)")
	channel := fs.String("channel", "", channels.CodeList()+" (required)")
	orderNo := fs.String("merchant-order-no", "", "the merchant order number (out_trade_no, client_sn); this or --trade-no")
	tradeNo := fs.String("trade-no", "", "the channel's trade number; this or --merchant-order-no")
	refundNo := fs.String("refund-no", "", "ask about this refund of the order instead of its payment")
	merchant := fs.String("merchant-id", "", "the merchant to ask for (default: the tenant's one merchant of the channel with credentials)")
	publish := fs.Bool("publish", false, "publish an answer that proves a payment or refund to the input topic, signed, for the worker to settle")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	return func(ctx context.Context, env *environment, _ []string) error {
		if err := requireFlags("query once", required{"--channel", *channel != ""}, required{"--tenant", *tenant != 0},
			required{"--merchant-order-no or --trade-no", *orderNo != "" || *tradeNo != ""}); err != nil {
			return err
		}
		ch := channels.Channel(*channel)
		spec, ok := channels.Lookup(ch)
		if !ok || !ch.Valid() {
			return usagef("query once: --channel %q is not %s", *channel, channels.CodeList())
		}
		if spec.BuildQuery == nil || spec.ReadQueryAnswer == nil {
			return usagef("query once: channel %s cannot be queried", ch)
		}
		target := channels.QueryTarget{
			TenantID: *tenant, Channel: ch, Kind: channels.QueryPayment,
			MerchantOrderNo: *orderNo, TradeNo: *tradeNo, RefundNo: *refundNo,
		}
		if *refundNo != "" {
			target.Kind = channels.QueryRefund
		}
		creds, err := queryCredentials(env)
		if err != nil {
			return err
		}
		if target.MerchantID, err = queryMerchant(env, creds, *tenant, ch, *merchant); err != nil {
			return err
		}
		pubKeys, err := queryPublicKeys(env, spec)
		if err != nil {
			return err
		}
		var pub *querier.TopicPublisher
		var k kafkaops.Kafka
		if *publish {
			path := env.cfg.Statement.KeyFile
			if path == "" {
				return usagef("query once --publish: no statement key to sign the answer with, and the workers dead-letter an unsigned answer " +
					"unauthenticated: set PAYCB_STATEMENT_KEY_FILE (statement.key_file) to the key file the workers verify with")
			}
			keys, err := statementauth.Load(path)
			if err != nil {
				return usagef("query once --publish: statement.key_file (PAYCB_STATEMENT_KEY_FILE): %w", err)
			}
			if k, err = opsKafka(ctx, env); err != nil {
				return err
			}
			// The topic is checked before the channel is asked: a query
			// answered for nothing costs the merchant's budget.
			if err := k.RequireTopic(ctx, k.Topic); err != nil {
				return fmt.Errorf("query once --publish: input topic: %w", err)
			}
			pub = &querier.TopicPublisher{
				Produce: func(ctx context.Context, msgs []kafkaops.Message) error { return ops.Publish(ctx, k, msgs) },
				Keys:    func() statementauth.Keys { return keys },
				Headers: func(channels.Channel) []string { return spec.QueryAnswerHeaders },
			}
		}
		roots, err := queryclient.SystemRootsWith(env.cfg.Query.TLSCAFile)
		if err != nil {
			return usagef("query once: query.tls_ca_file (PAYCB_QUERY_TLS_CA_FILE): %w", err)
		}
		client, err := queryclient.New(queryclient.Config{BaseURLs: env.cfg.Query.BaseURLs(), RootCAs: roots}, creds)
		if err != nil {
			return usagef("query once: %w", err)
		}

		rep := queryOnceJSON{
			TenantID: *tenant, Channel: ch, Kind: string(target.Kind), MerchantID: target.MerchantID,
			MerchantOrderNo: *orderNo, TradeNo: *tradeNo, RefundNo: *refundNo, AskedAt: time.Now().UTC(), Events: []queryOnceEvent{},
		}
		resp, err := client.Query(ctx, target)
		switch {
		case errors.Is(err, queryclient.ErrNoCredentials), errors.Is(err, queryclient.ErrNotQueryable), errors.Is(err, queryclient.ErrBuild):
			return usagef("query once: nothing sent: %w", err)
		case err != nil:
			return fmt.Errorf("query once: %w", err)
		}
		rep.HTTPStatus = resp.StatusCode
		answer, readErr := querier.SpecReader{Keys: func() channels.ChannelPublicKeys { return pubKeys }}.Read(target, resp)
		if readErr != nil {
			rep.Answer = metrics.QueryAnswerAmbiguous
			if kind, _ := channels.KindOf(readErr); kind == channels.KindUnauthenticated {
				rep.Answer = metrics.QueryAnswerUnauthenticated
			}
			rep.Error = readErr.Error()
		} else {
			rep.Verified = true
			rep.Answer = metrics.QueryAnswerLabel(target.Kind, answer)
			rep.Outcome, rep.RawState, rep.Detail = string(answer.Outcome), answer.RawState, answer.Detail
			for _, ev := range answer.Events {
				rep.Events = append(rep.Events, queryOnceEvent{
					Key: string(ev.Key), Type: string(ev.Type), TradeNo: ev.TradeNo, MerchantOrderNo: ev.MerchantOrderNo,
					RefundNo: ev.RefundNo, OrderTotal: ev.OrderTotal, RefundAmount: ev.RefundAmount,
					CumulativeRefunded: ev.CumulativeRefunded, OccurredAt: ev.OccurredAt,
				})
			}
		}

		var pubErr error
		switch {
		case pub == nil:
		case readErr != nil:
			rep.NotPublished = "the answer did not verify: never published"
		case answer.Outcome != channels.QuerySettled:
			rep.NotPublished = "the answer proves no payment or refund (" + rep.Answer + "): only such an answer is published"
		default:
			pubErr = pub.Publish(ctx, target, rep.AskedAt, resp, answer)
			rep.Published = pubErr == nil
		}

		out := newPrinter(env)
		if *asJSON {
			out.json(rep)
		} else {
			printQueryOnce(out, rep, k.Topic)
		}
		err = out.err
		switch {
		case pubErr != nil:
			err = fmt.Errorf("query once --publish: %w", pubErr)
		case readErr != nil:
			err = &exitError{code: exitFailure, err: fmt.Errorf("query once: the answer is not acted on: %w", readErr)}
		}
		if pub != nil && (rep.Published || pubErr != nil) {
			db, closeDB := env.auditDB(ctx)
			defer closeDB()
			detail := ""
			if rep.Published {
				detail = fmt.Sprintf("published the %s answer (%s) to %s: %s", ch, rep.RawState, k.Topic, strings.Join(eventKeys(rep.Events), ", "))
			}
			return env.audit(ctx, db, detail, err)
		}
		return err
	}
}

// queryCredentials loads PAYCB_QUERY_CREDENTIALS_FILE: unset or invalid
// is a configuration error (exit 2); the error never shows key material.
func queryCredentials(env *environment) (*querycreds.Set, error) {
	path := env.cfg.Query.CredentialsFile
	if path == "" {
		return nil, usagef("query once: no query credentials: set PAYCB_QUERY_CREDENTIALS_FILE (query.credentials_file) to the querier's credentials per merchant")
	}
	s, err := querycreds.Load(path)
	if err != nil {
		return nil, usagef("query once: query.credentials_file (PAYCB_QUERY_CREDENTIALS_FILE): %w", err)
	}
	return s, nil
}

// queryMerchant is the merchant to ask for: named, or the tenant's one
// merchant of ch with credentials (and bound to the tenant when a binding
// is configured). What cannot be checked is a usage error.
func queryMerchant(env *environment, creds *querycreds.Set, tenant int64, ch channels.Channel, named string) (string, error) {
	var binding *merchantbinding.Binding
	if path := env.cfg.Worker.TenantMerchantsFile; path != "" {
		f, err := merchantbinding.Load(path)
		if err != nil {
			return "", usagef("query once: worker.tenant_merchants_file (PAYCB_TENANT_MERCHANTS_FILE): %w", err)
		}
		b := f.Current()
		binding = &b
	}
	bound := func(m string) bool {
		if binding == nil {
			return true
		}
		owner, ok := binding.TenantOf(ch, m)
		return ok && owner == tenant
	}
	if named != "" {
		if !bound(named) {
			return "", usagef("query once: %s merchant %s is not bound to tenant %d in PAYCB_TENANT_MERCHANTS_FILE", ch, channels.Quote(named), tenant)
		}
		if _, ok := creds.Lookup(tenant, ch, named); !ok {
			return "", usagef("query once: no query credentials for tenant %d %s merchant %s in PAYCB_QUERY_CREDENTIALS_FILE", tenant, ch, channels.Quote(named))
		}
		return named, nil
	}
	var candidates []string
	for _, m := range creds.Merchants(tenant, ch) {
		if bound(m) {
			candidates = append(candidates, m)
		}
	}
	switch len(candidates) {
	case 1:
		return candidates[0], nil
	case 0:
		return "", usagef("query once: tenant %d has no %s merchant with query credentials in PAYCB_QUERY_CREDENTIALS_FILE%s", tenant, ch, boundNote(binding))
	default:
		return "", usagef("query once: tenant %d has %d %s merchants with query credentials (%s): name one with --merchant-id",
			tenant, len(candidates), ch, strings.Join(candidates, ", "))
	}
}

func boundNote(b *merchantbinding.Binding) string {
	if b == nil {
		return ""
	}
	return " bound to it in PAYCB_TENANT_MERCHANTS_FILE"
}

// queryPublicKeys loads PAYCB_CHANNEL_PUBLIC_KEYS_FILE; for a channel
// that signs its answers (its Spec parses public keys) the file is
// required, since without it no answer of the channel could verify.
func queryPublicKeys(env *environment, spec channels.Spec) (channels.ChannelPublicKeys, error) {
	path := env.cfg.Worker.ChannelPublicKeysFile
	if path == "" {
		if spec.ParsePublicKey != nil {
			return channels.ChannelPublicKeys{}, usagef("query once: %s signs its answers and no key to verify them with: set PAYCB_CHANNEL_PUBLIC_KEYS_FILE (worker.channel_public_keys_file)", spec.Code)
		}
		return channels.ChannelPublicKeys{}, nil
	}
	f, err := channelkeys.Load(path)
	if err != nil {
		return channels.ChannelPublicKeys{}, usagef("query once: worker.channel_public_keys_file (PAYCB_CHANNEL_PUBLIC_KEYS_FILE): %w", err)
	}
	return f.Current(), nil
}

func eventKeys(evs []queryOnceEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Key
	}
	return out
}

// printQueryOnce prints the report as text.
func printQueryOnce(out *printer, r queryOnceJSON, topic string) {
	what := "the payment of"
	if r.RefundNo != "" {
		what = "refund " + r.RefundNo + " of"
	}
	var ids []string
	if r.MerchantOrderNo != "" {
		ids = append(ids, "order "+r.MerchantOrderNo)
	}
	if r.TradeNo != "" {
		ids = append(ids, "trade "+r.TradeNo)
	}
	out.printf("asked %s about %s %s, tenant %d merchant %s, at %s: HTTP %d\n", r.Channel, what, strings.Join(ids, " "),
		r.TenantID, r.MerchantID, r.AskedAt.Format(time.RFC3339), r.HTTPStatus)
	if !r.Verified {
		out.printf("answer: %s: NOT VERIFIED, not acted on: %s\n", r.Answer, r.Error)
	} else {
		out.printf("answer: %s (outcome %s)\n", r.Answer, r.Outcome)
		out.printf("channel state: %s\n", r.RawState)
		if r.Detail != "" {
			out.printf("detail: %s\n", r.Detail)
		}
	}
	for _, ev := range r.Events {
		out.printf("event %s %s trade %s order_total %d fen", ev.Key, ev.Type, ev.TradeNo, ev.OrderTotal)
		if ev.RefundNo != "" {
			out.printf(" refund %s refund_amount %d fen", ev.RefundNo, ev.RefundAmount)
			if ev.CumulativeRefunded > 0 {
				out.printf(" cumulative_refunded %d fen", ev.CumulativeRefunded)
			}
		}
		out.printf(" occurred %s\n", ev.OccurredAt.Format(time.RFC3339))
	}
	switch {
	case r.Published:
		out.printf("published to %s, signed: the worker settles it through the claim\n", topic)
	case r.NotPublished != "":
		out.printf("not published: %s\n", r.NotPublished)
	}
}
