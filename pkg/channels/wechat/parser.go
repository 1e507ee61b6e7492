package wechat

import (
	"bytes"

	"github.com/paycallback/paycallback/pkg/statements"
)

// StatementParser is the channel's statement parser as package statements
// knows it; package allchannels registers it.
func StatementParser() statements.Parser {
	return statements.Parser{
		Parse: func(data []byte, wantSHA1 string) (statements.Statement, error) {
			return ParseStatement(bytes.NewReader(data), wantSHA1)
		},
		Refunds:        statements.RefundLinesByNumber,
		PaymentSettled: func(status string) bool { return status == "SUCCESS" },
	}
}
