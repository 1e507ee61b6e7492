package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/audit"
	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/pkg/channels"
)

func dlqShowCmd() command {
	return command{
		name:     "show",
		summary:  "one dead letter in full: headers, key, envelope, body and status",
		synopsis: "--at P:O [--decrypt] [--json]",
		description: `Prints the dead letter at partition P, offset O of the dead-letter topic:
every header, the key, the envelope decoded (tenant, channel, received_at,
content_type), the callback body as received, and its status (open, resolved
or closed, with the closing note) when PAYCB_DB_DSN is set. A WeChat
resource shows its algorithm, associated data and nonce; its plaintext holds
personal data (the payer's openid) and is decrypted with the configured
APIv3 keys only with --decrypt. Only reads.`,
		exits: []exitStatus{
			{exitUsage, "a usage or configuration error: --at missing or malformed, or naming no dead letter"},
		},
		setup: dlqShowCommand,
	}
}

func dlqCloseCmd() command {
	return command{
		name:     "close",
		summary:  "close a dead letter with a note, recorded with who closed it",
		synopsis: "--at P:O --note TEXT",
		description: `Records that the dead letter at partition P, offset O of the dead-letter
topic needs nothing more: its ss_dead_letter row gets the time, the OS
user@host and the note, and ` + "`dlq list`" + ` shows it closed. Use it for a
conflict or an over-refund once handled with the merchant, or for a dead
letter that will never be redriven. Closing one already closed changes
nothing and says so. Needs PAYCB_DB_DSN; the close is recorded in the audit
trail (a log line and an ss_operator_audit row).`,
		exits: []exitStatus{
			{exitUsage, "a usage or configuration error: --at or --note missing or empty, --at naming no dead letter, no PAYCB_DB_DSN"},
		},
		setup: dlqCloseCommand,
	}
}

// atFlag registers --at and returns its parsed value; ok is false when it
// was not given.
func atFlag(fs *flag.FlagSet, usage string) func() (at deadletters.At, ok bool, err error) {
	v := fs.String("at", "", usage)
	return func() (deadletters.At, bool, error) {
		if *v == "" {
			return deadletters.At{}, false, nil
		}
		at, err := deadletters.ParseAt(*v)
		if err != nil {
			return deadletters.At{}, false, usagef("--at: %w", err)
		}
		return at, true, nil
	}
}

// readAt reads the dead letter at at; naming none is a usage error.
func readAt(ctx context.Context, k deadletters.Kafka, at deadletters.At) (deadletters.Message, error) {
	d, err := deadletters.ReadAt(ctx, k, at)
	if errors.Is(err, deadletters.ErrNoDeadLetter) {
		return d, usagef("--at %w", err)
	}
	return d, err
}

// operatorDecoder decodes with the configured APIv3 keys, as the workers do.
func operatorDecoder(env *environment) *channels.Decoder {
	return channels.NewDecoder(wechatKeys(env.cfg.WeChat))
}

// deadLetterStates is deadletters.States on the configured database, or
// nil when none is configured.
func deadLetterStates(ctx context.Context, env *environment, ds []deadletters.Message) ([]deadletters.State, error) {
	if !env.cfg.DB.DSN.IsSet() {
		return nil, nil
	}
	db, err := openDB(ctx, env)
	if err != nil {
		return nil, err
	}
	defer func() { _ = db.Close() }()
	return deadletters.States(ctx, db, operatorDecoder(env), ds)
}

func dlqShowCommand(fs *flag.FlagSet) runFunc {
	atOf := atFlag(fs, "the dead letter's position in the dead-letter topic, PARTITION:OFFSET (required)")
	decrypt := fs.Bool("decrypt", false, "decrypt a WeChat resource with the configured APIv3 keys and print its plaintext (personal data)")
	asJSON := fs.Bool("json", false, "print the dead letter as JSON")
	return func(ctx context.Context, env *environment, _ []string) error {
		at, ok, err := atOf()
		if err != nil {
			return err
		}
		if !ok {
			return usagef("dlq show: --at PARTITION:OFFSET is required")
		}
		k, err := dlqKafka(ctx, env)
		if err != nil {
			return err
		}
		d, err := readAt(ctx, k, at)
		if err != nil {
			return err
		}
		states, err := deadLetterStates(ctx, env, []deadletters.Message{d})
		if err != nil {
			return err
		}
		var st *deadletters.State
		if len(states) == 1 {
			st = &states[0]
		}
		var keys channels.KeyProvider
		if *decrypt {
			keys = wechatKeys(env.cfg.WeChat)
		}
		v := deadletters.ViewOf(k.DLQTopic, d, st, keys)
		out := newPrinter(env)
		if *asJSON {
			out.json(v)
			return out.err
		}
		printDeadLetter(out, v, *decrypt)
		return out.err
	}
}

