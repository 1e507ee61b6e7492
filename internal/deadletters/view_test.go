package deadletters

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestViewOfAnEnvelopeReadTwoWaysShowsTheBytes: an envelope whose member
// repeats (two tenant_id, one in capitals) was dead-lettered malformed;
// `dlq show` must not present it as an envelope of the last tenant, as
// encoding/json alone would read it: it shows the value as it is.
func TestViewOfAnEnvelopeReadTwoWaysShowsTheBytes(t *testing.T) {
	value := `{"tenant_id":1001,"TENANT_ID":2002,"channel":"SQB","received_at":"2026-12-05T02:00:00Z","content_type":"application/json","body":"{}"}`
	v := ViewOf("channel-events.dlq", Message{Value: []byte(value)}, nil, nil)
	assert.Nil(t, v.Envelope)
	assert.Equal(t, value, v.Value)

	once := `{"tenant_id":1001,"channel":"SQB","received_at":"2026-12-05T02:00:00Z","content_type":"application/json","body":"{}"}`
	v = ViewOf("channel-events.dlq", Message{Value: []byte(once)}, nil, nil)
	require.NotNil(t, v.Envelope)
	assert.Equal(t, int64(1001), v.Envelope.TenantID)
}
