package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHelpPrintsAndSucceeds: --help (and -h) is a request, not a usage
// error: the usage goes to stdout and the exit status is 0.
func TestHelpPrintsAndSucceeds(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		var out, errOut bytes.Buffer
		require.NoError(t, run(context.Background(), []string{arg}, &out, &errOut), arg)
		assert.Contains(t, out.String(), "usage: kfake-broker", arg)
		assert.Contains(t, out.String(), "-port", arg)
		assert.Contains(t, out.String(), "exit status:", arg)
		assert.Empty(t, errOut.String(), arg)
	}
	var out, errOut bytes.Buffer
	require.Error(t, run(context.Background(), []string{"--no-such-flag"}, &out, &errOut))
	assert.Empty(t, out.String())
}
