package watchfile

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// DefaultInterval is how often Watch looks at the file when given no
// interval: short enough that a new terminal or key is in force within
// seconds, and a stat plus a read of a few kilobytes costs nothing.
const DefaultInterval = 2 * time.Second

// Parse turns a file's bytes into the value the program uses. Its error
// should name the line that is wrong, never a secret on it.
type Parse[T any] func(data []byte) (T, error)

// File is a parsed file kept current. It is safe for concurrent use.
type File[T any] struct {
	path  string
	parse Parse[T]
	read  Read

	mu      sync.RWMutex
	current T
	sum     [sha256.Size]byte // of the contents current was parsed from
	failed  [sha256.Size]byte // of the last contents that failed to parse
	lastErr error
}

// Load reads and parses path. An error (the file unreadable or its contents
// refused by parse) is returned wrapped with the path: at start a bad file is
// a configuration error, not something to run without.
func Load[T any](path string, parse Parse[T]) (*File[T], error) {
	return LoadWith(path, readFile, parse)
}

// readFile is Load's Read: the file's bytes.
func readFile(path string) ([]byte, error) {
	return os.ReadFile(filepath.Clean(path)) // the operator names the file
}

// Read returns what a File at path is parsed from and compared by: the
// file's bytes, or (LoadWith) the file's and those of the files it names,
// so that a change of any of them is a change of the File.
type Read func(path string) ([]byte, error)

// LoadWith is Load with read in place of reading the file alone: what
// read returns is parsed, and compared on each Refresh. A read error is
// reported as an unreadable file is.
func LoadWith[T any](path string, read Read, parse Parse[T]) (*File[T], error) {
	f := &File[T]{path: path, parse: parse, read: read}
	data, err := read(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	v, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.current, f.sum = v, sha256.Sum256(data)
	return f, nil
}

// Path is the file's path as given to Load.
func (f *File[T]) Path() string { return f.path }

// Current is the value parsed from the file's last good contents.
func (f *File[T]) Current() T {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.current
}

// Refresh reads the file again and, when its contents changed and parse
// accepts them, makes them current. It reports whether the value changed.
// On a read or parse error the last good value stays current and the error
// is returned, wrapped with the path; the same bad contents are reported
// once, so a poller does not repeat the error every interval (it is returned
// again once the contents change or after they were fixed and broken again).
func (f *File[T]) Refresh() (changed bool, err error) {
	data, err := f.read(f.path)
	if err != nil {
		return false, f.fail(sha256.Sum256([]byte("unreadable: "+err.Error())), fmt.Errorf("read %s: %w", f.path, err))
	}
	sum := sha256.Sum256(data)
	f.mu.RLock()
	same := sum == f.sum
	f.mu.RUnlock()
	if same {
		f.clearFailure()
		return false, nil
	}
	v, err := f.parse(data)
	if err != nil {
		return false, f.fail(sum, fmt.Errorf("%s: %w (the last good contents stay in force)", f.path, err))
	}
	f.mu.Lock()
	f.current, f.sum, f.failed, f.lastErr = v, sum, [sha256.Size]byte{}, nil
	f.mu.Unlock()
	return true, nil
}

// Err is the error of the last failed Refresh while it still stands (the
// file has not been read good since), else nil.
func (f *File[T]) Err() error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.lastErr
}

// fail records err for contents sum and returns it, or nil when the same
// contents were already reported.
func (f *File[T]) fail(sum [sha256.Size]byte, err error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	repeated := f.lastErr != nil && f.failed == sum
	f.failed, f.lastErr = sum, err
	if repeated {
		return nil
	}
	return err
}

func (f *File[T]) clearFailure() {
	f.mu.Lock()
	f.failed, f.lastErr = [sha256.Size]byte{}, nil
	f.mu.Unlock()
}

// Watch calls Refresh every interval (DefaultInterval when zero or less)
// until ctx is done. A change is logged at INFO, a refused file at ERROR
// (once per bad contents), both with the path and never the contents;
// onChange, when not nil, is called after each change with the new value.
func (f *File[T]) Watch(ctx context.Context, interval time.Duration, log *slog.Logger, onChange func(T)) {
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
			log.ErrorContext(ctx, "configuration file refused; the last good contents stay in force", "file", f.path, "err", err)
		case changed:
			log.InfoContext(ctx, "configuration file re-read", "file", f.path)
			if onChange != nil {
				onChange(f.Current())
			}
		}
	}
}
