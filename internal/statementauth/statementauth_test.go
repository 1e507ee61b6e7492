package statementauth_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/statementauth"
)

const (
	secretA = "0123456789abcdef0123456789abcdef" // 32 bytes
	secretB = "fedcba9876543210fedcba9876543210-and-more=="
)

func mustParse(tb testing.TB, file string) statementauth.Keys {
	tb.Helper()
	ks, err := statementauth.Parse([]byte(file))
	require.NoError(tb, err)
	return ks
}

func TestParse(t *testing.T) {
	t.Run("comments, blank lines, CRLF and the current key first", func(t *testing.T) {
		ks := mustParse(t, "# statement keys\r\n\r\n  2026-12 = "+secretB+"\r\n# retired when the topics no longer hold its events\n2026-06="+secretA+"\n")
		assert.Equal(t, []string{"2026-12", "2026-06"}, ks.IDs())
		assert.Equal(t, "2026-12", ks.CurrentID())
		assert.Equal(t, 2, ks.Len())
	})
	for _, tc := range []struct {
		name, file, want string
	}{
		{"short secret", "k1=" + secretA[:31] + "\n", "line 1: the secret is 31 bytes, at least 32 required"},
		{"duplicate id", "k1=" + secretA + "\n# x\nk1=" + secretB + "\n", "line 3: the key id repeats line 1's"},
		{"no equals sign", "k1=" + secretA + "\n" + secretA + "\n", "line 2: want KEY_ID=SECRET"},
		{"a secret holding '=' with no id", "k1=" + secretA + "\n" + secretB + "\n", "line 2:"},
		{"empty id", "=" + secretA + "\n", "line 1: key id is empty"},
		{"id with a colon", "a:b=" + secretA + "\n", "line 1: key id must be printable ASCII without ':', '=' or whitespace"},
		{"id with a space", "a b=" + secretA + "\n", "line 1: key id must be printable ASCII"},
		{"id with a control character", "a\tb=" + secretA + "\n", "line 1: key id must be printable ASCII"},
		{"no key at all", "# nothing yet\n\n", "no key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := statementauth.Parse([]byte(tc.file))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			for _, s := range []string{secretA, secretA[:31], secretB, secretA[:8], secretB[:8]} {
				assert.NotContains(t, err.Error(), s, "the error must not show a secret")
			}
		})
	}
	t.Run("every problem at once", func(t *testing.T) {
		_, err := statementauth.Parse([]byte("k1=short\nbad line\nk2=" + secretA + "\n"))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "line 1:")
		assert.Contains(t, err.Error(), "line 2:")
		assert.NotContains(t, err.Error(), "line 3:")
	})
	t.Run("printed keys are masked", func(t *testing.T) {
		ks := mustParse(t, "k1="+secretA+"\nk2="+secretB+"\n")
		for _, s := range []string{fmt.Sprint(ks), fmt.Sprintf("%v %+v %#v %s", ks, ks, ks, ks)} {
			assert.NotContains(t, s, secretA)
			assert.NotContains(t, s, secretB)
			assert.Contains(t, s, "k1")
		}
	})
}

func TestSignVerify(t *testing.T) {
	value := []byte(`{"tenant_id":7,"channel":"WECHAT","content_type":"application/vnd.paycb.statement+json","body":"{}"}`)
	ks := mustParse(t, "new="+secretB+"\nold="+secretA+"\n")

	sig, err := ks.Sign(value)
	require.NoError(t, err)
	m := hmac.New(sha256.New, []byte(secretB))
	m.Write(value)
	assert.Equal(t, "new:"+hex.EncodeToString(m.Sum(nil)), sig, "the current key's HMAC-SHA256 of the whole value, lowercase hex")
	require.NoError(t, ks.Verify(value, sig), "the positive case: a signature of the current key verifies")

	old := mustParse(t, "old="+secretA+"\n")
	oldSig, err := old.Sign(value)
	require.NoError(t, err)
	require.NoError(t, ks.Verify(value, oldSig), "an older key still verifies")

	other := mustParse(t, "other="+secretA+"\n")
	otherSig, err := other.Sign(value)
	require.NoError(t, err)
	forgedNew := "new:" + strings.SplitN(otherSig, ":", 2)[1] // another secret's MAC under a known id

	tampered := append([]byte{}, value...)
	tampered[len(tampered)-3] = 'x'
	hexPart := strings.SplitN(sig, ":", 2)[1]
	for _, tc := range []struct {
		name, header string
		value        []byte
		want         error
	}{
		{"missing header", "", value, statementauth.ErrMissing},
		{"unknown key id", otherSig, value, statementauth.ErrUnknownKey},
		{"wrong MAC under a known id", forgedNew, value, statementauth.ErrMismatch},
		{"tampered value", sig, tampered, statementauth.ErrMismatch},
		{"no colon", "new" + hexPart, value, statementauth.ErrMalformed},
		{"bad hex", "new:" + strings.Repeat("zz", 32), value, statementauth.ErrMalformed},
		{"upper-case hex", "new:" + strings.ToUpper(hexPart), value, statementauth.ErrMalformed},
		{"short MAC", "new:" + hexPart[:62], value, statementauth.ErrMalformed},
		{"empty id", ":" + hexPart, value, statementauth.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ks.Verify(tc.value, tc.header)
			require.ErrorIs(t, err, tc.want)
			for _, s := range []string{secretA, secretB, hexPart} {
				assert.NotContains(t, err.Error(), s, "the reason must not reveal a secret or the expected MAC")
			}
		})
	}

	t.Run("no keys", func(t *testing.T) {
		var none statementauth.Keys
		_, err := none.Sign(value)
		require.ErrorIs(t, err, statementauth.ErrNoKeys)
		require.ErrorIs(t, none.Verify(value, sig), statementauth.ErrNoKeys)
	})
}

// TestParseNeverQuotesASecret: whatever is wrong with a line (written
// backwards, a secret with spaces where the id belongs, a short secret), the
// error names the line and never quotes what it holds.
func TestParseNeverQuotesASecret(t *testing.T) {
	secret := "0123456789abcdef0123456789abcdef-secret"
	for _, data := range []string{
		secret + "=k1\n",
		"two words " + secret + "=k1\n",
		"k1=" + secret[:10] + "\n",
		secret + "\n",
	} {
		_, err := statementauth.Parse([]byte(data))
		require.Error(t, err, data)
		assert.Contains(t, err.Error(), "line 1: ")
		assert.NotContains(t, err.Error(), secret[:10], "no part of the secret is quoted")
	}
}
