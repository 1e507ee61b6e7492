package deadletters_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
)

func TestHashSeparatesKeyFromValue(t *testing.T) {
	assert.NotEqual(t, deadletters.Hash([]byte("ab"), []byte("c")), deadletters.Hash([]byte("a"), []byte("bc")))
	assert.NotEqual(t, deadletters.Hash(nil, []byte("v")), deadletters.Hash(nil, []byte("w")))
}

// TestStore runs the record's life on both dialects: not recorded, then
// recorded once (a second insert is success, not a second row), read back
// with its event fields, found by its source, closed once with a note.
func TestStore(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		now := time.Date(2026, 12, 1, 8, 0, 0, 123456000, time.UTC)
		s := deadletters.NewStore(db).WithClock(func() time.Time { return now })
		id := deadletters.NewID("channel-events", 3, 41, []byte("WECHAT:42"), []byte(`{"tenant_id":7}`), "conflict")

		ok, err := s.Recorded(ctx, id)
		require.NoError(t, err)
		assert.False(t, ok)
		_, err = s.Get(ctx, id)
		require.ErrorIs(t, err, deadletters.ErrNotFound)

		rec := deadletters.Record{
			ID: id, TenantID: 7, Key: "WECHAT:42:PAYMENT_RECEIVED", Fingerprint: strings.Repeat("f", 64),
			Channel: "WECHAT", TradeNo: "42", Error: strings.Repeat("é", 600),
		}
		require.NoError(t, s.Record(ctx, rec))
		require.NoError(t, s.Record(ctx, rec), "a second insert of the same dead letter is success")
		n, err := db.NewSelect().Table("ss_dead_letter").Count(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 1, n, "one row")

		ok, err = s.Recorded(ctx, id)
		require.NoError(t, err)
		assert.True(t, ok)
		other := id
		other.Kind = "over_refund"
		ok, err = s.Recorded(ctx, other)
		require.NoError(t, err)
		assert.False(t, ok, "another kind of the same message is another dead letter")
		changed := deadletters.NewID("channel-events", 3, 41, []byte("WECHAT:42"), []byte(`{"tenant_id":8}`), "conflict")
		ok, err = s.Recorded(ctx, changed)
		require.NoError(t, err)
		assert.False(t, ok, "other bytes at the same coordinates (a recreated topic) are another message")

		got, err := s.Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, id, got.ID)
		assert.Equal(t, int64(7), got.TenantID)
		assert.Equal(t, rec.Key, got.Key)
		assert.Equal(t, rec.Fingerprint, got.Fingerprint)
		assert.Equal(t, "42", got.TradeNo)
		assert.Equal(t, "WECHAT", got.Channel)
		assert.LessOrEqual(t, len(got.Error), 1024)
		assert.True(t, strings.HasPrefix(rec.Error, got.Error), "the error is cut on a character boundary")
		assert.Equal(t, now.Truncate(time.Microsecond), got.CreatedAt)
		assert.False(t, got.Closed())

		bare := deadletters.Record{ID: deadletters.NewID("channel-events", 0, 1, nil, []byte("not json"), "malformed"), Error: "bad"}
		require.NoError(t, s.Record(ctx, bare))
		found, err := s.ForSources(ctx, []deadletters.Source{{Topic: "channel-events", Partition: 0, Offset: 1}, {Topic: "channel-events", Partition: 9, Offset: 9}})
		require.NoError(t, err)
		require.Len(t, found, 1)
		assert.Equal(t, bare.ID, found[0].ID)
		assert.Zero(t, found[0].TenantID, "no tenant when the message did not decode that far")
		assert.Empty(t, found[0].Key)

		_, _, err = s.Close(ctx, rec, "ops@host", "  ")
		require.ErrorIs(t, err, deadletters.ErrEmptyNote)
		closed, changedNow, err := s.Close(ctx, rec, "ops@host", "merchant confirmed the first amount")
		require.NoError(t, err)
		assert.True(t, changedNow)
		require.NotNil(t, closed.ClosedAt)
		assert.Equal(t, "ops@host", closed.ClosedBy)
		assert.Equal(t, "merchant confirmed the first amount", closed.CloseNote)

		now = now.Add(time.Hour)
		again, changedNow, err := s.Close(ctx, rec, "someone@else", "another note")
		require.NoError(t, err)
		assert.False(t, changedNow, "closing twice changes nothing")
		assert.Equal(t, "merchant confirmed the first amount", again.CloseNote)
		assert.Equal(t, *closed.ClosedAt, *again.ClosedAt)

		old := deadletters.Record{
			ID:        deadletters.NewID("channel-events", 1, 5, []byte("k"), []byte("v"), "no_key"),
			CreatedAt: now.Add(-72 * time.Hour),
		}
		unrecorded, changedNow, err := s.Close(ctx, old, "ops@host", "written before the table existed")
		require.NoError(t, err)
		assert.True(t, changedNow, "a dead letter without a record gets one, closed")
		assert.Equal(t, now.Add(-72*time.Hour).Truncate(time.Microsecond), unrecorded.CreatedAt)
	})
}

// TestListLeavesOutAnotherDeploymentsRows: two deployments (input and
// dead-letter topics of their own) share one database. A row of the other
// deployment's topics is not one of this topic's dead letters whose body was
// lost: dlq list leaves it out, and lists this deployment's own lost row.
func TestListLeavesOutAnotherDeploymentsRows(t *testing.T) {
	k := mustKafka(t, 1)
	db := sqldbtest.MustMySQL(t)
	ctx := context.Background()
	s := deadletters.NewStore(db)
	mine := deadletters.Record{ID: deadletters.NewID(k.Topic, 0, 7, nil, []byte("mine"), "malformed"), Error: "bad"}
	theirs := deadletters.Record{ID: deadletters.NewID("other-events", 0, 7, nil, []byte("theirs"), "malformed"), Error: "bad"}
	require.NoError(t, s.Record(ctx, mine))
	require.NoError(t, s.Record(ctx, theirs))

	states, err := deadletters.List(ctx, k, db, nil, deadletters.Filter{})
	require.NoError(t, err)
	require.Len(t, states, 1, "the other deployment's row is not listed")
	assert.Equal(t, mine.ID, states[0].Record.ID)
	assert.True(t, states[0].Message.BodyLost, "this topic no longer holds it")
}
