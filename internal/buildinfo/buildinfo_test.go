package buildinfo_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/paycallback/paycallback/internal/buildinfo"
)

// TestRead: a test binary records its Go version and a module version; the
// formatted line carries all three parts.
func TestRead(t *testing.T) {
	info := buildinfo.Read()
	assert.Equal(t, runtime.Version(), info.GoVersion)
	assert.NotEmpty(t, info.Version)
	assert.NotEmpty(t, info.Revision)
	s := info.String()
	for _, part := range []string{info.Version, "revision " + info.Revision, info.GoVersion} {
		assert.Contains(t, s, part)
	}
}
