package config

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
)

// masked is what every printed form of a non-empty secret shows.
const masked = "***"

// Secret is a string that must never be printed: an APIv3 key, a password.
// Every printing path (String, GoString, fmt verbs including %+v and %#v,
// JSON, YAML, text encoders, slog) shows "***" for a set secret and "" for an
// unset one, so an operator can tell the two apart without learning the
// value. Reveal is the only way to read it.
type Secret string

// Reveal returns the secret's value. Call it only where the value is used,
// never to log or print it.
func (s Secret) Reveal() string { return string(s) }

// IsSet reports whether the secret is non-empty.
func (s Secret) IsSet() bool { return s != "" }

// String returns "***" for a set secret and "" for an unset one.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return masked
}

// GoString returns the masked value as a Go literal, for %#v.
func (s Secret) GoString() string { return fmt.Sprintf("config.Secret(%q)", s.String()) }

// Format masks the secret for every fmt verb, including %d, %x and %q, which
// would otherwise print a string's bytes.
func (s Secret) Format(f fmt.State, verb rune) { formatMasked(f, verb, s.String(), s.GoString()) }

// LogValue implements slog.LogValuer with the masked value.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText implements encoding.TextMarshaler with the masked value.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// MarshalJSON encodes the masked value as a JSON string.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// MarshalYAML encodes the masked value, so a dumped configuration never
// carries the secret.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }

// DSN is a go-sql-driver/mysql data source name,
// "[user[:password]@][net[(addr)]]/dbname[?params]". It prints like the DSN
// with the password replaced by "***" ("root:***@tcp(db:3306)/paycb"); a DSN
// too malformed to find the password in prints as "***" entirely. Reveal is
// the only way to read the full value.
type DSN string

// Reveal returns the full DSN, password included, for opening the database.
func (d DSN) Reveal() string { return string(d) }

// IsSet reports whether the DSN is non-empty.
func (d DSN) IsSet() bool { return d != "" }

// String returns the DSN with its password masked.
func (d DSN) String() string { return maskDSN(string(d)) }

// GoString returns the masked DSN as a Go literal, for %#v.
func (d DSN) GoString() string { return fmt.Sprintf("config.DSN(%q)", d.String()) }

// Format masks the password for every fmt verb.
func (d DSN) Format(f fmt.State, verb rune) { formatMasked(f, verb, d.String(), d.GoString()) }

// LogValue implements slog.LogValuer with the masked DSN.
func (d DSN) LogValue() slog.Value { return slog.StringValue(d.String()) }

// MarshalText implements encoding.TextMarshaler with the masked DSN.
func (d DSN) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// MarshalJSON encodes the masked DSN as a JSON string.
func (d DSN) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// MarshalYAML encodes the masked DSN.
func (d DSN) MarshalYAML() (any, error) { return d.String(), nil }

// formatMasked writes the already-masked text for any verb: %#v gets the Go
// literal, %q a quoted string, everything else the plain masked text.
func formatMasked(f fmt.State, verb rune, text, goText string) {
	switch {
	case verb == 'v' && f.Flag('#'):
		_, _ = f.Write([]byte(goText))
	case verb == 'q':
		_, _ = fmt.Fprintf(f, "%q", text)
	default:
		_, _ = f.Write([]byte(text))
	}
}

// maskDSN replaces the password of a go-sql-driver/mysql DSN with "***". It
// splits the DSN the way the driver does: the last '/' ends the address
// part, the last '@' before it ends the credentials, and the first ':' in the
// credentials starts the password. Anything it cannot split is masked whole,
// so a mistyped DSN never leaks its password.
func maskDSN(dsn string) string {
	if dsn == "" {
		return ""
	}
	slash := strings.LastIndexByte(dsn, '/')
	if slash < 0 {
		return masked
	}
	at := strings.LastIndexByte(dsn[:slash], '@')
	if at < 0 {
		return dsn // no credentials, nothing to hide
	}
	user, _, hasPass := strings.Cut(dsn[:at], ":")
	if !hasPass {
		return dsn
	}
	return user + ":" + masked + dsn[at:]
}
