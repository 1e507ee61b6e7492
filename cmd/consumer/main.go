// Command consumer is the paycallback worker: it consumes payment-channel
// callbacks from Kafka and posts each event to the settlement ledger exactly
// once. See `consumer help` for its commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/logging"
	"github.com/paycallback/paycallback/internal/sqldb"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv)
	stop()
	if err != nil {
		if !errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, "consumer:", err)
		}
		os.Exit(exitCode(err))
	}
}

// errUsage marks a usage error that was already printed.
var errUsage = errors.New("usage")

// exitError carries a specific exit status (reconcile's discrepancies, the
// demo's failed invariants).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if errors.Is(err, errUsage) {
		return 2
	}
	return 1
}

// command is one subcommand. setup registers the command's own flags and
// returns the function that runs it once the flags are parsed.
type command struct {
	name    string
	summary string
	setup   func(fs *flag.FlagSet) runFunc
}

// runFunc runs a command with its environment and remaining arguments.
type runFunc func(ctx context.Context, env *environment, args []string) error

// environment is what every command gets: output streams and the loaded
// configuration (after flags).
type environment struct {
	stdout, stderr io.Writer
	lookup         config.LookupEnv
	cfg            config.Config
	logger         *slog.Logger
}

func commands() []command {
	return []command{
		{"run", "consume channel events and settle them (the worker)", noFlags(cmdRun)},
		{"migrate", "create or upgrade the database schema, then exit", noFlags(cmdMigrate)},
		{"demo", "the whole pipeline with an in-process Kafka and an embedded database", demoCommand},
		{"replay", "reset the stopped group's offsets to replay history (--dry-run to preview)", replayCommand},
		{"orphans", "list claims stuck ACQUIRED; --settle settles them through the fence", orphansCommand},
		{"reconcile", "check claims, ledger, orders and refund registrations; non-zero exit on discrepancies", reconcileCommand},
		{"purge", "clear stored events of old SETTLED claims beyond the retention floor (rows are kept)", purgeCommand},
		{"dlq", "dead letters: list, redrive", dlqCommand},
		{"refund", "refund pre-registration: register", refundCommand},
		{"version", "print the version, the VCS revision and the Go version", noFlags(cmdVersion)},
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, lookup config.LookupEnv) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	name := args[0]
	for _, c := range commands() {
		if c.name != name {
			continue
		}
		fs := flag.NewFlagSet("consumer "+name, flag.ContinueOnError)
		fs.SetOutput(stderr)
		flags := config.RegisterFlags(fs)
		runCmd := c.setup(fs)
		if err := fs.Parse(args[1:]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			return errUsage
		}
		// A configuration error, from whatever source, exits 2.
		cfg, err := config.Load(flags, lookup)
		if err != nil {
			return &exitError{code: 2, err: fmt.Errorf("load configuration: %w", err)}
		}
		if name != "demo" {
			if err := cfg.ValidateFor(name); err != nil {
				return &exitError{code: 2, err: err}
			}
		}
		env := &environment{stdout: stdout, stderr: stderr, lookup: lookup, cfg: cfg, logger: newLogger(stderr, cfg.Log)}
		sqldb.SetLogger(env.logger) // the database libraries' own lines, in the chosen format
		return runCmd(ctx, env, fs.Args())
	}
	fmt.Fprintf(stderr, "consumer: unknown command %q\n\n", name)
	usage(stderr)
	return errUsage
}

func noFlags(fn runFunc) func(*flag.FlagSet) runFunc {
	return func(*flag.FlagSet) runFunc { return fn }
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: consumer <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Configuration: --config FILE (YAML, default config/consumer.yaml when present),")
	fmt.Fprintln(w, "overridden by PAYCB_* environment variables, overridden by flags.")
	fmt.Fprintln(w, "`consumer <command> --help` lists a command's flags.")
}

// newLogger returns the process logger the configuration asks for.
func newLogger(w io.Writer, lc config.Log) *slog.Logger {
	return logging.New(w, lc.SlogLevel(), lc.Format)
}
