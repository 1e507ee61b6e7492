// Package jsonscan decodes the hot JSON shapes (the envelope, and the
// channels' notifications and resources) in one pass without reflection.
// It handles the common case only: plain keys, string and integer values,
// no null, no surrogate escapes, valid UTF-8, each known key at most once.
// On anything else a Scanner reports false and the caller decodes with
// encoding/json, so the outcome is always what encoding/json gives; the
// fast-path fuzz targets of package channels and of each channel package
// hold their fast paths to that. Being internal to pkg/channels, it serves
// only the channel packages.
package jsonscan
