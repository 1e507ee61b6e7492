package registry

// Channel adds a channels.Spec to the channel registry and returns the
// function that removes it again; package channels sets it at init. It
// fails on a spec that does not validate or whose code is registered
// already.
var Channel func(spec any) (remove func(), err error)

// Parser adds a statements.Parser for the channel code to the statement
// parsers and returns the function that removes it again; package
// statements sets it at init. It fails on a parser without a Parse or
// Refunds, or a code that has one already.
var Parser func(code string, parser any) (remove func(), err error)

// Bodies adds a sample.Bodies for the channel code to the sample builders
// and returns the function that removes it again; package sample sets it
// at init. It fails on builders missing or a code that has them already.
var Bodies func(code string, bodies any) (remove func(), err error)
