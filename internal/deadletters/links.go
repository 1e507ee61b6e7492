package deadletters

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/uptrace/bun"
)

// maxChain bounds how many successors Record follows to the latest one of
// a dead letter (a message redriven and failing again that many times).
const maxChain = 1000

// idsPerQuery bounds the ids one IN list of Successors holds.
const idsPerQuery = 500

// origin finds the row of the dead letter whose redrive produced the
// message of id, named by from (x-redriven-from): the row that records
// that position in the dead-letter topic or else, for a position not
// recorded, the latest dead letter of the same input topic and the same
// bytes (the redriven message carries its letter's key and value
// unchanged) that has no successor yet.
func (s *Store) origin(ctx context.Context, from string, id ID) (int64, bool, error) {
	if pos, ok := ParsePosition(from); ok {
		var ids []int64
		err := s.db.NewSelect().Table("ss_dead_letter").Column("id").
			Where("dlq_topic = ?", pos.Topic).Where("dlq_partition = ?", pos.Partition).Where("dlq_offset = ?", pos.Offset).
			OrderExpr("id DESC").Limit(1).Scan(ctx, &ids)
		if err != nil {
			return 0, false, fmt.Errorf("find the dead letter at %s: %w", from, err)
		}
		if len(ids) == 1 {
			return ids[0], true, nil
		}
	}
	var ids []int64
	err := s.db.NewSelect().TableExpr("ss_dead_letter AS d").Column("d.id").
		Where("d.message_hash = ?", id.MessageHash[:]).Where("d.source_topic = ?", id.SourceTopic).
		Where("NOT (d.source_partition = ? AND d.source_offset = ?)", id.SourcePartition, id.SourceOffset).
		Where("NOT EXISTS (SELECT 1 FROM ss_dead_letter AS n WHERE n.redriven_from_id = d.id)").
		OrderExpr("d.id DESC").Limit(1).Scan(ctx, &ids)
	if err != nil {
		return 0, false, fmt.Errorf("find the dead letter %s was redriven from: %w", id, err)
	}
	if len(ids) == 1 {
		return ids[0], true, nil
	}
	return 0, false, nil
}

// successor is the row linked to rowID as its successor.
func (s *Store) successor(ctx context.Context, rowID int64) (int64, bool, error) {
	var ids []int64
	if err := s.db.NewSelect().Table("ss_dead_letter").Column("id").Where("redriven_from_id = ?", rowID).Scan(ctx, &ids); err != nil {
		return 0, false, fmt.Errorf("find the successor of dead letter %d: %w", rowID, err)
	}
	if len(ids) == 0 {
		return 0, false, nil
	}
	return ids[0], true, nil
}

// linkTarget is the row a dead letter of a redriven message is linked to:
// the latest successor of its origin (the origin itself when it has none).
func (s *Store) linkTarget(ctx context.Context, r Record) (int64, bool, error) {
	cur, ok, err := s.origin(ctx, r.RedrivenFrom, r.ID)
	if err != nil || !ok {
		return 0, false, err
	}
	for range maxChain {
		next, ok, err := s.successor(ctx, cur)
		if err != nil {
			return 0, false, err
		}
		if !ok {
			return cur, true, nil
		}
		cur = next
	}
	return 0, false, fmt.Errorf("dead letter %d: more than %d successors", cur, maxChain)
}

// RedriveRecorded reports whether the dead letter that from names (the
// x-redriven-from of the message of id), found by its recorded position in
// the dead-letter topic, already has a successor: a redrive of it failed
// again and that dead letter is written and recorded, so a second one for
// the same original is not written. A from whose position no row records
// is never recorded here.
func (s *Store) RedriveRecorded(ctx context.Context, from string, id ID) (bool, error) {
	pos, ok := ParsePosition(from)
	if !ok {
		return false, nil
	}
	rec, found, err := s.AtPosition(ctx, pos)
	if err != nil || !found {
		return false, err
	}
	if rec.ID == id {
		return true, nil
	}
	_, has, err := s.successor(ctx, rec.RowID)
	if err != nil {
		return false, fmt.Errorf("look up dead letter %s: %w", id, err)
	}
	return has, nil
}

