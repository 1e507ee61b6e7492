// Package kafkaops holds the Kafka chores that sit beside the consumer:
// starting an in-process broker (kfake) for the demo and tests, producing a
// stream, reading a topic back, and reading a group's committed offsets
// against the partitions' ends. It never commits offsets on a live group.
package kafkaops
