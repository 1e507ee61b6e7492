package alipay

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The raw-value extractor against encoding/json: Alipay signs the exact
// text of one member, so the extractor must find the very bytes
// encoding/json's json.RawMessage holds for it.

// ReadQueryTestdata returns testdata/query/name; the external tests use
// it too.
func ReadQueryTestdata(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "query", name))
	require.NoError(tb, err)
	return b
}

func TestSplitAnswerPublished(t *testing.T) {
	// A.7 checkResponseSign "should work" and getSignStr "include sign key
	// in data": whitespace around the member, a nested "sign", \/ escapes.
	for _, tc := range []struct{ body, signed, method string }{
		{"a7_file_upload_response.json", "a7_file_upload_signed_text.txt", "alipay.open.file.upload"},
		{"a7_getsignstr_include_sign.json", "a7_getsignstr_include_sign_signed_text.txt", "alipay.offline.material.image.upload"},
	} {
		t.Run(tc.body, func(t *testing.T) {
			parts, err := splitAnswer(ReadQueryTestdata(t, tc.body), tc.method)
			require.NoError(t, err)
			require.Equal(t, string(ReadQueryTestdata(t, tc.signed)), string(parts.response))
			require.True(t, parts.hasSign)
		})
	}
}

func TestJSONMembersTricky(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string // name, value, name, value…
	}{
		{"empty", `{}`, nil},
		{"escaped quote and braces", `{"a":"x\"}{\\","b":{"c":"}\"{"}}`, []string{"a", `"x\"}{\\"`, "b", `{"c":"}\"{"}`}},
		{"escaped slash kept", `{"u":"http:\/\/x"}`, []string{"u", `"http:\/\/x"`}},
		{"nested sign", ` { "r" : {"sign":"in","x":[1,{"y":"]"}]} , "sign" : "out" } `, []string{"r", `{"sign":"in","x":[1,{"y":"]"}]}`, "sign", `"out"`}},
		{"literals and numbers", `{"t":true,"n":null,"f":-1.5e3}`, []string{"t", "true", "n", "null", "f", "-1.5e3"}},
		{"escaped name", `{"\u0073ign":"s"}`, []string{"sign", `"s"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := jsonMembers([]byte(tc.doc))
			require.NoError(t, err)
			var got []string
			for _, m := range ms {
				got = append(got, m.name, string(m.value))
			}
			require.Equal(t, tc.want, got)
		})
	}
	for _, bad := range []string{
		``, `[]`, `"s"`, `{"a":1,}`, `{"a":1}x`, `{"a":1,"a":2}`, `{"sign":1,"\u0073ign":2}`,
		`{"Trade_Status":"A","trade_status":"B"}`, `{"a":"\x"}`,
	} {
		_, err := jsonMembers([]byte(bad))
		require.Error(t, err, "%s", bad)
	}
}

// FuzzJSONMembers checks jsonMembers against encoding/json: whenever it
// reads an object, encoding/json reads the same members with byte-equal
// json.RawMessage values; it refuses exactly what is not an object, and
// repeated names only.
func FuzzJSONMembers(f *testing.F) {
	for _, name := range []string{
		"a7_file_upload_response.json", "a7_getsignstr_include_sign.json",
		"a11_wait_buyer_pay.json", "a11_trade_success.json", "a11_refund_query.json",
	} {
		f.Add(ReadQueryTestdata(f, name))
	}
	f.Add([]byte(`{"a":"x\"}{\\","b":{"c":"}\"{"},"u":"http:\/\/x"}`))
	f.Add([]byte(`{"a":1,"A":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := jsonMembers(data)
		var m map[string]json.RawMessage
		jerr := json.Unmarshal(data, &m)
		if err != nil {
			if jerr == nil && m != nil && len(m) > 0 {
				// encoding/json read an object: the only refusal left is a
				// repeated name, which encoding/json silently merges.
				require.Contains(t, err.Error(), "more than once")
			}
			return
		}
		require.NoError(t, jerr, "jsonMembers read what encoding/json refuses")
		require.Len(t, m, len(ms))
		for _, mem := range ms {
			raw, ok := m[mem.name]
			require.True(t, ok, "member %q", mem.name)
			require.True(t, bytes.Equal(raw, mem.value), "member %q: %q vs %q", mem.name, mem.value, raw)
		}
	})
}
