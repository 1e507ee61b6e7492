package deadletters_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
)

// TestRedriveLinks runs the links between a dead letter and the dead
// letters of its redrives on both dialects: a redrive that fails again is
// linked to the dead letter it came from, by the position recorded before
// the redrive or, without one, by the message's bytes; a second failure of
// the same redrive is recorded already (written once); a failure linked to
// an original that already has a successor is linked to that successor, so
// a dead letter never has two; and a letter without a row is known to be
// superseded by the x-redriven-from its successor recorded.
func TestRedriveLinks(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		s := deadletters.NewStore(db)
		key, value := []byte("junk"), []byte("not an envelope")
		original := deadletters.Record{ID: deadletters.NewID(testTopic, 0, 3, key, value, "malformed"), Error: "bad"}
		require.NoError(t, s.Record(ctx, original))
		pos := deadletters.Position{Topic: testDLQ, Partition: 0, Offset: 7}
		noted, err := s.NotePosition(ctx, original, pos)
		require.NoError(t, err)
		require.NotNil(t, noted.Position)
		assert.Equal(t, pos, *noted.Position)
		byPos, found, err := s.AtPosition(ctx, pos)
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, noted.RowID, byPos.RowID)

		// The redrive is consumed at channel-events/1@20 and fails again.
		again := deadletters.NewID(testTopic, 1, 20, key, value, "malformed")
		done, err := s.RedriveRecorded(ctx, pos.String(), again)
		require.NoError(t, err)
		assert.False(t, done, "nothing recorded for the redrive yet")
		require.NoError(t, s.Record(ctx, deadletters.Record{ID: again, Error: "bad", RedrivenFrom: pos.String()}))
		got, err := s.Get(ctx, again)
		require.NoError(t, err)
		assert.Equal(t, noted.RowID, got.RedrivenFromID, "linked to the dead letter it was redriven from")
		assert.Equal(t, pos.String(), got.RedrivenFrom)
		succ, err := s.Successors(ctx, []int64{noted.RowID, got.RowID})
		require.NoError(t, err)
		assert.Equal(t, map[int64]int64{noted.RowID: got.RowID}, succ)

		// The same redrive failing in another group, or a second redrive of
		// the original: recorded already, so not written again.
		other := deadletters.NewID(testTopic, 0, 21, key, value, "malformed")
		done, err = s.RedriveRecorded(ctx, pos.String(), other)
		require.NoError(t, err)
		assert.True(t, done, "the original already has a successor")

		// Recorded all the same (a race lost), it is linked to the
		// successor, never as a second successor of the original.
		require.NoError(t, s.Record(ctx, deadletters.Record{ID: other, Error: "bad", RedrivenFrom: pos.String()}))
		third, err := s.Get(ctx, other)
		require.NoError(t, err)
		assert.Equal(t, got.RowID, third.RedrivenFromID)

		// No recorded position: found by the bytes, the latest dead letter
		// without a successor.
		unnoted := deadletters.NewID(testTopic, 1, 30, key, value, "malformed")
		require.NoError(t, s.Record(ctx, deadletters.Record{ID: unnoted, Error: "bad", RedrivenFrom: testDLQ + "/0@99"}))
		fourth, err := s.Get(ctx, unnoted)
		require.NoError(t, err)
		assert.Equal(t, third.RowID, fourth.RedrivenFromID, "the tail of the chain")
		all, err := s.All(ctx)
		require.NoError(t, err)
		assert.Len(t, all, 4)

		// A message of other bytes redriven from a position nobody
		// recorded: recorded, linked to nothing.
		lone := deadletters.NewID(testTopic, 1, 31, []byte("k"), []byte("other"), "malformed")
		require.NoError(t, s.Record(ctx, deadletters.Record{ID: lone, Error: "bad", RedrivenFrom: testDLQ + "/0@5"}))
		fifth, err := s.Get(ctx, lone)
		require.NoError(t, err)
		assert.Zero(t, fifth.RedrivenFromID)
		byFrom, err := s.SuccessorsByFrom(ctx, []string{testDLQ + "/0@5", testDLQ + "/0@6"})
		require.NoError(t, err)
		assert.Equal(t, map[string]int64{testDLQ + "/0@5": fifth.RowID}, byFrom, "a letter without a row is superseded by its x-redriven-from")

		byRow, err := s.ByRowID(ctx, fifth.RowID)
		require.NoError(t, err)
		assert.Equal(t, lone, byRow.ID)
		_, err = s.ByRowID(ctx, 999)
		require.ErrorIs(t, err, deadletters.ErrNotFound)
	})
}

func TestParseID(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want deadletters.LetterRef
	}{
		{"37", deadletters.LetterRef{RowID: 37}},
		{"p0-12", deadletters.LetterRef{At: &deadletters.At{Partition: 0, Offset: 12}}},
	} {
		got, err := deadletters.ParseID(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
	for _, bad := range []string{"", "0", "-1", "p", "p1", "p1-", "p-1-2", "x3", "0:12"} {
		_, err := deadletters.ParseID(bad)
		require.ErrorIs(t, err, deadletters.ErrBadID, bad)
	}
	pos, ok := deadletters.ParsePosition("channel-events.dlq/2@40")
	require.True(t, ok)
	assert.Equal(t, deadletters.Position{Topic: "channel-events.dlq", Partition: 2, Offset: 40}, pos)
	for _, bad := range []string{"", "x", "/1@2", "t/1", "t/a@2", "t/1@-2"} {
		_, ok := deadletters.ParsePosition(bad)
		assert.False(t, ok, bad)
	}
}

// TestConcurrentFailuresOfOneRedriveFormOneChain: dead letters of the same
// original recorded at once (several groups or instances failing the same
// redrive) each take a distinct place in one chain, never two successors
// of one dead letter: exactly one of them is not superseded.
func TestConcurrentFailuresOfOneRedriveFormOneChain(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		s := deadletters.NewStore(db)
		key, value := []byte("ALIPAY:T-1"), []byte(`{"conflicting":true}`)
		original := deadletters.Record{ID: deadletters.NewID(testTopic, 0, 1, key, value, "conflict"), Error: "conflict"}
		pos := deadletters.Position{Topic: testDLQ, Partition: 0, Offset: 0}
		noted, err := s.NotePosition(ctx, original, pos)
		require.NoError(t, err)
		const n = 4
		errs := make(chan error, n)
		for i := range n {
			go func() {
				id := deadletters.NewID(testTopic, 1, int64(100+i), key, value, "conflict")
				errs <- s.Record(ctx, deadletters.Record{ID: id, Error: "conflict", RedrivenFrom: pos.String()})
			}()
		}
		for range n {
			require.NoError(t, <-errs)
		}
		all, err := s.All(ctx)
		require.NoError(t, err)
		require.Len(t, all, n+1)
		ids := make([]int64, len(all))
		for i, r := range all {
			ids[i] = r.RowID
		}
		succ, err := s.Successors(ctx, ids)
		require.NoError(t, err)
		assert.Len(t, succ, n, "every dead letter but one is superseded, each by one successor")
		_, ok := succ[noted.RowID]
		assert.True(t, ok, "the original is superseded")
		seen := map[int64]bool{}
		for _, next := range succ {
			assert.False(t, seen[next], "one place each")
			seen[next] = true
		}
	})
}
