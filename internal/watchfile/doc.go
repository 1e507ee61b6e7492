// Package watchfile keeps the parsed contents of a small configuration file
// (the merchant binding, the statement keys) current while the worker runs:
// it reads the file once at start, then again whenever its contents change,
// so an operator's edit needs no restart.
//
// It must never replace good contents with bad: a read or parse that fails
// leaves the last good value in force and is reported (logged by Watch, and
// returned by Refresh), so a half-written or mistyped file cannot switch a
// check off or on by surprise. It never logs the file's contents, which may
// hold secrets.
package watchfile
