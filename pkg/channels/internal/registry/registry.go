package registry

// Register adds a channels.Spec to the registry and returns the function
// that removes it again; package channels sets it at init. It fails on a
// spec that does not validate or whose code is registered already.
var Register func(spec any) (remove func(), err error)
