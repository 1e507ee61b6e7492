package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/sample"
)

func keys() channels.StaticKeys { return sample.Keys() }

func encodeEvent(ev channels.Event) (string, error) {
	b, err := json.Marshal(ev)
	if err != nil {
		return "", fmt.Errorf("encode event %s: %w", ev.Key, err)
	}
	return string(b), nil
}

// transportCeiling reads every message of topic, all partitions at once,
// with one kafka-go reader per partition and a handler that does nothing.
// It returns how many messages it read and the elapsed time.
func transportCeiling(ctx context.Context, brokers []string, topic string) (int, time.Duration, error) {
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return 0, 0, fmt.Errorf("transport ceiling: metadata of %s: %w", topic, err)
	}
	if len(meta.Topics) != 1 || meta.Topics[0].Error != nil {
		return 0, 0, fmt.Errorf("transport ceiling: metadata of %s: %v", topic, meta.Topics)
	}
	var parts []int
	for _, p := range meta.Topics[0].Partitions {
		parts = append(parts, p.ID)
	}
	first, err := kafkaops.ListOffsets(ctx, client, topic, parts, kafka.FirstOffset)
	if err != nil {
		return 0, 0, fmt.Errorf("transport ceiling: %w", err)
	}
	end, err := kafkaops.ListOffsets(ctx, client, topic, parts, kafka.LastOffset)
	if err != nil {
		return 0, 0, fmt.Errorf("transport ceiling: %w", err)
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
		last  time.Time // when the last partition's last message arrived
	)
	start := time.Now()
	for _, p := range parts {
		if end[p] <= first[p] {
			continue
		}
		wg.Go(func() {
			r := kafka.NewReader(kafka.ReaderConfig{
				Brokers: brokers, Topic: topic, Partition: p,
				MinBytes: 1, MaxBytes: 10 << 20, MaxWait: 500 * time.Millisecond,
			})
			defer func() { _ = r.Close() }()
			if err := r.SetOffset(first[p]); err != nil {
				cancel(fmt.Errorf("transport ceiling: seek %s/%d: %w", topic, p, err))
				return
			}
			n := 0
			for {
				m, err := r.FetchMessage(ctx)
				if err != nil {
					cancel(fmt.Errorf("transport ceiling: read %s/%d: %w", topic, p, err))
					return
				}
				n++ // the no-op handler
				if m.Offset+1 >= end[p] {
					break
				}
			}
			// Closing a reader waits out its in-flight fetch (up to
			// MaxWait): not part of reading, so the clock stops here.
			done := time.Now()
			mu.Lock()
			total += n
			if done.After(last) {
				last = done
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := last.Sub(start)
	if err := context.Cause(ctx); err != nil {
		return 0, 0, err
	}
	return total, elapsed, nil
}

// pacedMessage is one message of a paced stream, ready to be stamped with
// its publish time.
type pacedMessage struct {
	key []byte
	env channels.Envelope
	id  string // tenant|idempotency key; empty when it moves no money
}

// preparePaced parses the stream's envelopes and idempotency keys ahead of
// the paced loop, so the loop only stamps and sends.
func preparePaced(values [][]byte, msgKeys [][]byte) ([]pacedMessage, error) {
	dec := channels.NewDecoder(keys())
	out := make([]pacedMessage, len(values))
	for i, v := range values {
		env, err := channels.ParseEnvelope(v)
		if err != nil {
			return nil, fmt.Errorf("paced stream message %d: %w", i, err)
		}
		out[i] = pacedMessage{key: msgKeys[i], env: env}
		if res, err := dec.Decode(v); err == nil && !res.Ignored {
			out[i].id = fmt.Sprintf("%d|%s", res.Event.TenantID, res.Event.Key)
		}
	}
	return out, nil
}

// producePaced sends msgs to topic at rate messages per second, in small
// chunks every 10 ms (or one message every 1/rate when rate < 100). Each
// envelope's received_at is its publish time. It returns the first publish
// time of every money event (tenant|key) and the rate achieved: when a
// chunk's write takes longer than its slot, the loop falls behind and the
// achieved rate says so.
func producePaced(ctx context.Context, brokers []string, topic string, msgs []pacedMessage, rate float64) (map[string]time.Time, float64, error) {
	w := &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Topic:        topic,
		Balancer:     &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll,
		BatchSize:    1000,
		BatchTimeout: time.Millisecond,
	}
	defer func() { _ = w.Close() }()
	chunk := max(1, int(rate/100))
	published := make(map[string]time.Time, len(msgs))
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	batch := make([]kafka.Message, 0, chunk)
	start := time.Now()
	for i := 0; i < len(msgs); i += chunk {
		due := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return nil, 0, fmt.Errorf("paced produce: %w", ctx.Err())
			case <-timer.C:
			}
		}
		now := time.Now()
		batch = batch[:0]
		for _, m := range msgs[i:min(i+chunk, len(msgs))] {
			m.env.ReceivedAt = now
			batch = append(batch, kafka.Message{Key: m.key, Value: sample.EnvelopeWith(m.env)})
			if _, ok := published[m.id]; !ok && m.id != "" {
				published[m.id] = now
			}
		}
		if err := w.WriteMessages(ctx, batch...); err != nil {
			return nil, 0, fmt.Errorf("paced produce to %s: %w", topic, err)
		}
	}
	elapsed := time.Since(start)
	achieved := float64(len(msgs)) / elapsed.Seconds()
	return published, achieved, nil
}
