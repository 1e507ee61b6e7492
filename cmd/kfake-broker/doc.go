// Command kfake-broker runs an in-process Kafka cluster (franz-go's kfake,
// one broker) as a process of its own, so that benchmarks can measure the
// worker's memory apart from the broker's and soak tests can kill either one.
//
// It listens on 127.0.0.1 at --port (0 picks a free port), seeds the topics
// named by --topic name:partitions (repeatable), prints the broker address
// as the first line on stdout, and runs until SIGTERM or SIGINT. It keeps
// everything in memory: nothing survives the process.
package main
