package statements

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/internal/registry"
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
	// Parse parses one file of size bytes, read through r, and checks it
	// against wantSHA1 when not empty (see the function Parse). It reads
	// the file as a stream within the limits of ReadLines and LimitRatio
	// (an Alipay zip's directory is read at its end: hence a ReaderAt),
	// never whole.
	Parse func(r io.ReaderAt, size int64, wantSHA1 string) (Statement, error)
	// Refunds is how the statement reports refunds.
	Refunds RefundLines
	// PaymentSettled, when set, says whether a payment line's status is
	// money the channel settled (WeChat: SUCCESS); nil: every payment line
	// is.
	PaymentSettled func(status string) bool
	// BindingMerchantID turns a merchant as MerchantIDs (and Line.MerchantID,
	// Statement.Account) name it into the merchant binding's terms; nil
	// keeps it as it is. See Statement.BindingMerchantIDs.
	BindingMerchantID func(id string) string
	// UnboundMerchant, when set, says why a merchant as BindingMerchantID
	// made it can be bound to no tenant ("" when it can): Alipay's account
	// that is not a PID followed by 0156. nil: every
	// merchant can be.
	UnboundMerchant func(id string) string
	// Canceled, when set, says whether a line's status is the channel's
	// cancel, which nets the trade to zero whether or not it was paid
	// (Shouqianba CANCELED; channels.Spec.CancelRefundNo); nil: the
	// channel has no cancel.
	Canceled func(status string) bool
}

// RefundLines is how a channel's statement reports refunds, and so how a
// statement is stored and compared with the ledger.
type RefundLines uint8

// The shapes of refunds in a statement.
const (
	// RefundLinesByNumber: a line per refund with its own number and
	// amount, as the channel's per-refund callbacks report it (WeChat):
	// compared refund by refund.
	RefundLinesByNumber RefundLines = iota + 1
	// RefundLinesRunning: a line per refund with its own amount while the
	// callbacks report the cumulative refunded (Alipay): compared as running
	// totals per trade.
	RefundLinesRunning
	// RefundLinesPerOrder: no refund lines; a line per order (KindOrder)
	// carries its payment and its refunds so far (Shouqianba): compared per
	// order, and files merge per order rather than replace a day.
	RefundLinesPerOrder
)

// parsers are the statement parsers, by channel code: the ones
// allchannels registers, and a test's (channelstest.Register).
var (
	parsersMu sync.RWMutex
	parsers   = map[channels.Channel]Parser{}
)

func init() { registry.Parser = register }

// errParserRegistered is wrapped by register's error for a code that has
// a parser already.
var errParserRegistered = errors.New("statement parser already registered")

// register adds the Parser v for code and returns the function that
// removes it again; it is reached only through pkg/internal/registry.
func register(code string, v any) (func(), error) {
	p, ok := v.(Parser)
	if !ok {
		return nil, fmt.Errorf("register statement parser %s: %T is not a statements.Parser", code, v)
	}
	if p.Parse == nil || p.Refunds < RefundLinesByNumber || p.Refunds > RefundLinesPerOrder {
		return nil, fmt.Errorf("register statement parser %s: a Parse and a refund shape are required", code)
	}
	ch := channels.Channel(code)
	parsersMu.Lock()
	defer parsersMu.Unlock()
	if _, dup := parsers[ch]; dup {
		return nil, fmt.Errorf("register statement parser: %w: %s", errParserRegistered, code)
	}
	parsers[ch] = p
	return func() {
		parsersMu.Lock()
		defer parsersMu.Unlock()
		delete(parsers, ch)
	}, nil
}

// ParserOf returns the statement parser of channel ch and whether there is
// one.
func ParserOf(ch channels.Channel) (Parser, bool) {
	parsersMu.RLock()
	defer parsersMu.RUnlock()
	p, ok := parsers[ch]
	return p, ok
}

// parserOf is ParserOf without the flag: the zero Parser for a channel
// without one.
func parserOf(ch channels.Channel) Parser {
	p, _ := ParserOf(ch)
	return p
}

// RefundLinesOf is ch's Parser.Refunds; 0 for a channel without a parser.
func RefundLinesOf(ch channels.Channel) RefundLines { return parserOf(ch).Refunds }

// PaymentSettled reports whether a payment line of ch with status is money
// the channel settled (Parser.PaymentSettled; true when the channel's
// parser does not say).
func PaymentSettled(ch channels.Channel, status string) bool {
	if f := parserOf(ch).PaymentSettled; f != nil {
		return f(status)
	}
	return true
}

// LineCanceled reports whether a line of ch with status is the channel's
// cancel (Parser.Canceled; false when the channel's parser has none).
func LineCanceled(ch channels.Channel, status string) bool {
	if f := parserOf(ch).Canceled; f != nil {
		return f(status)
	}
	return false
}

// UnboundMerchant says why the merchant id, as BindingMerchantIDs names it
// for a statement of ch, can be bound to no tenant (Parser.UnboundMerchant);
// "" when it can.
func UnboundMerchant(ch channels.Channel, id string) string {
	if f := parserOf(ch).UnboundMerchant; f != nil {
		return f(id)
	}
	return ""
}
