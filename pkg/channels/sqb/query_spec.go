package sqb

import (
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
)

// specReadAnswer is Spec.ReadQueryAnswer: DecodeQueryAnswer. Shouqianba
// does not sign its answers (TLS to the configured host is all there is),
// so keys are unused and an answer is taken on the statement-key signature
// of the querier that received it; now is unused: its answers carry no
// timestamp to judge.
func specReadAnswer(target channels.QueryTarget, resp channels.QueryResponse, _ channels.ChannelPublicKeys, _ time.Time) (channels.QueryAnswer, error) {
	return DecodeQueryAnswer(target, resp)
}