// printDeadLetter prints a dead letter's view as text.
func printDeadLetter(out *printer, v deadletters.View, decrypt bool) {
	out.printf("dead letter %s\n", v.Position)
	out.printf("time:     %s\n", v.Time.Format(time.RFC3339Nano))
	out.printf("kind:     %s\n", v.Kind)
	out.printf("error:    %s\n", v.Error)
	out.printf("source:   %s\n", v.Source)
	out.printf("status:   %s\n", statusLine(v))
	out.printf("key:      %s\n", v.Key)
	out.println("headers:")
	for _, h := range v.Headers {
		out.printf("  %s: %s\n", h.Key, h.Value)
	}
	switch {
	case v.ValueOmitted:
		out.println("value:    OMITTED (too large for the dead-letter topic; the original is at the source while the input topic retains it)")
		return
	case v.Envelope == nil:
		out.printf("value:    %d bytes, not an envelope:\n%s\n", v.ValueBytes, indent(v.Value))
		return
	}
	e := v.Envelope
	out.printf("envelope: tenant %d, channel %s, received_at %s, content_type %s\n",
		e.TenantID, e.Channel, e.ReceivedAt.Format(time.RFC3339Nano), e.ContentType)
	if !e.Valid {
		out.printf("          not valid: %s\n", e.Problem)
	}
	out.printf("body:\n%s\n", indent(pretty(v.Body)))
	if w := v.WeChat; w != nil {
		out.printf("wechat resource: event_type %s, algorithm %s, associated_data %q, nonce %q, original_type %s, ciphertext %d bytes\n",
			w.EventType, w.Algorithm, w.AssociatedData, w.Nonce, w.OriginalType, w.CiphertextLength)
		switch {
		case !decrypt:
			out.println("decrypted resource: not shown (personal data); --decrypt shows it")
		case w.DecryptError != "":
			out.printf("decrypted resource: cannot decrypt: %s\n", w.DecryptError)
		default:
			out.printf("decrypted resource:\n%s\n", indent(pretty(string(w.Decrypted))))
		}
	}
}

// statusLine says a dead letter's status in one line.
func statusLine(v deadletters.View) string {
	switch v.Status {
	case "":
		return "unknown (no PAYCB_DB_DSN configured)"
	case deadletters.StatusClosed:
		return fmt.Sprintf("closed at %s by %s: %s", v.ClosedAt.Format(time.RFC3339), v.ClosedBy, v.CloseNote)
	case deadletters.StatusResolved:
		return fmt.Sprintf("resolved: its event's claim settled %s at %s", v.Outcome, v.SettledAt.UTC().Format(time.RFC3339))
	}
	if !v.Recorded {
		return "open (no ss_dead_letter row: written before it existed)"
	}
	return "open"
}

// pretty indents s when it is JSON, else returns it unchanged.
func pretty(s string) string {
	var b bytes.Buffer
	if json.Indent(&b, []byte(s), "", "  ") == nil {
		return b.String()
	}
	return s
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

func dlqCloseCommand(fs *flag.FlagSet) runFunc {
	atOf := atFlag(fs, "the dead letter's position in the dead-letter topic, PARTITION:OFFSET (required)")
	note := fs.String("note", "", "why it needs nothing more (required), e.g. what the merchant confirmed")
	return func(ctx context.Context, env *environment, _ []string) error {
		at, ok, err := atOf()
		if err != nil {
			return err
		}
		if !ok {
			return usagef("dlq close: --at PARTITION:OFFSET is required")
		}
		if strings.TrimSpace(*note) == "" {
			return usagef("dlq close: --note is required and may not be empty")
		}
		if !env.cfg.DB.DSN.IsSet() {
			return usagef("dlq close: PAYCB_DB_DSN is required: the close is recorded in ss_dead_letter")
		}
		k, err := dlqKafka(ctx, env)
		if err != nil {
			return err
		}
		d, err := readAt(ctx, k, at)
		if err != nil {
			return err
		}
		db, err := openDB(ctx, env)
		if err != nil {
			return err
		}
		defer func() { _ = db.Close() }()
		return closeDeadLetter(ctx, env, db, k, d, *note)
	}
}

func closeDeadLetter(ctx context.Context, env *environment, db *bun.DB, k deadletters.Kafka, d deadletters.Message, note string) error {
	user, host := audit.Who()
	pos := d.Position(k.DLQTopic)
	rec, changed, err := deadletters.CloseMessage(ctx, db, operatorDecoder(env), d, user+"@"+host, note)
	if errors.Is(err, deadletters.ErrEmptyNote) {
		return usagef("dlq close: %w", err)
	}
	out := newPrinter(env)
	if err != nil {
		return env.audit(ctx, db, "", err)
	}
	if !changed {
		out.printf("%s (%s) is already closed: at %s by %s: %s\n", pos, d.Kind, rec.ClosedAt.Format(time.RFC3339), rec.ClosedBy, rec.CloseNote)
		return out.err
	}
	out.printf("closed %s (%s, source %s)\n", pos, d.Kind, d.Source)
	return env.audit(ctx, db, fmt.Sprintf("closed %s (%s, source %s)", pos, d.Kind, d.Source), out.err)
}
