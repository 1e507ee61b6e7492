package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/pkg/dbengine"
	"github.com/paycallback/paycallback/schema"
)

func workerCmd() command {
	return command{
		name:    "run",
		summary: "consume channel events and settle them (the worker)",
		description: `Joins the consumer group and settles each channel event exactly once, until
interrupted (SIGINT or SIGTERM: a graceful shutdown). Before joining it
checks the keys, the admin address, the database and its schema, the broker
and the topics, retrying a dependency for up to PAYCB_STARTUP_TIMEOUT; a
database answer that waiting will not heal (access denied, unknown
database, a missing privilege) exits 1 at once, naming PAYCB_DB_DSN.
Serves /metrics, /healthz and /readyz on PAYCB_ADMIN_ADDR.`,
		exits: []exitStatus{
			{exitFailure, "a runtime failure, a start-up check still failing after PAYCB_STARTUP_TIMEOUT, or a database refusing the DSN's credentials, database or grants"},
			{exitUsage, "a usage or configuration error, including one a start-up check finds (a key, a TLS file, a missing topic setting)"},
		},
		config: configListed,
		setup:  func(*flag.FlagSet) runFunc { return cmdRun },
	}
}

func migrateCmd() command {
	return command{
		name:    "migrate",
		summary: "create or upgrade the database schema, then exit",
		description: `Applies the migrations this binary embeds that the database (PAYCB_DB_DSN)
has not had yet, in order, and prints them ("schema is current" when none).
It prints first the engine it found, "engine=mysql|mariadb|tidb version=…",
told by what the server is, never by its configurable version string.`,
		exits: []exitStatus{
			{exitUsage, "a usage or configuration error: no DSN"},
		},
		setup: func(*flag.FlagSet) runFunc { return cmdMigrate },
	}
}

// cmdRun runs the worker until ctx ends. Before joining the group it makes
// the start-up checks (app.ErrStartup): a dependency that still fails after
// PAYCB_STARTUP_TIMEOUT exits 1, a configuration at fault exits 2.
func cmdRun(ctx context.Context, env *environment, _ []string) error {
	m := &app.Main{Config: env.cfg, Logger: env.logger}
	err := m.Run(ctx)
	if errors.Is(err, config.ErrInvalid) {
		return &exitError{code: 2, err: err}
	}
	return err
}

func cmdMigrate(ctx context.Context, env *environment, _ []string) error {
	db, err := sqldb.Open(env.cfg.DB)
	if err != nil {
		return err
	}
	defer db.Close()
	engine, err := dbengine.Detect(ctx, db)
	if err != nil {
		return err
	}
	fmt.Fprintln(env.stdout, engine)
	applied, err := schema.Migrate(ctx, db)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintln(env.stdout, "schema is current")
		return nil
	}
	fmt.Fprintf(env.stdout, "applied migrations %v\n", applied)
	return nil
}
