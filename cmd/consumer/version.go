package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/paycallback/paycallback/internal/buildinfo"
)

func versionCmd() command {
	return command{
		name:        "version",
		summary:     "print the version, the VCS revision and the Go version",
		description: "Prints \"consumer VERSION (revision REV, GOVERSION)\". Reads no configuration.",
		config:      configNone,
		setup:       func(*flag.FlagSet) runFunc { return cmdVersion },
	}
}

// cmdVersion prints the build: "consumer VERSION (revision REV, GOVERSION)".
func cmdVersion(_ context.Context, env *environment, _ []string) error {
	fmt.Fprintf(env.stdout, "consumer %s\n", buildinfo.Read())
	return nil
}