// All returns every record, oldest first.
func (s *Store) All(ctx context.Context) ([]Record, error) {
	var rows []row
	if err := s.db.NewSelect().Model(&rows).OrderExpr("id").Scan(ctx); err != nil {
		return nil, fmt.Errorf("read dead letter records: %w", err)
	}
	out := make([]Record, len(rows))
	for i := range rows {
		out[i] = rows[i].record()
	}
	return out, nil
}

// ByRowID returns the record whose row id is id, or an error wrapping
// ErrNotFound.
func (s *Store) ByRowID(ctx context.Context, id int64) (Record, error) {
	var rw row
	if err := s.db.NewSelect().Model(&rw).Where("id = ?", id).Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return Record{}, fmt.Errorf("dead letter %d: %w", id, ErrNotFound)
		}
		return Record{}, fmt.Errorf("read dead letter %d: %w", id, err)
	}
	return rw.record(), nil
}

// AtPosition returns the latest record that records pos as its position
// in the dead-letter topic; found is false when none does.
func (s *Store) AtPosition(ctx context.Context, pos Position) (Record, bool, error) {
	var rows []row
	err := s.db.NewSelect().Model(&rows).
		Where("dlq_topic = ?", pos.Topic).Where("dlq_partition = ?", pos.Partition).Where("dlq_offset = ?", pos.Offset).
		OrderExpr("id DESC").Limit(1).Scan(ctx)
	if err != nil {
		return Record{}, false, fmt.Errorf("read the dead letter at %s: %w", pos, err)
	}
	if len(rows) == 0 {
		return Record{}, false, nil
	}
	return rows[0].record(), true, nil
}

// NotePosition records pos as r's position in the dead-letter topic,
// inserting r first when it was not read from the table (RowID 0) and has
// no row (a dead letter written before the
// table existed, or whose row was lost), and returns the record as it is
// after the call.
func (s *Store) NotePosition(ctx context.Context, r Record, pos Position) (Record, error) {
	if r.RowID == 0 {
		if err := s.Record(ctx, r); err != nil {
			return Record{}, err
		}
	}
	_, err := whereID(s.db.NewUpdate().Table("ss_dead_letter"), r.ID).
		Set("dlq_topic = ?", pos.Topic).Set("dlq_partition = ?", pos.Partition).Set("dlq_offset = ?", pos.Offset).
		Exec(ctx)
	if err != nil {
		return Record{}, fmt.Errorf("record the position of dead letter %s: %w", r.ID, err)
	}
	return s.Get(ctx, r.ID)
}

// Successors returns, for each of rowIDs that has one, the row id of its
// successor (the dead letter its redrive failed again into).
func (s *Store) Successors(ctx context.Context, rowIDs []int64) (map[int64]int64, error) {
	out := map[int64]int64{}
	for start := 0; start < len(rowIDs); start += idsPerQuery {
		chunk := rowIDs[start:min(start+idsPerQuery, len(rowIDs))]
		var rows []struct {
			ID   int64 `bun:"id"`
			From int64 `bun:"redriven_from_id"`
		}
		if err := s.db.NewSelect().Table("ss_dead_letter").Column("id", "redriven_from_id").
			Where("redriven_from_id IN (?)", bun.List(chunk)).Scan(ctx, &rows); err != nil {
			return nil, fmt.Errorf("read the successors of dead letters: %w", err)
		}
		for _, r := range rows {
			out[r.From] = r.ID
		}
	}
	return out, nil
}

// SuccessorsByFrom returns, for each of froms (dead-letter positions,
// topic/partition@offset) that a recorded dead letter names as its
// x-redriven-from, that dead letter's row id: how a dead letter without a
// row of its own is known to be superseded.
func (s *Store) SuccessorsByFrom(ctx context.Context, froms []string) (map[string]int64, error) {
	out := map[string]int64{}
	for start := 0; start < len(froms); start += idsPerQuery {
		chunk := froms[start:min(start+idsPerQuery, len(froms))]
		var rows []struct {
			ID   int64  `bun:"id"`
			From string `bun:"redriven_from"`
		}
		if err := s.db.NewSelect().Table("ss_dead_letter").Column("id", "redriven_from").
			Where("redriven_from IN (?)", bun.List(chunk)).OrderExpr("id").Scan(ctx, &rows); err != nil {
			return nil, fmt.Errorf("read the successors of dead letters: %w", err)
		}
		for _, r := range rows {
			if _, ok := out[r.From]; !ok {
				out[r.From] = r.ID
			}
		}
	}
	return out, nil
}
