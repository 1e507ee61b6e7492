package channelkeys

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"

	"github.com/paycallback/paycallback/internal/watchfile"
	"github.com/paycallback/paycallback/pkg/channels"
)

// MaxFileBytes bounds the YAML file and each key file: a key or a
// certificate is a few kilobytes.
const MaxFileBytes = 1 << 20

// File is the public-keys file kept current; Current implements
// channels.QueryKeySource.
type File = watchfile.File[channels.ChannelPublicKeys]

// Load reads path and the key files it names. Errors name the file and
// the entry: an unknown field, an unknown channel, a channel that takes
// no key (Shouqianba), an entry repeated, a key file missing or not a
// public key or certificate its channel accepts.
func Load(path string) (*File, error) {
	return watchfile.LoadWith(path, read, parse)
}

// bundle is what a File is parsed from and compared by: the YAML's entries
// and the bytes of their key files, in order.
type bundle struct {
	Entries []channels.PublicKeyEntry
	PEMs    [][]byte
}

// read reads the YAML at path and every key file it names into a bundle.
func read(path string) ([]byte, error) {
	data, err := readLimited(path)
	if err != nil {
		return nil, err
	}
	entries, err := parseYAML(data)
	if err != nil {
		return nil, err
	}
	pems := make([][]byte, len(entries))
	dir := filepath.Dir(path)
	for i, e := range entries {
		keyPath := e.PublicKeyFile
		if !filepath.IsAbs(keyPath) {
			keyPath = filepath.Join(dir, keyPath)
		}
		if pems[i], err = readLimited(keyPath); err != nil {
			return nil, fmt.Errorf("entry %d (%s %s): public_key_file: %w", i+1, e.Channel, name(e), err)
		}
	}
	return json.Marshal(bundle{Entries: entries, PEMs: pems})
}

// parse builds the keys of a bundle read.
func parse(data []byte) (channels.ChannelPublicKeys, error) {
	var b bundle
	if err := json.Unmarshal(data, &b); err != nil {
		return channels.ChannelPublicKeys{}, fmt.Errorf("channel public keys: %w", err)
	}
	return channels.NewChannelPublicKeys(b.Entries, b.PEMs)
}

// readLimited reads a file of at most MaxFileBytes.
func readLimited(path string) ([]byte, error) {
	f, err := os.Open(filepath.Clean(path)) // the operator names the files
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only: nothing to lose
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, MaxFileBytes)
	}
	return data, nil
}

// parseYAML reads the YAML list strictly: an unknown field is an error,
// every entry names its channel and a key file, and no entry is repeated
// (the same channel and identity).
func parseYAML(data []byte) ([]channels.PublicKeyEntry, error) {
	var entries []channels.PublicKeyEntry
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&entries); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("channel public keys: %w", err)
	}
	seen := map[channels.PublicKeyEntry]int{}
	for i, e := range entries {
		if e.Channel == "" {
			return nil, fmt.Errorf("entry %d: no channel", i+1)
		}
		if e.PublicKeyFile == "" {
			return nil, fmt.Errorf("entry %d (%s %s): no public_key_file", i+1, e.Channel, name(e))
		}
		id := e
		id.PublicKeyFile = ""
		if j, dup := seen[id]; dup {
			return nil, fmt.Errorf("entry %d (%s %s) repeats entry %d", i+1, e.Channel, name(e), j)
		}
		seen[id] = i + 1
	}
	return entries, nil
}

// name names an entry's identity for messages.
func name(e channels.PublicKeyEntry) string {
	switch {
	case e.AppID != "":
		return "app_id " + e.AppID
	case e.KeyID != "":
		return "merchant_id " + e.MerchantID + " key_id " + e.KeyID
	}
	return "merchant_id " + e.MerchantID
}
