package querier

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/statementauth"
	"github.com/paycallback/paycallback/pkg/channels"
)

// TopicPublisher publishes answers to the worker's input topic as query
// answer messages (channels.QueryEnvelope), signed with the current
// statement key, keyed like the callback of the trade the answer proves
// (CHANNEL:trade_no, so that it shares the callback's partition), else
// CHANNEL:merchant order no.
type TopicPublisher struct {
	// Produce writes msgs to the input topic and returns once the broker
	// acknowledged every one (kafkaops.Produce on the topic).
	Produce func(ctx context.Context, msgs []kafkaops.Message) error
	// Keys returns the current statement keys (reloaded as the file
	// changes).
	Keys func() statementauth.Keys
	// Headers returns the answer headers the channel's verification reads
	// (its Spec's), the only ones carried.
	Headers func(channels.Channel) []string
}

// ErrNothingToSign is returned when there is no statement key: an unsigned
// answer would be dead-lettered unauthenticated by every worker.
var ErrNothingToSign = errors.New("no statement key to sign query answers with: set PAYCB_STATEMENT_KEY_FILE")

// Publish writes one answer, signed. It fails, publishing nothing, without
// a statement key or when the answer cannot be carried unchanged.
func (p TopicPublisher) Publish(ctx context.Context, target channels.QueryTarget, askedAt time.Time, resp channels.QueryResponse, answer channels.QueryAnswer) error {
	value, err := channels.QueryEnvelope(target, askedAt, resp, p.Headers(target.Channel))
	if err != nil {
		return fmt.Errorf("query answer message: %w", err)
	}
	keys := p.Keys()
	if keys.Len() == 0 {
		return ErrNothingToSign
	}
	sig, err := keys.Sign(value)
	if err != nil {
		return fmt.Errorf("sign the query answer: %w", err)
	}
	id := target.MerchantOrderNo
	if len(answer.Events) > 0 && answer.Events[0].TradeNo != "" {
		id = answer.Events[0].TradeNo
	} else if target.TradeNo != "" {
		id = target.TradeNo
	}
	msg := kafkaops.Message{
		Key: []byte(string(target.Channel) + ":" + id), Value: value,
		Headers: []kafka.Header{{Key: statementauth.HeaderSignature, Value: []byte(sig)}},
	}
	if err := p.Produce(ctx, []kafkaops.Message{msg}); err != nil {
		return fmt.Errorf("publish the query answer: %w", err)
	}
	return nil
}

// SpecHeaders is TopicPublisher.Headers from the channels' specs: the
// answer headers each channel's verification reads (none for a channel
// not registered).
func SpecHeaders(ch channels.Channel) []string {
	if spec, ok := channels.Lookup(ch); ok {
		return spec.QueryAnswerHeaders
	}
	return nil
}
