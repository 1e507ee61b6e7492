package sqldbtest

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

// Proxy is a TCP proxy in front of the test database that a test can cut:
// Down closes every connection and refuses new ones until Up; CutAfterCommit
// drops the connection right after forwarding the next COMMIT, so the client
// cannot know whether it committed; Stall makes the server stop answering,
// its connections left open, until Resume.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
	// stalled, while not nil, is closed by Resume: until then nothing a
	// client sends reaches the server.
	stalled chan struct{}

	cutAfterCommit atomic.Bool
	commitsCut     atomic.Int64
}

// NewProxy starts a proxy to the server of dsn and returns it with a DSN
// that goes through it. Cleanup closes it.
func NewProxy(tb testing.TB, dsn string) (*Proxy, string) {
	tb.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(tb, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	p := &Proxy{ln: ln, target: cfg.Addr, conns: map[net.Conn]struct{}{}}
	go p.accept()
	tb.Cleanup(func() { _ = p.Close() })
	cfg.Net = "tcp"
	cfg.Addr = ln.Addr().String()
	return p, cfg.FormatDSN()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.mu.Unlock()
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	p.track(client, server)
	defer p.untrack(client, server)
	done := make(chan struct{}, 2)
	go func() { // server -> client
		_, _ = io.Copy(client, server)
		done <- struct{}{}
	}()
	go func() { // client -> server, watching for COMMIT
		buf := make([]byte, 64<<10)
		for {
			n, err := client.Read(buf)
			if n > 0 {
				chunk := buf[:n]
				p.waitResumed()
				if _, werr := server.Write(chunk); werr != nil {
					break
				}
				if isCommit(chunk) && p.cutAfterCommit.CompareAndSwap(true, false) {
					p.commitsCut.Add(1)
					break
				}
			}
			if err != nil {
				break
			}
		}
		done <- struct{}{}
	}()
	<-done
}

// isCommit reports whether chunk is a COM_QUERY packet "COMMIT": a 4-byte
// header, command 0x03, then the statement.
func isCommit(chunk []byte) bool {
	return len(chunk) >= 5 && chunk[4] == 0x03 && bytes.EqualFold(bytes.TrimSpace(chunk[5:]), []byte("COMMIT"))
}

func (p *Proxy) track(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(p.conns, c)
	}
}

// Down closes every proxied connection and refuses new ones until Up.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
}

// Up accepts connections again.
func (p *Proxy) Up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// CutAfterNextCommit arms the proxy to drop the connection right after it
// forwards the next COMMIT to the server.
func (p *Proxy) CutAfterNextCommit() { p.cutAfterCommit.Store(true) }

// CommitsCut counts the connections dropped after a COMMIT.
func (p *Proxy) CommitsCut() int64 { return p.commitsCut.Load() }

// Stall holds from now on whatever a client sends, on open connections and
// new ones (which then never finish their handshake), until Resume: a
// server that does not answer.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled == nil {
		p.stalled = make(chan struct{})
	}
}

// Resume forwards what Stall held, and everything after it.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled != nil {
		close(p.stalled)
		p.stalled = nil
	}
}

// waitResumed returns once the proxy is not stalled.
func (p *Proxy) waitResumed() {
	p.mu.Lock()
	stalled := p.stalled
	p.mu.Unlock()
	if stalled != nil {
		<-stalled
	}
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.Resume()
	p.Down()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
