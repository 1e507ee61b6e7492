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
	"strconv"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/paycallback/paycallback/internal/kafkaops/inprocess"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kfake-broker:", err)
		os.Exit(2)
	}
}

// topicFlags collects repeated --topic name:partitions values.
type topicFlags map[string]int32

func (t topicFlags) String() string {
	parts := make([]string, 0, len(t))
	for name, n := range t {
		parts = append(parts, fmt.Sprintf("%s:%d", name, n))
	}
	return strings.Join(parts, ",")
}

func (t topicFlags) Set(v string) error {
	name, n, ok := strings.Cut(v, ":")
	if !ok || name == "" {
		return fmt.Errorf("want name:partitions, got %q", v)
	}
	parts, err := strconv.ParseInt(n, 10, 32)
	if err != nil || parts < 1 {
		return fmt.Errorf("partitions of %s: want a positive number, got %q", name, n)
	}
	t[name] = int32(parts)
	return nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kfake-broker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	port := fs.Int("port", 0, "TCP port on 127.0.0.1 (0 picks a free one)")
	topics := topicFlags{}
	fs.Var(topics, "topic", "topic to seed as name:partitions (repeatable)")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error")
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprintln(stdout, "usage: kfake-broker [flags]\n\nan in-process Kafka broker (kfake) as a process of its own, on 127.0.0.1, until SIGINT or SIGTERM\n\nflags:")
			fs.PrintDefaults()
			fmt.Fprintln(stdout, "\nexit status:\n  0  stopped by a signal, or --help\n  2  a usage error, or the broker could not start")
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *port < 0 || *port > 65535 {
		return fmt.Errorf("port: want 0 to 65535, got %d", *port)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("log level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	cluster, addrs, err := inprocess.Start(topics, kfake.Ports(*port))
	if err != nil {
		return err
	}
	defer cluster.Close()
	if len(addrs) == 0 {
		return errors.New("kfake started without a listen address")
	}
	if _, err := fmt.Fprintln(stdout, addrs[0]); err != nil {
		return fmt.Errorf("print broker address: %w", err)
	}
	logger.Info("kfake broker running", "addr", addrs[0], "topics", topics.String())
	<-ctx.Done()
	logger.Info("kfake broker stopping")
	return nil
}
