package main

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVersion: `consumer version` prints the build on one line and needs
// no database, broker or configuration; extra arguments are a usage error.
func TestVersion(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"version"}, &out, &errOut, none))
	line := out.String()
	assert.True(t, strings.HasPrefix(line, "consumer "), "%q", line)
	assert.Contains(t, line, "revision ")
	assert.Contains(t, line, runtime.Version())
	assert.Equal(t, 1, strings.Count(line, "\n"))

	err := run(context.Background(), []string{"version", "extra"}, &out, &errOut, none)
	require.ErrorIs(t, err, errUsage)
	assert.Equal(t, 2, exitCode(err))
}
