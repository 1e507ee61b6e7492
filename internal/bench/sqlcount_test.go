package bench

import (
	"bytes"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// packet is one MySQL protocol packet: payload length, sequence number,
// payload.
func packet(seq byte, payload []byte) []byte {
	n := len(payload)
	return append([]byte{byte(n), byte(n >> 8), byte(n >> 16), seq}, payload...)
}

// TestPacketCounterCountsStatements: of a client's stream, the statement
// commands (COM_QUERY, COM_STMT_EXECUTE at sequence 0) are counted, the
// handshake response, a prepare, a ping, a quit, an empty packet and
// statement-like bytes inside payloads are not, however the stream is cut
// into writes.
func TestPacketCounterCountsStatements(t *testing.T) {
	var stream bytes.Buffer
	stream.Write(packet(1, []byte{comQuery, 'h', 'a', 'n', 'd'}))                 // handshake response: seq 1
	stream.Write(packet(0, []byte("\x03SELECT 1")))                               // COM_QUERY
	stream.Write(packet(0, []byte{0x16, comQuery, comStmtExecute}))               // COM_STMT_PREPARE
	stream.Write(packet(0, append([]byte{comStmtExecute}, make([]byte, 300)...))) // COM_STMT_EXECUTE
	stream.Write(packet(0, []byte{0x0e}))                                         // COM_PING
	stream.Write(packet(0, nil))                                                  // empty
	stream.Write(packet(0, []byte("\x03COMMIT")))                                 // COM_QUERY
	stream.Write(packet(0, []byte{0x01}))                                         // COM_QUIT
	all := stream.Bytes()
	for _, size := range []int{1, 2, 3, 5, 7, 64, len(all)} {
		var n atomic.Int64
		p := &packetCounter{n: &n}
		for b := all; len(b) > 0; {
			k := min(size, len(b))
			w, err := p.Write(b[:k])
			require.NoError(t, err)
			assert.Equal(t, k, w)
			b = b[k:]
		}
		assert.Equal(t, int64(3), n.Load(), "writes of %d bytes", size)
	}
}
