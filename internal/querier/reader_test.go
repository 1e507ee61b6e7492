package querier_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/querier"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/channels/querytest"
)

// TestSpecReaderVerifiesWithTheChannelsKeys: a genuine WeChat answer reads
// as settled with the configured keys, and as unauthenticated without
// them.
func TestSpecReaderVerifiesWithTheChannelsKeys(t *testing.T) {
	kit := querytest.New(t)
	tr := channelstest.NewTrade(channels.WeChat, 31)
	at := time.Now().UTC().Truncate(time.Second)
	a := kit.WeChatPayment(t, tr, "SUCCESS", kit.Trusted, at, at)
	resp := channels.QueryResponse{StatusCode: 200, Header: a.Header, Body: a.Body, ReceivedAt: a.ReceivedAt}
	r := querier.SpecReader{Keys: func() channels.ChannelPublicKeys { return kit.Keys }}
	ans, err := r.Read(a.Target, resp)
	require.NoError(t, err)
	assert.Equal(t, channels.QuerySettled, ans.Outcome)
	require.Len(t, ans.Events, 1)
	assert.Equal(t, tr.TradeNo, ans.Events[0].TradeNo)

	none := querier.SpecReader{Keys: func() channels.ChannelPublicKeys { return channels.ChannelPublicKeys{} }}
	_, err = none.Read(a.Target, resp)
	kind, _ := channels.KindOf(err)
	assert.Equal(t, channels.KindUnauthenticated, kind)
}
