package jsonscan

import (
	"bytes"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Scanner walks one JSON document.
type Scanner struct {
	data []byte
	p    int
}

// New returns a Scanner at the start of data.
func New(data []byte) Scanner { return Scanner{data: data} }

// WS skips whitespace.
func (s *Scanner) WS() {
	for s.p < len(s.data) {
		switch s.data[s.p] {
		case ' ', '\t', '\n', '\r':
			s.p++
		default:
			return
		}
	}
}

func (s *Scanner) consume(c byte) bool {
	s.WS()
	if s.p < len(s.data) && s.data[s.p] == c {
		s.p++
		return true
	}
	return false
}

// End reports whether only whitespace is left.
func (s *Scanner) End() bool {
	s.WS()
	return s.p == len(s.data)
}

// Object reads an object whose keys are among known, calling value with the
// key's index to read each value. Unknown keys are skipped (as encoding/json
// ignores them) unless they match a known key case-insensitively, which
// encoding/json would map onto the field: then it fails. It fails too on
// any key that repeats, exactly or in another case (the standard path
// refuses such a document: see FirstRepeat).
func (s *Scanner) Object(known []string, depth int, value func(i int) bool) bool {
	if depth > maxDepth || !s.consume('{') {
		return false
	}
	var (
		seen  uint32 // known keys
		other names  // unknown keys
	)
	if s.consume('}') {
		return true
	}
	for {
		s.WS()
		key, ok := s.plainKey()
		if !ok || !s.consume(':') {
			return false
		}
		s.WS()
		i := -1
		for j, k := range known {
			if k == string(key) {
				i = j
				break
			}
			if len(k) == len(key) && strings.EqualFold(k, string(key)) {
				return false
			}
		}
		if i < 0 {
			if _, repeated := other.add(key, key); repeated || !s.skip(depth+1) {
				return false
			}
		} else {
			if seen&(1<<i) != 0 || !value(i) {
				return false
			}
			seen |= 1 << i
		}
		if s.consume('}') {
			return true
		}
		if !s.consume(',') {
			return false
		}
	}
}

// plainKey reads a key of ASCII letters, digits and '_'.
func (s *Scanner) plainKey() ([]byte, bool) {
	if s.p >= len(s.data) || s.data[s.p] != '"' {
		return nil, false
	}
	for q := s.p + 1; q < len(s.data); q++ {
		c := s.data[q]
		if c == '"' {
			k := s.data[s.p+1 : q]
			s.p = q + 1
			return k, true
		}
		if c != '_' && !isDigit(c) && (c|0x20 < 'a' || c|0x20 > 'z') {
			return nil, false
		}
	}
	return nil, false
}

// rawString returns the extent of a JSON string (quotes included) and
// whether it has escapes; it checks the bytes are valid UTF-8 without raw
// control characters. The closing quote is found with bytes.IndexByte (a
// quote preceded by an odd run of backslashes is escaped), and the bytes
// between checked in one tight loop: envelopes carry whole callback
// bodies as strings.
func (s *Scanner) rawString() (raw []byte, escaped, ok bool) {
	if s.p >= len(s.data) || s.data[s.p] != '"' {
		return nil, false, false
	}
	start := s.p + 1
	q := closingQuote(s.data, start)
	if q < 0 {
		return nil, false, false
	}
	body := s.data[start:q]
	var high byte
	for _, c := range body {
		if c < 0x20 {
			return nil, false, false
		}
		high |= c
	}
	if high >= utf8.RuneSelf && !utf8.Valid(body) {
		return nil, false, false
	}
	escaped = bytes.IndexByte(body, '\\') >= 0
	raw = s.data[s.p : q+1]
	s.p = q + 1
	return raw, escaped, true
}

// Str reads a string value, decoding the simple escapes and \u outside the
// surrogate range.
func (s *Scanner) Str() (string, bool) {
	raw, escaped, ok := s.rawString()
	if !ok {
		return "", false
	}
	raw = raw[1 : len(raw)-1]
	if !escaped {
		return string(raw), true
	}
	out, ok := unescape(raw, make([]byte, 0, len(raw)))
	return string(out), ok
}

// skipString validates a string value without building it.
func (s *Scanner) skipString() bool {
	raw, escaped, ok := s.rawString()
	if !ok || !escaped {
		return ok
	}
	_, ok = unescape(raw[1:len(raw)-1], nil)
	return ok
}

// unescape decodes the escapes of raw, appending to out unless out is nil
// (validation only). The runs between escapes are copied whole.
func unescape(raw, out []byte) ([]byte, bool) {
	build := out != nil
	for i := 0; i < len(raw); i++ {
		k := bytes.IndexByte(raw[i:], '\\')
		if k < 0 {
			if build {
				out = append(out, raw[i:]...)
			}
			break
		}
		if build {
			out = append(out, raw[i:i+k]...)
		}
		i += k + 1
		if i >= len(raw) {
			return nil, false
		}
		var c byte
		switch raw[i] {
		case '"', '\\', '/':
			c = raw[i]
		case 'b':
			c = '\b'
		case 'f':
			c = '\f'
		case 'n':
			c = '\n'
		case 'r':
			c = '\r'
		case 't':
			c = '\t'
		case 'u':
			r, ok := hex4(raw[i+1:])
			if !ok || (r >= 0xD800 && r <= 0xDFFF) {
				return nil, false
			}
			if build {
				out = utf8.AppendRune(out, r)
			}
			i += 4
			continue
		default:
			return nil, false
		}
		if build {
			out = append(out, c)
		}
	}
	return out, true
}

// Time reads a string without escapes as time.Time's UnmarshalJSON does.
func (s *Scanner) Time(t *time.Time) bool {
	raw, escaped, ok := s.rawString()
	return ok && !escaped && t.UnmarshalJSON(raw) == nil
}

// Int reads an integer literal (no fraction or exponent) that fits int64.
func (s *Scanner) Int() (int64, bool) {
	q := s.p
	if q < len(s.data) && s.data[q] == '-' {
		q++
	}
	digits := q
	for q < len(s.data) && isDigit(s.data[q]) {
		q++
	}
	if q == digits || (s.data[digits] == '0' && q-digits > 1) {
		return 0, false
	}
	if q < len(s.data) && (s.data[q] == '.' || s.data[q] == 'e' || s.data[q] == 'E') {
		return 0, false
	}
	n, err := strconv.ParseInt(string(s.data[s.p:q]), 10, 64)
	if err != nil {
		return 0, false
	}
	s.p = q
	return n, true
}

// maxDepth bounds the nesting the scanner follows; deeper documents go to
// encoding/json.
const maxDepth = 32

// skip validates and skips any value whose escapes and numbers are of the
// kinds handled above; depth bounds nesting.
func (s *Scanner) skip(depth int) bool {
	if depth > maxDepth || s.p >= len(s.data) {
		return false
	}
	switch c := s.data[s.p]; {
	case c == '"':
		return s.skipString()
	case c == '-' || isDigit(c):
		_, ok := s.Int()
		return ok
	case c == '{':
		return s.Object(nil, depth, func(int) bool { return false })
	case c == '[':
		s.p++
		if s.consume(']') {
			return true
		}
		for {
			s.WS()
			if !s.skip(depth + 1) {
				return false
			}
			if s.consume(']') {
				return true
			}
			if !s.consume(',') {
				return false
			}
		}
	default:
		for _, lit := range [...]string{"true", "false"} {
			if strings.HasPrefix(string(s.data[s.p:min(len(s.data), s.p+5)]), lit) {
				s.p += len(lit)
				return true
			}
		}
		return false
	}
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case isDigit(c):
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
