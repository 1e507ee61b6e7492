// Package buildinfo says which build of the worker is running: the module
// version, the VCS revision and the Go version, as the Go toolchain
// recorded them in the binary. It never fails: what the binary does not
// record reads "unknown".
package buildinfo
