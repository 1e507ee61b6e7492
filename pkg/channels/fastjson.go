package channels

import (
	"bytes"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// This file decodes the hot JSON shapes (the envelope, the WeChat
// notification and its decrypted resources, the Shouqianba body) in one
// pass without reflection. It handles the
// common case only: plain keys, string and integer values, no null, no
// surrogate escapes, valid UTF-8, each known key at most once. On anything
// else it reports false and the caller decodes with encoding/json, so the
// outcome is always what encoding/json gives; FuzzFastEnvelope and
// FuzzFastWeChat hold the fast path to that.

// scanner walks one JSON document.
type scanner struct {
	data []byte
	p    int
}

func (s *scanner) ws() {
	for s.p < len(s.data) {
		switch s.data[s.p] {
		case ' ', '\t', '\n', '\r':
			s.p++
		default:
			return
		}
	}
}

func (s *scanner) consume(c byte) bool {
	s.ws()
	if s.p < len(s.data) && s.data[s.p] == c {
		s.p++
		return true
	}
	return false
}

// end reports whether only whitespace is left.
func (s *scanner) end() bool {
	s.ws()
	return s.p == len(s.data)
}

// object reads an object whose keys are among known, calling value with the
// key's index to read each value. Unknown keys are skipped (as encoding/json
// ignores them) unless they match a known key case-insensitively, which
// encoding/json would map onto the field: then, and on a repeated known
// key, it fails.
func (s *scanner) object(known []string, depth int, value func(i int) bool) bool {
	if depth > maxDepth || !s.consume('{') {
		return false
	}
	var seen uint32
	if s.consume('}') {
		return true
	}
	for {
		s.ws()
		key, ok := s.plainKey()
		if !ok || !s.consume(':') {
			return false
		}
		s.ws()
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
			if !s.skip(depth + 1) {
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
func (s *scanner) plainKey() ([]byte, bool) {
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
func (s *scanner) rawString() (raw []byte, escaped, ok bool) {
	if s.p >= len(s.data) || s.data[s.p] != '"' {
		return nil, false, false
	}
	start, q := s.p+1, s.p+1
	for {
		i := bytes.IndexByte(s.data[q:], '"')
		if i < 0 {
			return nil, false, false
		}
		end := q + i
		n := 0
		for j := end - 1; j >= start && s.data[j] == '\\'; j-- {
			n++
		}
		if n%2 == 0 {
			q = end
			break
		}
		q = end + 1
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

// str reads a string value, decoding the simple escapes and \u outside the
// surrogate range.
func (s *scanner) str() (string, bool) {
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
func (s *scanner) skipString() bool {
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

// time reads a string without escapes as time.Time's UnmarshalJSON does.
func (s *scanner) time(t *time.Time) bool {
	raw, escaped, ok := s.rawString()
	return ok && !escaped && t.UnmarshalJSON(raw) == nil
}

// int reads an integer literal (no fraction or exponent) that fits int64.
func (s *scanner) int() (int64, bool) {
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
func (s *scanner) skip(depth int) bool {
	if depth > maxDepth || s.p >= len(s.data) {
		return false
	}
	switch c := s.data[s.p]; {
	case c == '"':
		return s.skipString()
	case c == '-' || isDigit(c):
		_, ok := s.int()
		return ok
	case c == '{':
		return s.object(nil, depth, func(int) bool { return false })
	case c == '[':
		s.p++
		if s.consume(']') {
			return true
		}
		for {
			s.ws()
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

var envelopeKeys = []string{"tenant_id", "channel", "received_at", "content_type", "body"}

// fastEnvelope is the one-pass decoder of an envelope.
func fastEnvelope(data []byte, env *Envelope) bool {
	s := scanner{data: data}
	s.ws()
	ok := s.object(envelopeKeys, 0, func(i int) bool {
		var ok bool
		switch i {
		case 0:
			env.TenantID, ok = s.int()
		case 1:
			env.Channel, ok = s.str()
		case 2:
			ok = s.time(&env.ReceivedAt)
		case 3:
			env.ContentType, ok = s.str()
		case 4:
			env.Body, ok = s.str()
		}
		return ok
	})
	return ok && s.end()
}

var (
	wechatKeys   = []string{"id", "create_time", "event_type", "resource_type", "resource"}
	resourceKeys = []string{"algorithm", "ciphertext", "nonce", "associated_data", "original_type"}
)

// fastWeChat is the one-pass decoder of the outer WeChat notification.
func fastWeChat(data []byte, n *wechatNotification) bool {
	s := scanner{data: data}
	s.ws()
	r := &n.Resource
	ok := s.object(wechatKeys, 0, func(i int) bool {
		var ok bool
		switch i {
		case 0:
			n.ID, ok = s.str()
		case 1:
			n.CreateTime, ok = s.str()
		case 2:
			n.EventType, ok = s.str()
		case 3:
			n.ResourceType, ok = s.str()
		case 4:
			ok = s.object(resourceKeys, 1, func(j int) bool {
				var ok bool
				switch j {
				case 0:
					r.Algorithm, ok = s.str()
				case 1:
					r.Ciphertext, ok = s.str()
				case 2:
					r.Nonce, ok = s.str()
				case 3:
					r.AssociatedData, ok = s.str()
				case 4:
					r.OriginalType, ok = s.str()
				}
				return ok
			})
		}
		return ok
	})
	return ok && s.end()
}

// fen reads a plain non-negative integer amount up to MaxAmount; anything
// else goes to encoding/json, whose jsonFen reports it as invalid_amount.
func (s *scanner) fen(f *jsonFen) bool {
	v, ok := s.int()
	if !ok || v < 0 || v > MaxAmount {
		return false
	}
	*f = jsonFen{v: v, set: true}
	return true
}

var (
	transactionKeys = []string{"mchid", "sp_mchid", "sub_mchid", "out_trade_no", "transaction_id", "trade_state", "success_time", "amount"}
	txAmountKeys    = []string{"total", "currency"}
	refundKeys      = []string{"mchid", "sp_mchid", "sub_mchid", "out_trade_no", "transaction_id", "out_refund_no", "refund_id", "refund_status", "status", "success_time", "amount"}
	refundAmountKey = []string{"total", "refund", "currency"}
)

// fastWeChatTransaction is the one-pass decoder of a decrypted transaction.
func fastWeChatTransaction(data []byte, tx *wechatTransaction) bool {
	s := scanner{data: data}
	s.ws()
	strs := [...]*string{&tx.MchID, &tx.SpMchID, &tx.SubMchID, &tx.OutTradeNo, &tx.TransactionID, &tx.TradeState, &tx.SuccessTime}
	ok := s.object(transactionKeys, 0, func(i int) bool {
		if i < len(strs) {
			var ok bool
			*strs[i], ok = s.str()
			return ok
		}
		return s.object(txAmountKeys, 1, func(j int) bool {
			if j == 0 {
				return s.fen(&tx.Amount.Total)
			}
			var ok bool
			tx.Amount.Currency, ok = s.str()
			return ok
		})
	})
	return ok && s.end()
}

// fastWeChatRefund is the one-pass decoder of a decrypted refund.
func fastWeChatRefund(data []byte, rf *wechatRefund) bool {
	s := scanner{data: data}
	s.ws()
	strs := [...]*string{&rf.MchID, &rf.SpMchID, &rf.SubMchID, &rf.OutTradeNo, &rf.TransactionID, &rf.OutRefundNo, &rf.RefundID, &rf.RefundStatus, &rf.Status, &rf.SuccessTime}
	ok := s.object(refundKeys, 0, func(i int) bool {
		if i < len(strs) {
			var ok bool
			*strs[i], ok = s.str()
			return ok
		}
		return s.object(refundAmountKey, 1, func(j int) bool {
			switch j {
			case 0:
				return s.fen(&rf.Amount.Total)
			case 1:
				return s.fen(&rf.Amount.Refund)
			}
			var ok bool
			rf.Amount.Currency, ok = s.str()
			return ok
		})
	})
	return ok && s.end()
}

var (
	sqbOrderKeys = []string{
		"sn", "client_sn", "client_tsn", "refund_request_no", "status", "order_status",
		"total_amount", "net_amount", "finish_time", "channel_finish_time", "terminal_sn",
	}
	sqbBodyKeys = append(append([]string(nil), sqbOrderKeys...), "biz_response")
	sqbBizKeys  = []string{"data"}
)

// sqbFields returns o's fields in the order of sqbOrderKeys.
func sqbFields(o *sqbOrder) [11]*string {
	return [...]*string{
		&o.SN, &o.ClientSN, &o.ClientTSN, &o.RefundRequestNo, &o.Status, &o.OrderStatus,
		&o.TotalAmount, &o.NetAmount, &o.FinishTime, &o.ChannelFinishTime, &o.TerminalSN,
	}
}

// fastSQB is the one-pass decoder of a Shouqianba body: a callback, or a
// forwarded refund API response.
func fastSQB(data []byte, b *sqbBody) bool {
	s := scanner{data: data}
	s.ws()
	top := sqbFields(&b.sqbOrder)
	ok := s.object(sqbBodyKeys, 0, func(i int) bool {
		if i < len(top) {
			var ok bool
			*top[i], ok = s.str()
			return ok
		}
		b.BizResponse = &sqbBizResponse{}
		return s.object(sqbBizKeys, 1, func(int) bool {
			b.BizResponse.Data = &sqbOrder{}
			inner := sqbFields(b.BizResponse.Data)
			return s.object(sqbOrderKeys, 2, func(j int) bool {
				var ok bool
				*inner[j], ok = s.str()
				return ok
			})
		})
	})
	return ok && s.end()
}
