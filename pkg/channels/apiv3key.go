package channels

import (
	"fmt"
	"log/slog"
	"slices"
)

// APIv3KeyLen is the length of a WeChat Pay APIv3 key: 32 characters, used
// as the raw bytes of an AES-256 key.
const APIv3KeyLen = 32

// KeyProvider gives the decoder a tenant's WeChat Pay APIv3 key. It reports
// false when the tenant has none; the decoder then fails with KindNoKey.
// Implementations must be safe for concurrent use and should not do I/O per
// call. The decoder neither modifies nor retains the returned slice.
type KeyProvider interface {
	APIv3Key(tenantID int64) ([]byte, bool)
}

// StaticKeys is a KeyProvider over keys known at start-up: a per-tenant key
// from the config file, else Default (PAYCB_WECHAT_APIV3_KEY), else none.
// An empty string means "no key". Call Validate once at start-up. String,
// GoString and LogValue never show a key.
type StaticKeys struct {
	Default string
	Tenants map[int64]string
}

// APIv3Key returns the tenant's own key, else Default, and false when both
// are empty. It does not check the length; the decoder reports a key of the
// wrong length as KindNoKey.
func (s StaticKeys) APIv3Key(tenantID int64) ([]byte, bool) {
	if k := s.Tenants[tenantID]; k != "" {
		return []byte(k), true
	}
	if s.Default != "" {
		return []byte(s.Default), true
	}
	return nil, false
}

// Validate checks that every configured key (Default if set, and each
// tenant's) is APIv3KeyLen bytes and every tenant ID is positive. The error
// names the tenant, never the key.
func (s StaticKeys) Validate() error {
	if s.Default != "" && len(s.Default) != APIv3KeyLen {
		return fmt.Errorf("default wechat apiv3 key: %d bytes, want %d", len(s.Default), APIv3KeyLen)
	}
	for _, id := range s.tenantIDs() {
		if id <= 0 {
			return fmt.Errorf("wechat apiv3 key for tenant %d: tenant id must be positive", id)
		}
		if k := s.Tenants[id]; len(k) != APIv3KeyLen {
			return fmt.Errorf("wechat apiv3 key for tenant %d: %d bytes, want %d", id, len(k), APIv3KeyLen)
		}
	}
	return nil
}

// String describes the configuration with every key masked, for example
// "StaticKeys{Default: ******, Tenants: [1001 1002]}".
func (s StaticKeys) String() string {
	def := "none"
	if s.Default != "" {
		def = "******"
	}
	return fmt.Sprintf("StaticKeys{Default: %s, Tenants: %v}", def, s.tenantIDs())
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
