package statementauth_test

import (
	"strings"
	"testing"

	"github.com/paycallback/paycallback/internal/statementauth"
)

// FuzzVerify: whatever a message's header says, Verify never panics,
// accepts only the signature Sign makes for that very value, and never
// puts the secret or the expected MAC in its reason.
func FuzzVerify(f *testing.F) {
	ks, err := statementauth.Parse([]byte("k1=" + secretA + "\nk2=" + secretB + "\n"))
	if err != nil {
		f.Fatal(err)
	}
	good, err := ks.Sign([]byte("{}"))
	if err != nil {
		f.Fatal(err)
	}
	for _, h := range []string{"", good, "k1:", ":", "k2:" + strings.Repeat("0", 64), "k1:" + strings.Repeat("G", 64), good + ":x"} {
		f.Add([]byte("{}"), h)
	}
	f.Fuzz(func(t *testing.T, value []byte, header string) {
		want, err := ks.Sign(value)
		if err != nil {
			t.Fatal(err)
		}
		err = ks.Verify(value, header)
		if (err == nil) != (header == want) {
			old, _ := statementauth.Parse([]byte("k2=" + secretB + "\n"))
			if alt, _ := old.Sign(value); err == nil && header == alt {
				return // the older key's signature verifies too
			}
			t.Fatalf("Verify(%q) = %v, Sign gives %q", header, err, want)
		}
		if err != nil {
			for _, s := range []string{secretA, secretB, want[3:]} {
				if strings.Contains(err.Error(), s) {
					t.Fatalf("reason %q reveals a secret or the expected MAC", err)
				}
			}
		}
	})
}

// FuzzParse: a key file of any contents is parsed or refused, never with a
// panic, and what it accepts holds a key that signs. (That a refusal names
// no secret is TestParse's.)
func FuzzParse(f *testing.F) {
	f.Add([]byte("k1=" + secretA + "\n"))
	f.Add([]byte("# c\r\n\r\nk1=" + secretA + "\r\nk2=" + secretB + "\n"))
	f.Add([]byte("k1=short\n" + secretB + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ks, err := statementauth.Parse(data)
		if err != nil {
			return
		}
		sig, err := ks.Sign(data)
		if err != nil {
			t.Fatalf("accepted a file whose keys do not sign: %v", err)
		}
		if err := ks.Verify(data, sig); err != nil {
			t.Fatalf("its own signature does not verify: %v", err)
		}
	})
}
