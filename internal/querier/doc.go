// Package querier is the active query's loop (consumer query run): it
// leases the registrations due to be asked about, asks each channel within
// the merchant's budget, reads the answer with the channel's own
// verification, publishes the answers that prove a payment or refund for
// the worker to settle through the claim, and records each answer and
// when to ask next (internal/queryplan).
//
// Its parts are interfaces (Work, Asker, Reader, Publisher, Budget), so
// the loop is one piece of logic whatever stores, channels and broker are
// behind them; the production ones are the database's registrations and
// budget rows, the channels' HTTPS APIs and the input topic.
//
// What this package must never do: post money or decide that a
// registration succeeded. A proving answer is published, and only the
// worker's claim and settlement make it true (and the registration
// SUCCEEDED); the querier asks again later if they have not. It never
// sends a query without a token of the merchant's budget, and never on an
// error of the budget's store.
package querier
