// Package inprocess starts an in-process Kafka (kfake) for the demo, the
// kfake-broker command and the tests. It is the one package outside test
// files and test helpers that imports kfake (a depguard rule keeps it so):
// the worker's run path and the production group and topic operations in
// internal/kafkaops never link it. The demo is part of the consumer binary,
// so the binary still links kfake through `consumer demo`.
package inprocess
