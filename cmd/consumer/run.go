package main

import (
	"context"
	"fmt"

	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/schema"
)

func cmdRun(ctx context.Context, env *environment, _ []string) error {
	m := &app.Main{Config: env.cfg, Logger: env.logger}
	return m.Run(ctx)
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
