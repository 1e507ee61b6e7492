package channels

import (
	"fmt"
	"slices"
	"strings"
)

// QueryCredentials are one merchant's API credentials for one channel, as
// the channel's package read them from a PAYCB_QUERY_CREDENTIALS_FILE
// entry (Spec.ParseQueryCredentials): wechat.Credentials,
// alipay.Credentials, sqb.Credentials. They can move money out (a
// merchant's API key can request refunds): only the querier holds them,
// and String never shows key material.
type QueryCredentials interface {
	// QueryTenantID is the tenant the merchant is bound to.
	QueryTenantID() int64
	// QueryMerchantID is the merchant as the merchant binding names it
	// (WeChat mchid, Alipay PID, Shouqianba terminal_sn).
	QueryMerchantID() string
	// String describes the credentials without their key.
	String() string
}

// QueryCredentialsEntry is one entry of PAYCB_QUERY_CREDENTIALS_FILE as
// the channel-neutral loader read it: the fields every entry has, and the
// channel's own fields, which Spec.ParseQueryCredentials reads.
type QueryCredentialsEntry struct {
	TenantID   int64
	Channel    Channel
	MerchantID string
	// Fields are the entry's other fields by name, as written (serial_no,
	// app_id, private_key_file, terminal_key_file, …).
	Fields map[string]string
	// ReadFile reads the file a *_file field names, resolved against the
	// credentials file's directory. Its errors name the path, never the
	// content.
	ReadFile func(name string) ([]byte, error)
}

// CheckFields refuses an entry that lacks one of required or has a field
// that is neither required nor optional, naming the fields (never their
// values).
func (e QueryCredentialsEntry) CheckFields(required []string, optional ...string) error {
	var missing, unknown []string
	for _, name := range required {
		if e.Fields[name] == "" {
			missing = append(missing, name)
		}
	}
	for name := range e.Fields {
		if !slices.Contains(required, name) && !slices.Contains(optional, name) {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	var problems []string
	if len(missing) > 0 {
		problems = append(problems, "missing "+strings.Join(missing, ", "))
	}
	if len(unknown) > 0 {
		problems = append(problems, "unknown field(s) "+strings.Join(unknown, ", ")+" for channel "+string(e.Channel))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s credentials of merchant %s: %s", e.Channel, Quote(e.MerchantID), strings.Join(problems, "; "))
	}
	return nil
}

// File reads the file the field names (ReadFile of its value).
func (e QueryCredentialsEntry) File(field string) ([]byte, error) {
	name := e.Fields[field]
	if name == "" {
		return nil, fmt.Errorf("%s credentials of merchant %s: no %s", e.Channel, Quote(e.MerchantID), field)
	}
	if e.ReadFile == nil {
		return nil, fmt.Errorf("%s credentials of merchant %s: %s: no file reader", e.Channel, Quote(e.MerchantID), field)
	}
	data, err := e.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("%s credentials of merchant %s: %s: %w", e.Channel, Quote(e.MerchantID), field, err)
	}
	return data, nil
}
