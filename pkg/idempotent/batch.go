package idempotent

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
)

// TenantKey identifies a claim.
type TenantKey struct {
	TenantID int64
	Key      Key
}

// LookupMany reads the claims that exist for keys, from the pool as one
// statement of its own (so it sees the latest committed rows). Keys without
// a claim are absent from the map. A lookup may only ever skip work for
// claims that exist: claim rows are never deleted, so a claim found here is
// a committed claim for good.
//
// The records carry what the duplicate path needs. Event, the stored
// event, is read only for a claim still ACQUIRED (settling it needs it); a
// settled claim's is left nil here, which keeps a replay's lookups small.
func (s *Store) LookupMany(ctx context.Context, keys []TenantKey) (map[TenantKey]Record, error) {
	out, _, err := s.lookup(ctx, s.db, keys, nil)
	return out, err
}

// lookup reads the claims of keys on db, as LookupMany describes; with a
// token, mine holds the keys whose rows carry it (those the insert of
// that token made), else it is nil.
func (s *Store) lookup(ctx context.Context, db bun.IDB, keys []TenantKey, token []byte) (out map[TenantKey]Record, mine map[TenantKey]bool, err error) {
	out = make(map[TenantKey]Record, len(keys))
	if len(keys) == 0 {
		return out, nil, nil
	}
	// One equality prefix and key list per tenant: the server probes
	// exactly these keys on uk_idem.
	byTenant := map[int64][]string{}
	var tenants []int64
	for _, k := range keys {
		if byTenant[k.TenantID] == nil {
			tenants = append(tenants, k.TenantID)
		}
		byTenant[k.TenantID] = append(byTenant[k.TenantID], string(k.Key))
	}
	q := db.NewSelect().Table("ss_channel_idempotent").
		Column("id", "tenant_id", "idempotent_key", "event_type", "status", "settle_outcome", "fingerprint",
			"source_topic", "source_partition", "source_offset", "attempts", "last_error", "dead_lettered_at",
			"created_at", "settled_at").
		ColumnExpr("CASE WHEN status = ? THEN event_json END AS event_json", string(StatusAcquired))
	if token != nil {
		q = q.ColumnExpr("CASE WHEN batch_token = ? THEN 1 ELSE 0 END AS mine", token)
		mine = make(map[TenantKey]bool, len(keys))
	}
	q = q.WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
		for _, t := range tenants {
			q = q.WhereOr("(tenant_id = ? AND idempotent_key IN (?))", t, bun.List(byTenant[t]))
		}
		return q
	})
	rows, err := q.Rows(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("look up %d claims: %w", len(keys), err)
	}
	defer rows.Close()
	// Scanned by hand, not through the model's reflection: a replay reads
	// every message's claim.
	for rows.Next() {
		var r claimRow
		var outcome, eventJSON, lastError sql.NullString
		var deadLettered, settled sql.NullTime
		var isMine int
		dest := []any{
			&r.ID, &r.TenantID, &r.IdempotentKey, &r.EventType, &r.Status, &outcome, &r.Fingerprint,
			&r.SourceTopic, &r.SourcePartition, &r.SourceOffset, &r.Attempts, &lastError, &deadLettered,
			&r.CreatedAt, &settled, &eventJSON,
		}
		if token != nil {
			dest = append(dest, &isMine)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, nil, fmt.Errorf("look up %d claims: %w", len(keys), err)
		}
		r.SettleOutcome = nullString(outcome)
		r.EventJSON = nullString(eventJSON)
		r.LastError = nullString(lastError)
		r.DeadLetteredAt = nullTime(deadLettered)
		r.SettledAt = nullTime(settled)
		rec := r.record()
		out[TenantKey{rec.TenantID, rec.Key}] = rec
		if isMine == 1 {
			mine[TenantKey{rec.TenantID, rec.Key}] = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("look up %d claims: %w", len(keys), err)
	}
	return out, mine, nil
}

func nullString(s sql.NullString) *string {
	if !s.Valid {
		return nil
	}
	return &s.String
}

