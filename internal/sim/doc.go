// Package sim is the seeded fault simulation: a seed decides a stream
// (demo.Generate with that seed) and a fault schedule — worker crashes at the
// pipeline's fault points, killed database connections, broker request errors
// injected through kfake's control hooks, rebalances with extra group members
// — and Run plays it against real workers (app.Main, exactly as production
// starts them), an in-process kfake broker and MariaDB, runs to quiescence and
// checks the invariants (internal/invariant).
//
// The stream and the schedule are a pure function of the seed; the timing of
// goroutines, the broker and the database is not, so a failing seed is re-run
// several times to see whether it reproduces. The package is for tests: it
// never touches a database or a broker it was not given.
package sim
