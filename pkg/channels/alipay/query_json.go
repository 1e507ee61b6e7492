package alipay

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/paycallback/paycallback/pkg/channels"
)

// jsonMember is one member of a JSON object: its name, unescaped, and its
// value's bytes exactly as written, without the whitespace around them
// (what encoding/json gives a json.RawMessage).
type jsonMember struct {
	name  string
	value []byte
}

// jsonMembers returns the members of the JSON object data in order, their
// values as raw bytes, never re-encoded: Alipay signs the raw text of one
// of them. It fails when data is not one valid JSON object, or when two
// members' names are equal ignoring case (encoding/json would read both
// into one field, the last winning: an answer read two ways).
func jsonMembers(data []byte) ([]jsonMember, error) {
	if !json.Valid(data) {
		return nil, errors.New("not valid JSON")
	}
	p := skipWS(data, 0)
	if data[p] != '{' {
		return nil, errors.New("not a JSON object")
	}
	p = skipWS(data, p+1)
	var ms []jsonMember
	if data[p] == '}' {
		return ms, nil
	}
	for {
		// Valid JSON: p is at a name's opening quote.
		end := stringEnd(data, p)
		var name string
		if err := json.Unmarshal(data[p:end], &name); err != nil {
			return nil, fmt.Errorf("member name: %w", err)
		}
		for _, m := range ms {
			if strings.EqualFold(m.name, name) {
				return nil, fmt.Errorf("member %s appears more than once", channels.Quote(name))
			}
		}
		p = skipWS(data, skipWS(data, end)+1) // past ':'
		vend := valueEnd(data, p)
		ms = append(ms, jsonMember{name: name, value: data[p:vend]})
		p = skipWS(data, vend)
		if data[p] == '}' {
			return ms, nil
		}
		p = skipWS(data, p+1) // past ','
	}
}

// skipWS returns the index of the first non-whitespace byte at or after p.
func skipWS(data []byte, p int) int {
	for p < len(data) {
		switch data[p] {
		case ' ', '\t', '\n', '\r':
			p++
		default:
			return p
		}
	}
	return p
}

// stringEnd returns the index just past the JSON string opening at p; a
// backslash escapes the byte after it, so \" and \\ are read correctly.
func stringEnd(data []byte, p int) int {
	for i := p + 1; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(data)
}

// valueEnd returns the index just past the JSON value starting at p:
// strings end at their closing quote, objects and arrays at the bracket
// that closes the one at p (brackets inside strings do not count), numbers
// and literals at the first delimiter.
func valueEnd(data []byte, p int) int {
	switch data[p] {
	case '"':
		return stringEnd(data, p)
	case '{', '[':
		depth := 0
		for i := p; i < len(data); i++ {
			switch data[i] {
			case '"':
				i = stringEnd(data, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(data)
	default:
		i := p
		for i < len(data) && !strings.ContainsRune(",}] \t\n\r", rune(data[i])) {
			i++
		}
		return i
	}
}

// answerParts is an Alipay answer split into what is signed and the
// signature.
type answerParts struct {
	// member is the name of the signed member: <method>_response or
	// error_response.
	member string
	// response is that member's raw value, the signed text.
	response []byte
	// sign is the signature, hasSign whether the answer carries one.
	sign    string
	hasSign bool
	// certSN is alipay_cert_sn, the serial of the certificate whose key
	// signed the answer (certificate mode only); hasCertSN whether the
	// answer names one.
	certSN    string
	hasCertSN bool
}

// errorResponse is the member a gateway-level error answers with.
const errorResponse = "error_response"

// responseMember is the name of the member the answer to method carries
// ("alipay.trade.query" → "alipay_trade_query_response").
func responseMember(method string) string {
	return strings.ReplaceAll(method, ".", "_") + "_response"
}

// splitAnswer splits body, the answer to method, into its signed member
// and signature. It fails when body is not one JSON object with unique
// member names, carries neither <method>_response nor error_response or
// both, the one it carries is not an object, or sign is not a string.
func splitAnswer(body []byte, method string) (answerParts, error) {
	ms, err := jsonMembers(body)
	if err != nil {
		return answerParts{}, fmt.Errorf("alipay %s answer: %w", method, err)
	}
	var parts answerParts
	want := responseMember(method)
	for _, m := range ms {
		switch m.name {
		case want, errorResponse:
			if parts.member != "" {
				return answerParts{}, fmt.Errorf("alipay %s answer carries both %s and %s", method, parts.member, m.name)
			}
			if m.value[0] != '{' {
				return answerParts{}, fmt.Errorf("alipay %s answer: %s is not an object", method, m.name)
			}
			parts.member, parts.response = m.name, m.value
		case "sign":
			if err := json.Unmarshal(m.value, &parts.sign); err != nil {
				return answerParts{}, fmt.Errorf("alipay %s answer: sign is not a string", method)
			}
			parts.hasSign = true
		case "alipay_cert_sn":
			if err := json.Unmarshal(m.value, &parts.certSN); err != nil {
				return answerParts{}, fmt.Errorf("alipay %s answer: alipay_cert_sn is not a string", method)
			}
			parts.hasCertSN = true
		}
	}
	if parts.member == "" {
		return answerParts{}, fmt.Errorf("alipay %s answer carries neither %s nor %s", method, want, errorResponse)
	}
	return parts, nil
}
