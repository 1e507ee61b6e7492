package merchantbinding

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/paycallback/paycallback/internal/watchfile"
	"github.com/paycallback/paycallback/pkg/channels"
)

// MaxMerchantIDLen caps a merchant ID in the merchant binding file, in
// bytes: WeChat mchid and Alipay PIDs are 10 to 16 digits, Shouqianba
// terminal numbers about 20 characters.
const MaxMerchantIDLen = 64

// Binding says which tenant each merchant belongs to, per channel: the
// contents of the file config.Worker.TenantMerchantsFile names. A merchant
// ID is WeChat mchid (sub_mchid for a service provider's sub-merchant),
// Alipay seller_id (the PID) or Shouqianba terminal_sn. The zero value binds nothing. It is
// immutable once parsed and safe for concurrent use.
//
// A tenant's lines may also name its applications on a channel whose
// callbacks name one (channels.Spec.AppField: Alipay app_id); a tenant
// with applications bound on a channel has its callbacks of that channel
// checked by application too (AppAllowed).
type Binding struct {
	owner map[channels.Channel]map[string]int64
	// apps holds each tenant's applications per channel.
	apps  map[channels.Channel]map[int64]map[string]bool
	lines int
}

// Parse parses a merchant binding file: one binding a line,
// TENANT_ID CHANNEL MERCHANT_ID separated by spaces or tabs; blank lines
// and everything from a # to the end of a line are skipped; a tenant may
// have several merchants of a channel. CHANNEL is a registered channel
// (channels.All: WECHAT, ALIPAY or SQB). A line
// TENANT_ID CHANNEL APP_FIELD APP_ID (e.g. 1001 ALIPAY app_id
// 2021000000000000) binds an application of the tenant instead, on a
// channel whose spec names an AppField; an application may serve several
// tenants (a service provider's app). A
// merchant bound to two tenants is an error naming both lines: one merchant
// belongs to one tenant. Every problem is reported at once, each naming its
// line.
func Parse(data []byte) (Binding, error) {
	b := Binding{owner: map[channels.Channel]map[string]int64{}, apps: map[channels.Channel]map[int64]map[string]bool{}}
	type at struct {
		tenant int64
		line   int
	}
	first := map[channels.Channel]map[string]at{}
	var errs []error
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		line, _, _ = strings.Cut(line, "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) != 3 && len(fields) != 4 {
			errs = append(errs, fmt.Errorf("line %d: want TENANT_ID CHANNEL MERCHANT_ID or TENANT_ID CHANNEL APP_FIELD APP_ID, got %d fields", n, len(fields)))
			continue
		}
		tenant, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || tenant <= 0 {
			errs = append(errs, fmt.Errorf("line %d: tenant ID %q is not a positive integer", n, fields[0]))
			continue
		}
		ch := channels.Channel(fields[1])
		if !ch.Valid() {
			errs = append(errs, fmt.Errorf("line %d: channel %q is not %s", n, fields[1], channels.CodeList()))
			continue
		}
		if len(fields) == 4 {
			if err := b.bindApp(tenant, ch, fields[2], fields[3]); err != nil {
				errs = append(errs, fmt.Errorf("line %d: %w", n, err))
			}
			continue
		}
		merchant := fields[2]
		if msg := checkMerchantID(merchant); msg != "" {
			errs = append(errs, fmt.Errorf("line %d: merchant ID %s", n, msg))
			continue
		}
		if first[ch] == nil {
			first[ch], b.owner[ch] = map[string]at{}, map[string]int64{}
		}
		if prev, ok := first[ch][merchant]; ok {
			if prev.tenant != tenant {
				errs = append(errs, fmt.Errorf("line %d: %s merchant %s is bound to tenant %d, but line %d binds it to tenant %d: a merchant belongs to one tenant",
					n, ch, merchant, tenant, prev.line, prev.tenant))
			}
			continue
		}
		first[ch][merchant] = at{tenant: tenant, line: n}
		b.owner[ch][merchant] = tenant
		b.lines++
	}
	if len(errs) > 0 {
		return Binding{}, errors.Join(errs...)
	}
	return b, nil
}

// bindApp binds application app of channel ch, named by field, to
// tenant.
func (b *Binding) bindApp(tenant int64, ch channels.Channel, field, app string) error {
	spec, _ := channels.Lookup(ch) // ch is valid
	switch {
	case spec.AppField == "":
		return fmt.Errorf("%s callbacks name no application: want TENANT_ID %s MERCHANT_ID", ch, ch)
	case field != spec.AppField:
		return fmt.Errorf("%q is not %s: want TENANT_ID %s %s APP_ID", field, spec.AppField, ch, spec.AppField)
	}
	if msg := checkMerchantID(app); msg != "" {
		return fmt.Errorf("%s %s", spec.AppField, msg)
	}
	if b.apps[ch] == nil {
		b.apps[ch] = map[int64]map[string]bool{}
	}
	if b.apps[ch][tenant] == nil {
		b.apps[ch][tenant] = map[string]bool{}
	}
	if !b.apps[ch][tenant][app] {
		b.apps[ch][tenant][app] = true
		b.lines++
	}
	return nil
}

// AppAllowed reports whether a callback of channel ch naming application
// app may be tenant's: always when the binding names none of the tenant's
// applications on ch, else only one of them (an empty app is none).
func (b Binding) AppAllowed(tenant int64, ch channels.Channel, app string) bool {
	apps := b.apps[ch][tenant]
	return len(apps) == 0 || apps[app]
}

// Apps returns tenant's applications of channel ch, sorted.
func (b Binding) Apps(tenant int64, ch channels.Channel) []string {
	return slices.Sorted(maps.Keys(b.apps[ch][tenant]))
}

// checkMerchantID says what is wrong with a merchant ID, or "" when it is
// fine: at most MaxMerchantIDLen bytes of printable characters.
func checkMerchantID(id string) string {
	if len(id) > MaxMerchantIDLen {
		return fmt.Sprintf("is %d bytes, at most %d", len(id), MaxMerchantIDLen)
	}
	for _, r := range id {
		if !unicode.IsPrint(r) || r == '[' || r == ']' {
			return fmt.Sprintf("%q has a character a merchant ID never has", id)
		}
	}
	return ""
}

// TenantOf returns the tenant the binding gives merchant of channel ch, and
// false when it binds that merchant to none.
func (b Binding) TenantOf(ch channels.Channel, merchant string) (int64, bool) {
	t, ok := b.owner[ch][merchant]
	return t, ok
}

// Merchants returns the merchants of channel ch bound to tenant, sorted.
func (b Binding) Merchants(tenant int64, ch channels.Channel) []string {
	var out []string
	for m, t := range b.owner[ch] {
		if t == tenant {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return out
}

// Len is the number of distinct bindings.
func (b Binding) Len() int { return b.lines }

// Tenants returns the tenants the binding names, sorted.
func (b Binding) Tenants() []int64 {
	seen := map[int64]bool{}
	for _, m := range b.owner {
		for _, t := range m {
			seen[t] = true
		}
	}
	for _, m := range b.apps {
		for t := range m {
			seen[t] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// File is the merchant binding file kept current while the worker runs
// (see internal/watchfile).
type File = watchfile.File[Binding]

// Load reads and parses the merchant binding file at path; the error names
// the file and every bad line.
func Load(path string) (*File, error) {
	f, err := watchfile.Load(path, Parse)
	if err != nil {
		return nil, fmt.Errorf("load merchant binding: %w", err)
	}
	return f, nil
}
