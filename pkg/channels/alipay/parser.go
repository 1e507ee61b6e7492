package alipay

import (
	"bytes"

	"github.com/paycallback/paycallback/pkg/statements"
)

// StatementParser is the channel's statement parser as package statements
// knows it; package allchannels registers it.
func StatementParser() statements.Parser {
	return statements.Parser{
		Parse: func(data []byte, wantSHA1 string) (statements.Statement, error) {
			st, err := ParseStatement(bytes.NewReader(data), int64(len(data)))
			return statements.CheckSHA1(st, err, wantSHA1)
		},
		Refunds:           statements.RefundLinesRunning,
		BindingMerchantID: alipayPID,
		UnboundMerchant:   alipayUnbound,
	}
}
