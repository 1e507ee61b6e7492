package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/sample"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "readfloor:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("readfloor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokers := fs.String("brokers", "", "comma-separated broker addresses")
	topic := fs.String("topic", "", "topic to read, from each partition's first offset")
	messages := fs.Int64("messages", 0, "messages to read, over all partitions, before exiting")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *brokers == "" || *topic == "" || *messages <= 0 {
		return errors.New("-brokers, -topic and a positive -messages are required")
	}
	addrs := strings.Split(*brokers, ",")
	client := &kafka.Client{Addr: kafka.TCP(addrs...), Timeout: 10 * time.Second}
	parts, err := kafkaops.TopicPartitions(ctx, client, nil, addrs, *topic)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	k := config.Default().Kafka
	dec := channels.NewDecoder(sample.Keys())
	var (
		read atomic.Int64
		wg   sync.WaitGroup
	)
	for _, p := range parts {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers: addrs, Topic: *topic, Partition: p,
			MinBytes: k.MinBytes, MaxBytes: k.MaxBytes, MaxWait: k.MaxWait, ReadLagInterval: -1,
		})
		if err := r.SetOffset(kafka.FirstOffset); err != nil {
			_ = r.Close()
			cancel(fmt.Errorf("seek %s/%d: %w", *topic, p, err))
			break
		}
		wg.Go(func() {
			defer func() { _ = r.Close() }()
			for {
				m, err := r.FetchMessage(ctx)
				if err != nil {
					cancel(fmt.Errorf("read %s/%d: %w", *topic, p, err))
					return
				}
				if _, err := dec.DecodeMessage(m.Value, ""); err != nil {
					cancel(fmt.Errorf("decode %s/%d@%d: %w", *topic, p, m.Offset, err))
					return
				}
				if read.Add(1) == *messages {
					cancel(errDone)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); !errors.Is(err, errDone) {
		return err
	}
	return nil
}

// errDone ends the readers once every message wanted was read.
var errDone = errors.New("every message read")
