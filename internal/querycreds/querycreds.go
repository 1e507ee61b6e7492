package querycreds

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/paycallback/paycallback/pkg/channels"
)

// MaxKeyFileSize caps what is read of one key file: a PEM key or a
// terminal key is a few kilobytes at most.
const MaxKeyFileSize = 64 << 10

// DefaultInterval is how often Watch reads the list and its key files
// again when given no interval.
const DefaultInterval = 10 * time.Second

// The fields every entry has; the others are the channel's.
const (
	fieldTenant   = "tenant_id"
	fieldChannel  = "channel"
	fieldMerchant = "merchant_id"
)

// ErrInvalid is what every refusal of a credentials list unwraps to.
var ErrInvalid = errors.New("invalid query credentials")

// key is what a Set is looked up by.
type key struct {
	tenant   int64
	channel  channels.Channel
	merchant string
}

// Set is one good reading of the list: the credentials of each merchant.
// It is immutable and safe for concurrent use.
type Set struct {
	creds map[key]channels.QueryCredentials
	// sum is the digest of the list and every key file it names, by path:
	// what Refresh compares.
	sum [sha256.Size]byte
}

// Lookup returns the credentials of the merchant of channel ch bound to
// tenantID (queryclient.CredentialSource).
func (s *Set) Lookup(tenantID int64, ch channels.Channel, merchantID string) (channels.QueryCredentials, bool) {
	if s == nil {
		return nil, false
	}
	c, ok := s.creds[key{tenantID, ch, merchantID}]
	return c, ok
}

// Merchants returns the merchants of channel ch that tenantID has
// credentials for, sorted (consumer query once picks the merchant to ask
// from them when it is not named).
func (s *Set) Merchants(tenantID int64, ch channels.Channel) []string {
	if s == nil {
		return nil
	}
	var out []string
	for k := range s.creds {
		if k.tenant == tenantID && k.channel == ch {
			out = append(out, k.merchant)
		}
	}
	slices.Sort(out)
	return out
}

// Len is the number of entries.
func (s *Set) Len() int { return len(s.creds) }

// Parse reads data, a credentials list, resolving relative *_file paths
// against dir. Every entry needs a positive tenant_id, a channel that is
// registered and can be queried, and a merchant_id; its other fields are
// the channel's (a field the channel does not know is an error). A
// merchant may appear once (one tenant, one entry). The error wraps
// ErrInvalid and names the entry, its line and the field, never a key.
func Parse(data []byte, dir string) (*Set, error) {
	h := sha256.New()
	h.Write(data)
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: not YAML: %w", ErrInvalid, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("%w: want a YAML list of entries {tenant_id, channel, merchant_id, …}", ErrInvalid)
	}
	list := doc.Content[0]
	if len(list.Content) == 0 {
		return nil, fmt.Errorf("%w: the list has no entries", ErrInvalid)
	}
	read := func(name string) ([]byte, error) {
		path := name
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		b, err := readCapped(path)
		if err != nil {
			return nil, err
		}
		h.Write([]byte(path))
		h.Write([]byte{0})
		h.Write(b)
		return b, nil
	}
	s := &Set{creds: make(map[key]channels.QueryCredentials, len(list.Content))}
	tenantOf := map[string]int64{} // channel:merchant → tenant
	for i, node := range list.Content {
		where := fmt.Sprintf("entry %d (line %d)", i+1, node.Line)
		e, err := entry(node)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, where, err)
		}
		e.ReadFile = read
		spec, _ := channels.Lookup(e.Channel)
		creds, err := spec.ParseQueryCredentials(e)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, where, err)
		}
		k := key{e.TenantID, e.Channel, e.MerchantID}
		if _, dup := s.creds[k]; dup {
			return nil, fmt.Errorf("%w: %s: merchant %s of %s for tenant %d is listed twice", ErrInvalid, where, channels.Quote(e.MerchantID), e.Channel, e.TenantID)
		}
		if t, ok := tenantOf[string(e.Channel)+":"+e.MerchantID]; ok {
			return nil, fmt.Errorf("%w: %s: merchant %s of %s is listed for tenants %d and %d; a merchant belongs to one tenant",
				ErrInvalid, where, channels.Quote(e.MerchantID), e.Channel, t, e.TenantID)
		}
		tenantOf[string(e.Channel)+":"+e.MerchantID] = e.TenantID
		s.creds[k] = creds
	}
	copy(s.sum[:], h.Sum(nil))
	return s, nil
}

