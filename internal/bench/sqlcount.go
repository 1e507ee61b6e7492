package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// MySQL client commands that the server's Questions counter counts: a
// text statement and the execution of a prepared one.
const (
	comQuery       = 0x03
	comStmtExecute = 0x17
)

// statementCounter is a TCP relay between one client process and the
// database server that counts the statements the client sends (MySQL
// protocol command packets COM_QUERY and COM_STMT_EXECUTE, as the
// server's Questions counts them), so that one process's statements can
// be told from those of the others sharing the server. It reads the
// protocol, changes nothing, and works only for connections without TLS
// or compression (the harness's own).
type statementCounter struct {
	ln         net.Listener
	server     string
	statements atomic.Int64
	wg         sync.WaitGroup
	mu         sync.Mutex
	conns      []net.Conn
}

// newStatementCounter listens on a free local port and relays every
// connection to server (host:port).
func newStatementCounter(ctx context.Context, server string) (*statementCounter, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("statement counter: listen: %w", err)
	}
	c := &statementCounter{ln: ln, server: server}
	c.wg.Go(c.accept)
	return c, nil
}

// addr is the address clients connect to instead of the server.
func (c *statementCounter) addr() string { return c.ln.Addr().String() }

// count is the statements relayed so far.
func (c *statementCounter) count() int64 { return c.statements.Load() }

// close stops listening, closes every relayed connection and waits for
// the relays to end.
func (c *statementCounter) close() {
	_ = c.ln.Close()
	c.mu.Lock()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.mu.Unlock()
	c.wg.Wait()
}

func (c *statementCounter) track(conns ...net.Conn) {
	c.mu.Lock()
	c.conns = append(c.conns, conns...)
	c.mu.Unlock()
}

func (c *statementCounter) accept() {
	for {
		client, err := c.ln.Accept()
		if err != nil {
			return // closed
		}
		server, err := net.Dial("tcp", c.server)
		if err != nil {
			_ = client.Close()
			continue
		}
		c.track(client, server)
		c.wg.Go(func() {
			_, _ = io.Copy(client, server)
			_ = client.Close()
		})
		c.wg.Go(func() {
			_, _ = io.Copy(server, io.TeeReader(client, &packetCounter{n: &c.statements}))
			_ = server.Close()
		})
	}
}

// packetCounter reads a client's side of the MySQL protocol as it passes
// and counts the command packets that are statements: a packet is a 3-byte
// little-endian payload length, a sequence number (0 for the first packet
// of a command) and the payload, whose first byte names the command.
type packetCounter struct {
	n      *atomic.Int64
	header [4]byte
	have   int // header bytes read of the current packet
	left   int // payload bytes still to pass of the current packet
	// first: the next payload byte is the first of a command packet's.
	first bool
}

// errShortWrite never happens: Write consumes everything.
var errShortWrite = errors.New("packet counter: short write")

func (p *packetCounter) Write(b []byte) (int, error) {
	total := len(b)
	for len(b) > 0 {
		if p.left == 0 && p.have < 4 {
			k := copy(p.header[p.have:], b)
			p.have += k
			b = b[k:]
			if p.have < 4 {
				break
			}
			p.left = int(p.header[0]) | int(p.header[1])<<8 | int(p.header[2])<<16
			p.first = p.header[3] == 0 && p.left > 0
			p.have = 0
			if p.left == 0 {
				continue
			}
		}
		if len(b) == 0 {
			break
		}
		if p.first {
			if b[0] == comQuery || b[0] == comStmtExecute {
				p.n.Add(1)
			}
			p.first = false
		}
		k := min(p.left, len(b))
		p.left -= k
		b = b[k:]
	}
	if len(b) != 0 {
		return total - len(b), errShortWrite
	}
	return total, nil
}
