package sqb

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/paycallback/paycallback/pkg/channels"
)

// MaxTerminalKeyLen is the longest terminal key accepted. Shouqianba's
// keys are 32 hexadecimal characters (interface/activate.md's example);
// the format is not specified, so any printable ASCII up to this length is
// taken.
const MaxTerminalKeyLen = 128

// Credentials are the API credentials the querier signs a terminal's
// queries with: one entry of PAYCB_QUERY_CREDENTIALS_FILE with channel SQB
// (docs/contract.md). Shouqianba answers are unsigned, so there is no
// public-key counterpart. String, GoString and LogValue never show the key.
type Credentials struct {
	// TenantID is the tenant the terminal's orders are registered for.
	TenantID int64
	// MerchantID is the terminal_sn: the Authorization header names it and
	// every request body carries it.
	MerchantID string
	// TerminalKeyFile is where the key was read from (terminal_key_file),
	// for messages only: this package never reads files.
	TerminalKeyFile string
	// TerminalKey is the terminal's current key (ParseTerminalKey of the
	// file's content). /terminal/checkin rotates it; only the current and
	// the previous key are accepted by Shouqianba.
	TerminalKey string
}

// ErrBadTerminalKey is the reason every refusal of a terminal key unwraps
// to; the error names what is wrong, never the key.
var ErrBadTerminalKey = errors.New("bad sqb terminal key")

// ParseTerminalKey reads a terminal key file's content: the key alone,
// with at most one trailing newline ("\n"), which is stripped. Anything
// else odd is refused: an empty key, whitespace or control characters
// (a "\r" of a CRLF line end included), non-ASCII bytes, a key longer than
// MaxTerminalKeyLen. The error wraps ErrBadTerminalKey and says what is
// wrong without quoting the content.
func ParseTerminalKey(data []byte) (string, error) {
	if n := len(data); n > 0 && data[n-1] == '\n' {
		data = data[:n-1]
	}
	switch {
	case len(data) == 0:
		return "", fmt.Errorf("%w: empty", ErrBadTerminalKey)
	case len(data) > MaxTerminalKeyLen:
		return "", fmt.Errorf("%w: %d bytes, at most %d", ErrBadTerminalKey, len(data), MaxTerminalKeyLen)
	}
	if err := checkKeyBytes(data); err != nil {
		return "", err
	}
	return string(data), nil
}

// checkKeyBytes refuses whitespace, control and non-ASCII bytes, naming
// the position and the class, never the byte.
func checkKeyBytes(key []byte) error {
	for i, c := range key {
		switch {
		case c == '\r':
			return fmt.Errorf("%w: carriage return at byte %d (a CRLF line end?)", ErrBadTerminalKey, i+1)
		case c == '\n':
			return fmt.Errorf("%w: line break at byte %d: the file must hold the key alone, with at most one trailing newline", ErrBadTerminalKey, i+1)
		case c == ' ' || c == '\t':
			return fmt.Errorf("%w: whitespace at byte %d", ErrBadTerminalKey, i+1)
		case c < 0x20 || c == 0x7f:
			return fmt.Errorf("%w: control character at byte %d", ErrBadTerminalKey, i+1)
		case c >= 0x80:
			return fmt.Errorf("%w: non-ASCII byte at byte %d", ErrBadTerminalKey, i+1)
		}
	}
	return nil
}

// Validate checks the credentials: a positive tenant, a terminal_sn that
// is a valid identifier, and a key as ParseTerminalKey would return it.
// The error names the terminal, never the key.
func (c Credentials) Validate() error {
	if c.TenantID <= 0 {
		return fmt.Errorf("sqb credentials of terminal %q: tenant_id %d is not positive", c.MerchantID, c.TenantID)
	}
	if err := channels.CheckID("sqb credentials terminal_sn (merchant_id)", c.MerchantID); err != nil {
		return err
	}
	if c.TerminalKey == "" {
		return fmt.Errorf("sqb credentials of terminal %s: %w: empty", c.MerchantID, ErrBadTerminalKey)
	}
	if len(c.TerminalKey) > MaxTerminalKeyLen {
		return fmt.Errorf("sqb credentials of terminal %s: %w: %d bytes, at most %d",
			c.MerchantID, ErrBadTerminalKey, len(c.TerminalKey), MaxTerminalKeyLen)
	}
	if err := checkKeyBytes([]byte(c.TerminalKey)); err != nil {
		return fmt.Errorf("sqb credentials of terminal %s: %w", c.MerchantID, err)
	}
	return nil
}

// QueryTenantID is c.TenantID (channels.QueryCredentials).
func (c Credentials) QueryTenantID() int64 { return c.TenantID }

// QueryMerchantID is c.MerchantID, the terminal_sn
// (channels.QueryCredentials).
func (c Credentials) QueryMerchantID() string { return c.MerchantID }

// String shows the tenant, terminal and key file, and whether a key is
// set, never the key.
func (c Credentials) String() string {
	key := "none"
	if c.TerminalKey != "" {
		key = "******"
	}
	return fmt.Sprintf("sqb.Credentials{TenantID: %d, MerchantID: %q, TerminalKeyFile: %q, TerminalKey: %s}",
		c.TenantID, c.MerchantID, c.TerminalKeyFile, key)
}

// GoString is String, so that %#v does not print the key either.
func (c Credentials) GoString() string { return c.String() }

// LogValue makes slog print the masked form.
func (c Credentials) LogValue() slog.Value { return slog.StringValue(c.String()) }
