package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// commandPaths lists every command and every verb as argument paths.
func commandPaths() [][]string {
	var paths [][]string
	for _, c := range commands() {
		paths = append(paths, []string{c.name})
		for _, v := range c.verbs {
			paths = append(paths, []string{c.name, v.name})
		}
	}
	return paths
}

// TestEveryHelp walks every command's and verb's help, with an empty
// environment (no DSN, no broker): it exits 0 and shows the summary, the
// usage, the command's own flags only and its exit statuses.
func TestEveryHelp(t *testing.T) {
	for _, path := range commandPaths() {
		name := strings.Join(path, " ")
		for _, args := range [][]string{
			append(append([]string(nil), path...), "--help"),
			append(append([]string(nil), path...), "-h"),
			append([]string{"help"}, path...),
		} {
			t.Run(strings.Join(args, "_"), func(t *testing.T) {
				var out, errOut bytes.Buffer
				err := run(context.Background(), args, &out, &errOut, noEnv)
				require.NoError(t, err, "stderr: %s", errOut.String())
				help := out.String()
				c := lookupCommand(t, path)
				assert.True(t, strings.HasPrefix(help, "consumer "+name+": "+c.summary+"\n"), help)
				assert.Contains(t, help, "\nusage: consumer "+name)
				assert.Contains(t, help, "\nexit status:\n  0  success\n")
				assert.Contains(t, help, "\n  2  ")
				if c.config != configNone {
					assert.Contains(t, help, "\n  1  ")
				}
				for _, e := range c.exits {
					assert.Contains(t, help, fmt.Sprintf("\n  %d  %s\n", e.code, e.meaning))
				}
				if c.config == configListed {
					assert.Contains(t, help, "--db-dsn")
				} else {
					assert.NotContains(t, help, "--kafka-brokers string", "configuration flags are summarised, not listed")
				}
				if c.config == configSummary {
					assert.Contains(t, help, "consumer help config")
				}
				for _, v := range c.verbs {
					assert.Regexp(t, `\n  `+v.name+` +`+regexpQuote(v.summary), help)
				}
				assert.Empty(t, errOut.String())
			})
		}
	}
}

func regexpQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\.+*?()|[]{}^$`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func lookupCommand(t *testing.T, path []string) command {
	t.Helper()
	cs := commands()
	var c command
	for _, p := range path {
		var ok bool
		c, ok = find(cs, p)
		require.True(t, ok, p)
		cs = c.verbs
	}
	return c
}

// TestHelpListsCommandsAndExitStatuses: `consumer help` lists every command
// and verb with its summary, and the five exit statuses.
func TestHelpListsCommandsAndExitStatuses(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		var out, errOut bytes.Buffer
		require.NoError(t, run(context.Background(), args, &out, &errOut, noEnv))
		for _, path := range commandPaths() {
			assert.Contains(t, out.String(), "  "+strings.Join(path, " ")+" ", "%v lists %v", args, path)
		}
		for code := 0; code <= 4; code++ {
			assert.Contains(t, out.String(), fmt.Sprintf("\n  %d  ", code))
		}
	}
	for _, args := range [][]string{{"help", "config"}, {"help", "config", "--help"}, {"help", "config", "-h"}, {"help", "--help", "config"}} {
		var out, errOut bytes.Buffer
		require.NoError(t, run(context.Background(), args, &out, &errOut, noEnv), "%v: %s", args, errOut.String())
		assert.Contains(t, out.String(), "--db-dsn", "%v", args)
		assert.Contains(t, out.String(), "PAYCB_KAFKA_BROKERS", "%v", args)
		assert.Empty(t, errOut.String(), "%v", args)
	}
	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"help", "run", "--help"}, &out, &errOut, noEnv))
	assert.True(t, strings.HasPrefix(out.String(), "consumer run: "), out.String())
}

// TestEverySummaryAndUsageIsDescribed: no command is registered without a
// summary and a description.
func TestEverySummaryAndUsageIsDescribed(t *testing.T) {
	for _, path := range commandPaths() {
		c := lookupCommand(t, path)
		assert.NotEmpty(t, c.summary, "%v", path)
		assert.NotContains(t, c.summary, "\n", "%v", path)
		assert.NotEmpty(t, c.description, "%v", path)
		assert.NotEqual(t, c.setup == nil, len(c.verbs) == 0, "%v: setup or verbs, not both", path)
	}
}
