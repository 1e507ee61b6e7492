package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/audit"
	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/pkg/channels"
)

func dlqShowCmd() command {
	return command{
		name:     "show",
		summary:  "one dead letter in full: headers, key, envelope, body and status",
		synopsis: "(--id ID | --at P:O) [--decrypt] [--json]",
		description: `Prints one dead letter, named by its id (--id, from dlq list) or by its
position in the dead-letter topic (--at P:O): its id, every header, the key,
the envelope decoded (tenant, channel, received_at, content_type), the
callback body as received, and its status (open, resolved, redriven or
closed, with the closing note) when PAYCB_DB_DSN is set. A dead letter the
topic no longer holds (retention) is shown from its ss_dead_letter row and
says its body is lost. A WeChat
resource shows its algorithm, associated data and nonce; its plaintext holds
personal data (the payer's openid) and is decrypted with the configured
APIv3 keys only with --decrypt. Only reads.`,
		exits: []exitStatus{
			{exitUsage, "a usage or configuration error: --id and --at both or neither, malformed, or naming no dead letter"},
		},
		setup: dlqShowCommand,
	}
}

func dlqCloseCmd() command {
	return command{
		name:     "close",
		summary:  "close a dead letter with a note, recorded with who closed it",
		synopsis: "(--id ID | --at P:O) --note TEXT",
		description: `Records that a dead letter, named by its id (--id, from dlq list) or its
position in the dead-letter topic (--at P:O), needs nothing more: its
ss_dead_letter row gets the time, the OS user@host and the note, and ` + "`dlq list`" + `
shows it closed. Use it for a conflict or an over-refund once handled with
the merchant, or for a dead letter that will never be redriven, including
one whose body the topic no longer holds (closed by its id). Closing one already closed changes
nothing and says so. Needs PAYCB_DB_DSN; the close is recorded in the audit
trail (a log line and an ss_operator_audit row).`,
		exits: []exitStatus{
			{exitUsage, "a usage or configuration error: --id and --at both or neither, --note missing or empty, naming no dead letter, no PAYCB_DB_DSN"},
		},
		setup: dlqCloseCommand,
	}
}

// letterFlags registers --id and --at; what it returns names the one dead
// letter they select (what is "id X" or "at P:O"; ok is false when neither
// was given; both is a usage error).
func letterFlags(fs *flag.FlagSet, usage string) func() (ref deadletters.LetterRef, ok bool, what string, err error) {
	id := fs.String("id", "", usage+": its id, as dlq list shows it (a row id such as 37, or p<PARTITION>-<OFFSET>)")
	at := fs.String("at", "", usage+": its position in the dead-letter topic, PARTITION:OFFSET")
	return func() (deadletters.LetterRef, bool, string, error) {
		switch {
		case *id != "" && *at != "":
			return deadletters.LetterRef{}, false, "", usagef("--id and --at both name a dead letter; give one")
		case *id != "":
			ref, err := deadletters.ParseID(*id)
			if err != nil {
				return ref, false, "", usagef("--id: %w", err)
			}
			return ref, true, "id " + *id, nil
		case *at != "":
			a, err := deadletters.ParseAt(*at)
			if err != nil {
				return deadletters.LetterRef{}, false, "", usagef("--at: %w", err)
			}
			return deadletters.LetterRef{At: &a}, true, "at " + a.String(), nil
		}
		return deadletters.LetterRef{}, false, "", nil
	}
}

// findLetter is deadletters.Find on db (nil: none configured); naming no
// dead letter is a usage error.
func findLetter(ctx context.Context, env *environment, db *bun.DB, k kafkaops.Kafka, ref deadletters.LetterRef, what string) (deadletters.State, error) {
	st, err := deadletters.Find(ctx, k, db, operatorDecoder(env), ref)
	switch {
	case errors.Is(err, deadletters.ErrNoDeadLetter), errors.Is(err, deadletters.ErrNotFound):
		return st, usagef("%s names no dead letter: %w", what, err)
	case errors.Is(err, deadletters.ErrNeedsDatabase):
		return st, usagef("--id: %w; without it, use the p<PARTITION>-<OFFSET> id or --at", err)
	}
	return st, err
}

// operatorDecoder decodes with the configured APIv3 keys, as the workers do.
func operatorDecoder(env *environment) *channels.Decoder {
	return channels.NewDecoder(wechatKeys(env.cfg.WeChat))
}

