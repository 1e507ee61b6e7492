// Package sample builds realistic callback envelopes for the registered
// payment channels (channels.All), for tests, the demo and simulations. It
// is production code: it must never import testing, so the demo linked
// into the consumer binary can use it. Each channel's builders are its
// Bodies, registered with the channel (allchannels; channelstest.Register
// for a test's own channel).
//
// Describe a trade with Trade (NewTrade fills realistic numbers), a refund
// with Refund, and one delivery of a notification with Delivery; the
// builders return the Kafka value (envelope JSON) that the upstream receiver
// would write. Redeliveries of one notification are the same call with a
// different Delivery.Attempt (or explicit NotifyTime, ID, Nonce): the bytes
// differ the way real retries differ (Alipay notify_time, WeChat envelope
// id, create_time, nonce and ciphertext), the decoded fingerprint does not.
//
// WeChat bodies are encrypted with AES-256-GCM under Delivery.APIv3Key
// (default APIv3Key, the fake key of the test vectors in docs/channels.md),
// so a decoder built with Keys() reads them. Delivery.Edit changes the payload
// before it is encoded, to build traps and broken messages.
//
// Builders panic on impossible input (a key that is not 32 bytes, a nonce
// that is not 12); they never return errors. Everything is deterministic:
// the same arguments give the same bytes.
package sample