func nullTime(t sql.NullTime) *time.Time {
	if !t.Valid {
		return nil
	}
	return &t.Time
}

// AcquireMany is the acquire step: it claims each of claims (usually the
// keys a LookupMany has just found absent) and returns one Result per
// claim, in order. The unique index uk_idem decides every row: the
// statements run on the pool, each committing on its own, and a claim is
// reported Acquired only once the row this call inserted has committed; a
// key already claimed comes back Duplicate (same fingerprint) or Conflict,
// with the stored claim read back by a fresh statement, so it reflects the
// latest committed row.
//
// The statements depend on the number of claims, the decisions do not. One
// claim is a plain INSERT, and only its duplicate-key error (never any
// other error) means the key was claimed already. Several are one
// multi-row INSERT … ON DUPLICATE KEY UPDATE id = id (SQLite: ON CONFLICT
// DO NOTHING), which changes nothing on a duplicate: on MySQL/MariaDB a
// multi-row INSERT fails whole on one existing key, and INSERT IGNORE
// hides other errors. Each row of the upsert counts one affected row when
// inserted and none when it met a duplicate, so when every row counts the
// statement inserted them all; otherwise one read of the batch's keys
// tells which rows carry the batch token (only rows this statement
// inserted do) and reads the claims the others met.
//
// Every claim must be valid and each (tenant, key) may appear once;
// otherwise nothing is written and the error wraps ErrInvalidClaim. Any
// database error is returned wrapped and means nothing is known (an
// insert may have committed): retry, and the unique index decides again.
func (s *Store) AcquireMany(ctx context.Context, claims []Claim) ([]Result, error) {
	results := make([]Result, len(claims))
	if len(claims) == 0 {
		return results, nil
	}
	keys, err := checkBatch(claims)
	if err != nil {
		return nil, err
	}
	if len(claims) == 1 {
		r, err := s.acquireOne(ctx, claims[0])
		if err != nil {
			return nil, err
		}
		results[0] = r
		return results, nil
	}
	fresh := make([]int, len(claims))
	for i := range fresh {
		fresh[i] = i
	}
	// Insert in (tenant, key) order, the index's order, so concurrent
	// batches with overlapping keys queue rather than deadlock.
	slices.SortFunc(fresh, func(a, b int) int { return compareTenantKeys(keys[a], keys[b]) })
	// Each pass upserts the claims not decided yet; when it did not insert
	// them all, one read of their keys tells which rows it inserted (they
	// carry its token) and reads the claims the others met. A row neither
	// inserted nor there is left for the next pass: MariaDB can skip a row
	// of a multi-row upsert whose duplicate was a concurrent insert that
	// then rolled back (a deadlock victim), and under concurrent batches of
	// overlapping keys it does so for dozens of rows of one statement.
	// Rows still undecided after the last pass are claimed one by one, each
	// decided by its own insert's duplicate-key error.
	for pass := 0; len(fresh) > 0 && pass < acquirePasses; pass++ {
		undecided, err := s.upsertPass(ctx, claims, keys, fresh, results)
		if err != nil {
			return nil, err
		}
		fresh = undecided
	}
	for _, i := range fresh {
		r, err := s.acquireOne(ctx, claims[i])
		if err != nil {
			return nil, fmt.Errorf("acquire batch: %w", err)
		}
		results[i] = r
	}
	return results, nil
}

// acquirePasses is how many multi-row upserts AcquireMany makes before it
// claims the rows still undecided one by one.
const acquirePasses = 3

