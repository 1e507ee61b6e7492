package statements_test

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/statements"
)

// repeatReader reads s n times over without holding more than s.
type repeatReader struct {
	s   string
	n   int
	off int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && r.n > 0 {
		k := copy(p[n:], r.s[r.off:])
		n += k
		if r.off += k; r.off == len(r.s) {
			r.off, r.n = 0, r.n-1
		}
	}
	return n, nil
}

// TestReadLinesLimits: each limit refuses, by line number and naming the
// limit, the first line past it, with ErrLimit and ErrFormat; a file at
// each limit is read whole.
func TestReadLinesLimits(t *testing.T) {
	tests := []struct {
		name    string
		r       io.Reader
		lines   int
		wantErr string
	}{
		{"MaxLines lines", &repeatReader{s: "x\n", n: statements.MaxLines}, statements.MaxLines, ""},
		{
			"one line more", &repeatReader{s: "x\n", n: statements.MaxLines + 1}, statements.MaxLines,
			"line 300001: more than 300000 lines",
		},
		{"a run of MaxBlankRun blank lines", strings.NewReader("a\n" + strings.Repeat(" \r\n", statements.MaxBlankRun) + "b"), 1002, ""},
		{
			"one blank line more", io.MultiReader(strings.NewReader("a\n"), &repeatReader{s: "\t\n", n: 1 << 20}), 1001,
			"line 1002: more than 1000 blank lines in a row",
		},
		{"a line of MaxLineBytes, CR included", strings.NewReader(strings.Repeat(",", statements.MaxLineBytes-1) + "\r\nb"), 2, ""},
		{"a line longer, without an end", &repeatReader{s: ",", n: 100 << 20}, 0, "line 1: longer than 65536 bytes"},
		{
			"more than MaxTextBytes", &repeatReader{s: strings.Repeat(",", 1<<16-1) + "\n", n: statements.MaxTextBytes>>16 + 1}, statements.MaxTextBytes >> 16,
			"line 4097: more than 268435456 bytes of text",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seen := 0
			err := statements.ReadLines(tc.r, func(int, string) error { seen++; return nil })
			assert.Equal(t, tc.lines, seen)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, statements.ErrLimit)
			require.ErrorIs(t, err, statements.ErrFormat)
			require.EqualError(t, err, tc.wantErr+": "+statements.ErrLimit.Error()+": "+statements.ErrFormat.Error())
		})
	}
}

// TestLimitRatio: a stream that grows more than MaxCompressionRatio times
// is refused once RatioFromBytes have come out, long before its end; one
// that grows ten times, as a bill does, is read whole, and so is a small
// one that grows as it likes; nothing passes MaxTextBytes uncompressed.
func TestLimitRatio(t *testing.T) {
	read := func(r io.Reader, compressed func() int64) (int64, error) {
		return io.Copy(io.Discard, statements.LimitRatio(r, "gzip stream", compressed))
	}
	fixed := func(n int64) func() int64 { return func() int64 { return n } }

	n, err := read(&repeatReader{s: strings.Repeat("\n", 1<<16), n: 1 << 10}, fixed(64<<10))
	require.ErrorIs(t, err, statements.ErrLimit)
	require.ErrorIs(t, err, statements.ErrFormat)
	require.ErrorContains(t, err, "gzip stream: ")
	require.ErrorContains(t, err, " bytes uncompressed from 65536, more than 100 times")
	assert.LessOrEqual(t, n, int64(statements.RatioFromBytes+64<<10), "refused once past RatioFromBytes")

	n, err = read(&repeatReader{s: strings.Repeat("\n", 1<<16), n: statements.RatioFromBytes >> 16}, fixed(1))
	require.NoError(t, err, "a small file compresses as it likes")
	assert.Equal(t, int64(statements.RatioFromBytes), n)

	src, taken := statements.CountingReader(&repeatReader{s: strings.Repeat("x", 1<<16), n: 32 << 4})
	n, err = read(src, func() int64 { return taken() / 10 })
	require.NoError(t, err, "a bill compresses about ten times")
	assert.Equal(t, int64(32<<20), n)

	n, err = read(&repeatReader{s: strings.Repeat("x", 1<<16), n: statements.MaxTextBytes>>16 + 1}, fixed(statements.MaxTextBytes))
	require.ErrorIs(t, err, statements.ErrLimit)
	require.ErrorContains(t, err, "gzip stream: more than 268435456 bytes uncompressed")
	assert.LessOrEqual(t, n, int64(statements.MaxTextBytes+1<<16))
}
