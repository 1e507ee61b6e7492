package watchfile_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/watchfile"
)

// parseNumber accepts one decimal number per file.
func parseNumber(data []byte) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, errors.New("want one number")
	}
	return n, nil
}

func write(t *testing.T, path, s string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(s), 0o600))
}

func TestLoadRefusesABadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "n")
	_, err := watchfile.Load(path, parseNumber)
	require.ErrorIs(t, err, os.ErrNotExist)

	write(t, path, "not a number")
	_, err = watchfile.Load(path, parseNumber)
	require.ErrorContains(t, err, path)
	require.ErrorContains(t, err, "want one number")
}

func TestRefreshKeepsTheLastGoodContents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n")
	write(t, path, "1\n")
	f, err := watchfile.Load(path, parseNumber)
	require.NoError(t, err)
	assert.Equal(t, 1, f.Current())

	changed, err := f.Refresh()
	require.NoError(t, err)
	assert.False(t, changed, "unchanged contents")

	write(t, path, "2\n")
	changed, err = f.Refresh()
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, 2, f.Current())

	write(t, path, "two")
	changed, err = f.Refresh()
	require.ErrorContains(t, err, "last good contents stay in force")
	assert.False(t, changed)
	assert.Equal(t, 2, f.Current(), "a refused file never replaces good contents")
	require.Error(t, f.Err())

	_, err = f.Refresh()
	require.NoError(t, err, "the same bad contents are reported once")
	require.Error(t, f.Err(), "but the failure still stands")

	require.NoError(t, os.Remove(path))
	_, err = f.Refresh()
	require.ErrorIs(t, err, os.ErrNotExist, "a vanished file is reported")
	assert.Equal(t, 2, f.Current())

	write(t, path, "2\n")
	changed, err = f.Refresh()
	require.NoError(t, err)
	assert.False(t, changed, "back to the good contents")
	require.NoError(t, f.Err(), "fixed")

	write(t, path, "3")
	changed, err = f.Refresh()
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, 3, f.Current())
}

func TestWatchPicksUpAChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n")
	write(t, path, "1")
	f, err := watchfile.Load(path, parseNumber)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	changes := make(chan int, 4)
	var wg sync.WaitGroup
	wg.Go(func() {
		f.Watch(ctx, time.Millisecond, slog.New(slog.DiscardHandler), func(n int) { changes <- n })
	})
	defer func() { cancel(); wg.Wait() }()

	write(t, path, "7")
	select {
	case n := <-changes:
		assert.Equal(t, 7, n)
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not report the change within 10s")
	}
	assert.Equal(t, 7, f.Current())
}

func TestConcurrentReadersAndRefreshes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n")
	write(t, path, "0")
	f, err := watchfile.Load(path, parseNumber)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				n := f.Current()
				assert.True(t, n >= 0 && n < 50, "only a value that was written: %d", n)
			}
		})
	}
	for i := range 50 {
		write(t, path, strconv.Itoa(i))
		_, _ = f.Refresh() // a torn read may be refused; the value stays good
	}
	wg.Wait()
	_, err = f.Refresh()
	require.NoError(t, err)
	assert.Equal(t, 49, f.Current(), "the last contents written are in force")
}
