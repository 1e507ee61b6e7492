package sqb

import (
	"github.com/paycallback/paycallback/pkg/channels/internal/jsonscan"
)

// The hot JSON shapes of the channel are decoded in one pass without
// reflection (internal/jsonscan); on anything unusual the decoder falls
// back to encoding/json, so the outcome is always what encoding/json gives.

var (
	sqbOrderKeys = []string{
		"sn", "client_sn", "client_tsn", "refund_request_no", "status", "order_status",
		"total_amount", "net_amount", "finish_time", "channel_finish_time", "terminal_sn",
	}
	sqbBodyKeys = append(append([]string(nil), sqbOrderKeys...), "biz_response")
	sqbBizKeys  = []string{"data"}
)

// sqbFields returns o's fields in the order of sqbOrderKeys.
func sqbFields(o *sqbOrder) [11]*string {
	return [...]*string{
		&o.SN, &o.ClientSN, &o.ClientTSN, &o.RefundRequestNo, &o.Status, &o.OrderStatus,
		&o.TotalAmount, &o.NetAmount, &o.FinishTime, &o.ChannelFinishTime, &o.TerminalSN,
	}
}

// fastSQB is the one-pass decoder of a Shouqianba body: a callback, or a
// forwarded refund API response.
func fastSQB(data []byte, b *sqbBody) bool {
	s := jsonscan.New(data)
	s.WS()
	top := sqbFields(&b.sqbOrder)
	ok := s.Object(sqbBodyKeys, 0, func(i int) bool {
		if i < len(top) {
			var ok bool
			*top[i], ok = s.Str()
			return ok
		}
		b.BizResponse = &sqbBizResponse{}
		return s.Object(sqbBizKeys, 1, func(int) bool {
			b.BizResponse.Data = &sqbOrder{}
			inner := sqbFields(b.BizResponse.Data)
			return s.Object(sqbOrderKeys, 2, func(j int) bool {
				var ok bool
				*inner[j], ok = s.Str()
				return ok
			})
		})
	})
	return ok && s.End()
}
