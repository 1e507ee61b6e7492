package statements

import (
	"bytes"
	"errors"

	"github.com/paycallback/paycallback/pkg/channels"
)

// ErrNoParser is wrapped by Parse's error for a channel this package has no
// statement parser for.
var ErrNoParser = errors.New("no statement parser for the channel")

// Parser is what this package knows of one channel's statement file. The
// channel itself (its code, refund model, merchant fields) is a
// channels.Spec in the channel registry; this package cannot be named
// there (it imports channels), so it keeps its parsers keyed by the Spec's
// code, and TestParsersCoverRegistry fails for a registered channel
// without one: a channel added to the registry without a parser fails the
// build's tests, and at run time Parse refuses it by name (ErrNoParser).
type Parser struct {
	// Parse parses one file and checks it against wantSHA1 when not empty
	// (see the function Parse).
	Parse func(data []byte, wantSHA1 string) (Statement, error)
	// BindingMerchantID turns a merchant as MerchantIDs (and Line.MerchantID,
	// Statement.Account) name it into the merchant binding's terms; nil
	// keeps it as it is. See Statement.BindingMerchantIDs.
	BindingMerchantID func(id string) string
}

// parsers are the statement parsers, by channel code.
var parsers = map[channels.Channel]Parser{
	channels.WeChat: {
		Parse: func(data []byte, wantSHA1 string) (Statement, error) {
			return ParseWeChat(bytes.NewReader(data), wantSHA1)
		},
	},
	channels.Alipay: {
		Parse: func(data []byte, wantSHA1 string) (Statement, error) {
			st, err := ParseAlipay(bytes.NewReader(data), int64(len(data)))
			return checkSHA1(st, err, wantSHA1)
		},
		BindingMerchantID: alipayPID,
	},
	channels.SQB: {
		Parse: func(data []byte, wantSHA1 string) (Statement, error) {
			st, err := ParseSQB(bytes.NewReader(data))
			return checkSHA1(st, err, wantSHA1)
		},
	},
}

// ParserOf returns the statement parser of channel ch and whether there is
// one.
func ParserOf(ch channels.Channel) (Parser, bool) {
	p, ok := parsers[ch]
	return p, ok
}
