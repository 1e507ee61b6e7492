package demo

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
)

// TestTradePrefix starts the trade number of every trade TestStream
// generates, followed by the run's seed and a dash, so that test trades are
// told apart from real ones at a glance and runs from one another.
const TestTradePrefix = "TEST"

// TestOptions shape TestStream's stream: the smoke test `consumer publish`
// sends to a deployment.
type TestOptions struct {
	// TenantID is the one tenant every event belongs to; required.
	TenantID int64
	// Channels are the channels trades are paid through; default every
	// registered channel (channels.All).
	Channels []channels.Channel
	// Trades is how many trades to generate; default 10.
	Trades int
	// Seed makes the stream reproducible and names the run in the trade
	// numbers; 0 takes the current Unix time.
	Seed uint64
	// WeChatKey is the tenant's current APIv3 key, which encrypts the
	// WeChat resources as the channel would; required when Channels include
	// WECHAT.
	WeChatKey string
}

// ErrNoWeChatKey is returned, wrapped, by TestStream when WeChat callbacks
// are asked for without an APIv3 key to encrypt them.
var ErrNoWeChatKey = errors.New("no WeChat APIv3 key for the tenant")

// TestStream is Generate for one tenant without the traps (nothing in it
// should be dead-lettered): every trade paid, about half refunded in one to
// three parts, each notification delivered one to three times as the
// channels do, received now, every trade number starting with prefix
// (TestTradePrefix, the seed and a dash). The error says which option is unusable.
func TestStream(o TestOptions) (s Stream, prefix string, err error) {
	if o.TenantID <= 0 {
		return Stream{}, "", errors.New("test stream: tenant must be positive")
	}
	chans := o.Channels
	if len(chans) == 0 {
		chans = channels.Codes()
	}
	for _, ch := range chans {
		if !ch.Valid() {
			return Stream{}, "", fmt.Errorf("test stream: channel %q is not %s", ch, channels.CodeList())
		}
		if spec, _ := channels.Lookup(ch); spec.NeedsAPIv3Key && o.WeChatKey == "" {
			return Stream{}, "", fmt.Errorf("test stream: tenant %d: %w", o.TenantID, ErrNoWeChatKey)
		}
	}
	if o.Trades <= 0 {
		o.Trades = 10
	}
	if o.Seed == 0 {
		o.Seed = uint64(max(time.Now().Unix(), 1)) // the Unix time is positive
	}
	prefix = TestTradePrefix + strconv.FormatUint(o.Seed, 10) + "-"
	s = Generate(StreamOptions{
		Seed: o.Seed, Trades: o.Trades, Tenants: []int64{o.TenantID}, NoTraps: true,
		ReceivedAt: time.Now(), Channels: chans, TradePrefix: prefix,
		WeChatKey: func(int64) string { return o.WeChatKey },
	})
	return s, prefix, nil
}
