// Package fakechannel holds fake payment-channel API servers for the
// active query (主动查单): one httptest TLS server per channel (WeChat Pay
// v3, the Alipay gateway, Shouqianba upay) that checks each request's
// signature with the public half of a test merchant key and refuses a bad
// one as the channel does, answers scripted sequences per order or refund
// (NOTPAY then SUCCESS, USERPAYING for ever, rate limits, 500s, delays
// longer than a client's timeout, not found), signs its answers with a
// test platform key where the channel signs them, can forge (another key)
// or age (a timestamp outside the window) an answer, and records every
// request it received.
//
// The answers are the channel packages' sample builders' (wechat,
// alipay and sqb sample_query.go), so what a fake answers is what the
// channels' answer readers accept.
//
// It is test machinery, for tests and the demo: it never imports testing
// (a test passes its testing.TB as a TB), and the worker and the querier
// never link it (depguard rule fakechannel). Nothing here is fit to talk
// to a real channel.
package fakechannel
