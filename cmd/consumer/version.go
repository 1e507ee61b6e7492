package main

import (
	"context"
	"fmt"

	"github.com/paycallback/paycallback/internal/buildinfo"
)

// cmdVersion prints the build: "consumer VERSION (revision REV, GOVERSION)".
func cmdVersion(_ context.Context, env *environment, args []string) error {
	if len(args) > 0 {
		fmt.Fprintf(env.stderr, "consumer version: unexpected arguments %q\n", args)
		return errUsage
	}
	fmt.Fprintf(env.stdout, "consumer %s\n", buildinfo.Read())
	return nil
}
