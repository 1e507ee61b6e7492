package alipay

import (
	"io"

	"github.com/paycallback/paycallback/pkg/statements"
)

// StatementParser is the channel's statement parser as package statements
// knows it; package allchannels registers it.
func StatementParser() statements.Parser {
	return statements.Parser{
		Parse: func(r io.ReaderAt, size int64, wantSHA1 string) (statements.Statement, error) {
			st, err := ParseStatement(r, size)
			return statements.CheckSHA1(st, err, wantSHA1)
		},
		Refunds:           statements.RefundLinesRunning,
		BindingMerchantID: alipayPID,
		UnboundMerchant:   alipayUnbound,
	}
}
