package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/kafkaconn"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/sqldb"
)

// opsKafka describes the configured cluster, topics and group for the
// operations commands, connecting with the configured TLS and SASL. With
// either on it connects once first, so that a refused password or an
// untrusted broker certificate is reported as such.
func opsKafka(ctx context.Context, env *environment) (kafkaops.Kafka, error) {
	k := env.cfg.Kafka
	conn, err := kafkaconn.New(k)
	if err != nil {
		return kafkaops.Kafka{}, err
	}
	const timeout = 15 * time.Second
	if conn.Secured() {
		if err := conn.Check(ctx, timeout); errors.Is(err, kafkaconn.ErrRejected) {
			return kafkaops.Kafka{}, err
		}
	}
	return kafkaops.Kafka{Brokers: k.Brokers, Topic: k.Topic, Group: k.Group, DLQTopic: k.DLQTopic, Timeout: timeout, Conn: conn}, nil
}

// dlqKafka is opsKafka for the dead-letter commands.
func dlqKafka(ctx context.Context, env *environment) (kafkaops.Kafka, error) {
	k, err := opsKafka(ctx, env)
	if err != nil {
		return kafkaops.Kafka{}, err
	}
	return kafkaops.Kafka{Brokers: k.Brokers, Topic: k.Topic, DLQTopic: k.DLQTopic, Timeout: k.Timeout, Conn: k.Conn}, nil
}

// openDB opens the configured database and checks that it answers. The
// caller closes it.
func openDB(ctx context.Context, env *environment) (*bun.DB, error) {
	c := env.cfg.DB
	c.MaxOpenConns, c.MaxIdleConns = 4, 4 // an operator command needs few connections
	db, err := sqldb.Open(c)
	if err != nil {
		return nil, err
	}
	if err := sqldb.Ping(ctx, db, 10*time.Second); err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}

// parseTime parses an RFC 3339 time flag; empty is the zero time.
func parseTime(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("--%s: %q is not an RFC 3339 time such as 2026-12-01T08:00:00+08:00", name, v)
	}
	return t, nil
}

// printer writes a command's report to stdout and keeps the first write
// error, so that a report cut short (a closed pipe, a full disk) fails the
// command instead of passing silently.
type printer struct {
	w   io.Writer
	err error
}

func newPrinter(env *environment) *printer { return &printer{w: env.stdout} }

// Write implements io.Writer for tabwriter; after an error it writes
// nothing more.
func (p *printer) Write(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	n, err := p.w.Write(b)
	if err != nil {
		p.err = fmt.Errorf("write output: %w", err)
	}
	return n, p.err
}

func (p *printer) printf(format string, a ...any) { _, _ = fmt.Fprintf(p, format, a...) }

// json writes v as indented JSON, the --json form of every report; a value
// that does not encode fails the command like a failed write.
func (p *printer) json(v any) {
	enc := json.NewEncoder(p)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil && p.err == nil {
		p.err = fmt.Errorf("write output: %w", err)
	}
}

func (p *printer) println(a ...any) { _, _ = fmt.Fprintln(p, a...) }

// flush flushes tw, whose output goes to p.
func (p *printer) flush(tw *tabwriter.Writer) {
	if err := tw.Flush(); err != nil && p.err == nil {
		p.err = fmt.Errorf("write output: %w", err)
	}
}
