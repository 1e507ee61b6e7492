package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/schema"
)

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
