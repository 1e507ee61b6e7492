package jsonscan

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// names is the set of the member names one object has shown so far, told
// apart as encoding/json tells them apart when it matches a name to a
// field: after unescaping, and ignoring case (Unicode simple folding, as
// bytes.EqualFold). Two names it holds the same would be decoded into one
// field, the later value winning. Each key is either a plain name (ASCII
// without escapes) as it stands in the document, or a name folded by fold;
// the first keys sit in an array, the rest move to a map of folded names,
// so an object of many members costs no quadratic time.
type names struct {
	small [16]nameEntry
	n     int
	big   map[string][]byte // folded key -> spelling
}

// nameEntry is one member name: key as names compares it, spelling as the
// document has it (unescaped).
type nameEntry struct{ key, spelling []byte }

// add records a name whose key is key and, when an earlier name has the
// same key, returns that name's spelling and true instead.
func (ns *names) add(key, spelling []byte) ([]byte, bool) {
	if ns.big != nil {
		k := string(fold(key))
		if prev, ok := ns.big[k]; ok {
			return prev, true
		}
		ns.big[k] = spelling
		return nil, false
	}
	for _, e := range ns.small[:ns.n] {
		if sameKey(e.key, key) {
			return e.spelling, true
		}
	}
	if ns.n < len(ns.small) {
		ns.small[ns.n] = nameEntry{key, spelling}
		ns.n++
		return nil, false
	}
	ns.big = make(map[string][]byte, 4*len(ns.small))
	for _, e := range ns.small {
		ns.big[string(fold(e.key))] = e.spelling
	}
	ns.big[string(fold(key))] = spelling
	return nil, false
}

// sameKey compares two keys (plain or folded) ignoring ASCII case: a
// plain name has only ASCII bytes, a folded one no lower-case letter, so
// this is equality of their folded forms.
func sameKey(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && upper(a[i]) != upper(b[i]) {
			return false
		}
	}
	return true
}

func upper(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}

// fold returns name's folded form, the same for any two names
// bytes.EqualFold calls equal: ASCII letters upper-cased, every other rune
// the least rune of its simple-folding orbit (encoding/json folds so).
func fold(name []byte) []byte {
	out := make([]byte, 0, len(name))
	for i := 0; i < len(name); {
		if c := name[i]; c < utf8.RuneSelf {
			out = append(out, upper(c))
			i++
			continue
		}
		r, size := utf8.DecodeRune(name[i:])
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		out = utf8.AppendRune(out, least)
		i += size
	}
	return out
}

// Repeat is a member name that appears twice in one JSON object, exactly
// or differing only in case.
type Repeat struct {
	// Path locates the object from the top of the document: member names
	// joined by '.' and array indexes in brackets, as "biz_response.data"
	// or "promotion_detail[0]"; "" for the top-level object.
	Path string
	// Name is the later name and First the earlier one, both unescaped.
	Name, First string
}

// maxNesting is encoding/json's nesting limit: it refuses anything deeper.
const maxNesting = 10000

// FirstRepeat returns the first member name of the JSON document data that
// repeats within its object, at any depth, and false when none does. data
// must be one document encoding/json accepts: on anything else the answer
// means nothing (but FirstRepeat still returns, in time linear in
// len(data)). Names are compared as encoding/json matches them to fields,
// after unescaping and ignoring case, so a document read by encoding/json
// without a repeat reads one way only.
func FirstRepeat(data []byte) (Repeat, bool) {
	w := walker{New(data)}
	return w.value(0)
}

// walker walks a valid JSON document, checking member names only. It
// moves as a Scanner does, but reads every JSON value.
type walker struct{ Scanner }

// stop ends the walk: the document is not what FirstRepeat expects.
func (w *walker) stop() { w.p = len(w.data) }

// enter steps into the object or array at w.p and reports whether it holds
// a member or an element: false when it closes at once (closing), or when
// it lies deeper than encoding/json reads (which stops the walk).
func (w *walker) enter(depth int, closing byte) bool {
	w.p++
	if depth > maxNesting {
		w.stop()
		return false
	}
	return !w.consume(closing)
}

