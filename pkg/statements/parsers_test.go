package statements_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	_ "github.com/paycallback/paycallback/pkg/channels/allchannels" // the built-in channels
	"github.com/paycallback/paycallback/pkg/statements"
)

// TestParsersCoverRegistry: every channel of the registry has a statement
// parser here, so a channel added to channels' registry without one fails
// this test rather than having its statements refused at run time.
func TestParsersCoverRegistry(t *testing.T) {
	require.NotEmpty(t, channels.All())
	for _, spec := range channels.All() {
		p, ok := statements.ParserOf(spec.Code)
		if assert.True(t, ok, "channel %s has no statement parser", spec.Code) {
			assert.NotNil(t, p.Parse, spec.Code)
			assert.NotZero(t, p.Refunds, spec.Code)
			assert.Equal(t, p.Refunds == statements.RefundLinesByNumber, !spec.Cumulative(),
				"%s: refunds compared by number exactly when the callbacks report each refund's own amount", spec.Code)
		}
	}
	assert.Equal(t, statements.RefundLinesByNumber, statements.RefundLinesOf(channels.WeChat))
	assert.Equal(t, statements.RefundLinesRunning, statements.RefundLinesOf(channels.Alipay))
	assert.Equal(t, statements.RefundLinesPerOrder, statements.RefundLinesOf(channels.SQB))
	assert.False(t, statements.PaymentSettled(channels.WeChat, "REVOKED"))
	assert.True(t, statements.PaymentSettled(channels.WeChat, "SUCCESS"))
	assert.True(t, statements.PaymentSettled(channels.Alipay, "whatever"))
	_, ok := statements.ParserOf("PAYPAL")
	assert.False(t, ok)
	_, err := statements.Parse("PAYPAL", []byte("x"), "")
	require.ErrorIs(t, err, statements.ErrNoParser)
}
