//go:build linux

package main

import (
	"archive/zip"
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/statements"
)

// refusalCeiling is the peak RSS statement import may reach refusing a
// file that is not a statement, whatever its size: the process and one
// line of text (docs/operations.md, "Statement import's memory").
const refusalCeiling = 64 << 20

// TestStatementImportRefusesBombsInBoundedMemory runs the built command,
// a child process, on files that are not statements but grow without
// bound when read whole: each is refused with exit 4 in one short line
// naming the file and the limit, at a peak RSS (the child's own, from
// wait4 in the small launcher testdata/peakrss) under refusalCeiling;
// and a real bill still imports. The bombs are written to disk by
// streaming, never held: a gzip of 256 MiB of
// newlines, a 100 MiB line of commas, an Alipay zip whose detail entry is
// the real one with 256 MiB of blank lines inside it, a gzip of 1 GiB of
// zeros, and a gzip of the WeChat header and one row repeated to 512 MiB
// (refused by its ratio); a (sparse) file over MaxTextBytes is refused
// before it is read.
func TestStatementImportRefusesBombsInBoundedMemory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin, launcher := buildConsumer(ctx, t), buildPeakRSS(ctx, t)
	dsn := migratedDatabase(ctx, t)
	env := []string{"PAYCB_DB_DSN=" + dsn, "PAYCB_LOG_LEVEL=warn", "PAYCB_TENANT_MERCHANTS_FILE=" + writeMerchants(t, testMerchants)}

	fixture := func(channel, name string) string {
		return filepath.Join("..", "..", "pkg", "channels", channel, "testdata", name)
	}
	wx := string(mustRead(t, fixture("wechat", "wechat_tradebill_ALL_2024-03-15.csv")))
	wxHeader, wxRest, _ := strings.Cut(wx, "\n")
	wxRow, _, _ := strings.Cut(wxRest, "\n")

	tests := []struct {
		name, channel string
		write         func(w io.Writer) error
		want          string
	}{
		{
			name: "newlines.csv.gz", channel: "WECHAT",
			write: gzipped(repeated("\n", 256<<20)),
			want:  "wechat trade bill: line 1001: more than 1000 blank lines in a row",
		},
		{
			name: "commas.csv", channel: "WECHAT",
			write: repeated(",", 100<<20),
			want:  "wechat trade bill: line 1: longer than 65536 bytes",
		},
		{
			name: "blank.csv.zip", channel: "ALIPAY",
			write: alipayWithBlankLines(t, fixture("alipay", "alipay_20880000000000000156_20240315.csv.zip"), 200<<20),
			want:  `alipay bill: detail entry "20880000000000000156_20240315_业务明细.csv": line 1002: more than 1000 blank lines in a row`,
		},
		{
			name: "zeros.gz", channel: "WECHAT",
			write: gzipped(repeated("\x00", 1<<30)),
			want:  "wechat trade bill: line 1: longer than 65536 bytes",
		},
		{
			name: "one-row.csv.gz", channel: "WECHAT",
			write: gzippedAt(gzip.BestCompression, func(w io.Writer) error {
				if _, err := io.WriteString(w, wxHeader+"\n"); err != nil {
					return err
				}
				return repeated(wxRow+"\n", 512<<20)(w)
			}),
			want: "wechat trade bill: line ",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.name)
			writeFile(t, path, tc.write)
			start := time.Now()
			stdout, stderr, code, rss := runMeasured(ctx, t, launcher, bin, env, "statement", "import", "--channel", tc.channel,
				"--tenant", "1001", "--date", "2024-03-15", "--file", path)
			t.Logf("%s: exit %d in %v, peak RSS %d MiB: %s", tc.name, code, time.Since(start).Round(time.Millisecond), rss>>20, stderr)
			assert.Equal(t, exitRefused, code, stdout+stderr)
			assert.Contains(t, stderr, "statement import refused "+path+": ")
			assert.Contains(t, stderr, tc.want)
			assert.Contains(t, stderr, "beyond a statement's limits")
			assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %s", stderr)
			assert.Less(t, len(stderr), 400, "a short line")
			assert.Less(t, rss, int64(refusalCeiling), "peak RSS")
		})
	}

	t.Run("a file over MaxTextBytes", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "sparse.csv")
		f, err := os.Create(path) //nolint:gosec // the test's own directory
		require.NoError(t, err)
		require.NoError(t, f.Truncate(statements.MaxTextBytes+1), "a sparse file: nothing written")
		require.NoError(t, f.Close())
		_, stderr, code, rss := runMeasured(ctx, t, launcher, bin, env, "statement", "import", "--channel", "WECHAT",
			"--tenant", "1001", "--date", "2024-03-15", "--file", path)
		assert.Equal(t, exitRefused, code, stderr)
		assert.Equal(t, "consumer: statement import refused "+path+": not a regular file of at most 268435456 bytes: "+
			statements.ErrLimit.Error()+"\n", stderr)
		assert.Less(t, rss, int64(refusalCeiling), "peak RSS")
	})

	t.Run("a real bill", func(t *testing.T) {
		stdout, stderr, code, rss := runMeasured(ctx, t, launcher, bin, env, "statement", "import", "--channel", "WECHAT",
			"--tenant", "1001", "--date", "2024-03-15", "--file", fixture("wechat", "wechat_tradebill_ALL_2024-03-15.csv.gz"),
			"--sha1", "c2baf4b6b2671093d900aa83c375339a410ccae3")
		require.Zero(t, code, stdout+stderr)
		assert.Contains(t, stdout, "2024-03-15: new, 5 lines in the file")
		assert.Less(t, rss, int64(refusalCeiling), "peak RSS")
	})
}

