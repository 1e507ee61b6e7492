package allchannels_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/alipay"
	_ "github.com/paycallback/paycallback/pkg/channels/allchannels"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
)

// TestBuiltInOrderAndCodes: the built-in channels are registered in their
// fixed order, under the codes the rest of the repository's tests name
// them by.
func TestBuiltInOrderAndCodes(t *testing.T) {
	assert.Equal(t, []channels.Channel{wechat.Code, alipay.Code, sqb.Code}, channels.Codes())
	assert.Equal(t, []channels.Channel{channels.WeChat, channels.Alipay, channels.SQB}, channels.Codes())
}
