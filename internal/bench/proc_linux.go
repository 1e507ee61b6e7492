package bench

import (
	"os/exec"
	"syscall"
)

// setProcAttr makes the kernel kill the subprocess when the harness dies,
// so a crashed or killed benchmark never leaves a broker or worker behind.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
