// Package querytest builds query-answer messages (content type
// channels.ContentTypeQuery) as the querier publishes them, for the tests
// of the worker that reads them: the channels' answers signed with the
// published test keys in the channel packages' testdata (the A.3 key as
// the trusted WeChat platform and Alipay key, the A.1 key as a forger's),
// carried in a query envelope, which the caller signs with its statement
// key. Like channelstest it is production code for tests only, and as pure
// as pkg/channels: it opens nothing and imports nothing of the worker's.
//
// It must never be imported by production code paths: its keys are
// published test keys, trusted by nothing but the tests.
package querytest
