package statements_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/statements"
)

// TestParseDispatchesByChannel: each fixture parses through Parse with its
// channel, a wrong hash is ErrHash, and an unknown channel is refused.
func TestParseDispatchesByChannel(t *testing.T) {
	for _, tc := range []struct {
		ch    channels.Channel
		file  string
		lines int
	}{
		{channels.WeChat, "../channels/wechat/testdata/wechat_tradebill_ALL_2024-03-15.csv.gz", 5},
		{channels.Alipay, "../channels/alipay/testdata/alipay_20880000000000000156_20240315.csv.zip", 5},
		{channels.SQB, "../channels/sqb/testdata/sqb_query_responses_SYNTHETIC.jsonl", 3},
	} {
		t.Run(string(tc.ch), func(t *testing.T) {
			data, err := os.ReadFile(tc.file)
			require.NoError(t, err)
			st, err := statements.Parse(tc.ch, data, "")
			require.NoError(t, err)
			assert.Equal(t, tc.ch, st.Channel)
			assert.Len(t, st.Lines, tc.lines)
			again, err := statements.Parse(tc.ch, data, st.SHA1)
			require.NoError(t, err)
			assert.Equal(t, st.SHA1, again.SHA1)
			_, err = statements.Parse(tc.ch, data, "0000000000000000000000000000000000000000")
			require.ErrorIs(t, err, statements.ErrHash)
		})
	}
	_, err := statements.Parse("PAYPAL", []byte("x"), "")
	require.ErrorContains(t, err, "unknown channel")
}
