package alipay_test

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/eventkey"
	"github.com/stretchr/testify/require"
)

// decodeKinds are the kinds the decoder may return.
var decodeKinds = map[channels.ErrorKind]bool{
	channels.KindMalformed:      true,
	channels.KindUnknownChannel: true,
	channels.KindDecryptFailed:  true,
	channels.KindNoKey:          true,
	channels.KindInvalidAmount:  true,
	channels.KindUnsupported:    true,
}

var hexFingerprint = regexp.MustCompile(`^[0-9a-f]{64}$`)

// testDecoder decodes with the channelstest key for every tenant.
func testDecoder() *channels.Decoder { return channels.NewDecoder(channelstest.Keys()) }

// mustDecode decodes value, requires success and checks the result's
// invariants.
func mustDecode(tb testing.TB, value []byte) channels.Result {
	tb.Helper()
	res, err := testDecoder().Decode(value)
	require.NoError(tb, err)
	checkResult(tb, res, nil)
	return res
}

// mustFail decodes value and requires a typed error of kind want.
func mustFail(tb testing.TB, value []byte, want channels.ErrorKind) {
	tb.Helper()
	_, err := testDecoder().Decode(value)
	require.Error(tb, err)
	kind, ok := channels.KindOf(err)
	require.True(tb, ok, "untyped error %v", err)
	require.Equal(tb, want, kind, "error: %v", err)
}

// checkResult asserts what holds for every decode: failures are typed with a
// decoder kind; a money event validates, its key parses back to its type,
// amounts are in range, the fingerprint is fresh hex, times are UTC, and it
// survives a JSON round trip unchanged.
func checkResult(tb testing.TB, res channels.Result, err error) {
	tb.Helper()
	if err != nil {
		kind, ok := channels.KindOf(err)
		require.True(tb, ok, "untyped error %v", err)
		require.True(tb, decodeKinds[kind], "kind %q is not a decoder kind", kind)
		return
	}
	ev := res.Event
	require.Positive(tb, ev.TenantID)
	require.True(tb, ev.Channel.Valid())
	if res.Ignored {
		require.NotEmpty(tb, res.IgnoreReason)
		require.Empty(tb, ev.Key)
		require.Empty(tb, ev.Fingerprint)
		return
	}
	require.NoError(tb, ev.Validate())
	key, typ, kerr := eventkey.ParseKey(string(ev.Key))
	require.NoError(tb, kerr)
	require.Equal(tb, ev.Key, key)
	require.Equal(tb, ev.Type, typ)
	for _, a := range []int64{ev.OrderTotal, ev.RefundAmount, ev.CumulativeRefunded} {
		require.GreaterOrEqual(tb, a, int64(0))
		require.LessOrEqual(tb, a, channels.MaxAmount)
	}
	require.Regexp(tb, hexFingerprint, ev.Fingerprint)
	require.Equal(tb, channels.Fingerprint(ev), ev.Fingerprint)
	require.Equal(tb, time.UTC, ev.OccurredAt.Location())
	require.Equal(tb, time.UTC, ev.ReceivedAt.Location())
	if ev.Type == eventkey.RefundSucceeded {
		require.Equal(tb, channels.RefundSuccess, res.RefundStatus)
	}
	b, jerr := json.Marshal(ev)
	require.NoError(tb, jerr)
	var back channels.Event
	require.NoError(tb, json.Unmarshal(b, &back))
	require.Equal(tb, ev, back)
}

// envelope wraps a raw body for tenant 1001, received at a fixed instant.
func envelope(ch channels.Channel, body string) []byte {
	return channelstest.Envelope(1001, ch, body, time.Date(2024, 6, 1, 12, 0, 6, 123e6, channelstest.Beijing))
}

func beijing(s string) time.Time {
	t, err := time.ParseInLocation("2006-01-02 15:04:05.000", s, channelstest.Beijing)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}
