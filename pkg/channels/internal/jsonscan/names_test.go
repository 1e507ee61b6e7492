package jsonscan

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

func TestFirstRepeat(t *testing.T) {
	for _, tt := range []struct {
		name, doc string
		want      Repeat // zero: no repeat
	}{
		{"no repeat", `{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]}`, Repeat{}},
		{"not an object", `["a","a"]`, Repeat{}},
		{"exact", `{"total_amount":"100","total_amount":"999900"}`, Repeat{Name: "total_amount", First: "total_amount"}},
		{"case", `{"total_amount":"100","TOTAL_AMOUNT":"999900"}`, Repeat{Name: "TOTAL_AMOUNT", First: "total_amount"}},
		{"escaped", `{"total_amount":"100","total\u005famount":"999900"}`, Repeat{Name: "total_amount", First: "total_amount"}},
		{"escaped first", `{"\u0074otal_amount":"100","Total_Amount":"1"}`, Repeat{Name: "Total_Amount", First: "total_amount"}},
		{"kelvin sign", `{"k":1,"\u212a":2}`, Repeat{Name: "\u212a", First: "k"}},
		{"long s", `{"sn":1,"\u017fN":2}`, Repeat{Name: "\u017fN", First: "sn"}},
		{"nested", `{"biz_response":{"data":{"sn":"1","x":[],"SN":"2"}}}`, Repeat{Path: "biz_response.data", Name: "SN", First: "sn"}},
		{"in an array", `{"a":[1,{"b":{}},{"c":1,"c":2}]}`, Repeat{Path: "a[2]", Name: "c", First: "c"}},
		{"array of arrays", `[[],[{"x":1,"X":1}]]`, Repeat{Path: "[1][0]", Name: "X", First: "x"}},
		{"values that look like names", `{"a":"a","b":"a","c":{"d":"\"a\\\\"}}`, Repeat{}},
		{"after nesting", `{"a":{"b":1},"A":2}`, Repeat{Name: "A", First: "a"}},
		{"same name in sibling objects", `{"a":{"x":1},"b":{"x":1}}`, Repeat{}},
		{"invalid UTF-8 becomes U+FFFD", "{\"\xff\":1,\"\xfe\":2}", Repeat{Name: "\ufffd", First: "\ufffd"}},
		{"İ is not i", `{"i":1,"\u0130":2}`, Repeat{}},
		{"many members", manyMembers(40, `"M5"`), Repeat{Name: "M5", First: "m5"}},
		{"many members, escaped", manyMembers(40, `"m\u0035"`), Repeat{Name: "m5", First: "m5"}},
		{"many members, none repeats", manyMembers(40, `"other"`), Repeat{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if !json.Valid([]byte(tt.doc)) {
				t.Fatalf("not JSON: %s", tt.doc)
			}
			got, found := FirstRepeat([]byte(tt.doc))
			if found != (tt.want != Repeat{}) || got != tt.want {
				t.Fatalf("FirstRepeat = %+v, %v; want %+v", got, found, tt.want)
			}
		})
	}
}

// manyMembers is an object of n members "m0"…, then the member named
// last (a JSON string as written).
func manyMembers(n int, last string) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		b.WriteString(`"m` + strconv.Itoa(i) + `":1,`)
	}
	b.WriteString(last + ":2}")
	return b.String()
}

// FuzzFirstRepeat holds FirstRepeat to a reference built on encoding/json's
// own tokenizer and bytes.EqualFold: for every document encoding/json
// accepts, both find a repeat or neither does, and the same one.
func FuzzFirstRepeat(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"A":2}`, `{"a":{"b":[{"c":1,"C":2}]}}`, `{"\u0041":1,"a":2}`, `{"\ud83d\ude00":1,"\ud83d\ude00":2}`,
		`{"\ud800":1,"\ufffd":2}`, "{\"\xc3\":1,\"\xc3\xa9\":2}", `{"k":1,"\u212a":2}`, `{"ß":1,"ẞ":2}`, `[1,"a",true,null,-1.5e3]`,
		`{"a\\":1,"a\\\"":2,"A\\":3}`, ` { "x" : [ { } , { "y" : 1 , "Y" : 2 } ] } `, `{"":1,"":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, found := FirstRepeat(data) // on anything at all: no panic, no hang
		if !json.Valid(data) {
			return
		}
		want, wantFound := referenceRepeat(t, data)
		if found != wantFound || got != want {
			t.Fatalf("FirstRepeat(%q) = %+v, %v; reference %+v, %v", data, got, found, want, wantFound)
		}
	})
}

// referenceRepeat finds the first repeated member name with
// encoding/json's Decoder.Token and bytes.EqualFold, quadratically.
func referenceRepeat(t *testing.T, data []byte) (Repeat, bool) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var walk func(path string) (Repeat, bool)
	walk = func(path string) (Repeat, bool) {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("reference: %v", err)
		}
		switch tok {
		case json.Delim('{'):
			var seen []string
			for dec.More() {
				nt, err := dec.Token()
				if err != nil {
					t.Fatalf("reference: %v", err)
				}
				name := nt.(string)
				for _, prev := range seen {
					if bytes.EqualFold([]byte(prev), []byte(name)) {
						return Repeat{Path: path, Name: name, First: prev}, true
					}
				}
				seen = append(seen, name)
				sub := name
				if path != "" {
					sub = path + "." + name
				}
				if r, ok := walk(sub); ok {
					return r, true
				}
			}
			_, _ = dec.Token()
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if r, ok := walk(path + "[" + strconv.Itoa(i) + "]"); ok {
					return r, true
				}
			}
			_, _ = dec.Token()
		}
		return Repeat{}, false
	}
	return walk("")
}

// BenchmarkFirstRepeat measures the standard path's extra pass over a
// decrypted WeChat transaction, next to the encoding/json decode it
// follows (its cost is the ratio of the two).
func BenchmarkFirstRepeat(b *testing.B) {
	doc := []byte(`{"mchid":"1230000109","appid":"wxd678efh567hg6787","out_trade_no":"POS20240601000123",` +
		`"transaction_id":"4200002211202406011234567890","trade_type":"MICROPAY","trade_state":"SUCCESS",` +
		`"trade_state_desc":"\u652f\u4ed8\u6210\u529f","bank_type":"OTHERS","attach":"","success_time":"2024-06-01T12:00:05+08:00",` +
		`"payer":{"openid":"oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"},"amount":{"total":2580,"payer_total":2580,"currency":"CNY","payer_currency":"CNY"}}`)
	b.Run("FirstRepeat", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, found := FirstRepeat(doc); found {
				b.Fatal("a repeat")
			}
		}
	})
	b.Run("json.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v struct {
				MchID  string `json:"mchid"`
				Amount struct {
					Total int64 `json:"total"`
				} `json:"amount"`
			}
			if err := json.Unmarshal(doc, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
