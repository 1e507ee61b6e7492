// Command readfloor is the benchmark's paced read floor: it reads every
// partition of a topic as the worker does (one kafka-go reader per
// partition, with the worker's default fetch settings), decodes each
// message with the channel decoders, and exits once it has read as many
// messages as it was told. It writes nothing anywhere, and must never: what
// it costs is what the worker pays per message before any claim or
// statement.
//
// The harness (internal/bench) runs it as a process of its own, beside the
// consumer rather than inside the harness, so that its CPU time (read from
// its rusage when it exits) holds none of the publisher's.
//
//	readfloor -brokers 127.0.0.1:9092 -topic T -messages N
//
// Its CPU is counted from its start, as the consumer's is: the readers
// start at each partition's first offset, so a publisher may start at
// once. It exits 0 after N messages, 1 on any error (a message that does
// not decode is one: the paced streams carry none).
package main