// more reads what follows a member or an element: true on a comma (another
// follows), false on closing or else (which stops the walk).
func (w *walker) more(closing byte) bool {
	if w.consume(',') {
		return true
	}
	if !w.consume(closing) {
		w.stop()
	}
	return false
}

func (w *walker) value(depth int) (Repeat, bool) {
	w.WS()
	if w.p >= len(w.data) {
		return Repeat{}, false
	}
	switch c := w.data[w.p]; c {
	case '{':
		return w.object(depth + 1)
	case '[':
		return w.array(depth + 1)
	case '"':
		if q := closingQuote(w.data, w.p+1); q < 0 {
			w.stop()
		} else {
			w.p = q + 1
		}
	case ',', ':', ']', '}':
		w.stop()
	default: // a number or a literal
		for w.p < len(w.data) && !isDelim(w.data[w.p]) {
			w.p++
		}
	}
	return Repeat{}, false
}

func isDelim(c byte) bool {
	switch c {
	case ',', ':', ']', '}', '{', '[', '"', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

func (w *walker) object(depth int) (Repeat, bool) {
	if !w.enter(depth, '}') {
		return Repeat{}, false
	}
	var seen names
	for {
		w.WS()
		key, spelling, ok := w.name()
		if !ok || !w.consume(':') {
			w.stop()
			return Repeat{}, false
		}
		if prev, repeated := seen.add(key, spelling); repeated {
			return Repeat{Name: string(spelling), First: string(prev)}, true
		}
		if r, ok := w.value(depth); ok {
			r.Path = joinPath(string(spelling), r.Path)
			return r, true
		}
		if !w.more('}') {
			return Repeat{}, false
		}
	}
}

func (w *walker) array(depth int) (Repeat, bool) {
	if !w.enter(depth, ']') {
		return Repeat{}, false
	}
	for i := 0; ; i++ {
		if r, ok := w.value(depth); ok {
			r.Path = "[" + strconv.Itoa(i) + "]" + pathTail(r.Path)
			return r, true
		}
		if !w.more(']') {
			return Repeat{}, false
		}
	}
}

// joinPath puts a member name before the path of a repeat inside it.
func joinPath(name, tail string) string { return name + pathTail(tail) }

// pathTail is the path of a repeat inside a value, as it follows that
// value's own place.
func pathTail(tail string) string {
	if tail == "" || tail[0] == '[' {
		return tail
	}
	return "." + tail
}

// name reads a member name: its key for names (the name itself when plain,
// ASCII without escapes; else its folded form) and its spelling, unescaped
// as encoding/json unescapes it (invalid UTF-8 and lone surrogates become
// U+FFFD).
func (w *walker) name() (key, spelling []byte, ok bool) {
	if w.p >= len(w.data) || w.data[w.p] != '"' {
		return nil, nil, false
	}
	q := closingQuote(w.data, w.p+1)
	if q < 0 {
		return nil, nil, false
	}
	raw := w.data[w.p : q+1]
	w.p = q + 1
	if inner := raw[1 : len(raw)-1]; plainName(inner) {
		return inner, inner, true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil, nil, false
	}
	return fold([]byte(s)), []byte(s), true
}

// plainName reports whether a name is ASCII without escapes.
func plainName(b []byte) bool {
	for _, c := range b {
		if c == '\\' || c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// closingQuote returns the offset of the quote closing a string whose
// contents start at data[from], or -1: the first quote not preceded by an
// odd run of backslashes.
func closingQuote(data []byte, from int) int {
	for q := from; ; {
		i := bytes.IndexByte(data[q:], '"')
		if i < 0 {
			return -1
		}
		end := q + i
		n := 0
		for j := end - 1; j >= from && data[j] == '\\'; j-- {
			n++
		}
		if n%2 == 0 {
			return end
		}
		q = end + 1
	}
}
