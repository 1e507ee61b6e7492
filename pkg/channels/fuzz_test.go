package channels_test

import (
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/eventkey"
)

// The fuzz targets check, for any input: no panic, every failure is a
// typed decoder error, and every money event validates with a parseable key
// and non-negative amounts (checkResult). Seeds live in testdata/fuzz and
// are added from the fixtures below.

func fixtureSeeds() [][]byte {
	var out [][]byte
	for i, ch := range channels.Codes() {
		tr := channelstest.NewTrade(ch, 100+i)
		out = append(out,
			channelstest.PaymentEnvelope(tr, channelstest.Delivery{}),
			channelstest.RefundEnvelope(tr, channelstest.Refund{No: "RF-1", Amount: 100}, channelstest.Delivery{}),
		)
		// The same payment rebuilt from a statement.
		ev, err := channels.NewStatementEvent(channels.Event{
			TenantID: tr.TenantID, Channel: ch, Type: eventkey.PaymentReceived, TradeNo: tr.TradeNo,
			MerchantOrderNo: tr.MerchantOrderNo, OrderTotal: tr.Total, OccurredAt: tr.PaidAt, ReceivedAt: tr.PaidAt, RawStatus: "SUCCESS",
		})
		if err != nil {
			panic(err)
		}
		v, err := channels.StatementEnvelope(ev, tr.PaidAt)
		if err != nil {
			panic(err)
		}
		out = append(out, v)
	}
	return out
}

func FuzzDecode(f *testing.F) {
	for _, s := range fixtureSeeds() {
		f.Add(s)
	}
	d := testDecoder()
	f.Fuzz(func(t *testing.T, value []byte) {
		res, err := d.Decode(value)
		checkResult(t, res, err)
	})
}

// FuzzParseYuan checks ParseYuan against exact rational arithmetic: when it
// accepts s, s is a plain decimal whose value times 100 is exactly the
// result.
func FuzzParseYuan(f *testing.F) {
	for _, s := range []string{"20", "88.8", "0.01", "1.005", "-1", "1e3", "", " 1", "1,00", "10000000000", "0x1p3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fen, err := channels.ParseYuan(s)
		if err != nil {
			kind, ok := channels.KindOf(err)
			require.True(t, ok)
			require.Equal(t, channels.KindInvalidAmount, kind)
			return
		}
		require.GreaterOrEqual(t, fen, int64(0))
		require.LessOrEqual(t, fen, channels.MaxAmount)
		for _, c := range []byte(s) {
			require.True(t, c == '.' || (c >= '0' && c <= '9'), "accepted %q", s)
		}
		r, ok := new(big.Rat).SetString(s)
		require.True(t, ok)
		r.Mul(r, big.NewRat(100, 1))
		require.True(t, r.IsInt())
		require.Equal(t, fen, r.Num().Int64())
	})
}
