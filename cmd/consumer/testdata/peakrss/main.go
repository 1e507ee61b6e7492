// Command peakrss runs a command and writes its peak RSS, in bytes, to
// the file PEAKRSS_OUT names, passing its standard streams and its exit
// status through. The statement import's memory test runs the consumer
// through it: a child the (large, race-instrumented) test process starts
// itself inherits the test's peak RSS in its own ru_maxrss, for Go starts
// children with vfork and Linux counts the memory the child shared until
// exec. This launcher is small, so what it adds is a few MiB.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: PEAKRSS_OUT=FILE peakrss COMMAND [ARGS...]")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...) //nolint:gosec // the test's own command
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		fmt.Fprintln(os.Stderr, "peakrss:", err)
		os.Exit(2)
	}
	usage, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		fmt.Fprintln(os.Stderr, "peakrss: no rusage")
		os.Exit(2)
	}
	// ru_maxrss is in KiB on Linux.
	if err := os.WriteFile(os.Getenv("PEAKRSS_OUT"), []byte(strconv.FormatInt(usage.Maxrss<<10, 10)), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "peakrss:", err)
		os.Exit(2)
	}
	os.Exit(cmd.ProcessState.ExitCode())
}
