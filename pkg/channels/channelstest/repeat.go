package channelstest

import (
	"strings"
	"testing"

	"github.com/paycallback/paycallback/pkg/channels"
)

// WithMembers returns the JSON object obj with members (written as JSON,
// such as `"total_amount":"999900"`) added after its last member: a way to
// repeat a member name, which a map or a struct cannot. obj must end in
// '}' and have a member already.
func WithMembers(obj, members string) string {
	i := strings.LastIndexByte(obj, '}')
	if i < 0 {
		panic("channelstest.WithMembers: not a JSON object: " + obj)
	}
	return obj[:i] + "," + members + obj[i:]
}

// RequireRepeatRefused decodes value with d and fails the test unless it
// is refused as channels.KindMalformed with a reason that quotes name (the
// repeated member) and does not hold secret (a value of the document, such
// as the amount the repeat carried).
func RequireRepeatRefused(tb testing.TB, d *channels.Decoder, value []byte, name, secret string) {
	tb.Helper()
	_, err := d.Decode(value)
	if kind, _ := channels.KindOf(err); kind != channels.KindMalformed {
		tb.Fatalf("decode: got %v (kind %q), want %s", err, kind, channels.KindMalformed)
	}
	if msg := err.Error(); !strings.Contains(msg, channels.Quote(name)) || (secret != "" && strings.Contains(msg, secret)) {
		tb.Fatalf("the reason %q should quote %s and not hold %q", msg, channels.Quote(name), secret)
	}
}
