package wechat

import (
	"io"

	"github.com/paycallback/paycallback/pkg/statements"
)

// StatementParser is the channel's statement parser as package statements
// knows it; package allchannels registers it.
func StatementParser() statements.Parser {
	return statements.Parser{
		Parse: func(r io.ReaderAt, size int64, wantSHA1 string) (statements.Statement, error) {
			return ParseStatement(io.NewSectionReader(r, 0, size), wantSHA1)
		},
		Refunds:        statements.RefundLinesByNumber,
		PaymentSettled: func(status string) bool { return status == "SUCCESS" },
	}
}
