package wechat

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
)

// AnswerWindow is how far an answer's Wechatpay-Timestamp may be from the
// verifier's clock: answers at or beyond it are refused, as WeChat Pay's
// SDKs refuse them.
const AnswerWindow = 300 * time.Second

// VerifyAnswer checks the signature of answer resp to a query for
// merchantID at now: Wechatpay-Signature must be the SHA256withRSA
// signature of "Wechatpay-Timestamp\nWechatpay-Nonce\nbody\n" by the key of
// keys whose MerchantID is merchantID and whose KeyID is Wechatpay-Serial,
// and Wechatpay-Timestamp must be less than AnswerWindow from now. The
// error, a *channels.Error of KindUnauthenticated, says which check failed
// (a missing or repeated header, the time, an unknown serial, a bad
// signature); the answer must then be acted on in no way.
func VerifyAnswer(resp channels.QueryResponse, merchantID string, keys []PublicKey, now time.Time) error {
	fail := func(format string, args ...any) error {
		return channels.Errorf(channels.KindUnauthenticated, "wechat query answer (HTTP %d): "+format,
			append([]any{resp.StatusCode}, args...)...)
	}
	var hv [4]string
	for i, name := range []string{HeaderTimestamp, HeaderNonce, HeaderSignature, HeaderSerial} {
		switch vs := resp.Header.Values(name); len(vs) {
		case 0:
			return fail("no %s header: unsigned", name)
		case 1:
			hv[i] = vs[0]
		default:
			return fail("%d %s headers", len(vs), name)
		}
	}
	ts, nonce, sig, serial := hv[0], hv[1], hv[2], hv[3]
	if st := resp.Header.Values(HeaderSignatureType); len(st) > 1 || (len(st) == 1 && st[0] != AuthScheme) {
		return fail("%s is not %s", HeaderSignatureType, AuthScheme)
	}
	sec, err := parseTimestamp(ts)
	if err != nil {
		return fail("%s %s: %w", HeaderTimestamp, channels.Quote(ts), err)
	}
	if d := now.Sub(time.Unix(sec, 0)).Abs(); d >= AnswerWindow {
		return fail("%s %s is %s from now, the window is %s", HeaderTimestamp, ts, d.Truncate(time.Second), AnswerWindow)
	}
	var key *rsa.PublicKey
	for _, k := range keys {
		if k.MerchantID == merchantID && k.KeyID == serial {
			key = k.Key
			break
		}
	}
	if key == nil {
		return fail("%s %s is not a configured key of merchant %s", HeaderSerial, channels.Quote(serial), channels.Quote(merchantID))
	}
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return fail("%s is not base64", HeaderSignature)
	}
	digest := sha256.Sum256(AnswerMessage(ts, nonce, resp.Body))
	if err := rsa.VerifyPKCS1v15(key, crypto.SHA256, digest[:], raw); err != nil {
		return fail("signature does not verify with key %s of merchant %s", channels.Quote(serial), channels.Quote(merchantID))
	}
	return nil
}

// parseTimestamp reads Unix seconds written as 1 to 12 decimal digits.
func parseTimestamp(s string) (int64, error) {
	if s == "" || len(s) > 12 {
		return 0, fmt.Errorf("want 1 to 12 digits")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("want decimal digits")
		}
	}
	return strconv.ParseInt(s, 10, 64)
}
