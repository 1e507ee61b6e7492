// Package consumer is the Kafka side of the worker: a consumer group whose
// generations run one strictly ordered loop per assigned partition, each
// taking batches of its partition's messages (a single message is a batch
// of one) through the pipeline (a Handler: internal/pipeline), the offset
// committer, the lag, the group membership, readiness and the partitions'
// status.
//
// The offset rule lives here, in one place (partition.go, whose loops offer
// offsets to the generation's committer, committer.go, which commits them
// in the background and on revoke and shutdown): an offset is committed
// only after the message before it has a durable outcome — claimed
// and settled (by this worker or, through the fence, by another), a
// duplicate, an ignored event, or a dead letter acknowledged by all in-sync
// replicas. A message whose outcome is not durable is retried in place, with
// bounded, jittered backoff, and nothing after it on its partition is
// fetched or committed: a failing message holds up only its own partition.
//
// The package never decides an outcome, "already handled" least of all:
// the pipeline reports which messages are done (their outcome durable),
// and the claim store's unique index alone decides a duplicate.
package consumer
