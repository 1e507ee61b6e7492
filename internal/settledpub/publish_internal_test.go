package settledpub

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestChunksBoundEachWrite: a write holds at most maxWriteMessages rows and
// maxWriteBytes of values (a larger value alone), the rows in their order;
// the writer's batch is as large as a write, no larger.
func TestChunksBoundEachWrite(t *testing.T) {
	var rows []row
	for i := range 3*maxWriteMessages + 7 {
		rows = append(rows, row{ID: int64(i), Value: []byte("{}")})
	}
	big := row{ID: 1 << 20, Value: bytes.Repeat([]byte("x"), maxWriteBytes+1)}
	rows = append(rows[:200], append([]row{big}, rows[200:]...)...)
	var again []row
	for _, c := range chunks(rows) {
		require.NotEmpty(t, c)
		assert.LessOrEqual(t, len(c), maxWriteMessages)
		size := 0
		for _, r := range c {
			size += len(r.Value)
		}
		if len(c) > 1 {
			assert.LessOrEqual(t, size, maxWriteBytes)
		}
		again = append(again, c...)
	}
	assert.Equal(t, rows, again, "every row once, in order")

	w := NewKafkaWriter([]string{"127.0.0.1:9"}, "settled", nil, nil, 0)
	defer func() { _ = w.Close() }()
	assert.Equal(t, maxWriteMessages, w.BatchSize)
	assert.EqualValues(t, 2*maxWriteBytes, w.BatchBytes)
}
