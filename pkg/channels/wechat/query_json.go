package wechat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/paycallback/paycallback/pkg/channels"
)

// maxJSONDepth bounds the nesting of a query answer (WeChat's are 3 deep).
const maxJSONDepth = 32

// unmarshalAnswer decodes one JSON object, what naming it in errors, with
// channels.Unmarshal, after refusing with KindMalformed what
// encoding/json would read one way among several: a member repeated in an
// object, also under another letter case (encoding/json matches names
// case-insensitively and keeps the last), trailing data, or nesting beyond
// maxJSONDepth. An answer read two ways is never guessed at.
func unmarshalAnswer(data []byte, v any, what string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return channels.Errorf(channels.KindMalformed, "decode %s: %w", what, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return channels.Errorf(channels.KindMalformed, "decode %s: not a JSON object", what)
	}
	if err := checkMembers(dec, 1); err != nil {
		return channels.Errorf(channels.KindMalformed, "decode %s: %w", what, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return channels.Errorf(channels.KindMalformed, "decode %s: data after the object", what)
	}
	return channels.Unmarshal(data, v, what)
}

// checkMembers reads the rest of an object whose '{' was read, refusing a
// repeated member name.
func checkMembers(dec *json.Decoder, depth int) error {
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := tok.(string)
		folded := foldName(name)
		if seen[folded] {
			return fmt.Errorf("member %s is repeated", channels.Quote(name))
		}
		seen[folded] = true
		if err := checkValue(dec, depth); err != nil {
			return err
		}
	}
	_, err := dec.Token() // '}'
	return err
}

// checkValue reads one value, checking the objects within it.
func checkValue(dec *json.Decoder, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if depth >= maxJSONDepth {
		return fmt.Errorf("nested deeper than %d", maxJSONDepth)
	}
	if d == '{' {
		return checkMembers(dec, depth+1)
	}
	for dec.More() { // '['
		if err := checkValue(dec, depth+1); err != nil {
			return err
		}
	}
	_, err = dec.Token() // ']'
	return err
}

// foldName maps name to one representative of the names encoding/json
// takes for it: each rune to the smallest of its case-folding orbit.
func foldName(name string) string {
	var b strings.Builder
	for _, r := range name {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}
