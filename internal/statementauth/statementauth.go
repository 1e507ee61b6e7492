package statementauth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"
)

// HeaderSignature is the Kafka header carrying a statement event's
// signature: "<key id>:<lowercase hex HMAC-SHA256 of the message value>".
const HeaderSignature = "x-paycb-statement-signature"

// MinSecretBytes is the shortest secret accepted: 32 bytes, the size of the
// HMAC-SHA256 output, so that the key is no weaker than the MAC.
const MinSecretBytes = 32

// maxKeyIDBytes bounds a key id, which is written into every signature.
const maxKeyIDBytes = 64

// Key is one statement key: its id, written in each signature it makes, and
// its secret. Its printed forms never show the secret.
type Key struct {
	ID     string
	secret []byte
}

// String returns the key id and a masked secret: "ID=***".
func (k Key) String() string { return k.ID + "=***" }

// GoString masks the secret for %#v.
func (k Key) GoString() string { return fmt.Sprintf("statementauth.Key{ID: %q, secret: ***}", k.ID) }

// Keys are the statement keys of a key file, current first. The zero value
// (no keys) signs nothing and verifies nothing. Keys is safe for concurrent
// use; it is never modified once parsed.
type Keys struct {
	keys []Key
}

// Len is the number of keys.
func (ks Keys) Len() int { return len(ks.keys) }

// IDs are the key ids, current first.
func (ks Keys) IDs() []string {
	out := make([]string, len(ks.keys))
	for i, k := range ks.keys {
		out[i] = k.ID
	}
	return out
}

// CurrentID is the id of the current key, the one Sign uses; "" when there
// is none.
func (ks Keys) CurrentID() string {
	if len(ks.keys) == 0 {
		return ""
	}
	return ks.keys[0].ID
}

// String lists the key ids with their secrets masked: "[new=*** old=***]".
func (ks Keys) String() string { return fmt.Sprint(ks.keys) }

// GoString masks the secrets for %#v.
func (ks Keys) GoString() string { return "statementauth.Keys" + ks.String() }

// Parse reads a key file: one key a line, KEY_ID=SECRET, the current key
// first; blank lines and lines whose first non-blank character is # are
// skipped; spaces around the id and a trailing carriage return are
// ignored, the secret is every byte after the first '=' (so it may hold
// '='). A key id is 1 to 64 printable characters without ':', '=' or
// whitespace, unique in the file; a secret is at least MinSecretBytes bytes.
// At least one key is required. Every problem is reported at once, each
// naming its line only: never the secret, nor the id (a line written
// wrong may hold a secret where the id belongs).
func Parse(data []byte) (Keys, error) {
	var (
		out  Keys
		errs []error
	)
	seen := map[string]int{}
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		line = strings.TrimSuffix(line, "\r")
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		rawID, secret, ok := strings.Cut(line, "=")
		if !ok {
			errs = append(errs, fmt.Errorf("line %d: want KEY_ID=SECRET", n))
			continue
		}
		id := strings.TrimSpace(rawID)
		if msg := checkID(id); msg != "" {
			errs = append(errs, fmt.Errorf("line %d: key id %s", n, msg))
			continue
		}
		if first, dup := seen[id]; dup {
			errs = append(errs, fmt.Errorf("line %d: the key id repeats line %d's: each key needs an id of its own", n, first))
			continue
		}
		seen[id] = n
		if len(secret) < MinSecretBytes {
			errs = append(errs, fmt.Errorf("line %d: the secret is %d bytes, at least %d required (e.g. openssl rand -hex 32)", n, len(secret), MinSecretBytes))
			continue
		}
		out.keys = append(out.keys, Key{ID: id, secret: []byte(secret)})
	}
	if len(errs) > 0 {
		return Keys{}, errors.Join(errs...)
	}
	if len(out.keys) == 0 {
		return Keys{}, errors.New("no key: want one line KEY_ID=SECRET at least, the current key first")
	}
	return out, nil
}

