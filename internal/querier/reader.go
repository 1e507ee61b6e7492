package querier

import (
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
)

// SpecReader reads answers as the worker will: through the channel's
// Spec.ReadQueryAnswer, with the channels' public keys
// (PAYCB_CHANNEL_PUBLIC_KEYS_FILE), judging the answer's time at the
// moment it was received. The querier reads the answer only to decide
// what to do next; the worker verifies and reads it again from the
// published message.
type SpecReader struct {
	// Keys returns the current public keys (a channelkeys.File's Current).
	Keys func() channels.ChannelPublicKeys
}

// Read verifies and reads resp, the answer to target. A channel without a
// reader yields a *channels.Error of KindUnsupported.
func (r SpecReader) Read(target channels.QueryTarget, resp channels.QueryResponse) (channels.QueryAnswer, error) {
	spec, ok := channels.Lookup(target.Channel)
	if !ok || spec.ReadQueryAnswer == nil {
		return channels.QueryAnswer{}, &channels.Error{Kind: channels.KindUnsupported, Err: errNoReader(target.Channel)}
	}
	at := resp.ReceivedAt
	if at.IsZero() {
		at = time.Now()
	}
	return spec.ReadQueryAnswer(target, resp, r.Keys(), at)
}

type errNoReader channels.Channel

func (e errNoReader) Error() string { return "channel " + string(e) + " has no query answer reader" }
