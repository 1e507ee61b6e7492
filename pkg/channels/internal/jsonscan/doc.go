// Package jsonscan decodes the hot JSON shapes (the envelope, and the
// channels' notifications and resources) in one pass without reflection.
// It handles the common case only: plain keys, string and integer values,
// no null, no surrogate escapes, valid UTF-8, each key at most once in its
// object in any case. On anything else a Scanner reports false and the
// caller decodes with encoding/json, so the outcome is always what
// encoding/json gives; the fast-path fuzz targets of package channels and
// of each channel package hold their fast paths to that.
//
// FirstRepeat finds, in any JSON document, a member name that repeats
// within its object, exactly or differing only in case: encoding/json
// would read such a document as one member (the last value winning) where
// another reader may take the first, so the standard path refuses it and
// every document from outside is read one way only.
//
// Being internal to pkg/channels, it serves only the channel packages.
package jsonscan