// checkID says what is wrong with a key id, or "" when it is fine, without
// quoting it.
func checkID(id string) string {
	switch {
	case id == "":
		return "is empty"
	case len(id) > maxKeyIDBytes:
		return fmt.Sprintf("is %d bytes, at most %d", len(id), maxKeyIDBytes)
	}
	for _, r := range id {
		if r == ':' || r == '=' || unicode.IsSpace(r) || !unicode.IsPrint(r) || r > unicode.MaxASCII {
			return "must be printable ASCII without ':', '=' or whitespace"
		}
	}
	return ""
}

// ErrNoKeys is returned by Sign, and wrapped by Verify's error, when there is
// no key.
var ErrNoKeys = errors.New("no statement key")

// Sign returns the HeaderSignature value for value, the whole Kafka message
// value, made with the current key: "<key id>:<lowercase hex HMAC-SHA256>".
// It fails with ErrNoKeys when there is no key.
func (ks Keys) Sign(value []byte) (string, error) {
	if len(ks.keys) == 0 {
		return "", ErrNoKeys
	}
	k := ks.keys[0]
	return k.ID + ":" + hex.EncodeToString(mac(k.secret, value)), nil
}

// The reasons Verify refuses a signature; each is wrapped by its error.
var (
	// ErrMissing: the message has no signature header (an empty one
	// included).
	ErrMissing = errors.New("no signature")
	// ErrMalformed: the header is not "<key id>:<64 lowercase hex digits>".
	ErrMalformed = errors.New("malformed signature")
	// ErrUnknownKey: the header names a key id the key file does not hold.
	ErrUnknownKey = errors.New("unknown statement key")
	// ErrMismatch: the MAC does not match the value under the key named:
	// the value was changed, or signed with another secret.
	ErrMismatch = errors.New("signature does not match the message")
)

// Verify checks header, the HeaderSignature value of a message whose Kafka
// value is value, against every key (any key verifies, not only the
// current one). The MAC is compared in constant time. It returns nil when
// the signature is valid; otherwise an error wrapping ErrNoKeys, ErrMissing,
// ErrMalformed, ErrUnknownKey or ErrMismatch whose text is fit for the
// dead letter's x-error: it names the key id when it is one of the file's,
// and never a secret, an expected MAC or the header's own MAC.
func (ks Keys) Verify(value []byte, header string) error {
	if len(ks.keys) == 0 {
		return ErrNoKeys
	}
	if header == "" {
		return fmt.Errorf("%w: the message has no %s header", ErrMissing, HeaderSignature)
	}
	id, sig, ok := strings.Cut(header, ":")
	if !ok || checkID(id) != "" {
		return fmt.Errorf("%w: %s is not KEY_ID:HEX", ErrMalformed, HeaderSignature)
	}
	if len(sig) != 2*sha256.Size || strings.ToLower(sig) != sig {
		return fmt.Errorf("%w: %s of key %q does not have %d lowercase hex digits", ErrMalformed, HeaderSignature, id, 2*sha256.Size)
	}
	got, err := hex.DecodeString(sig)
	if err != nil {
		return fmt.Errorf("%w: %s of key %q is not hex", ErrMalformed, HeaderSignature, id)
	}
	for _, k := range ks.keys {
		if k.ID != id {
			continue
		}
		if !hmac.Equal(got, mac(k.secret, value)) {
			return fmt.Errorf("%w: key %q", ErrMismatch, id)
		}
		return nil
	}
	return fmt.Errorf("%w %q: the key file holds %s", ErrUnknownKey, id, strings.Join(ks.IDs(), ", "))
}

func mac(secret, value []byte) []byte {
	h := hmac.New(sha256.New, secret)
	_, _ = h.Write(value)
	return h.Sum(nil)
}

// Load reads and parses the key file at path (Parse). Its error names the
// path and the lines that are wrong, never a secret.
func Load(path string) (Keys, error) {
	data, err := os.ReadFile(filepath.Clean(path)) // the operator names the file
	if err != nil {
		return Keys{}, fmt.Errorf("read statement key file: %w", err)
	}
	ks, err := Parse(data)
	if err != nil {
		return Keys{}, fmt.Errorf("statement key file %s: %w", path, err)
	}
	return ks, nil
}
