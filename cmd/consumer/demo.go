package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/paycallback/paycallback/internal/demo"
)

func demoCmd() command {
	return command{
		name:     "demo",
		summary:  "the whole pipeline with an in-process Kafka and an embedded database",
		synopsis: "[--trades N] [--barcode N] [--seed N] [--db FILE] [--keep]",
		description: `Runs the worker against an in-process Kafka and an embedded SQLite database,
feeds it a generated realistic stream (payments, refunds, channel retries,
a conflict, a malformed message), and registers WeChat barcode payments
(付款码, MICROPAY) that never call back: an in-process querier, apart from
the worker as consumer query run is, asks a fake WeChat (TLS, signed
answers) about them after a first wait of 1s, and the worker settles its
answers through the claim. Then it prints a summary (how many the query
recovered among them) and checks the ledger's invariants. Needs no outside
service.`,
		exits: []exitStatus{
			{exitFound, "an invariant failed"},
		},
		setup: demoCommand,
	}
}

func demoCommand(fs *flag.FlagSet) runFunc {
	keep := fs.Bool("keep", false, "keep the worker serving /metrics after the summary until interrupted")
	trades := fs.Int("trades", 300, "how many trades the generated stream holds")
	barcode := fs.Int("barcode", 0, "how many WeChat barcode payments are registered without a callback, for the querier (default trades/25, at least 1)")
	seed := fs.Uint64("seed", 1, "seed of the generated stream (the same seed gives the same stream)")
	dbPath := fs.String("db", "", "embedded database file to keep (default: a temporary file)")
	return func(ctx context.Context, env *environment, _ []string) error {
		if *trades <= 0 {
			return usagef("demo: --trades %d is not positive", *trades)
		}
		if *barcode < 0 {
			return usagef("demo: --barcode %d is negative", *barcode)
		}
		addr := "127.0.0.1:0"
		if *keep {
			addr = env.cfg.Admin.Addr
		}
		logger := env.logger
		if env.cfg.Log.Level == "info" {
			// The demo's own output is the progress; the worker's routine
			// logs would drown it. PAYCB_LOG_LEVEL=debug shows them.
			lc := env.cfg.Log
			lc.Level = "error"
			logger = newLogger(env.stderr, lc)
		}
		sum, err := demo.Run(ctx, demo.Options{
			Seed: *seed, Trades: *trades, Barcode: *barcode, DBPath: *dbPath, Keep: *keep,
			AdminAddr: addr, Out: env.stdout, Logger: logger,
		})
		if err != nil {
			return err
		}
		if !sum.OK() {
			return &exitError{code: 3, err: errors.New("demo: invariants failed")}
		}
		fmt.Fprintln(env.stdout, "demo: done")
		return nil
	}
}
