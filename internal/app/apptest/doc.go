// Package apptest starts the worker for tests exactly as production does,
// through app.Main (Start, then Close), so that no test writes its own
// "run Main and wait until it is ready".
package apptest
