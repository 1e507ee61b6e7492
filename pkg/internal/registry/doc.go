// Package registry holds the doors through which channels are added to the
// registries of packages channels (the callback Spec), statements (the
// statement Parser) and sample (the sample Bodies) at run time. Being
// internal to pkg, it can be imported only by the packages under pkg; the
// ones that go through it are allchannels, whose init registers the
// built-in channels, and channelstest, whose Register needs a testing.TB.
// Each registry sets its door when it initialises, so a package that
// imports the registry's package finds the door set.
//
// So no other code can register a channel, by accident or otherwise: the
// channels a binary understands are the ones allchannels lists.
package registry