// runMeasured is runBinary that also returns the child's peak RSS in
// bytes, as wait4 reports it, measured by the small launcher in
// testdata/peakrss: this test process is large and starts children with
// vfork, so the ru_maxrss of a child it starts itself holds the test's
// own peak too.
func runMeasured(ctx context.Context, t *testing.T, launcher, bin string, env []string, args ...string) (stdout, stderr string, code int, rss int64) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "peakrss")
	stdout, stderr, code = runBinary(ctx, t, launcher, append(env, "PEAKRSS_OUT="+out), append([]string{bin}, args...)...)
	raw, err := os.ReadFile(out) //nolint:gosec // the test's own directory
	require.NoError(t, err, "the launcher's measure: %s", stderr)
	rss, err = strconv.ParseInt(string(raw), 10, 64)
	require.NoError(t, err)
	return stdout, stderr, code, rss
}

// buildPeakRSS builds the launcher in testdata/peakrss.
func buildPeakRSS(ctx context.Context, t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "peakrss")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./testdata/peakrss").CombinedOutput()
	require.NoError(t, err, "build the peak RSS launcher: %s", out)
	return bin
}

// writeFile writes path with write, through a buffer.
func writeFile(t *testing.T, path string, write func(io.Writer) error) {
	t.Helper()
	f, err := os.Create(path) //nolint:gosec // the test's own directory
	require.NoError(t, err)
	bw := bufio.NewWriterSize(f, 1<<20)
	require.NoError(t, write(bw))
	require.NoError(t, bw.Flush())
	require.NoError(t, f.Close())
}

// repeated writes s over and over until n bytes are written (the last
// copy cut short).
func repeated(s string, n int64) func(io.Writer) error {
	return func(w io.Writer) error {
		chunk := []byte(strings.Repeat(s, max(1, (64<<10)/len(s))))
		for n > 0 {
			k, err := w.Write(chunk[:min(int64(len(chunk)), n)])
			if err != nil {
				return err
			}
			n -= int64(k)
		}
		return nil
	}
}

// gzipped writes write's bytes as a gzip stream, compressed fast.
func gzipped(write func(io.Writer) error) func(io.Writer) error {
	return gzippedAt(gzip.BestSpeed, write)
}

// gzippedAt writes write's bytes as a gzip stream compressed at level.
func gzippedAt(level int, write func(io.Writer) error) func(io.Writer) error {
	return func(w io.Writer) error {
		zw, err := gzip.NewWriterLevel(w, level)
		if err != nil {
			return err
		}
		if err := write(zw); err != nil {
			return err
		}
		return zw.Close()
	}
}

// alipayWithBlankLines writes the Alipay bill zip at path with n bytes
// of blank lines (CRLF) after the first line of its detail entry.
func alipayWithBlankLines(t *testing.T, path string, n int64) func(io.Writer) error {
	t.Helper()
	zr, err := zip.OpenReader(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = zr.Close() })
	return func(w io.Writer) error {
		zw := zip.NewWriter(w)
		zw.RegisterCompressor(zip.Deflate, func(out io.Writer) (io.WriteCloser, error) {
			return flate.NewWriter(out, flate.BestSpeed)
		})
		for _, f := range zr.File {
			hdr := f.FileHeader
			ew, err := zw.CreateHeader(&hdr)
			if err != nil {
				return err
			}
			rc, err := f.Open()
			if err != nil {
				return err
			}
			entry, err := io.ReadAll(rc)
			_ = rc.Close()
			if err != nil {
				return err
			}
			if strings.HasSuffix(f.Name, ").csv") || !bytes.Contains(entry, []byte("\n")) {
				_, err = ew.Write(entry)
			} else {
				first, rest, _ := bytes.Cut(entry, []byte("\n"))
				_, err = ew.Write(append(first, '\n'))
				if err == nil {
					err = repeated("\r\n", n)(ew)
				}
				if err == nil {
					_, err = ew.Write(rest)
				}
			}
			if err != nil {
				return err
			}
		}
		return zw.Close()
	}
}
