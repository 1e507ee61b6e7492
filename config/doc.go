// Package config holds the worker's configuration: one Config struct with
// documented defaults, validation, loading from a YAML file, the environment
// and command-line flags (in that order of precedence), and secret masking.
//
// Only this package and cmd/ read the environment or flags; everything else
// receives a Config (or the parts of it it needs). This package must never
// print, log or return in an error the value of a secret: the database DSN's
// password and the WeChat APIv3 keys are held in Secret and DSN, whose every
// printed form is masked.
//
// Of the project's packages it imports only pure ones: pkg/channels for the
// domain's facts it validates against (the registered channels and their
// merchant fields, the APIv3 key length), which a depguard rule keeps free
// of anything that talks to a database. It holds the paths of the files
// other packages own (the statement keys, the merchant binding) and never
// parses them: Validate checks them through the FileChecks its caller
// gives it, and the wiring loads them through their packages
// (internal/statementauth, internal/merchantbinding).
package config
