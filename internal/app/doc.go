// Package app wires the worker together: database, claim store, channel
// decoder, settlement, Kafka consumer group, dead-letter writer, orphan
// sweeper and the admin HTTP server. `consumer run`, `consumer demo` and the
// end-to-end tests all start the worker through Main, exactly as production
// does (tests through Start and Close, by apptest.MustRun). Only cmd/ and
// this package know every part.
package app