func dlqShowCommand(fs *flag.FlagSet) runFunc {
	one := letterFlags(fs, "the dead letter to show (--id or --at is required)")
	decrypt := fs.Bool("decrypt", false, "decrypt a WeChat resource with the configured APIv3 keys and print its plaintext (personal data)")
	asJSON := fs.Bool("json", false, "print the dead letter as JSON")
	return func(ctx context.Context, env *environment, _ []string) error {
		ref, ok, what, err := one()
		if err != nil {
			return err
		}
		if !ok {
			return usagef("dlq show: --id ID or --at PARTITION:OFFSET is required")
		}
		k, err := dlqKafka(ctx, env)
		if err != nil {
			return err
		}
		var db *bun.DB
		if env.cfg.DB.DSN.IsSet() {
			if db, err = openDB(ctx, env); err != nil {
				return err
			}
			defer func() { _ = db.Close() }()
		}
		st, err := findLetter(ctx, env, db, k, ref, what)
		if err != nil {
			return err
		}
		var keys channels.KeyProvider
		if *decrypt {
			keys = wechatKeys(env.cfg.WeChat)
		}
		state := &st
		if db == nil {
			state = nil
		}
		v := deadletters.ViewOf(k.DLQTopic, st.Message, state, keys)
		v.ID = st.ID
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
	if v.BodyLost {
		out.printf("dead letter %s (no longer in the dead-letter topic)\n", v.ID)
	} else {
		out.printf("dead letter %s (id %s)\n", v.Position, v.ID)
	}
	out.printf("time:     %s\n", v.Time.Format(time.RFC3339Nano))
	out.printf("kind:     %s\n", printable(v.Kind, false))
	out.printf("error:    %s\n", printable(v.Error, false))
	out.printf("source:   %s\n", printable(v.Source, false))
	if v.RedrivenFrom != "" {
		out.printf("redriven from: %s (this dead letter is the failure of that one's redrive)\n", v.RedrivenFrom)
	}
	out.printf("status:   %s\n", printable(statusLine(v), false))
	out.printf("key:      %s\n", printable(v.Key, false))
	out.println("headers:")
	for _, h := range v.Headers {
		out.printf("  %s: %s\n", printable(h.Key, false), printable(h.Value, false))
	}
	switch {
	case v.BodyLost:
		out.println("body:     LOST: the dead-letter topic no longer holds this dead letter (retention); shown from its ss_dead_letter row. It can be closed (dlq close --id), not redriven.")
		return
	case v.ValueOmitted:
		out.println("value:    OMITTED (too large for the dead-letter topic; the original is at the source while the input topic retains it)")
		return
	case v.Envelope == nil:
		out.printf("value:    %d bytes, not an envelope:\n%s\n", v.ValueBytes, indent(printable(v.Value, true)))
		return
	}
	e := v.Envelope
	out.printf("envelope: tenant %d, channel %s, received_at %s, content_type %s\n",
		e.TenantID, printable(e.Channel, false), e.ReceivedAt.Format(time.RFC3339Nano), printable(e.ContentType, false))
	if !e.Valid {
		out.printf("          not valid: %s\n", printable(e.Problem, false))
	}
	out.printf("body:\n%s\n", indent(printable(pretty(v.Body), true)))
	if w := v.Resource; w != nil {
		out.printf("wechat resource: event_type %s, algorithm %s, associated_data %q, nonce %q, original_type %s, ciphertext %d bytes\n",
			printable(w.EventType, false), printable(w.Algorithm, false), w.AssociatedData, w.Nonce, printable(w.OriginalType, false), w.CiphertextLength)
		switch {
		case !decrypt:
			out.println("decrypted resource: not shown (personal data); --decrypt shows it")
		case w.DecryptError != "":
			out.printf("decrypted resource: cannot decrypt: %s\n", printable(w.DecryptError, false))
		default:
			out.printf("decrypted resource:\n%s\n", indent(printable(pretty(string(w.Decrypted)), true)))
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
	case deadletters.StatusRedriven:
		return "redriven: its redrive failed again into dead letter " + v.Successor + ", which takes its place"
	case deadletters.StatusDuplicate:
		return "duplicate: a second copy of dead letter " + v.Successor + ", which stands for both"
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
	one := letterFlags(fs, "the dead letter to close (--id or --at is required)")
	note := fs.String("note", "", "why it needs nothing more (required), e.g. what the merchant confirmed")
	return func(ctx context.Context, env *environment, _ []string) error {
		ref, ok, what, err := one()
		if err != nil {
			return err
		}
		if !ok {
			return usagef("dlq close: --id ID or --at PARTITION:OFFSET is required")
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
		db, err := openDB(ctx, env)
		if err != nil {
			return err
		}
		defer func() { _ = db.Close() }()
		st, err := findLetter(ctx, env, db, k, ref, what)
		if err != nil {
			return err
		}
		return closeDeadLetter(ctx, env, db, k, st, *note)
	}
}

func closeDeadLetter(ctx context.Context, env *environment, db *bun.DB, k kafkaops.Kafka, st deadletters.State, note string) error {
	user, host := audit.Who()
	d := st.Message
	name := d.Position(k.DLQTopic)
	if d.BodyLost {
		name = "dead letter " + st.ID
	}
	rec, changed, err := deadletters.Close(ctx, db, operatorDecoder(env), st, user+"@"+host, note)
	if errors.Is(err, deadletters.ErrEmptyNote) {
		return usagef("dlq close: %w", err)
	}
	out := newPrinter(env)
	if err != nil {
		return env.audit(ctx, db, "", err)
	}
	if !changed {
		out.printf("%s (%s, id %d) is already closed: at %s by %s: %s\n", name, d.Kind, rec.RowID, rec.ClosedAt.Format(time.RFC3339), printable(rec.ClosedBy, false), printable(rec.CloseNote, false))
		return out.err
	}
	line := fmt.Sprintf("closed %s (%s, source %s)", name, d.Kind, d.Source)
	if d.BodyLost {
		line += ", its body lost from the topic"
	}
	line += "; id " + strconv.FormatInt(rec.RowID, 10)
	out.println(line)
	return env.audit(ctx, db, line, out.err)
}
