package buildinfo

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestLinkTimeValuesWin: a version and revision set with -ldflags -X
// replace what the toolchain recorded (nothing, in a container build).
func TestLinkTimeValuesWin(t *testing.T) {
	defer func(v, r string) { version, revision = v, r }(version, revision)
	version, revision = "v1.4.0", "0123abc"
	info := Read()
	assert.Equal(t, "v1.4.0", info.Version)
	assert.Equal(t, "0123abc", info.Revision)
}
