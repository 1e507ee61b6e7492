// Package queryplan decides when the querier asks a channel about an open
// registration again, and when it stops: the schedule of the active query
// (主动查单), as pure logic over time, so it is tested without a clock,
// a channel or a database.
//
// The default schedule follows the channels' own guidance, each figure
// with its source in docs/querier.md: WeChat's
// "query if no callback within a minute, then at 1, 3, 5, 10 and 30 minutes
// after creation" for payments, and "every minute, after five minutes
// decaying to 5, 10, 20, 30 minutes" for refunds; Shouqianba's "the result
// of active polling is what counts"; and WeChat's "do not poll orders more
// than a month old".
//
// What this package must never do: decide that money moved. It turns a
// channel's answer outcome (channels.QueryOutcome) into the next time to
// ask and, for final outcomes, the registration's new status; whether an
// answer proves a payment is the channel package's verified reading, and
// the worker's claim is the only judge of whether it was settled.
package queryplan