// upsertPass upserts the claims at idx (in index order) with a batch token
// of its own and sets their results; it returns those it could not decide
// (neither inserted by it nor there), in the same order.
func (s *Store) upsertPass(ctx context.Context, claims []Claim, keys []TenantKey, idx []int, results []Result) ([]int, error) {
	var token [16]byte
	if _, err := rand.Read(token[:]); err != nil {
		return nil, fmt.Errorf("acquire batch: token: %w", err)
	}
	n, err := s.insertMany(ctx, claims, idx, token[:])
	if err != nil {
		return nil, fmt.Errorf("acquire batch of %d: %w", len(idx), err)
	}
	if n == int64(len(idx)) {
		for _, i := range idx {
			results[i] = Result{Kind: Acquired}
		}
		return nil, nil
	}
	want := make([]TenantKey, len(idx))
	for k, i := range idx {
		want[k] = keys[i]
	}
	found, mine, err := s.lookup(ctx, s.db, want, token[:])
	if err != nil {
		return nil, fmt.Errorf("acquire batch: read back: %w", err)
	}
	var undecided []int
	for _, i := range idx {
		rec, ok := found[keys[i]]
		switch {
		case mine[keys[i]]:
			results[i] = Result{Kind: Acquired}
		case ok:
			results[i] = Compare(claims[i], rec)
		default:
			undecided = append(undecided, i)
		}
	}
	return undecided, nil
}

// acquireOne claims c with a plain INSERT, a statement of its own; only
// its duplicate-key error means the key is claimed, and the stored claim
// is then read back with a fresh statement.
func (s *Store) acquireOne(ctx context.Context, c Claim) (Result, error) {
	src := c.Source
	if src.Topic == "" {
		src = NoSource
	}
	row := claimRow{
		TenantID:        c.TenantID,
		IdempotentKey:   string(c.Key),
		EventType:       string(c.EventType),
		Status:          string(StatusAcquired),
		Fingerprint:     c.Fingerprint,
		SourceTopic:     src.Topic,
		SourcePartition: src.Partition,
		SourceOffset:    src.Offset,
		OccurredAt:      occurredAt(c),
		CreatedAt:       s.Now(),
	}
	if c.Event != nil {
		ev := string(c.Event)
		row.EventJSON = &ev
	}
	_, err := s.db.NewInsert().Model(&row).
		Column("tenant_id", "idempotent_key", "event_type", "status", "fingerprint", "event_json",
			"source_topic", "source_partition", "source_offset", "occurred_at", "created_at").
		Returning("").
		Exec(ctx)
	if err == nil {
		return Result{Kind: Acquired}, nil
	}
	if err = ClassifyDuplicate(err); !errors.Is(err, ErrDuplicateKey) {
		return Result{}, fmt.Errorf("acquire %s: %w", c.Key, err)
	}
	tk := TenantKey{c.TenantID, c.Key}
	existing, err := s.LookupMany(ctx, []TenantKey{tk})
	if err != nil {
		return Result{}, fmt.Errorf("acquire %s: read existing claim: %w", c.Key, err)
	}
	rec, ok := existing[tk]
	if !ok {
		// The index refused the key, yet no committed claim holds it: a
		// concurrent insert that has since rolled back. Nothing is known.
		return Result{}, fmt.Errorf("acquire %s: duplicate key, but no committed claim: %w", c.Key, ErrNotFound)
	}
	return Compare(c, rec), nil
}

// checkBatch validates every claim and refuses a (tenant, key) twice; it
// returns the claims' keys.
func checkBatch(claims []Claim) ([]TenantKey, error) {
	keys := make([]TenantKey, len(claims))
	seen := make(map[TenantKey]bool, len(claims))
	for i, c := range claims {
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("acquire batch: %s: %w", c.Key, err)
		}
		keys[i] = TenantKey{c.TenantID, c.Key}
		if seen[keys[i]] {
			return nil, fmt.Errorf("acquire batch: %w: %d/%s appears twice", ErrInvalidClaim, c.TenantID, c.Key)
		}
		seen[keys[i]] = true
	}
	return keys, nil
}

// Compare is the Result a claim gets against the existing claim of its
// key: Duplicate when the fingerprints match, Conflict when they differ.
func Compare(c Claim, rec Record) Result {
	if rec.Fingerprint != c.Fingerprint {
		return Result{Kind: Conflict, Existing: rec}
	}
	return Result{Kind: Duplicate, Existing: rec}
}

