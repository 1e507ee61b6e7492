// Package allchannels registers every built-in payment channel (WeChat
// Pay, Alipay, Shouqianba) when it initialises: each channel package's
// callback Spec, statement Parser and sample Bodies, through the doors of
// pkg/internal/registry. It is the one place that lists the channels; a
// binary or test that needs them imports it for its side effect:
//
//	import _ "github.com/paycallback/paycallback/pkg/channels/allchannels"
//
// cmd/consumer, cmd/paycb-bench and package config (whose PAYCB_CHANNELS
// default is every registered channel) import it, and so does
// channelstest, so every test that builds callbacks has the channels.
// Without it the registries are empty and every channel is refused as
// unknown. It must never hold a channel's code of its own: a channel is
// its package.
package allchannels
