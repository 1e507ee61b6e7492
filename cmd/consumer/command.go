package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/sqldb"
)

// command is one command of the binary, or one verb of a command with
// verbs (dlq list, refund register). Registering one: write a function
// returning it in a file of its own (see version.go for the smallest), then
// list it in commands() or in its parent's verbs. Fields are set by name.
type command struct {
	// name is the word on the command line: "status", or a verb: "show".
	name string
	// summary is one line for the listings, without a final period.
	summary string
	// synopsis is the command line after the command's path, e.g.
	// "--at P:O [--decrypt]"; empty when the command takes no flags.
	synopsis string
	// description says what the command does, in a few lines of text.
	description string
	// exits are the exit statuses beyond 0, 1 and 2 (which every command
	// has), or 1 with a more precise meaning.
	exits []exitStatus
	// config says how the configuration flags are shown in --help; they
	// are accepted by every command but configNone.
	config configFlags
	// setup registers the command's own flags on fs and returns the
	// function that runs it once they are parsed. Nil for a command with
	// verbs.
	setup func(fs *flag.FlagSet) runFunc
	// args, when set, names the positional arguments the command accepts
	// (e.g. "[command]"); otherwise any positional argument is a usage error.
	args string
	// verbs are the subcommands of a command with verbs.
	verbs []command
}

// runFunc runs a command with its environment and positional arguments.
type runFunc func(ctx context.Context, env *environment, args []string) error

// exitStatus is one exit status a command documents in its --help.
type exitStatus struct {
	code    int
	meaning string
}

// configFlags says what a command's --help shows of the configuration
// flags (--config and one flag per setting).
type configFlags int

const (
	// configSummary accepts the configuration flags and mentions them in
	// one line pointing at `consumer help config`.
	configSummary configFlags = iota
	// configListed accepts and lists them in full (run, migrate).
	configListed
	// configNone reads no configuration at all (version).
	configNone
)

// baseExits are the statuses every command that reads the configuration has.
var baseExits = []exitStatus{
	{exitOK, "success"},
	{exitFailure, "a runtime failure (database, broker, I/O)"},
	{exitUsage, "a usage or configuration error: unknown flag or command, missing or invalid argument or setting"},
}

// find returns the command called name in cs.
func find(cs []command, name string) (command, bool) {
	for _, c := range cs {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// invoke runs c, found at path, with args: the arguments after its name.
// pre holds configuration flags given before a verb (consumer dlq
// --kafka-brokers B list); a verb's flag set parses them again with its own.
func invoke(ctx context.Context, c command, path, pre, args []string, stdout, stderr io.Writer, lookup config.LookupEnv) error {
	name := strings.Join(path, " ")
	if len(c.verbs) > 0 {
		fs := newFlagSet(name, stderr)
		config.RegisterFlags(fs)
		if err := fs.Parse(args); err != nil {
			return parseError(err, c, path, stdout, stderr)
		}
		if fs.NArg() == 0 {
			fmt.Fprintf(stderr, "consumer %s: which verb?\n\n", name)
			printHelp(stderr, c, path)
			return errUsage
		}
		verb := fs.Arg(0)
		if verb == "help" {
			printHelp(stdout, c, path)
			return nil
		}
		v, ok := find(c.verbs, verb)
		if !ok {
			fmt.Fprintf(stderr, "consumer %s: unknown verb %q\n\n", name, verb)
			printHelp(stderr, c, path)
			return errUsage
		}
		before := args[:len(args)-fs.NArg()]
		return invoke(ctx, v, append(slices.Clone(path), v.name), append(slices.Clone(pre), before...), fs.Args()[1:], stdout, stderr, lookup)
	}

	fs := newFlagSet(name, stderr)
	runFn := c.setup(fs)
	var flags *config.Flags
	if c.config != configNone {
		flags = config.RegisterFlags(fs)
	}
	if err := fs.Parse(append(slices.Clone(pre), args...)); err != nil {
		return parseError(err, c, path, stdout, stderr)
	}
	if fs.NArg() > 0 && c.args == "" {
		fmt.Fprintf(stderr, "consumer %s: unexpected arguments %q\n", name, fs.Args())
		fmt.Fprintf(stderr, "run `consumer %s --help` for its usage\n", name)
		return errUsage
	}
	env := &environment{stdout: stdout, stderr: stderr, lookup: lookup, command: name, args: slices.Clone(args)}
	if len(pre) > 0 {
		env.args = append(slices.Clone(pre), args...)
	}
	if c.config == configNone {
		env.logger = newLogger(stderr, config.Default().Log)
		return runFn(ctx, env, fs.Args())
	}
	// A configuration error, from whatever source, exits 2.
	cfg, err := config.Load(flags, lookup)
	if err != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("load configuration: %w", err)}
	}
	if err := cfg.ValidateFor(name, app.FileChecks()); err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	env.cfg = cfg
	env.logger = newLogger(stderr, cfg.Log)
	sqldb.SetLogger(env.logger) // the database libraries' own lines, in the chosen format
	return runFn(ctx, env, fs.Args())
}

// newFlagSet is a flag set that prints parse errors to stderr and leaves
// the usage text to printHelp.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("consumer "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {}
	return fs
}

// parseError turns a flag parse error into --help's output (exit 0) or a
// usage error (exit 2; the flag package printed the message).
func parseError(err error, c command, path []string, stdout, stderr io.Writer) error {
	if errors.Is(err, flag.ErrHelp) {
		printHelp(stdout, c, path)
		return nil
	}
	fmt.Fprintf(stderr, "run `consumer %s --help` for its usage\n", strings.Join(path, " "))
	return errUsage
}

