package textcut

import (
	"strings"
	"unicode/utf8"
)

// Replacement stands for each run of bytes of s that is not valid UTF-8 in
// what Truncate and Ellipsis return.
const Replacement = "?"

// Truncate returns s cut to at most n bytes on a character boundary, each
// run of invalid UTF-8 in s replaced by Replacement first: the result is
// valid UTF-8, at most n bytes (none when n <= 0) and a prefix of that
// replaced s.
func Truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, Replacement)
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// Ellipsis is Truncate with a mark that something was cut: when s (invalid
// UTF-8 replaced) is longer than n bytes, its first n bytes at most, on a
// character boundary, followed by "…" (3 bytes more); otherwise s, invalid
// UTF-8 replaced.
func Ellipsis(s string, n int) string {
	v := strings.ToValidUTF8(s, Replacement)
	if len(v) <= n {
		return v
	}
	return Truncate(v, n) + "…"
}
