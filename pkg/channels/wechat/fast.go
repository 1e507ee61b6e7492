package wechat

import (
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/internal/jsonscan"
)

// The hot JSON shapes of the channel are decoded in one pass without
// reflection (internal/jsonscan); on anything unusual the decoder falls
// back to encoding/json, so the outcome is always what encoding/json gives.

var (
	wechatKeys   = []string{"id", "create_time", "event_type", "resource_type", "resource"}
	resourceKeys = []string{"algorithm", "ciphertext", "nonce", "associated_data", "original_type"}
)

// fastWeChat is the one-pass decoder of the outer WeChat notification.
func fastWeChat(data []byte, n *wechatNotification) bool {
	s := jsonscan.New(data)
	s.WS()
	r := &n.Resource
	ok := s.Object(wechatKeys, 0, func(i int) bool {
		var ok bool
		switch i {
		case 0:
			n.ID, ok = s.Str()
		case 1:
			n.CreateTime, ok = s.Str()
		case 2:
			n.EventType, ok = s.Str()
		case 3:
			n.ResourceType, ok = s.Str()
		case 4:
			ok = s.Object(resourceKeys, 1, func(j int) bool {
				var ok bool
				switch j {
				case 0:
					r.Algorithm, ok = s.Str()
				case 1:
					r.Ciphertext, ok = s.Str()
				case 2:
					r.Nonce, ok = s.Str()
				case 3:
					r.AssociatedData, ok = s.Str()
				case 4:
					r.OriginalType, ok = s.Str()
				}
				return ok
			})
		}
		return ok
	})
	return ok && s.End()
}

// fen reads a plain non-negative integer amount up to MaxAmount; anything
// else goes to encoding/json, whose jsonFen reports it as invalid_amount.
func fen(s *jsonscan.Scanner, f *jsonFen) bool {
	v, ok := s.Int()
	if !ok || v < 0 || v > channels.MaxAmount {
		return false
	}
	*f = jsonFen{v: v, set: true}
	return true
}

var (
	transactionKeys = []string{"mchid", "sp_mchid", "sub_mchid", "out_trade_no", "transaction_id", "trade_state", "success_time", "amount"}
	txAmountKeys    = []string{"total", "currency"}
	refundKeys      = []string{"mchid", "sp_mchid", "sub_mchid", "out_trade_no", "transaction_id", "out_refund_no", "refund_id", "refund_status", "status", "success_time", "amount"}
	refundAmountKey = []string{"total", "refund", "currency"}
)

// fastWeChatTransaction is the one-pass decoder of a decrypted transaction.
func fastWeChatTransaction(data []byte, tx *wechatTransaction) bool {
	s := jsonscan.New(data)
	s.WS()
	strs := [...]*string{&tx.MchID, &tx.SpMchID, &tx.SubMchID, &tx.OutTradeNo, &tx.TransactionID, &tx.TradeState, &tx.SuccessTime}
	ok := s.Object(transactionKeys, 0, func(i int) bool {
		if i < len(strs) {
			var ok bool
			*strs[i], ok = s.Str()
			return ok
		}
		return s.Object(txAmountKeys, 1, func(j int) bool {
			if j == 0 {
				return fen(&s, &tx.Amount.Total)
			}
			var ok bool
			tx.Amount.Currency, ok = s.Str()
			return ok
		})
	})
	return ok && s.End()
}

// fastWeChatRefund is the one-pass decoder of a decrypted refund.
func fastWeChatRefund(data []byte, rf *wechatRefund) bool {
	s := jsonscan.New(data)
	s.WS()
	strs := [...]*string{&rf.MchID, &rf.SpMchID, &rf.SubMchID, &rf.OutTradeNo, &rf.TransactionID, &rf.OutRefundNo, &rf.RefundID, &rf.RefundStatus, &rf.Status, &rf.SuccessTime}
	ok := s.Object(refundKeys, 0, func(i int) bool {
		if i < len(strs) {
			var ok bool
			*strs[i], ok = s.Str()
			return ok
		}
		return s.Object(refundAmountKey, 1, func(j int) bool {
			switch j {
			case 0:
				return fen(&s, &rf.Amount.Total)
			case 1:
				return fen(&s, &rf.Amount.Refund)
			}
			var ok bool
			rf.Amount.Currency, ok = s.Str()
			return ok
		})
	})
	return ok && s.End()
}
