// Package channelkeys reads PAYCB_CHANNEL_PUBLIC_KEYS_FILE: the channels'
// public keys the worker verifies query answers with (docs/queries.md),
// a YAML list whose entries each name a PEM key file (relative paths
// relative to the YAML file). Each entry is parsed by its channel's
// channels.Spec.ParsePublicKey, so this package knows no channel. The
// file, and every key file it names, is re-read when it changes
// (watchfile); a change that does not parse leaves the last good keys in
// force.
//
// It must never let a key in on trust: a file, or a key file it names, that
// does not parse is refused whole (at start, a configuration error; while
// running, the last good keys stay), and it never logs a key's bytes.
package channelkeys
