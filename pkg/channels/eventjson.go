package channels

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends e encoded as JSON, byte for byte what
// encoding/json.Marshal gives for it, without reflection: the claim store
// keeps every new event this way, so the encoding sits on the hot path.
// json.Unmarshal reads it back. Its times must be within the years
// 0–9999, as json.Marshal requires (Validate holds them to 2000–2099).
func (e Event) AppendJSON(b []byte) []byte {
	b = append(b, `{"tenant_id":`...)
	b = strconv.AppendInt(b, e.TenantID, 10)
	b = append(b, `,"channel":`...)
	b = appendJSONString(b, string(e.Channel))
	b = append(b, `,"type":`...)
	b = appendJSONString(b, string(e.Type))
	b = append(b, `,"trade_no":`...)
	b = appendJSONString(b, e.TradeNo)
	b = append(b, `,"merchant_order_no":`...)
	b = appendJSONString(b, e.MerchantOrderNo)
	b = append(b, `,"refund_no":`...)
	b = appendJSONString(b, e.RefundNo)
	b = append(b, `,"order_total":`...)
	b = strconv.AppendInt(b, e.OrderTotal, 10)
	b = append(b, `,"refund_amount":`...)
	b = strconv.AppendInt(b, e.RefundAmount, 10)
	b = append(b, `,"cumulative_refunded":`...)
	b = strconv.AppendInt(b, e.CumulativeRefunded, 10)
	b = append(b, `,"currency":`...)
	b = appendJSONString(b, e.Currency)
	b = append(b, `,"occurred_at":"`...)
	b = e.OccurredAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","received_at":"`...)
	b = e.ReceivedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","raw_status":`...)
	b = appendJSONString(b, e.RawStatus)
	b = append(b, `,"key":`...)
	b = appendJSONString(b, string(e.Key))
	b = append(b, `,"fingerprint":`...)
	b = appendJSONString(b, e.Fingerprint)
	if e.BoundMerchant != "" {
		b = append(b, `,"bound_merchant":`...)
		b = appendJSONString(b, e.BoundMerchant)
	}
	if e.StatementMerchant != "" {
		b = append(b, `,"statement_merchant":`...)
		b = appendJSONString(b, e.StatementMerchant)
	}
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as encoding/json quotes it: HTML-safe, with
// invalid UTF-8 as U+FFFD and U+2028, U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
