package channelstest

import (
	"github.com/paycallback/paycallback/pkg/channels/alipay"
	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
)

// The builders of package sample and of the channel packages, under the
// names the tests know them by.

type (
	// Trade is sample.Trade.
	Trade = sample.Trade
	// Refund is sample.Refund.
	Refund = sample.Refund
	// SQBForm is sample.SQBForm.
	SQBForm = sample.SQBForm
	// Delivery is sample.Delivery.
	Delivery = sample.Delivery
	// Bodies is sample.Bodies.
	Bodies = sample.Bodies
)

const (
	// APIv3Key is sample.APIv3Key.
	APIv3Key = sample.APIv3Key
	// SQBRequestNo is sample.SQBRequestNo.
	SQBRequestNo = sample.SQBRequestNo
	// SQBClientTSN is sample.SQBClientTSN.
	SQBClientTSN = sample.SQBClientTSN
	// SQBNoRefundNo is sample.SQBNoRefundNo.
	SQBNoRefundNo = sample.SQBNoRefundNo
	// SQBAPIResponse is sample.SQBAPIResponse.
	SQBAPIResponse = sample.SQBAPIResponse
)

var (
	// Keys is sample.Keys.
	Keys = sample.Keys
	// Beijing is sample.Beijing.
	Beijing = sample.Beijing
	// BaseTime is sample.BaseTime.
	BaseTime = sample.BaseTime
	// NewTrade is sample.NewTrade.
	NewTrade = sample.NewTrade
	// PaymentEnvelope is sample.PaymentEnvelope.
	PaymentEnvelope = sample.PaymentEnvelope
	// StatementPayment is sample.StatementPayment.
	StatementPayment = sample.StatementPayment
	// RefundEnvelope is sample.RefundEnvelope.
	RefundEnvelope = sample.RefundEnvelope
	// Envelope is sample.Envelope.
	Envelope = sample.Envelope
	// EnvelopeWith is sample.EnvelopeWith.
	EnvelopeWith = sample.EnvelopeWith
	// WeChatPayment is wechat.SamplePayment.
	WeChatPayment = wechat.SamplePayment
	// WeChatRefund is wechat.SampleRefund.
	WeChatRefund = wechat.SampleRefund
	// WeChatBody is wechat.SampleBody.
	WeChatBody = wechat.SampleBody
	// EncryptWeChat is wechat.Encrypt.
	EncryptWeChat = wechat.Encrypt
	// AlipayPayment is alipay.SamplePayment.
	AlipayPayment = alipay.SamplePayment
	// AlipayFinished is alipay.SampleFinished.
	AlipayFinished = alipay.SampleFinished
	// AlipayWaitBuyerPay is alipay.SampleWaitBuyerPay.
	AlipayWaitBuyerPay = alipay.SampleWaitBuyerPay
	// AlipayUnpaidClose is alipay.SampleUnpaidClose.
	AlipayUnpaidClose = alipay.SampleUnpaidClose
	// AlipayRefund is alipay.SampleRefund.
	AlipayRefund = alipay.SampleRefund
	// AlipayForm is alipay.SampleForm.
	AlipayForm = alipay.SampleForm
	// Yuan is alipay.Yuan.
	Yuan = alipay.Yuan
	// SQBPayment is sqb.SamplePayment.
	SQBPayment = sqb.SamplePayment
	// SQBRefund is sqb.SampleRefund.
	SQBRefund = sqb.SampleRefund
	// SQBCancel is sqb.SampleCancel.
	SQBCancel = sqb.SampleCancel
	// SQBState is sqb.SampleState.
	SQBState = sqb.SampleState
	// BodiesOf is sample.BodiesOf.
	BodiesOf = sample.BodiesOf
)