// entry reads one list item: a mapping of names to single values.
func entry(node *yaml.Node) (channels.QueryCredentialsEntry, error) {
	var e channels.QueryCredentialsEntry
	if node.Kind != yaml.MappingNode {
		return e, errors.New("not a mapping {tenant_id, channel, merchant_id, …}")
	}
	e.Fields = map[string]string{}
	seen := map[string]bool{}
	for j := 0; j+1 < len(node.Content); j += 2 {
		k, v := node.Content[j], node.Content[j+1]
		name := k.Value
		if seen[name] {
			return e, fmt.Errorf("field %s is given twice", name)
		}
		seen[name] = true
		if v.Kind != yaml.ScalarNode {
			return e, fmt.Errorf("field %s must be a single value", name)
		}
		switch name {
		case fieldTenant:
			n, err := strconv.ParseInt(v.Value, 10, 64)
			if err != nil || n <= 0 {
				return e, fmt.Errorf("tenant_id %s is not a positive integer", channels.Quote(v.Value))
			}
			e.TenantID = n
		case fieldChannel:
			e.Channel = channels.Channel(v.Value)
		case fieldMerchant:
			e.MerchantID = v.Value
		default:
			e.Fields[name] = v.Value
		}
	}
	switch {
	case e.TenantID == 0:
		return e, errors.New("tenant_id is missing")
	case e.Channel == "":
		return e, errors.New("channel is missing")
	}
	if spec, ok := channels.Lookup(e.Channel); !ok || spec.ParseQueryCredentials == nil {
		return e, fmt.Errorf("channel %s cannot be queried (want %s)", channels.Quote(string(e.Channel)), channels.CodeList())
	}
	if err := channels.CheckID("merchant_id", e.MerchantID); err != nil {
		return e, err
	}
	return e, nil
}

// readCapped reads path, refusing a file over MaxKeyFileSize.
func readCapped(path string) ([]byte, error) {
	f, err := os.Open(filepath.Clean(path)) // the operator names the file
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only: nothing to flush
	b, err := io.ReadAll(io.LimitReader(f, MaxKeyFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > MaxKeyFileSize {
		return nil, fmt.Errorf("%s is over %d bytes: not a key file", path, MaxKeyFileSize)
	}
	return b, nil
}

// Load reads and parses the list at path (Parse, relative paths against
// its directory).
func Load(path string) (*Set, error) {
	data, err := readList(path)
	if err != nil {
		return nil, err
	}
	s, err := Parse(data, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

func readList(path string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Clean(path)) // the operator names the file
	if err != nil {
		return nil, fmt.Errorf("read query credentials: %w", err)
	}
	return data, nil
}

// File is the credentials list kept current. It is safe for concurrent
// use; Lookup always sees one whole good reading.
type File struct {
	path string
	cur  atomic.Pointer[Set]

	mu      sync.Mutex // serialises Refresh
	lastErr string     // the last failure reported, "" when the last read was good
}

// Open loads the list at path (Load): a bad list at start is an error.
func Open(path string) (*File, error) {
	s, err := Load(path)
	if err != nil {
		return nil, err
	}
	f := &File{path: path}
	f.cur.Store(s)
	return f, nil
}

// Path is the list's path.
func (f *File) Path() string { return f.path }

// Current is the last good reading.
func (f *File) Current() *Set { return f.cur.Load() }

// Lookup looks the merchant up in the last good reading
// (queryclient.CredentialSource).
func (f *File) Lookup(tenantID int64, ch channels.Channel, merchantID string) (channels.QueryCredentials, bool) {
	return f.Current().Lookup(tenantID, ch, merchantID)
}

// Refresh reads the list and every key file it names again and, when any
// of them changed and the whole parses, makes it current; it reports
// whether it did. On an error the last good reading stays current and the
// error is returned, once per distinct failure (a poller does not repeat
// it every interval).
func (f *File) Refresh() (changed bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := Load(f.path)
	if err != nil {
		msg := err.Error()
		if msg == f.lastErr {
			return false, nil
		}
		f.lastErr = msg
		return false, fmt.Errorf("%w (the last good credentials stay in force)", err)
	}
	f.lastErr = ""
	if s.sum == f.Current().sum {
		return false, nil
	}
	f.cur.Store(s)
	return true, nil
}

// Watch calls Refresh every interval (DefaultInterval when zero or less)
// until ctx is done, logging a change at INFO and a failure at ERROR, with
// the path and never the contents.
func (f *File) Watch(ctx context.Context, interval time.Duration, log *slog.Logger) {
	if interval <= 0 {
		interval = DefaultInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changed, err := f.Refresh()
		switch {
		case err != nil:
			log.Error("query credentials refused", "path", f.path, "error", err)
		case changed:
			log.Info("query credentials reloaded", "path", f.path, "entries", f.Current().Len())
		}
	}
}
