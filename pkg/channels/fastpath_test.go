package channels

import (
	"encoding/json"
	"testing"
)

// FuzzFastEnvelope holds the one-pass envelope decoder to the standard
// path (decodeJSON: encoding/json, refusing repeated member names):
// whenever it accepts an input, the standard path accepts it too and
// decodes the same envelope.
func FuzzFastEnvelope(f *testing.F) {
	f.Add([]byte(`{"tenant_id":1001,"channel":"WECHAT","received_at":"2026-12-02T10:00:00.123+08:00","content_type":"application/json","body":"{\"a\":\"\u4e2d\\u00e9\\n\"}"}`))
	f.Add([]byte(` { "body" : "x" , "tenant_id" : -0 } `))
	f.Add([]byte(`{"tenant_id":1e3}`))
	f.Add([]byte(`{"body":"\ud83d\ude00"}`))
	f.Add([]byte(`{}`))
	// Runs of backslashes before a quote: even ends the string, odd escapes it.
	f.Add([]byte(`{"body":"a\\","channel":"\\\"x\"\\\\"}`))
	// Repeated member names, exactly or in another case, at any depth.
	f.Add([]byte(`{"tenant_id":1001,"tenant_id":1002}`))
	f.Add([]byte(`{"body":"a","Body":"b"}`))
	f.Add([]byte(`{"x":1,"X":2,"channel":"SQB"}`))
	f.Add([]byte(`{"meta":{"a":[{"id":1,"id":2}]},"body":"x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast Envelope
		if !fastEnvelope(data, &fast) {
			return
		}
		var ref Envelope
		if err := decodeJSON(data, &ref); err != nil {
			t.Fatalf("fast path accepted %q, the standard path refuses: %v", data, err)
		}
		if fast.TenantID != ref.TenantID || fast.Channel != ref.Channel || fast.ContentType != ref.ContentType ||
			fast.Body != ref.Body || !fast.ReceivedAt.Equal(ref.ReceivedAt) {
			t.Fatalf("fast path %+v, standard path %+v for %q", fast, ref, data)
		}
		_, fastOffset := fast.ReceivedAt.Zone()
		_, refOffset := ref.ReceivedAt.Zone()
		if fastOffset != refOffset {
			t.Fatalf("zone offsets differ for %q", data)
		}
	})
}

// TestFastEnvelopeBackslashRuns: the closing quote of a string is the
// first one after an even run of backslashes.
func TestFastEnvelopeBackslashRuns(t *testing.T) {
	for _, data := range []string{
		`{"body":"a\\","channel":"b"}`,
		`{"body":"\\\"x\"\\\\","channel":"\\"}`,
		`{"body":"\"\"","channel":"\u005c\""}`,
		`{"body":"\\\\\\"}`,
	} {
		var fast, ref Envelope
		if !fastEnvelope([]byte(data), &fast) {
			t.Fatalf("fast path refused %s", data)
		}
		if err := json.Unmarshal([]byte(data), &ref); err != nil {
			t.Fatalf("encoding/json refused %s: %v", data, err)
		}
		if fast.Body != ref.Body || fast.Channel != ref.Channel {
			t.Fatalf("%s: fast %q %q, encoding/json %q %q", data, fast.Body, fast.Channel, ref.Body, ref.Channel)
		}
	}
	var env Envelope
	if fastEnvelope([]byte(`{"body":"a\\\"}`), &env) {
		t.Fatal("an escaped closing quote leaves the string open")
	}
}
