package sqb_test

import (
	"bytes"
	"crypto/md5" //nolint:gosec // the channel's signature algorithm, recomputed independently
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/stretchr/testify/require"
)

// Sources: testdata/query/SOURCES.md.
const (
	// A.13: terminal_sn of the sqb-query SKILL.md request example
	// (WoSai/sqb-payment-skills @ 20a325346f0797e5e6551ef616006775fbf17c42).
	vectorTerminal = "10298371039"
	// A.13: the terminal key of WoSai/shouqianba-doc
	// zh-cn/api/interface/activate.md (snapshot d659dbcf).
	vectorKey = "68d499beda5f72116592f5c527465656"
	// A.13, COMPUTED (md5sum), not published.
	vectorSig = "3092db8962e9f2effe44e1e651f5d77a"
)

func readQueryVector(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "query", name))
	require.NoError(tb, err)
	return b
}

func vectorCreds() sqb.Credentials {
	return sqb.Credentials{TenantID: 1001, MerchantID: vectorTerminal, TerminalKeyFile: "sqb_terminal.key", TerminalKey: vectorKey}
}

func paymentTarget(terminal, tradeNo, orderNo string) channels.QueryTarget {
	return channels.QueryTarget{
		TenantID: 1001, Channel: sqb.Code, Kind: channels.QueryPayment,
		MerchantID: terminal, TradeNo: tradeNo, MerchantOrderNo: orderNo,
	}
}

func TestQuerySignatureVectors(t *testing.T) {
	body := readQueryVector(t, "skills_query_request.json")
	tests := []struct {
		name, sn, key string
		body          []byte
		want          string
	}{
		// A.13 (computed, not published): SOURCES.md.
		{"A.13", vectorTerminal, vectorKey, body, vectorTerminal + " " + vectorSig},
		// Javen205/IJPay WxPayKitTest.java @ 9293e8a8: md5("IJPay"), a
		// published MD5 vector in lowercase hex; body + empty key.
		{"IJPay", "t1", "", []byte("IJPay"), "t1 cbfc2149d454ecf4ab0f32e58430fcdd"},
		// The same digest with the key appended instead: body "IJ" + key "Pay".
		{"IJPay split", "t1", "Pay", []byte("IJ"), "t1 cbfc2149d454ecf4ab0f32e58430fcdd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, sqb.Authorization(tt.sn, tt.body, tt.key))
			require.NoError(t, sqb.CheckAuthorization(tt.want, tt.body, tt.sn, tt.key))
		})
	}
}

func TestBuildQueryRequestVector(t *testing.T) {
	// The A.13 body is the one BuildQueryRequest sends for a target known
	// by client_sn alone, so the request carries the A.13 signature.
	target := paymentTarget(vectorTerminal, "", "20230615143052001")
	req, err := sqb.BuildQueryRequest(target, vectorCreds(), "https://vsi-api.shouqianba.com/", time.Time{}, "")
	require.NoError(t, err)
	require.Equal(t, http.MethodPost, req.Method)
	require.Equal(t, "https://vsi-api.shouqianba.com/upay/v2/query", req.URL)
	require.Equal(t, string(readQueryVector(t, "skills_query_request.json")), string(req.Body))
	require.Equal(t, vectorTerminal+" "+vectorSig, req.Header.Get("Authorization"))
	require.Equal(t, "application/json", req.Header.Get("Content-Type"))
	require.Len(t, req.Header, 2)

	// Time and nonce are not part of Shouqianba's signature.
	again, err := sqb.BuildQueryRequest(target, vectorCreds(), "https://vsi-api.shouqianba.com/", time.Now(), "nonce")
	require.NoError(t, err)
	require.Equal(t, req, again)
}

func TestBuildQueryRequestPrefersSN(t *testing.T) {
	creds := vectorCreds()
	for _, kind := range []channels.QueryKind{channels.QueryPayment, channels.QueryRefund} {
		target := paymentTarget(vectorTerminal, "7892840250140845", "20230615143052001")
		target.Kind = kind
		target.RefundNo = "R1"
		req, err := sqb.BuildQueryRequest(target, creds, sqb.DefaultQueryBaseURL, time.Time{}, "")
		require.NoError(t, err)
		require.Equal(t, sqb.DefaultQueryBaseURL+sqb.QueryPath, req.URL)
		require.JSONEq(t, `{"terminal_sn":"10298371039","sn":"7892840250140845"}`, string(req.Body))
		// Byte for byte: the signature covers the exact bytes sent.
		const want = `{"terminal_sn":"10298371039","sn":"7892840250140845"}`
		require.True(t, bytes.Equal([]byte(want), req.Body), "body %s, want %s", req.Body, want)
		// Recomputed independently: md5 over the exact bytes + key.
		sum := md5.Sum(append(append([]byte(nil), req.Body...), creds.TerminalKey...)) //nolint:gosec // the channel's algorithm
		require.Equal(t, vectorTerminal+" "+hex.EncodeToString(sum[:]), req.Header.Get("Authorization"))
	}
}

