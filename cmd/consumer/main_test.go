package main

import (
	"bytes"
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func noEnv(string) (string, bool) { return "", false }

func TestDemoRunsAndItsInvariantsHold(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	err := run(ctx, []string{"demo", "--trades", "60", "--seed", "4"}, &out, &errOut, noEnv)
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	assert.Contains(t, out.String(), "invariants: all hold")
	assert.Contains(t, out.String(), "dead letters by kind: conflict=1 malformed=1")
	assert.Contains(t, out.String(), "demo: done")
	// 60 trades: two barcode payments without a callback, both recovered
	// by the in-process querier.
	assert.Contains(t, out.String(), "recovered by query: 2 of 2 barcode payments registered without a callback (")
	// The last progress line says everything was committed, however short
	// the run (60 trades take less than the progress interval).
	progress := regexp.MustCompile(`demo: +(\d+) of (\d+) messages committed\n`).FindAllStringSubmatch(out.String(), -1)
	require.NotEmpty(t, progress, out.String())
	lastLine := progress[len(progress)-1]
	assert.Equal(t, lastLine[2], lastLine[1], "the last progress line: %q", lastLine[0])
}

func TestUsageAndConfigurationErrors(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
		stderr  string
	}{
		{"no command", nil, nil, "usage", ""},
		{"unknown command", []string{"frobnicate"}, nil, "usage", `unknown command "frobnicate"`},
		{"run without a DSN", []string{"run"}, nil, "PAYCB_DB_DSN", ""},
		{"bad duration", []string{"run"}, map[string]string{"PAYCB_DB_DSN": "u:p@tcp(db:3306)/x", "PAYCB_ORPHAN_AFTER": "soon"}, "PAYCB_ORPHAN_AFTER", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			err := run(context.Background(), tc.args, &out, &errOut, lookup)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
			assert.NotContains(t, err.Error()+errOut.String(), "u:p@", "the DSN password is never printed")
			if tc.stderr != "" {
				assert.Contains(t, errOut.String(), tc.stderr)
			}
		})
	}
}
