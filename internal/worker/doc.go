// Package worker is the Kafka side of the worker: a consumer group whose
// generations run one strictly ordered loop per assigned partition, the
// pipeline that takes each batch of a partition's messages (a single
// message is a batch of one) through decode → acquire → settle, or
// dead-letter (through internal/deadletters), and the orphan sweeper.
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
// The package never decides "already handled" itself: the claim store's
// unique index does.
package worker
