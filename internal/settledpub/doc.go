// Package settledpub publishes the settled events that settlement wrote to
// the outbox (ss_settled_outbox) to the settled-event topic
// (docs/contract.md, "Output: settled events"), and marks them published.
//
// Two callers publish: the Publisher, told by the pipeline of each
// settlement right after its commit (Notify), publishes that settlement's
// rows at once; the Sweeper publishes, on a timer, the rows a crash, a
// broker outage or a full queue left behind, once they are older than a
// grace period. Both keep one rule, which holds a trade's trade_seq
// increasing on the topic: a row is published only when every earlier
// trade_seq of its trade is published or published in the same write
// (publishable). A sweeper claims its rows with a lease first, so two
// sweepers never publish one row within a lease.
//
// What this package must never do: block or fail the pipeline (Notify
// drops what does not fit its queue; the outbox row is the durable
// outcome, the sweeper publishes it), create a topic, or change a value
// (the stored bytes are published as they are). Delivery is at least
// once: a publish acknowledged but not marked is published again.
package settledpub