func TestCheckAuthorizationRefuses(t *testing.T) {
	body := readQueryVector(t, "skills_query_request.json")
	good := vectorTerminal + " " + vectorSig
	flipped := append([]byte(nil), body...)
	flipped[len(flipped)-3] ^= 1
	tests := []struct {
		name, header, sn, key string
		body                  []byte
	}{
		{"one body byte changed", good, vectorTerminal, vectorKey, flipped},
		{"another key", good, vectorTerminal, "68d499beda5f72116592f5c527465657", body},
		{"another terminal", good, "10298371040", vectorKey, body},
		{"uppercase hex", vectorTerminal + " " + strings.ToUpper(vectorSig), vectorTerminal, vectorKey, body},
		{"no separator", vectorTerminal + vectorSig, vectorTerminal, vectorKey, body},
		{"empty", "", vectorTerminal, vectorKey, body},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := sqb.CheckAuthorization(tt.header, tt.body, tt.sn, tt.key)
			require.ErrorIs(t, err, sqb.ErrBadAuthorization)
			require.NotContains(t, err.Error(), tt.key)
			require.NotContains(t, err.Error(), vectorSig[:8])
		})
	}
}

func TestBuildQueryRequestRefuses(t *testing.T) {
	ok := paymentTarget(vectorTerminal, "", "20230615143052001")
	tests := []struct {
		name  string
		edit  func(*channels.QueryTarget, *sqb.Credentials)
		base  string
		inErr string
	}{
		{"another channel", func(t *channels.QueryTarget, _ *sqb.Credentials) { t.Channel = channels.WeChat }, "", "channel"},
		{"another tenant", func(t *channels.QueryTarget, _ *sqb.Credentials) { t.TenantID = 1002 }, "", "tenant"},
		{"another terminal", func(t *channels.QueryTarget, _ *sqb.Credentials) { t.MerchantID = "10298371040" }, "", "terminal_sn"},
		{"unknown kind", func(t *channels.QueryTarget, _ *sqb.Credentials) { t.Kind = "ORDER" }, "", "kind"},
		{"no order number", func(t *channels.QueryTarget, _ *sqb.Credentials) { t.MerchantOrderNo = "" }, "", "neither"},
		{"refund without number", func(t *channels.QueryTarget, _ *sqb.Credentials) { t.Kind = channels.QueryRefund }, "", "refund number"},
		{"control character", func(t *channels.QueryTarget, _ *sqb.Credentials) { t.MerchantOrderNo = "a\nb" }, "", "control"},
		{"no key", func(_ *channels.QueryTarget, c *sqb.Credentials) { c.TerminalKey = "" }, "", "empty"},
		{"key with space", func(_ *channels.QueryTarget, c *sqb.Credentials) { c.TerminalKey = "ab cd" }, "", "whitespace"},
		{"no tenant", func(t *channels.QueryTarget, c *sqb.Credentials) { c.TenantID, t.TenantID = 0, 0 }, "", "tenant_id"},
		{"plain http", nil, "http://api.shouqianba.com", "https"},
		{"query in base", nil, "https://api.shouqianba.com?x=1", "https"},
		{"user info in base", nil, "https://u:secret@api.shouqianba.com", "https"},
		{"relative base", nil, "/upay", "https"},
		{"bad base", nil, "https://api.shouqianba.com/%zz", "base URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target, creds, base := ok, vectorCreds(), sqb.DefaultQueryBaseURL
			if tt.edit != nil {
				tt.edit(&target, &creds)
			}
			if tt.base != "" {
				base = tt.base
			}
			_, err := sqb.BuildQueryRequest(target, creds, base, time.Time{}, "")
			require.ErrorIs(t, err, sqb.ErrBadQueryTarget)
			require.Contains(t, err.Error(), tt.inErr)
			require.NotContains(t, err.Error(), vectorKey)
			require.NotContains(t, err.Error(), "secret")
		})
	}
}

func TestParseTerminalKey(t *testing.T) {
	for _, in := range []string{vectorKey, vectorKey + "\n"} {
		got, err := sqb.ParseTerminalKey([]byte(in))
		require.NoError(t, err)
		require.Equal(t, vectorKey, got)
	}
	tests := []struct{ name, in, inErr string }{
		{"empty", "", "empty"},
		{"newline only", "\n", "empty"},
		{"two newlines", vectorKey + "\n\n", "line break"},
		{"CRLF", vectorKey + "\r\n", "carriage return"},
		{"leading space", " " + vectorKey, "whitespace"},
		{"trailing space", vectorKey + " ", "whitespace"},
		{"tab", vectorKey + "\t", "whitespace"},
		{"two lines", vectorKey + "\n" + vectorKey, "line break"},
		{"NUL", vectorKey + "\x00", "control"},
		{"non-ASCII", vectorKey + "é", "non-ASCII"},
		{"BOM", "\ufeff" + vectorKey, "non-ASCII"},
		{"too long", strings.Repeat("a", sqb.MaxTerminalKeyLen+1), "at most"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sqb.ParseTerminalKey([]byte(tt.in))
			require.ErrorIs(t, err, sqb.ErrBadTerminalKey)
			require.Contains(t, err.Error(), tt.inErr)
			require.NotContains(t, err.Error(), vectorKey)
			require.NotContains(t, err.Error(), vectorKey[:6])
		})
	}
}

func TestCredentialsNeverShowTheKey(t *testing.T) {
	c := vectorCreds()
	require.NoError(t, c.Validate())
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("creds", "c", c)
	for _, s := range []string{c.String(), fmt.Sprintf("%v|%+v|%#v|%s", c, c, c, c), logged.String()} {
		require.NotContains(t, s, vectorKey)
		require.Contains(t, s, vectorTerminal)
		require.Contains(t, s, "******")
	}
	require.Contains(t, sqb.Credentials{}.String(), "TerminalKey: none")
	err := sqb.Credentials{TenantID: 1, MerchantID: "t", TerminalKey: strings.Repeat("k", 200)}.Validate()
	require.ErrorIs(t, err, sqb.ErrBadTerminalKey)
	require.NotContains(t, err.Error(), "kkkk")
}
