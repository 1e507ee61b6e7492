package channels

import (
	"fmt"
	"log/slog"
	"slices"
)

// APIv3KeyLen is the length of a WeChat Pay APIv3 key: 32 characters, used
// as the raw bytes of an AES-256 key.
const APIv3KeyLen = 32

// KeyProvider gives the decoder a tenant's WeChat Pay APIv3 keys, in the
// order to try them: the current key first, then keys still in flight
// during a rotation. It returns none when the tenant has no key; the
// decoder then fails with KindNoKey. Implementations must be safe for
// concurrent use and should not do I/O per call. The decoder neither
// modifies nor retains the returned slices.
type KeyProvider interface {
	APIv3Keys(tenantID int64) [][]byte
}

// StaticKeys is a KeyProvider over keys known at start-up: a tenant's own
// keys (current first) from the configuration, else Default
// (PAYCB_WECHAT_APIV3_KEY) alone, else none. An empty string means "no
// key". Call Validate once at start-up. String, GoString and LogValue never
// show a key.
type StaticKeys struct {
	Default string
	Tenants map[int64][]string
}

// APIv3Keys returns the tenant's own keys in their configured order when it
// has any, else Default alone, and nil when both are empty. Empty strings
// in a tenant's list are skipped. It does not check lengths; the decoder
// reports a key of the wrong length as KindNoKey.
func (s StaticKeys) APIv3Keys(tenantID int64) [][]byte {
	var keys [][]byte
	for _, k := range s.Tenants[tenantID] {
		if k != "" {
			keys = append(keys, []byte(k))
		}
	}
	if len(keys) > 0 {
		return keys
	}
	if s.Default != "" {
		return [][]byte{[]byte(s.Default)}
	}
	return nil
}

// Validate checks that every configured key (Default if set, and each of
// every tenant's) is APIv3KeyLen bytes, every tenant ID is positive, every
// listed tenant has a key and no tenant lists a key twice. The error names
// the tenant and the key's position, never the key.
func (s StaticKeys) Validate() error {
	if s.Default != "" && len(s.Default) != APIv3KeyLen {
		return fmt.Errorf("default wechat apiv3 key: %d bytes, want %d", len(s.Default), APIv3KeyLen)
	}
	for _, id := range s.tenantIDs() {
		if id <= 0 {
			return fmt.Errorf("wechat apiv3 keys for tenant %d: tenant id must be positive", id)
		}
		keys := s.Tenants[id]
		if len(keys) == 0 {
			return fmt.Errorf("wechat apiv3 keys for tenant %d: no key", id)
		}
		for i, k := range keys {
			if len(k) != APIv3KeyLen {
				return fmt.Errorf("wechat apiv3 key %d of tenant %d: %d bytes, want %d", i+1, id, len(k), APIv3KeyLen)
			}
			if slices.Contains(keys[:i], k) {
				return fmt.Errorf("wechat apiv3 key %d of tenant %d repeats an earlier key", i+1, id)
			}
		}
	}
	return nil
}

// String describes the configuration with every key masked: the tenants
// with their number of keys, for example
// "StaticKeys{Default: ******, Tenants: [1001:2 1002:1]}".
func (s StaticKeys) String() string {
	def := "none"
	if s.Default != "" {
		def = "******"
	}
	ids := s.tenantIDs()
	tenants := make([]string, len(ids))
	for i, id := range ids {
		tenants[i] = fmt.Sprintf("%d:%d", id, len(s.Tenants[id]))
	}
	return fmt.Sprintf("StaticKeys{Default: %s, Tenants: %v}", def, tenants)
}

// GoString is String, so that %#v does not print keys either.
func (s StaticKeys) GoString() string { return s.String() }

// LogValue makes slog print the masked form.
func (s StaticKeys) LogValue() slog.Value { return slog.StringValue(s.String()) }

func (s StaticKeys) tenantIDs() []int64 {
	ids := make([]int64, 0, len(s.Tenants))
	for id := range s.Tenants {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// KeyUse says which of a tenant's WeChat APIv3 keys opened a notification's
// resource, so that an operator can see when an old key stops being used.
// The zero value means nothing was decrypted (another channel, or a
// failure before or during decryption).
type KeyUse struct {
	// Position is the key's place in the tenant's list: 1 is the current
	// key, 2 the one before it, and so on.
	Position int
	// Keys is how many keys the tenant has (1 when it uses the default
	// key).
	Keys int
}
