package sqb

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/paycallback/paycallback/pkg/channels"
)

// maxAnswerDepth bounds the nesting a query answer may have; Shouqianba's
// is three objects and a list deep.
const maxAnswerDepth = 16

// checkMembers refuses a JSON document in which an object names one member
// twice, or two members encoding/json would both map onto one field (names
// equal but for case): encoding/json would keep the last silently, and an
// answer read two ways is no answer. It also refuses nesting deeper than
// maxAnswerDepth. Syntax errors are left to the decoder that follows.
func checkMembers(data []byte, what string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		object bool
		key    bool // an object's next token is a member name
		seen   map[string]string
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return nil //nolint:nilerr // syntax errors are reported by the decoder that follows
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.key {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			name, _ := tok.(string)
			folded := strings.ToLower(name)
			if prev, dup := top.seen[folded]; dup {
				if prev == name {
					return channels.Errorf(channels.KindMalformed, "decode %s: member %s appears twice", what, channels.Quote(name))
				}
				return channels.Errorf(channels.KindMalformed, "decode %s: members %s and %s differ only in case", what, channels.Quote(prev), channels.Quote(name))
			}
			top.seen[folded] = name
			top.key = false
			continue
		}
		if top != nil && top.object {
			top.key = true // this token is a member's value
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				if len(stack) >= maxAnswerDepth {
					return channels.Errorf(channels.KindMalformed, "decode %s: nested deeper than %d", what, maxAnswerDepth)
				}
				stack = append(stack, &frame{object: d == '{', key: d == '{', seen: map[string]string{}})
			case ']':
				stack = stack[:len(stack)-1]
			}
		}
	}
}