// help prints `consumer help [command [verb]]` or `consumer help config`.
// A --help (or -h, -help) among args asks for what help prints anyway: it is
// dropped, so `consumer help config --help` prints and exits 0.
func help(stdout, stderr io.Writer, args []string) error {
	args = slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "-h" || a == "-help" || a == "--help" })
	if len(args) == 0 {
		usage(stdout)
		return nil
	}
	if len(args) == 1 && args[0] == "config" {
		configHelp(stdout)
		return nil
	}
	cs := commands()
	var path []string
	var c command
	for _, a := range args {
		found, ok := find(cs, a)
		if !ok {
			fmt.Fprintf(stderr, "consumer help: unknown command %q\n\n", strings.Join(append(path, a), " "))
			usage(stderr)
			return errUsage
		}
		c, cs, path = found, found.verbs, append(path, a)
	}
	printHelp(stdout, c, path)
	return nil
}

// usage prints the list of commands and the exit statuses.
func usage(w io.Writer) {
	p := func(format string, a ...any) { _, _ = fmt.Fprintf(w, format, a...) }
	p("usage: consumer <command> [flags]\n\ncommands:\n")
	for _, c := range commands() {
		p("  %-18s %s\n", c.name, c.summary)
		for _, v := range c.verbs {
			p("  %-18s %s\n", c.name+" "+v.name, v.summary)
		}
	}
	p("  %-18s %s\n", "help config", "the configuration flags, variables and their precedence")
	p("\nexit status:\n")
	for _, e := range append(slices.Clone(baseExits),
		exitStatus{exitFound, "the command found what it checks for (e.g. reconcile discrepancies, demo invariant failures)"},
		exitStatus{exitRefused, "refused as unsafe (e.g. replay while the group has members)"}) {
		p("  %d  %s\n", e.code, e.meaning)
	}
	p("\nConfiguration: --config FILE (YAML, default %s when present), overridden by\n", config.DefaultFile)
	p("PAYCB_* environment variables, overridden by flags: `consumer help config`.\n")
	p("`consumer <command> --help` (or `consumer help <command>`) describes a command.\n")
}

// printHelp prints c's --help: summary, usage, description, own flags,
// verbs, configuration flags and exit statuses.
func printHelp(w io.Writer, c command, path []string) {
	p := func(format string, a ...any) { _, _ = fmt.Fprintf(w, format, a...) }
	name := strings.Join(path, " ")
	p("consumer %s: %s\n\n", name, c.summary)
	switch {
	case len(c.verbs) > 0:
		p("usage: consumer %s <verb> [verb flags]\n", name)
	case c.synopsis != "":
		p("usage: consumer %s %s\n", name, c.synopsis)
	default:
		p("usage: consumer %s\n", name)
	}
	if c.description != "" {
		p("\n%s\n", strings.TrimSpace(c.description))
	}
	if len(c.verbs) > 0 {
		p("\nverbs:\n")
		for _, v := range c.verbs {
			p("  %-10s %s\n", v.name, v.summary)
		}
		p("\n`consumer %s <verb> --help` describes a verb.\n", name)
	} else {
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		c.setup(fs)
		if n := flagCount(fs); n > 0 {
			p("\nflags:\n")
			printFlags(w, fs)
		}
	}
	switch c.config {
	case configListed:
		p("\nconfiguration flags (each overrides its PAYCB_* variable and the YAML file):\n")
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		config.RegisterFlags(fs)
		printFlags(w, fs)
	case configSummary:
		p("\nconfiguration flags: --config FILE and one flag per setting (e.g. --db-dsn, --kafka-brokers);\n")
		p("see `consumer help config`.\n")
	}
	p("\nexit status:\n")
	exits := baseExits
	if c.config == configNone {
		exits = []exitStatus{baseExits[0], {exitUsage, "a usage error: unknown flag or unexpected argument"}}
	}
	for _, e := range mergeExits(exits, c.exits) {
		p("  %d  %s\n", e.code, e.meaning)
	}
}

// mergeExits is base with extra's codes added or, for a code base has,
// its meaning replaced; sorted by code.
func mergeExits(base, extra []exitStatus) []exitStatus {
	out := slices.Clone(base)
	for _, e := range extra {
		i := slices.IndexFunc(out, func(o exitStatus) bool { return o.code == e.code })
		if i >= 0 {
			out[i] = e
		} else {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b exitStatus) int { return a.code - b.code })
	return out
}

func flagCount(fs *flag.FlagSet) int {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n
}

// printFlags prints fs's flags as "--name TYPE" lines, each followed by
// its meaning and default.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		typ, meaning := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if typ != "" {
			line += " " + typ
		}
		if def := f.DefValue; def != "" && def != "false" && def != "0" && def != "0s" && def != "[]" {
			meaning += " (default " + def + ")"
		}
		_, _ = fmt.Fprintf(w, "%s\n      %s\n", line, meaning)
	})
}

// configHelp prints every configuration flag and the precedence rules.
func configHelp(w io.Writer) {
	p := func(format string, a ...any) { _, _ = fmt.Fprintf(w, format, a...) }
	p("consumer help config: the configuration every command but version reads\n\n")
	p("Precedence: --config FILE (YAML in the shape of config/consumer.example.yaml; default\n")
	p("%s when present), overridden by PAYCB_* environment variables, overridden by\n", config.DefaultFile)
	p("these flags. A secret variable may be given as NAME_FILE, the path of a file holding it.\n")
	p("Settings without a flag are set in the file or the environment (docs/contract.md).\n\n")
	p("configuration flags (accepted by every command but version, before or after a verb):\n")
	fs := flag.NewFlagSet("config", flag.ContinueOnError)
	config.RegisterFlags(fs)
	printFlags(w, fs)
	p("\nA configuration error (a flag, variable or file value out of its bounds) exits 2.\n")
}
