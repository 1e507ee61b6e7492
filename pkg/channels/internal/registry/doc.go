// Package registry is the one door through which a channel is added to
// package channels' registry at run time. Being internal to pkg/channels,
// it can be imported only by pkg/channels and the packages under it; the
// one that does is channelstest, whose Register needs a testing.TB. So no
// production code can register a channel, by accident or otherwise: the
// channels a binary understands are channels' built-in list.
package registry
