package config

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var updateDocs = flag.Bool("update", false, "rewrite the settings table in docs/contract.md")

const (
	docFile     = "../docs/contract.md"
	tableBegin  = "<!-- settings table: generated from config/settings.go by `go test ./config -run TestContractDocSettings -update` -->"
	tableEnd    = "<!-- end of settings table -->"
	placeholder = "—"
)

// settingsTable renders the settings table as Markdown: the one list of
// variables, flags, YAML paths, defaults and bounds, so the document cannot
// drift from the code.
func settingsTable() string {
	var b strings.Builder
	b.WriteString("| variable | flag | YAML | meaning | default | bounds |\n|---|---|---|---|---|---|\n")
	code := func(s string) string {
		if s == "" {
			return placeholder
		}
		return "`" + s + "`"
	}
	def := Default()
	def.Finalize()
	for i := range settings {
		s := &settings[i]
		env := code(s.env)
		if s.file {
			env += " or `" + s.env + "_FILE`"
		}
		flagName := placeholder
		if s.flag != "" {
			flagName = "`--" + s.flag + "`"
		}
		value := s.defaultText()
		switch s.path {
		case "kafka.dlq_topic":
			value = "<topic>.dlq"
		case "settled.topic":
			value = "<topic>.settled"
		case "db.dsn", "wechat.apiv3_key", "kafka.sasl.password":
			value = ""
		}
		bounds := placeholder
		switch {
		case s.min != "" || s.max != "":
			bounds = s.min + " .. " + s.max
		case s.values() != nil:
			bounds = strings.Join(s.values(), ", ")
			if strings.HasPrefix(bounds, ", ") {
				bounds = "empty, " + bounds[2:]
			}
		}
		b.WriteString("| " + env + " | " + flagName + " | `" + s.path + "` | " + s.usage + " | " + code(value) + " | " + bounds + " |\n")
	}
	return b.String()
}

// TestContractDocSettings keeps the settings table in docs/contract.md
// identical to the settings table in the code.
func TestContractDocSettings(t *testing.T) {
	raw, err := os.ReadFile(docFile)
	require.NoError(t, err)
	doc := string(raw)
	begin := strings.Index(doc, tableBegin)
	end := strings.Index(doc, tableEnd)
	require.True(t, begin >= 0 && end > begin, "docs/contract.md lacks the settings table markers")
	want := tableBegin + "\n\n" + settingsTable() + "\n"
	if *updateDocs {
		doc = doc[:begin] + want + doc[end:]
		require.NoError(t, os.WriteFile(docFile, []byte(doc), 0o644)) //nolint:gosec // a document
		return
	}
	assert.Equal(t, want, doc[begin:end], "docs/contract.md's settings table is stale: run go test ./config -run TestContractDocSettings -update")
}
