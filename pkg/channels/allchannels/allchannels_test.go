package allchannels_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/alipay"
	_ "github.com/paycallback/paycallback/pkg/channels/allchannels"
	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
	"github.com/paycallback/paycallback/pkg/statements"
)

// TestBuiltInOrderAndCodes: the built-in channels are registered in their
// fixed order, under the codes the rest of the repository's tests name
// them by.
func TestBuiltInOrderAndCodes(t *testing.T) {
	assert.Equal(t, []channels.Channel{wechat.Code, alipay.Code, sqb.Code}, channels.Codes())
	assert.Equal(t, []channels.Channel{channels.WeChat, channels.Alipay, channels.SQB}, channels.Codes())
}

// TestEveryBuiltInChannelIsWhole: each built-in channel is registered in
// every registry, with every builder, so the conformance suite
// (internal/conformance) can run it.
func TestEveryBuiltInChannelIsWhole(t *testing.T) {
	for _, ch := range channels.Codes() {
		_, ok := statements.ParserOf(ch)
		assert.True(t, ok, "%s has a statement parser", ch)
		b, ok := sample.BodiesOf(ch)
		if assert.True(t, ok, "%s has sample bodies", ch) {
			assert.NotNil(t, b.StatementLines, "%s has statement lines", ch)
			assert.NotNil(t, b.Statement, "%s has a statement writer", ch)
		}
	}
}
