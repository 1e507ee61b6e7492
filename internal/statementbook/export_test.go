package statementbook

// RecordStatementResult exposes recordStatementResult to the tests, which
// need runs at times of their choosing.
var RecordStatementResult = recordStatementResult
