//go:build !linux

package bench

import "os/exec"

// setProcAttr does nothing here: only Linux can tie a child's life to its
// parent's. Subprocesses are still killed on every exit path of Run.
func setProcAttr(*exec.Cmd) {}
