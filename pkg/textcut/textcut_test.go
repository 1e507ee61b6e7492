package textcut_test

import (
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"github.com/paycallback/paycallback/pkg/textcut"
)

func TestTruncate(t *testing.T) {
	for _, c := range []struct {
		name, in string
		n        int
		want     string
	}{
		{"short", "abc", 5, "abc"},
		{"exact", "abcde", 5, "abcde"},
		{"ascii", "abcdef", 5, "abcde"},
		{"never splits a rune", "ab商户", 4, "ab"},
		{"keeps a whole rune", "ab商户", 5, "ab商"},
		{"four-byte rune", "a😀b", 4, "a"},
		{"invalid replaced", "a\xffb", 5, "a?b"},
		{"invalid run replaced once", "a\xff\xfe\xfdb", 5, "a?b"},
		{"invalid before the limit does not empty it", "\xff" + strings.Repeat("a", 10), 4, "?aaa"},
		{"split rune at the end of the input", "abc\xe5\x95", 10, "abc?"},
		{"zero", "abc", 0, ""},
		{"negative", "abc", -1, ""},
		{"empty", "", 3, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, textcut.Truncate(c.in, c.n))
		})
	}
}

func TestEllipsis(t *testing.T) {
	assert.Equal(t, "abc", textcut.Ellipsis("abc", 3))
	assert.Equal(t, "ab…", textcut.Ellipsis("abcd", 2))
	assert.Equal(t, "ab…", textcut.Ellipsis("ab商户", 4), "never splits a rune")
	assert.Equal(t, "a?b", textcut.Ellipsis("a\xffb", 3))
}

// TestTruncateProperties pins what every caller relies on, over random
// byte strings (valid and not) and limits: the result is valid UTF-8, at
// most n bytes, a prefix of the input with invalid runs replaced, and the
// longest such prefix that ends on a character boundary.
func TestTruncateProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	alphabet := []string{"a", "Z", " ", "é", "商", "😀", "\xff", "\xe5", "\x95", "\xf0\x9f"}
	for range 20000 {
		var b strings.Builder
		for range rng.Intn(24) {
			b.WriteString(alphabet[rng.Intn(len(alphabet))])
		}
		in := b.String()
		n := rng.Intn(32) - 2
		got := textcut.Truncate(in, n)
		valid := strings.ToValidUTF8(in, textcut.Replacement)
		if !utf8.ValidString(got) {
			t.Fatalf("Truncate(%q, %d) = %q: not valid UTF-8", in, n, got)
		}
		if len(got) > max(n, 0) {
			t.Fatalf("Truncate(%q, %d) = %q: %d bytes", in, n, got, len(got))
		}
		if !strings.HasPrefix(valid, got) {
			t.Fatalf("Truncate(%q, %d) = %q: not a prefix of %q", in, n, got, valid)
		}
		if len(got) < len(valid) {
			_, size := utf8.DecodeRuneInString(valid[len(got):])
			if len(got)+size <= n {
				t.Fatalf("Truncate(%q, %d) = %q: the next character fits too", in, n, got)
			}
		}
		e := textcut.Ellipsis(in, n)
		if !utf8.ValidString(e) || len(e) > max(n, 0)+len("…") {
			t.Fatalf("Ellipsis(%q, %d) = %q", in, n, e)
		}
	}
}