// occurredAt is c.OccurredAt for its column: nil (NULL) when unknown,
// else UTC.
func occurredAt(c Claim) *time.Time {
	if c.OccurredAt.IsZero() {
		return nil
	}
	t := c.OccurredAt.UTC()
	return &t
}

// insertMany runs the multi-row upsert of the claims at idx and returns
// its affected-row count: one per row inserted, none for a duplicate.
func (s *Store) insertMany(ctx context.Context, claims []Claim, idx []int, token []byte) (int64, error) {
	now := s.Now()
	var b strings.Builder
	b.WriteString(`INSERT INTO ss_channel_idempotent (tenant_id, idempotent_key, event_type, status, fingerprint,
		event_json, source_topic, source_partition, source_offset, occurred_at, created_at, batch_token) VALUES `)
	args := make([]any, 0, len(idx)*12)
	for n, i := range idx {
		c := claims[i]
		if n > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
		src := c.Source
		if src.Topic == "" {
			src = NoSource
		}
		var ev *string
		if c.Event != nil {
			e := string(c.Event)
			ev = &e
		}
		args = append(args, c.TenantID, string(c.Key), string(c.EventType), string(StatusAcquired), c.Fingerprint,
			ev, src.Topic, src.Partition, src.Offset, occurredAt(c), now, token)
	}
	if s.db.Dialect().Name() == dialect.SQLite {
		b.WriteString(" ON CONFLICT (tenant_id, idempotent_key) DO NOTHING")
	} else {
		b.WriteString(" ON DUPLICATE KEY UPDATE id = id")
	}
	res, err := s.db.ExecContext(ctx, b.String(), args...)
	if err != nil {
		if errors.Is(ClassifyDuplicate(err), ErrDuplicateKey) {
			// Impossible with the clause above; never read as "duplicate".
			return 0, fmt.Errorf("unexpected duplicate-key error from an upsert: %w", err)
		}
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("rows affected: %w", err)
	}
	return n, nil
}

// ReadMany is LookupMany inside db (a transaction or the pool), without
// locking: a batch settlement that lost its fence reads its claims this way
// and relies on SettleMany's fence, at the end, to find out whether another
// settler won meanwhile.
func (s *Store) ReadMany(ctx context.Context, db bun.IDB, keys []TenantKey) (map[TenantKey]Record, error) {
	out, _, err := s.lookup(ctx, db, keys, nil)
	return out, err
}

// Settlement is what the fence writes for one claim: the outcome, and
// the fingerprint of the event the settler decided on, which must be the
// claim's (empty: not checked).
type Settlement struct {
	Outcome     Outcome
	Fingerprint string
}

// ErrFingerprintMismatch is returned by SettleMany when a claim's
// fingerprint differs from the one the settler decided on: it settled
// another event than the one claimed. Permanent; roll back.
var ErrFingerprintMismatch = errors.New("event fingerprint differs from the claim's")

