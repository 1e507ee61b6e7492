package main

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// printable returns s with every character a terminal would act on rather
// than show (control characters such as ESC, DEL, the C1 controls, bidi
// overrides, other non-printing runes, bytes that are not UTF-8) written as
// its Go escape (\x1b, \u202e), so text from outside (a dead letter's key,
// error, headers and body; a claim's last error) cannot move the cursor,
// recolour, retitle or rewrite an operator's terminal. Printable text,
// Chinese included, is unchanged. With keepNewlines, '\n' stays, for
// blocks printed on lines of their own.
func printable(s string, keepNewlines bool) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !strconv.IsPrint(r) && (r != '\n' || !keepNewlines) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case strconv.IsPrint(r) && r != utf8.RuneError, r == '\n' && keepNewlines:
			b.WriteRune(r)
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}
