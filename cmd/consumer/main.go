package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/logging"
	_ "github.com/paycallback/paycallback/pkg/channels/allchannels" // the channels this binary understands
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

// The exit statuses of every command (docs/contract.md, "Running it").
const (
	exitOK      = 0 // success
	exitFailure = 1 // a runtime failure
	exitUsage   = 2 // a usage or configuration error
	exitFound   = 3 // the command found what it checks for
	exitRefused = 4 // refused as unsafe
)

// errUsage marks a usage error whose message was already printed.
var errUsage = errors.New("usage")

// exitError carries a specific exit status (reconcile's discrepancies, the
// demo's failed invariants, a refusal, a usage error).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usagef returns a usage error (exit 2) with a message main prints:
// a missing or invalid argument found after the flags were parsed.
func usagef(format string, a ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, a...)}
}

// required is one required flag: its name as written ("--tenant") and
// whether it was set.
type required struct {
	name string
	set  bool
}

// requireFlags returns a usage error naming every flag of flags that is
// not set, in the order given, as "<what>: required: --a, --b"; nil when
// all are set.
func requireFlags(what string, flags ...required) error {
	var missing []string
	for _, f := range flags {
		if !f.set {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return usagef("%s: required: %s", what, strings.Join(missing, ", "))
	}
	return nil
}

// exitCode is the process exit status for err (nil is 0).
func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, errUsage):
		return exitUsage
	default:
		return exitFailure
	}
}

// environment is what every command gets: output streams, the loaded
// configuration (after flags) and what the audit trail records.
type environment struct {
	stdout, stderr io.Writer
	lookup         config.LookupEnv
	cfg            config.Config
	logger         *slog.Logger
	command        string   // the command's path, e.g. "dlq redrive"
	args           []string // the arguments after the command's path, as given
}

// commands lists every command, in the order `consumer help` shows them.
// To add a command, write a function returning its command in a file of
// its own and add one line here; a verb goes in its parent's verbs.
func commands() []command {
	return []command{
		workerCmd(), // run
		migrateCmd(),
		demoCmd(),
		replayCmd(),
		orphansCmd(),
		reconcileCmd(),
		purgeCmd(),
		dlqCmd(),
		paymentCmd(),
		queryCmd(),
		refundCmd(),
		queryCmd(),
		statusCmd(),
		tradeCmd(),
		publishCmd(),
		statementCmd(),
		settledCmd(),
		versionCmd(),
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, lookup config.LookupEnv) error {
	if len(args) == 0 {
		usage(stderr)
		return errUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		return help(stdout, stderr, args[1:])
	}
	c, ok := find(commands(), args[0])
	if !ok {
		fmt.Fprintf(stderr, "consumer: unknown command %q\n\n", args[0])
		usage(stderr)
		return errUsage
	}
	return invoke(ctx, c, []string{c.name}, nil, args[1:], stdout, stderr, lookup)
}

// newLogger returns the process logger the configuration asks for.
func newLogger(w io.Writer, lc config.Log) *slog.Logger {
	return logging.New(w, lc.SlogLevel(), lc.Format)
}
