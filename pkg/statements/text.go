package statements

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxLineBytes is the longest line a statement file may hold, its line
// ending included: a WeChat or Alipay row is well under a kilobyte and a
// Shouqianba query response a few; a longer line is no statement, and is
// refused before it is split into cells.
const MaxLineBytes = 64 << 10

// EachLine is ReadLines over text: fn sees each line of text and its
// 1-based number, LF or CRLF removed, in order, one at a time, within the
// same limits (a line longer than MaxLineBytes is refused, before fn sees
// it, with an error wrapping ErrFormat that names its number). It returns
// fn's first error.
func EachLine(text string, fn func(lineNo int, line string) error) error {
	return ReadLines(strings.NewReader(text), fn)
}

// CheckIdentifiers returns an error wrapping ErrFormat, naming the line
// and the field, when a line's trade, merchant order or refund number or
// its merchant is not valid UTF-8 or holds U+FFFD, the replacement
// character a decoder puts for bytes it cannot read (Alipay's GBK
// decoding, Shouqianba's JSON): such a number was not read as the channel
// wrote it, so it is never stored.
func (s Statement) CheckIdentifiers() error {
	for _, l := range s.Lines {
		for _, f := range []struct{ name, v string }{
			{"trade number", l.TradeNo},
			{"merchant order number", l.MerchantOrderNo},
			{"refund number", l.RefundNo},
			{"merchant", l.MerchantID},
		} {
			if !utf8.ValidString(f.v) || strings.ContainsRune(f.v, utf8.RuneError) {
				return fmt.Errorf("%s statement: line %d: the %s is not valid UTF-8 (bytes the file's encoding does not have): %w",
					s.Channel, l.LineNo, f.name, ErrFormat)
			}
		}
	}
	return nil
}
