package alipay

import (
	"net/url"
	"testing"
)

// FuzzAlipayForm holds the Alipay form scanner to url.ParseQuery: both
// accept the same bodies (bar repeated decoder fields, which the scanner
// refuses) and read the same values.
func FuzzAlipayForm(f *testing.F) {
	f.Add("trade_no=1&total_amount=0.01&gmt_payment=2023-05-29+15%3A28%3A53&x=%E4%B8%AD")
	f.Add("a=%zz&trade_no=1")
	f.Add("trade_no=1;x=2")
	f.Add("trade_no=1&trade_no=2")
	f.Fuzz(func(t *testing.T, body string) {
		form, err := parseAlipayForm(body)
		ref, refErr := url.ParseQuery(body)
		repeated := false
		for _, k := range alipayFields {
			if len(ref[k]) > 1 {
				repeated = true
			}
		}
		if err != nil {
			if refErr == nil && !repeated {
				t.Fatalf("scanner refuses %q (%v), url.ParseQuery accepts", body, err)
			}
			return
		}
		if refErr != nil || repeated {
			t.Fatalf("scanner accepts %q, url.ParseQuery: %v, repeated %v", body, refErr, repeated)
		}
		for _, k := range alipayFields {
			if form.get(k) != ref.Get(k) {
				t.Fatalf("field %s: scanner %q, url.ParseQuery %q", k, form.get(k), ref.Get(k))
			}
		}
	})
}
