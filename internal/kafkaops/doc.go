// Package kafkaops holds the Kafka chores that sit beside the consumer:
// producing a stream, reading a topic back, and reading a group's committed
// offsets against the partitions' ends. It never commits offsets on a live
// group. The in-process broker (kfake) for the demo and tests is
// internal/kafkaops/inprocess: this package never links kfake.
package kafkaops
