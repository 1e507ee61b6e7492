package allchannels_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"io/fs"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/alipay"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
)

// The test merchant's identifiers.
const (
	testMchID       = "1230000109"
	testSerial      = "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"
	testPID         = "2088101122136241"
	testAppID       = "2021000000000000"
	testTerminal    = "01939202039923029"
	testTerminalKey = "e3b0c44298fc1c149afbf4c8996fb924"
)

// queryEntry is a credentials entry of ch for the test merchant,
// its files read from files.
func queryEntry(t *testing.T, ch channels.Channel, files map[string][]byte) channels.QueryCredentialsEntry {
	t.Helper()
	e := channels.QueryCredentialsEntry{TenantID: 1001, Channel: ch, ReadFile: func(name string) ([]byte, error) {
		if b, ok := files[name]; ok {
			return b, nil
		}
		return nil, fs.ErrNotExist
	}}
	switch ch {
	case wechat.Code:
		e.MerchantID = testMchID
		e.Fields = map[string]string{"serial_no": testSerial, "private_key_file": "key.pem"}
	case alipay.Code:
		e.MerchantID = testPID
		e.Fields = map[string]string{"app_id": testAppID, "private_key_file": "key.pem"}
	case sqb.Code:
		e.MerchantID = testTerminal
		e.Fields = map[string]string{"terminal_key_file": "terminal.key"}
	}
	return e
}

// TestQueryHooks: every built-in channel can be queried through its Spec
// alone: its credentials parser reads an entry, and its builder signs the
// very request the channel's own builder signs.
func TestQueryHooks(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	files := map[string][]byte{
		"key.pem":      pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
		"terminal.key": []byte(testTerminalKey + "\n"),
	}
	now := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, ch := range channels.Codes() {
		t.Run(string(ch), func(t *testing.T) {
			spec, _ := channels.Lookup(ch)
			require.NotNil(t, spec.BuildQuery)
			require.NotNil(t, spec.ParseQueryCredentials)
			creds, err := spec.ParseQueryCredentials(queryEntry(t, ch, files))
			require.NoError(t, err)
			require.Equal(t, int64(1001), creds.QueryTenantID())
			require.NotContains(t, creds.String(), "PRIVATE")
			require.NotContains(t, creds.String(), testTerminalKey)

			target := channels.QueryTarget{
				TenantID: 1001, Channel: ch, Kind: channels.QueryPayment,
				MerchantID: creds.QueryMerchantID(), MerchantOrderNo: "P20240601000001",
			}
			got, err := spec.BuildQuery(target, creds, "https://api.example.com", now, "n0nce")
			require.NoError(t, err)
			var want channels.QueryRequest
			switch ch {
			case wechat.Code:
				want, err = wechat.NewQueryRequest(target, wechat.Credentials{TenantID: 1001, MerchantID: testMchID, SerialNo: testSerial, PrivateKey: key}, "https://api.example.com", now, "n0nce")
			case alipay.Code:
				want, err = alipay.BuildQueryRequest(target, alipay.Credentials{TenantID: 1001, MerchantID: testPID, AppID: testAppID, PrivateKeyFile: "key.pem", PrivateKey: key}, "https://api.example.com", now, "n0nce")
			case sqb.Code:
				want, err = sqb.BuildQueryRequest(target, sqb.Credentials{TenantID: 1001, MerchantID: testTerminal, TerminalKeyFile: "terminal.key", TerminalKey: testTerminalKey}, "https://api.example.com", now, "n0nce")
			}
			require.NoError(t, err)
			require.Equal(t, want, got)

			_, err = spec.BuildQuery(target, otherCreds{}, "https://api.example.com", now, "n0nce")
			require.ErrorContains(t, err, "credentials are")
		})
	}
}

type otherCreds struct{}

func (otherCreds) QueryTenantID() int64    { return 1001 }
func (otherCreds) QueryMerchantID() string { return "x" }
func (otherCreds) String() string          { return "other" }

// TestQueryCredentialsRefused: an entry with a field of another channel,
// one without its key file, or one whose key file is not a key is refused,
// and the error never quotes the file's content.
func TestQueryCredentialsRefused(t *testing.T) {
	const secret = "SECRET-KEY-MATERIAL"
	for _, ch := range channels.Codes() {
		spec, _ := channels.Lookup(ch)
		t.Run(string(ch)+"/unknown field", func(t *testing.T) {
			e := queryEntry(t, ch, nil)
			e.Fields["terminal_key"] = "x"
			e.Fields["app_idd"] = "x"
			_, err := spec.ParseQueryCredentials(e)
			require.ErrorContains(t, err, "unknown field(s) app_idd, terminal_key")
		})
		t.Run(string(ch)+"/missing file", func(t *testing.T) {
			_, err := spec.ParseQueryCredentials(queryEntry(t, ch, nil))
			require.ErrorIs(t, err, fs.ErrNotExist)
		})
		t.Run(string(ch)+"/bad key", func(t *testing.T) {
			bad := []byte("-----BEGIN PRIVATE KEY-----\n" + secret + "\n-----END PRIVATE KEY-----\n")
			_, err := spec.ParseQueryCredentials(queryEntry(t, ch, map[string][]byte{"key.pem": bad, "terminal.key": bad}))
			require.Error(t, err)
			require.NotContains(t, err.Error(), secret)
			require.NotErrorIs(t, err, fs.ErrNotExist)
		})
	}
}
