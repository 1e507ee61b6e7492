package statements

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The limits every statement file is read within. A parser reads a file
// line by line and never holds more of it than one line, so what an
// import holds is its parsed lines: at most MaxLines of them. Anything
// beyond a limit is no statement, and is refused, as soon as it is seen,
// with an error wrapping ErrFormat that names the limit (docs/statements.md,
// "Limits").
const (
	// MaxLines is the most lines a file (the uncompressed text) may have,
	// blank ones included. A WeChat or Alipay bill is one merchant's day:
	// a busy point-of-sale merchant takes some thousands of payments a
	// day, a chain under one merchant number tens of thousands, the
	// busiest some hundred thousand; three hundred thousand lines is no
	// daily bill of one merchant. The parsed lines are what an import
	// holds, so this is what bounds its memory (docs/operations.md).
	MaxLines = 300_000
	// MaxTextBytes is the most bytes of text a file may have, uncompressed
	// (after gunzip, or the zip entry's), and the largest file statement
	// import opens: 256 MiB, some three times MaxLines WeChat rows (about
	// 250 bytes each, 27 cells) and 256 thousand Shouqianba responses of a
	// kilobyte.
	MaxTextBytes = 256 << 20
	// MaxBlankRun is the most blank lines (empty or white space) a file may
	// have one after another: a bill separates its parts by one or two.
	MaxBlankRun = 1000
	// MaxCompressionRatio is the most a compressed file or zip entry may
	// grow when uncompressed, checked once RatioFromBytes have come out:
	// a bill's CSV text compresses about ten times, a run of one byte a
	// thousand times.
	MaxCompressionRatio = 100
	// RatioFromBytes is how much uncompressed text may come out before
	// MaxCompressionRatio is checked: a small file may compress better
	// than a bill does (its header and summary repeat), and costs nothing.
	RatioFromBytes = 8 << 20
)

// ErrLimit is wrapped, with ErrFormat, by the error of a file beyond one
// of the limits above.
var ErrLimit = errors.New("beyond a statement's limits")

// ReadLines calls fn with each line r holds and its 1-based number, LF or
// CRLF removed, in order, one at a time: no more than one line of r is
// ever held. It refuses, with an error wrapping ErrFormat and ErrLimit that
// names the line and the limit, a line longer than MaxLineBytes (its LF
// excluded) before fn sees it, a line past MaxLines, the line that makes a
// run of more than MaxBlankRun blank ones, and text past MaxTextBytes. A
// read error is returned wrapped, fn's first error as it is.
func ReadLines(r io.Reader, fn func(lineNo int, line string) error) error {
	br := bufio.NewReaderSize(r, MaxLineBytes+1)
	var total int64
	blank := 0
	for lineNo := 1; ; lineNo++ {
		raw, err := br.ReadSlice('\n')
		total += int64(len(raw))
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			return limitErr("line %d: longer than %d bytes", lineNo, MaxLineBytes)
		case total > MaxTextBytes:
			return limitErr("line %d: more than %d bytes of text", lineNo, MaxTextBytes)
		case err != nil && !errors.Is(err, io.EOF):
			return fmt.Errorf("line %d: %w", lineNo, err)
		case len(raw) == 0:
			return nil
		case lineNo > MaxLines:
			return limitErr("line %d: more than %d lines", lineNo, MaxLines)
		}
		line := bytes.TrimSuffix(bytes.TrimSuffix(raw, []byte("\n")), []byte("\r"))
		if len(bytes.TrimSpace(line)) == 0 {
			if blank++; blank > MaxBlankRun {
				return limitErr("line %d: more than %d blank lines in a row", lineNo, MaxBlankRun)
			}
		} else {
			blank = 0
		}
		if ferr := fn(lineNo, string(line)); ferr != nil {
			return ferr
		}
		if err != nil {
			return nil
		}
	}
}

func limitErr(format string, args ...any) error {
	return fmt.Errorf(format+": %w: %w", append(args, ErrLimit, ErrFormat)...)
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// CountingReader returns r and a function reporting how many bytes have
// been read from it: what a decompressor has taken of its input, for
// LimitRatio.
func CountingReader(r io.Reader) (io.Reader, func() int64) {
	c := &countingReader{r: r}
	return c, func() int64 { return c.n }
}

// ratioReader is LimitRatio's reader.
type ratioReader struct {
	r          io.Reader
	what       string
	compressed func() int64
	out        int64
}

// LimitRatio returns a reader of r, the uncompressed text of what (e.g.
// "gzip stream", `zip entry "x"`), that fails with an error wrapping
// ErrFormat and ErrLimit, naming what and the limit, once more than
// MaxTextBytes have come out, or once RatioFromBytes have and they are
// more than MaxCompressionRatio times compressed(), the compressed bytes
// taken so far (or the compressed size, when it is known).
func LimitRatio(r io.Reader, what string, compressed func() int64) io.Reader {
	return &ratioReader{r: r, what: what, compressed: compressed}
}

func (l *ratioReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.out += int64(n)
	if l.out > MaxTextBytes {
		return n, limitErr("%s: more than %d bytes uncompressed", l.what, MaxTextBytes)
	}
	if in := l.compressed(); l.out > RatioFromBytes && l.out > MaxCompressionRatio*in {
		return n, limitErr("%s: %d bytes uncompressed from %d, more than %d times", l.what, l.out, in, MaxCompressionRatio)
	}
	return n, err
}

// Detached returns l with its strings copied out of the line of text they
// were cut from, so that a parsed line keeps only its own bytes and not
// the whole row's.
func (l Line) Detached() Line {
	for _, s := range []*string{&l.TradeNo, &l.MerchantOrderNo, &l.RefundNo, &l.Status, &l.Currency, &l.MerchantID} {
		*s = strings.Clone(*s)
	}
	return l
}
