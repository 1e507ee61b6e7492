package sqb

import (
	"crypto/md5" //nolint:gosec // Shouqianba's request signature is MD5 over body + terminal key; nothing else is hashed with it
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
)

// The query client of Shouqianba upay: the order query, which also answers
// for the order's refunds (Shouqianba has no refund query). Requests are
// signed with the terminal key: Authorization is "{terminal_sn}
// {md5hex(body + terminal_key)}". Answers are unsigned: TLS to the
// configured host is all that authenticates them, which is the querier's
// business. Facts and sources: docs/queries.md.

// QueryPath is the path of the order query, POSTed to the base URL.
const QueryPath = "/upay/v2/query"

// DefaultQueryBaseURL is the API host Shouqianba's documentation names
// (zh-cn/api/sign.md, interface/query.md). Whether it is still the
// current host is UNCONFIRMED (the sqb-payment-skills repository names
// https://vsi-api.shouqianba.com with another path): PAYCB_QUERY_SQB_URL
// overrides it.
const DefaultQueryBaseURL = "https://api.shouqianba.com"

// ErrBadQueryTarget is what every refusal of BuildQueryRequest unwraps to:
// the target cannot be asked with these credentials and base URL.
var ErrBadQueryTarget = errors.New("sqb query target cannot be asked")

// queryBody is the order query's JSON body, in the order it is sent:
// terminal_sn, then sn or client_sn.
type queryBody struct {
	TerminalSN string `json:"terminal_sn"`
	SN         string `json:"sn,omitempty"`
	ClientSN   string `json:"client_sn,omitempty"`
}

// BuildQueryRequest builds the signed order query for target: POST
// {baseURL}/upay/v2/query with body {"terminal_sn":…,"sn":…} when the
// target knows the channel's trade number, else {"terminal_sn":…,
// "client_sn":…}; Content-Type application/json; Authorization as
// Authorization gives it over the exact body bytes. A refund target is
// asked about its order: DecodeQueryAnswer reads the refund from the
// order's answer.
//
// The time and nonce every channel's builder is given are not used:
// Shouqianba's signature has neither. It is pure: the same arguments give
// the same request.
//
// It refuses, with an error wrapping ErrBadQueryTarget: a target of
// another channel, tenant or terminal than creds; one without a merchant
// order number or trade number (or a refund number, for a refund target),
// or with an identifier channels.CheckID refuses; invalid credentials; a
// base URL that is not an absolute https URL without query or fragment.
func BuildQueryRequest(target channels.QueryTarget, creds Credentials, baseURL string, _ time.Time, _ string) (channels.QueryRequest, error) {
	if err := checkQueryTarget(target, creds); err != nil {
		return channels.QueryRequest{}, err
	}
	endpoint, err := queryURL(baseURL)
	if err != nil {
		return channels.QueryRequest{}, err
	}
	qb := queryBody{TerminalSN: creds.MerchantID}
	if target.TradeNo != "" {
		qb.SN = target.TradeNo
	} else {
		qb.ClientSN = target.MerchantOrderNo
	}
	body, err := json.Marshal(qb)
	if err != nil {
		return channels.QueryRequest{}, fmt.Errorf("encode sqb query body: %w", err)
	}
	h := make(http.Header)
	h.Set("Content-Type", "application/json")
	h.Set("Authorization", Authorization(creds.MerchantID, body, creds.TerminalKey))
	return channels.QueryRequest{Method: http.MethodPost, URL: endpoint, Header: h, Body: body}, nil
}

// checkQueryTarget refuses a target creds cannot ask about.
func checkQueryTarget(target channels.QueryTarget, creds Credentials) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadQueryTarget, fmt.Sprintf(format, args...))
	}
	if err := creds.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadQueryTarget, err)
	}
	switch {
	case target.Channel != Code:
		return bad("channel %q is not %s", target.Channel, Code)
	case target.TenantID != creds.TenantID:
		return bad("tenant %d, credentials of tenant %d", target.TenantID, creds.TenantID)
	case target.MerchantID != creds.MerchantID:
		return bad("terminal_sn %q, credentials of terminal_sn %q", target.MerchantID, creds.MerchantID)
	case target.Kind != channels.QueryPayment && target.Kind != channels.QueryRefund:
		return bad("kind %q", target.Kind)
	case target.TradeNo == "" && target.MerchantOrderNo == "":
		return bad("neither sn nor client_sn is known")
	case target.Kind == channels.QueryRefund && target.RefundNo == "":
		return bad("a refund query without a refund number")
	}
	for _, id := range []struct{ name, v string }{
		{"sn", target.TradeNo}, {"client_sn", target.MerchantOrderNo}, {"refund number", target.RefundNo},
	} {
		if id.v == "" {
			continue
		}
		if err := channels.CheckID("sqb query "+id.name, id.v); err != nil {
			return fmt.Errorf("%w: %w", ErrBadQueryTarget, err)
		}
	}
	return nil
}

// queryURL is the query's URL under baseURL, which must be an absolute
// https URL with a host and no query, fragment or user info; a trailing
// slash is dropped.
func queryURL(baseURL string) (string, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return "", fmt.Errorf("%w: base URL: %w", ErrBadQueryTarget, err)
	}
	if u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", fmt.Errorf("%w: base URL %q is not an https URL of a host without query, fragment or user info "+
			"(Shouqianba's answers are unsigned: TLS is all that authenticates them)", ErrBadQueryTarget, u.Redacted())
	}
	return strings.TrimSuffix(baseURL, "/") + QueryPath, nil
}

// Authorization is the Authorization header of a request with body to
// terminal terminalSN: "{terminalSN} {md5hex(body + terminalKey)}", the
// digest in lowercase hex over the exact bytes sent (zh-cn/api/sign.md).
func Authorization(terminalSN string, body []byte, terminalKey string) string {
	return terminalSN + " " + signBody(body, terminalKey)
}

// signBody is md5hex(body + key), lowercase.
func signBody(body []byte, key string) string {
	h := md5.New() //nolint:gosec // the channel's signature algorithm
	h.Write(body)
	h.Write([]byte(key))
	return hex.EncodeToString(h.Sum(nil))
}

// ErrBadAuthorization is what CheckAuthorization's refusals unwrap to.
var ErrBadAuthorization = errors.New("sqb authorization does not verify")

// CheckAuthorization verifies a request's Authorization header as
// Shouqianba does: it must name terminalSN and carry md5hex(body +
// terminalKey) in lowercase hex. It is for fake channel servers and tests;
// the error wraps ErrBadAuthorization and never shows the key or the
// expected digest.
func CheckAuthorization(header string, body []byte, terminalSN, terminalKey string) error {
	sn, sig, ok := strings.Cut(header, " ")
	if !ok {
		return fmt.Errorf("%w: not \"{terminal_sn} {signature}\"", ErrBadAuthorization)
	}
	if sn != terminalSN {
		return fmt.Errorf("%w: names terminal %s, not %s", ErrBadAuthorization, channels.Quote(sn), terminalSN)
	}
	want := signBody(body, terminalKey)
	if subtle.ConstantTimeCompare([]byte(sig), []byte(want)) != 1 {
		return fmt.Errorf("%w: signature of terminal %s is not md5hex(body + terminal key)", ErrBadAuthorization, terminalSN)
	}
	return nil
}