// SettleMany is the fence, the one way a claim becomes SETTLED: inside the
// caller's business transaction it moves every claim of settlements from
// ACQUIRED to SETTLED with its outcome, with one UPDATE whatever the
// tenants (a merged round holds several), whose checked row count must be
// all of them; each claim must still be ACQUIRED and, where a fingerprint
// is given, hold that fingerprint. The UPDATE's row locks serialise
// concurrent settlers, so exactly one of them commits. When any claim does
// not qualify, the caller must roll back the whole transaction, business
// writes included, and the error says why, checked in this order:
// ErrFenceLost (a claim is SETTLED: another settler won, a final,
// successful outcome for that claim; never retry the same writes),
// ErrNotFound (a key was never claimed), ErrFingerprintMismatch.
func (s *Store) SettleMany(ctx context.Context, tx bun.Tx, settlements map[TenantKey]Settlement) error {
	if len(settlements) == 0 {
		return nil
	}
	keys := make([]TenantKey, 0, len(settlements))
	for k, st := range settlements {
		if !st.Outcome.Valid() {
			return fmt.Errorf("settle %s: invalid outcome %q", k.Key, st.Outcome)
		}
		keys = append(keys, k)
	}
	// In the index's order: the statement's text, and so its plan, depends
	// on the keys alone, not on a map's order.
	slices.SortFunc(keys, compareTenantKeys)
	hint := "FORCE INDEX (uk_idem)"
	if tx.Dialect().Name() == dialect.SQLite {
		hint = "INDEXED BY uk_idem"
	}
	// Per tenant, an equality prefix and a list of keys (IN lists of
	// constants are searched, not scanned, so the statement stays linear in
	// the batch where a CASE idempotent_key WHEN … per row would compare
	// every row with every key); the outcome and fingerprint lists are per
	// tenant too, since one key string may be claimed by two tenants.
	var tenants []int64
	all := map[int64][]string{}
	byOutcome := map[Outcome]map[int64][]string{}
	checked := map[int64][]bun.TupleValues{} // (key, fingerprint) pairs
	unchecked := map[int64][]string{}
	for _, k := range keys {
		st := settlements[k]
		if all[k.TenantID] == nil {
			tenants = append(tenants, k.TenantID)
		}
		all[k.TenantID] = append(all[k.TenantID], string(k.Key))
		if byOutcome[st.Outcome] == nil {
			byOutcome[st.Outcome] = map[int64][]string{}
		}
		byOutcome[st.Outcome][k.TenantID] = append(byOutcome[st.Outcome][k.TenantID], string(k.Key))
		if st.Fingerprint != "" {
			checked[k.TenantID] = append(checked[k.TenantID], bun.Tuple([]any{string(k.Key), st.Fingerprint}))
		} else {
			unchecked[k.TenantID] = append(unchecked[k.TenantID], string(k.Key))
		}
	}
	var b strings.Builder
	args := make([]any, 0, 8+8*len(tenants))
	// keysOf writes "(tenant_id = ? AND idempotent_key IN (?)) OR …" for
	// the tenants of lists.
	keysOf := func(lists map[int64][]string) {
		first := true
		for _, t := range tenants {
			if len(lists[t]) == 0 {
				continue
			}
			if !first {
				b.WriteString(" OR ")
			}
			first = false
			b.WriteString("(tenant_id = ? AND idempotent_key IN (?))")
			args = append(args, t, bun.List(lists[t]))
		}
	}
	b.WriteString("UPDATE ss_channel_idempotent " + hint + " SET status = ?, settle_outcome = CASE")
	args = append(args, string(StatusSettled))
	for _, o := range []Outcome{OutcomeNoMoney, OutcomeOverRefund, OutcomePosted} {
		if byOutcome[o] != nil {
			b.WriteString(" WHEN ")
			keysOf(byOutcome[o])
			b.WriteString(" THEN ?")
			args = append(args, string(o))
		}
	}
	now := s.Now()
	b.WriteString(" END, settled_at = ? WHERE (")
	args = append(args, now)
	keysOf(all)
	b.WriteString(") AND status = ?")
	args = append(args, string(StatusAcquired))
	// Each tenant's keys: those without a fingerprint to check, or those
	// whose (key, fingerprint) pair is the one decided on.
	b.WriteString(" AND (")
	first := true
	for _, t := range tenants {
		if !first {
			b.WriteString(" OR ")
		}
		first = false
		b.WriteString("(tenant_id = ? AND (")
		args = append(args, t)
		if len(unchecked[t]) > 0 {
			b.WriteString("idempotent_key IN (?)")
			args = append(args, bun.List(unchecked[t]))
			if len(checked[t]) > 0 {
				b.WriteString(" OR ")
			}
		}
		if len(checked[t]) > 0 {
			b.WriteString("(idempotent_key, fingerprint) IN (?)")
			args = append(args, bun.List(checked[t]))
		}
		b.WriteString("))")
	}
	b.WriteString(")")
	res, err := tx.NewRaw(b.String(), args...).Exec(ctx)
	if err != nil {
		return fmt.Errorf("settle %d claims of %d tenants: %w", len(keys), len(tenants), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("settle %d claims of %d tenants: rows affected: %w", len(keys), len(tenants), err)
	}
	if n != int64(len(keys)) {
		return s.fenceShortfall(ctx, tx, keys, settlements, n, now)
	}
	return nil
}

// compareTenantKeys orders keys as uk_idem does: by tenant, then key,
// byte for byte.
func compareTenantKeys(a, b TenantKey) int {
	return cmp.Or(cmp.Compare(a.TenantID, b.TenantID), cmp.Compare(a.Key, b.Key))
}

// fenceShortfall tells why a fence UPDATE, run at now, moved fewer claims
// than asked. It reads the claims inside the transaction, which sees the
// rows the UPDATE did move as SETTLED at now with their outcome: those are
// the ones that qualified. Should that count not be what the UPDATE moved
// (another settler's row that looks the same), the fence is reported lost,
// the answer that makes a caller read the claims again.
func (s *Store) fenceShortfall(ctx context.Context, tx bun.Tx, keys []TenantKey, settlements map[TenantKey]Settlement, moved int64, now time.Time) error {
	found, err := s.ReadMany(ctx, tx, keys)
	if err != nil {
		return fmt.Errorf("settle %d claims: %w", len(keys), err)
	}
	var missing, mismatched, lost *TenantKey
	var ours int64
	for i, k := range keys {
		rec, ok := found[k]
		switch {
		case !ok:
			missing = &keys[i]
		case rec.Status == StatusSettled && rec.SettledAt != nil && rec.SettledAt.Equal(now) && rec.Outcome == settlements[k].Outcome:
			ours++
		case rec.Status != StatusAcquired:
			lost = &keys[i]
		case settlements[k].Fingerprint != "" && rec.Fingerprint != settlements[k].Fingerprint:
			mismatched = &keys[i]
		}
	}
	switch {
	case lost != nil:
		return fmt.Errorf("settle %d claims: %d were ACQUIRED: %d/%s: %w", len(keys), moved, lost.TenantID, lost.Key, ErrFenceLost)
	case ours != moved:
	case missing != nil:
		return fmt.Errorf("settle %s: claim %d/%s: %w", missing.Key, missing.TenantID, missing.Key, ErrNotFound)
	case mismatched != nil:
		return fmt.Errorf("settle %s: claim %s, event %s: %w", mismatched.Key,
			found[*mismatched].Fingerprint, settlements[*mismatched].Fingerprint, ErrFingerprintMismatch)
	}
	// The UPDATE raced a change it no longer sees; nothing is known but
	// that the fence did not hold.
	return fmt.Errorf("settle %d claims: %d moved: %w", len(keys), moved, ErrFenceLost)
}

// MarkMoved records, inside the caller's business transaction, that a
// claim settled NO_MONEY has now moved money: its settle_outcome becomes
// POSTED, its status and settled_at stay. A Shouqianba CANCELED order
// settled before its payment moved nothing; the payment's settlement posts
// the reversal under the cancel's key and marks the cancel's claim so. The
// update is conditional on the claim being SETTLED with NO_MONEY and must
// change exactly one row; otherwise the error wraps ErrFenceLost (the
// claim changed since the caller decided: roll back and decide again).
func (s *Store) MarkMoved(ctx context.Context, tx bun.Tx, tenantID int64, key Key) error {
	res, err := tx.NewUpdate().Table("ss_channel_idempotent").
		Set("settle_outcome = ?", string(OutcomePosted)).
		Where("tenant_id = ?", tenantID).
		Where("idempotent_key = ?", string(key)).
		Where("status = ?", string(StatusSettled)).
		Where("settle_outcome = ?", string(OutcomeNoMoney)).
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("mark %s moved: %w", key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("mark %s moved: rows affected: %w", key, err)
	}
	if n != 1 {
		return fmt.Errorf("mark %s moved: the claim is no longer SETTLED with NO_MONEY: %w", key, ErrFenceLost)
	}
	return nil
}
