package allchannels

import (
	"fmt"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/alipay"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
	"github.com/paycallback/paycallback/pkg/internal/registry"
)

// builtin lists the channels this build understands, in the order every
// list of channels (PAYCB_CHANNELS' default, metrics, messages) shows them.
func builtin() []channels.Spec {
	return []channels.Spec{wechat.Spec(), alipay.Spec(), sqb.Spec()}
}

func init() {
	for _, spec := range builtin() {
		if _, err := registry.Channel(spec); err != nil {
			panic(fmt.Sprintf("allchannels: %v", err))
		}
	}
}
