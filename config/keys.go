package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Keys are one tenant's WeChat APIv3 keys, current first. In YAML it is a
// single key or a list of keys.
type Keys []Secret

// UnmarshalYAML accepts a scalar (one key) or a sequence of keys.
func (k *Keys) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*k = Keys{Secret(n.Value)}
		return nil
	case yaml.SequenceNode:
		out := make(Keys, 0, len(n.Content))
		for i, item := range n.Content {
			if item.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: key %d is not a string", item.Line, i)
			}
			out = append(out, Secret(item.Value))
		}
		*k = out
		return nil
	default:
		return fmt.Errorf("line %d: %w", n.Line, errors.New("want a key or a list of keys"))
	}
}

// Reveal returns the keys' values in order. Call it only where the keys
// are used.
func (k Keys) Reveal() []string {
	out := make([]string, len(k))
	for i, s := range k {
		out[i] = s.Reveal()
	}
	return out
}

// String returns the keys masked, one "***" per key: "[*** ***]".
func (k Keys) String() string { return fmt.Sprint([]Secret(k)) }

// LoadTenantKeys reads WeChat.TenantKeysFile, when set, into
// WeChat.APIv3Keys. The file has lines TENANT_ID=KEY, several per tenant
// allowed, current key first; blank lines and lines starting with # are
// skipped. A tenant whose keys are also in the YAML file is an error: each
// tenant's keys come from one source. Errors name the file and the line,
// never a key. Load calls it; reading the file twice is an error too, since
// every tenant would then be in two sources.
func (c *Config) LoadTenantKeys() error {
	path := c.WeChat.TenantKeysFile
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(filepath.Clean(path)) // the operator names the file
	if err != nil {
		return fmt.Errorf("wechat.tenant_keys_file (PAYCB_WECHAT_APIV3_TENANT_KEYS_FILE): %w", err)
	}
	fromFile, err := parseTenantKeys(data)
	if err != nil {
		return fmt.Errorf("wechat.tenant_keys_file %s: %w", path, err)
	}
	var errs []error
	for _, tenant := range slices.Sorted(maps.Keys(fromFile)) {
		if _, dup := c.WeChat.APIv3Keys[tenant]; dup {
			errs = append(errs, fmt.Errorf("tenant %d has keys both in wechat.apiv3_keys and in %s: keep one source", tenant, path))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	if c.WeChat.APIv3Keys == nil {
		c.WeChat.APIv3Keys = make(map[int64]Keys, len(fromFile))
	}
	maps.Copy(c.WeChat.APIv3Keys, fromFile)
	return nil
}

// parseTenantKeys parses the tenant keys file's lines. Key lengths are
// Validate's concern, so that every problem is reported at once.
func parseTenantKeys(data []byte) (map[int64]Keys, error) {
	out := map[int64]Keys{}
	var errs []error
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, key, ok := strings.Cut(line, "=")
		if !ok {
			errs = append(errs, fmt.Errorf("line %d: want TENANT_ID=KEY", i+1))
			continue
		}
		tenant, err := strconv.ParseInt(strings.TrimSpace(id), 10, 64)
		if err != nil || tenant <= 0 {
			// Never quote the text: a line written backwards (KEY=TENANT_ID)
			// holds the key where the tenant ID belongs.
			errs = append(errs, fmt.Errorf("line %d: what stands before '=' is not a positive tenant ID (want TENANT_ID=KEY; the line is not shown: it may hold a key)", i+1))
			continue
		}
		if key == "" {
			errs = append(errs, fmt.Errorf("line %d: tenant %d has an empty key", i+1, tenant))
			continue
		}
		out[tenant] = append(out[tenant], Secret(key))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}
