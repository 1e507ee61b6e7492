package channelstest

import "github.com/paycallback/paycallback/pkg/channels/sample"

// The builders of package sample, under the names the tests know them by.

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
	// WeChatPayment is sample.WeChatPayment.
	WeChatPayment = sample.WeChatPayment
	// WeChatRefund is sample.WeChatRefund.
	WeChatRefund = sample.WeChatRefund
	// WeChatBody is sample.WeChatBody.
	WeChatBody = sample.WeChatBody
	// EncryptWeChat is sample.EncryptWeChat.
	EncryptWeChat = sample.EncryptWeChat
	// AlipayPayment is sample.AlipayPayment.
	AlipayPayment = sample.AlipayPayment
	// AlipayFinished is sample.AlipayFinished.
	AlipayFinished = sample.AlipayFinished
	// AlipayWaitBuyerPay is sample.AlipayWaitBuyerPay.
	AlipayWaitBuyerPay = sample.AlipayWaitBuyerPay
	// AlipayUnpaidClose is sample.AlipayUnpaidClose.
	AlipayUnpaidClose = sample.AlipayUnpaidClose
	// AlipayRefund is sample.AlipayRefund.
	AlipayRefund = sample.AlipayRefund
	// AlipayForm is sample.AlipayForm.
	AlipayForm = sample.AlipayForm
	// Yuan is sample.Yuan.
	Yuan = sample.Yuan
	// SQBPayment is sample.SQBPayment.
	SQBPayment = sample.SQBPayment
	// SQBRefund is sample.SQBRefund.
	SQBRefund = sample.SQBRefund
	// SQBCancel is sample.SQBCancel.
	SQBCancel = sample.SQBCancel
	// SQBState is sample.SQBState.
	SQBState = sample.SQBState
	// BodiesOf is sample.BodiesOf.
	BodiesOf = sample.BodiesOf
)
