package main

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/audit"
)

// audit records a state-changing operator action that has ended (replay
// applied, dlq redrive, orphans --settle, purge, refund register, refund
// resolve, dlq close; never a dry run): one INFO "operator action" log line and, when db
// is not nil, one ss_operator_audit row, with the OS user, the host, the
// command, its arguments with secrets masked and the result ("ok" or
// "failed (exit N)" for err). detail says what the action did; on failure
// the error is recorded instead. Call it once per action, after the action,
// and return what it returns: err, unchanged. A row that cannot be written
// is reported on stderr and logged at ERROR; it does not change the exit
// status, since the action itself has happened. With db nil (replay or a
// dlq verb run without a DSN) only the log line is written, and stderr
// says so.
func (env *environment) audit(ctx context.Context, db *bun.DB, detail string, err error) error {
	who, host := audit.Who()
	e := audit.Entry{
		At: time.Now(), OSUser: who, Host: host, Command: env.command,
		Arguments: audit.Arguments(env.args), Result: audit.Result(exitCode(err)), Detail: detail,
	}
	if err != nil {
		e.Detail = err.Error()
	}
	env.logger.Info("operator action", "user", e.OSUser, "host", e.Host, "command", e.Command,
		"arguments", e.Arguments, "result", e.Result, "detail", e.Detail, "audit_row", db != nil)
	if db == nil {
		_, _ = fmt.Fprintf(env.stderr, "consumer %s: no database configured (PAYCB_DB_DSN): the audit trail is this log line only, no ss_operator_audit row\n", env.command)
		return err
	}
	// The action has happened: record it even when the operator interrupted.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if werr := audit.Write(wctx, db, e); werr != nil {
		env.logger.Error("operator action not recorded in ss_operator_audit", "command", e.Command, "err", werr)
		_, _ = fmt.Fprintf(env.stderr, "consumer %s: WARNING: the action is not in the audit table: %v\n", env.command, werr)
	}
	return err
}

// auditDB opens the configured database for the audit row of a command
// that does not otherwise need one (replay, the dlq verbs). It returns nil
// when no DSN is configured, or when the database cannot be opened (said on
// stderr); close is never nil.
func (env *environment) auditDB(ctx context.Context) (db *bun.DB, closeDB func()) {
	if !env.cfg.DB.DSN.IsSet() {
		return nil, func() {}
	}
	db, err := openDB(ctx, env)
	if err != nil {
		_, _ = fmt.Fprintf(env.stderr, "consumer %s: WARNING: cannot open the database for the audit trail: %v\n", env.command, err)
		return nil, func() {}
	}
	return db, func() { _ = db.Close() }
}
