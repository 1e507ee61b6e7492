package allchannels

import (
	"fmt"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/alipay"
	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
	"github.com/paycallback/paycallback/pkg/internal/registry"
	"github.com/paycallback/paycallback/pkg/statements"
)

// channel is what one channel package gives the registries.
type channel struct {
	spec   channels.Spec
	parser statements.Parser
	bodies sample.Bodies
}

// builtin lists the channels this build understands, in the order every
// list of channels (PAYCB_CHANNELS' default, metrics, messages) shows them.
func builtin() []channel {
	return []channel{
		{wechat.Spec(), wechat.StatementParser(), wechat.SampleBodies()},
		{alipay.Spec(), alipay.StatementParser(), alipay.SampleBodies()},
		{sqb.Spec(), sqb.StatementParser(), sqb.SampleBodies()},
	}
}

func init() {
	for _, c := range builtin() {
		code := string(c.spec.Code)
		if _, err := registry.Channel(c.spec); err != nil {
			panic(fmt.Sprintf("allchannels: %v", err))
		}
		if _, err := registry.Parser(code, c.parser); err != nil {
			panic(fmt.Sprintf("allchannels: %v", err))
		}
		if _, err := registry.Bodies(code, c.bodies); err != nil {
			panic(fmt.Sprintf("allchannels: %v", err))
		}
	}
}
