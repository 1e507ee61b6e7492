package settlement

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settled"
)

// tradeKey identifies an order row.
type tradeKey struct {
	tenant  int64
	channel channels.Channel
	tradeNo string
}

func tradeOf(ev channels.Event) tradeKey { return tradeKey{ev.TenantID, ev.Channel, ev.TradeNo} }

func compareTrades(x, y tradeKey) int {
	return cmp.Or(cmp.Compare(x.tenant, y.tenant), cmp.Compare(x.channel, y.channel), cmp.Compare(x.tradeNo, y.tradeNo))
}

// SettleBatch settles the ACQUIRED claims of evs, normally in one
// transaction with one commit for all of them: results[i] is evs[i]'s,
// exactly as Settle would have given it had the events been settled one
// after another in the order of evs. A claim found SETTLED already gives
// FenceLost for that event only.
//
// The work is set-based. On MySQL the order rows the batch's trades lack
// of a batch of createOrdersFrom events or more are first created by
// createOrders, committed at once; then the transaction makes one read and one locking read of the
// order rows (only the read when none exists yet), one insert of the rows
// still missing, with their final values (no read-back, no update), one
// write of the changed existing orders (their settled-event counters
// included), one insert of every ledger row, one insert of every settled
// event (the outbox, ss_settled_outbox: one row per claim settled POSTED)
// and one fence UPDATE, whatever the batch size;
// only refunds with registrations add statements of their own, and
// Shouqianba payments one read of their trades' cancel claims (after the
// order rows are locked; none for a trade whose row the transaction
// created) and, for a cancel settled before with nothing to
// reverse, one read of that cancel's time and source for its settled
// event, the reversal's rows in the same ledger insert and one
// conditional update of that cancel's claim (MarkMoved). The batch's own
// claims are not read: the fence checks that each is still ACQUIRED with the
// event's fingerprint, and only a transaction whose fence did not hold
// runs again after reading them. The decisions are Settle's own (decide), made in memory on the
// locked rows. Locks are taken order rows first (by id), then
// registrations, then the claims by the fence.
//
// A batch never waits, holding its other locks, for an order row another
// transaction holds (a trade whose events sit on two partitions): such
// trades are skipped, the rest committed, and the skipped trades' events
// settled in a second transaction that waits for their rows. Events of one
// trade always stay together and in order, so the results are the same.
// On a server that does not honour FOR UPDATE SKIP LOCKED (TiDB accepts
// the clause, then returns held rows unlocked), the batch's locking reads
// are plain FOR UPDATE and wait;
// deadlocks and TiDB's write conflicts (idempotent.IsRetryableConflict)
// run the transaction again like a lost race.
//
// Errors: a lost race for a new order row and a deadlock (two settlers
// that both lost that race hold shared locks on the row) or write
// conflict run the transaction again, twice at most. Any failure of the first transaction
// rolls it back, writes nothing and leaves every claim ACQUIRED; the
// caller then settles the events one at a time with Settle, whose contract
// tells permanent errors from transient ones and which handles a ledger
// duplicate. A failure of the second transaction is returned wrapping
// ErrBatchIncomplete, with the results of the first's events (settled and
// committed) and the zero Result for the others, which are not. An empty evs gives no results. Two events with
// one (tenant, key) are refused with ErrInvalidEvent.
func (s *Service) SettleBatch(ctx context.Context, evs []channels.Event) ([]Result, error) {
	return s.settleBatch(ctx, evs, nil, false)
}

// SettleBatchFrom is SettleBatch for events that did not all come from the
// channels' callbacks: sources[i] is what produced evs[i] (settled.Source;
// "" is a callback), and becomes the source of its settled event. sources
// is nil (every event a callback's) or as long as evs; one of another
// length, or an unknown source, is refused with ErrInvalidEvent.
func (s *Service) SettleBatchFrom(ctx context.Context, evs []channels.Event, sources []settled.Source) ([]Result, error) {
	return s.settleBatch(ctx, evs, sources, false)
}

// SettleMerged is SettleBatch for the events of several callers merged
// into one transaction (the worker's group commit across partitions): it
// gives up where SettleBatch would wait or try again, so that no caller
// waits for another's trouble. Its results are SettleBatch's; but
//   - a deadlock, a lock wait timeout, a write conflict (TiDB) or a
//     certification failure (Galera), and a lost race for a new order row,
//     are returned, nothing written, instead of running the transaction
//     again;
//   - on TiDB, which cannot skip a held order row, the locking read of the
//     order rows fails at once (NOWAIT) rather than wait for one;
//   - its missing order rows are created inside its transaction whatever
//     its size (a merged batch is short);
//   - the events of trades whose order rows another transaction holds are
//     not settled in a second transaction that waits for them: they come
//     back unsettled (the zero Result) with an error wrapping
//     ErrBatchIncomplete, the others settled and committed.
//
// A fence that did not hold runs the transaction once more reading the
// claims, as in SettleBatch: that is the fence deciding, not a conflict.
// The caller settles what it got back (its own events) with SettleBatch or
// Settle, whose contracts then apply.
func (s *Service) SettleMerged(ctx context.Context, evs []channels.Event) ([]Result, error) {
	return s.settleBatch(ctx, evs, nil, true)
}

// SettleMergedFrom is SettleMerged with the events' sources, as
// SettleBatchFrom.
func (s *Service) SettleMergedFrom(ctx context.Context, evs []channels.Event, sources []settled.Source) ([]Result, error) {
	return s.settleBatch(ctx, evs, sources, true)
}

// settleBatch is SettleBatch, and with merged SettleMerged; sources are
// SettleBatchFrom's.
func (s *Service) settleBatch(ctx context.Context, evs []channels.Event, sources []settled.Source, merged bool) ([]Result, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	if err := checkSources(evs, sources); err != nil {
		return nil, fmt.Errorf("settle batch: %w", err)
	}
	keys := make([]idempotent.TenantKey, len(evs))
	seen := make(map[idempotent.TenantKey]bool, len(evs))
	for i, ev := range evs {
		if err := ev.Validate(); err != nil {
			return nil, fmt.Errorf("settle batch: %s: %w: %w", ev.Key, ErrInvalidEvent, err)
		}
		keys[i] = idempotent.TenantKey{TenantID: ev.TenantID, Key: ev.Key}
		if seen[keys[i]] {
			return nil, fmt.Errorf("settle batch: %w: %s appears twice", ErrInvalidEvent, ev.Key)
		}
		seen[keys[i]] = true
	}

	// A small batch holds its transaction for a few statements only: it
	// creates missing order rows inside it, as lockOrders does (a batch of
	// one so writes nothing at all when it fails), and saves the upsert's
	// statements and commit, which weigh most at low load.
	tidb, err := s.onTiDB(ctx)
	if err != nil {
		return nil, fmt.Errorf("settle batch of %d: %w", len(evs), err)
	}
	mode := skipBusyRows
	switch {
	case tidb && merged:
		// A server that cannot skip a held row: a merged batch fails at
		// once rather than make every partition in it wait.
		mode = failOnBusyRows
	case tidb:
		// A server that cannot skip a held row waits for it.
		mode = waitForRows
	}
	// A merged batch creates its missing rows inside its transaction, as a
	// small one does: it is short (a few partitions' events), and the
	// upsert ahead of it would add two statements and a commit.
	if !s.sqlite && !merged && len(evs) >= createOrdersFrom {
		if err := s.createOrders(ctx, evs); err != nil {
			return nil, fmt.Errorf("settle batch of %d: %w", len(evs), err)
		}
		mode = skipBusyCreated
		if tidb {
			mode = waitForCreated
		}
	}
	sts := make([]settlement, len(evs))
	lost := make([]bool, len(evs))
	busy := make([]bool, len(evs))
	if err := s.runBatchTx(ctx, evs, sources, keys, sts, lost, busy, mode, merged); err != nil {
		return nil, fmt.Errorf("settle batch of %d: %w", len(evs), err)
	}
	// The events whose order rows another settler held: in a transaction
	// of their own, now that this one has released its locks, waiting for
	// those rows (a merged batch leaves them to their callers).
	var rest []int
	for i := range evs {
		if busy[i] {
			rest = append(rest, i)
		}
	}
	if len(rest) > 0 && merged {
		return s.batchResults(ctx, sts, lost, busy), fmt.Errorf("settle merged batch of %d: %w: %d events whose order rows were busy",
			len(evs), ErrBatchIncomplete, len(rest))
	}
	if len(rest) > 0 {
		subEvs, subKeys := make([]channels.Event, len(rest)), make([]idempotent.TenantKey, len(rest))
		subSrcs := make([]settled.Source, len(rest))
		for n, i := range rest {
			subEvs[n], subKeys[n], subSrcs[n] = evs[i], keys[i], sourceOf(sources, i)
		}
		subSts, subLost := make([]settlement, len(rest)), make([]bool, len(rest))
		if err := s.runBatchTx(ctx, subEvs, subSrcs, subKeys, subSts, subLost, make([]bool, len(rest)), waitForRows, false); err != nil {
			return s.batchResults(ctx, sts, lost, busy), fmt.Errorf("settle batch of %d: %w: %d events whose order rows were busy: %w",
				len(evs), ErrBatchIncomplete, len(rest), err)
		}
		for n, i := range rest {
			sts[i], lost[i], busy[i] = subSts[n], subLost[n], false
		}
	}
	return s.batchResults(ctx, sts, lost, busy), nil
}

// batchResults turns a batch's settlements into results, reporting each;
// an event left unsettled (unsettled[i]) gets the zero Result.
func (s *Service) batchResults(ctx context.Context, sts []settlement, lost, unsettled []bool) []Result {
	at := s.claims.Now()
	out := make([]Result, len(sts))
	for i := range sts {
		if unsettled[i] {
			continue
		}
		if lost[i] {
			out[i] = Result{FenceLost: true, SettledAt: at}
			continue
		}
		out[i] = Result{Outcome: sts[i].outcome, Amount: sts[i].amount, SettledAt: at}
		s.report(ctx, &sts[i])
	}
	return out
}

// createOrdersFrom is the smallest batch whose new order rows are created
// ahead of its transaction (createOrders).
const createOrdersFrom = 8

// createOrders creates the order rows of the batch's trades that do not
// exist yet, before the batch's transaction and each committed at once
// (the first event of a trade in the batch sets its total, merchant order
// number and currency, as lockOrders would). An order row inserted inside
// a batch transaction stays uncommitted for the whole batch, and another
// batch inserting the same trade (its other events, or a channel's
// unkeyed retry, on another partition) waits for that commit; created
// here, a row is committed before anyone waits for it. A row created here
// by a batch whose transaction then fails is a PENDING_PAYMENT order
// without postings, which the next event of the trade finds. The insert
// is an upsert that changes nothing on a row another settler created
// meanwhile, and it holds no lock past its own commit.
func (s *Service) createOrders(ctx context.Context, evs []channels.Event) error {
	want, firsts := newOrders(evs, nil, s.claims.Now())
	existing := map[tradeKey]*Order{}
	if err := s.selectOrders(ctx, s.db, want, firsts, existing, ""); err != nil {
		return err
	}
	var missing []Order
	for _, o := range want {
		if existing[tradeKey{o.TenantID, o.Channel, o.TradeNo}] == nil {
			missing = append(missing, o)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	// In index order (newOrders sorts), so concurrent upserts of
	// overlapping trades queue rather than deadlock; a deadlock is still
	// retried.
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		_, err = insertOrders(s.db, &missing).On("DUPLICATE KEY UPDATE id = id").Exec(ctx)
		if !idempotent.IsRetryableConflict(err) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("create %d orders: %w", len(missing), err)
	}
	return nil
}

// ErrBatchIncomplete marks a SettleBatch error after its first
// transaction committed: the events whose result is the zero Result were
// not settled, the others were.
var ErrBatchIncomplete = errors.New("batch settled in part")

// runBatchTx runs settleBatchTx, again (twice at most) after a lost race
// for an order row, a deadlock, or a fence that did not hold. The first
// attempts do not read the claims: the fence, last, checks that each is
// still ACQUIRED and holds the event's fingerprint. After a fence that did
// not hold, or a posting the ledger already had (which a claim another
// settler won also explains), it runs once more, whatever the reruns
// before, reading the claims first and leaving out those another settler
// won. With once (a merged batch), only that read-the-claims run is
// made: any other failure is returned at once.
func (s *Service) runBatchTx(ctx context.Context, evs []channels.Event, sources []settled.Source, keys []idempotent.TenantKey, sts []settlement, lost, busy []bool, mode lockMode, once bool) error {
	readClaims := false
	for reruns := 0; ; {
		err := s.settleBatchTx(ctx, evs, sources, keys, sts, lost, busy, mode, readClaims)
		switch {
		case !readClaims && (errors.Is(err, idempotent.ErrFenceLost) || errors.Is(err, errAlreadyPosted)):
			// Once, whatever the reruns before: read the claims.
			readClaims = true
			continue
		case once:
		case errors.Is(err, errOrderRace), idempotent.IsRetryableConflict(err), errors.Is(err, idempotent.ErrFenceLost):
			if reruns++; reruns < 3 {
				continue
			}
		}
		// Nothing was written by a failed attempt; the next one finds the
		// order rows the race was lost to, runs after the deadlock's other
		// side, or reads the claims another settler settled as lost.
		return err
	}
}

// errOrderRace marks a batch that lost the race to create an order row.
var errOrderRace = errors.New("another settler created an order row first")

// lockMode says how a batch transaction locks its order rows.
type lockMode int

const (
	// waitForRows finds the rows with a plain read, locks them by primary
	// key, waiting for other holders, and creates missing rows.
	waitForRows lockMode = iota
	// skipBusyRows is waitForRows, leaving out (busy) the rows another
	// transaction holds rather than waiting for them.
	skipBusyRows
	// skipBusyCreated is skipBusyRows when every row exists, created and
	// committed by createOrders: one locking read by the unique key locks
	// them and skips those another transaction holds; a row it does not
	// return is busy, and settled, by waitForRows, after the others.
	skipBusyCreated
	// waitForCreated is skipBusyCreated on a server that cannot skip a
	// held row (TiDB): the locking read by the unique key waits for the
	// rows other transactions hold, so no trade is left busy.
	waitForCreated
	// failOnBusyRows is waitForRows that does not wait: the locking read
	// fails (NOWAIT) when another transaction holds one of the rows. A
	// merged batch on a server that cannot skip a held row (TiDB) fails at
	// once, and its partitions settle their own events, rather than every
	// partition of the merge waiting for one trade's row.
	failOnBusyRows
)

// settleBatchTx is one attempt at a SettleBatch transaction; mode says
// how it locks its order rows, and the events whose rows it leaves to a
// later transaction are busy[i].
func (s *Service) settleBatchTx(ctx context.Context, evs []channels.Event, sources []settled.Source, keys []idempotent.TenantKey, sts []settlement, lost, busy []bool, mode lockMode, readClaims bool) error {
	return s.db.RunInTx(ctx, s.txOptions(), func(ctx context.Context, tx bun.Tx) error {
		for i := range evs {
			sts[i], lost[i], busy[i] = settlement{ev: evs[i], index: i, cancelIndex: -1, source: sourceOf(sources, i)}, false, false
		}
		// (1) The claims, when asked, read (not locked: the fence at the
		// end decides between concurrent settlers, and rolls this batch
		// back if it lost any claim).
		if readClaims {
			claims, err := s.claims.ReadMany(ctx, tx, keys)
			if err != nil {
				return err
			}
			for i, ev := range evs {
				rec, ok := claims[keys[i]]
				switch {
				case !ok:
					return fmt.Errorf("%s: read claim: %w", ev.Key, idempotent.ErrNotFound)
				case rec.Status == idempotent.StatusSettled:
					lost[i] = true
				case rec.Fingerprint != ev.Fingerprint:
					return fmt.Errorf("%s: %w: claim %s, event %s", ev.Key, ErrFingerprintMismatch, rec.Fingerprint, ev.Fingerprint)
				}
			}
		}

		// (2) The order rows, created where absent, then locked.
		now := s.claims.Now()
		orders, busyTrades, err := s.lockOrders(ctx, tx, evs, lost, now, mode)
		if err != nil {
			return err
		}
		skip := make([]bool, len(evs)) // lost, or left to a later transaction
		for i, ev := range evs {
			busy[i] = !lost[i] && busyTrades[tradeOf(ev)]
			skip[i] = lost[i] || busy[i]
		}

		// The registrations of the batch's refunded trades, read and locked
		// at once; matched in memory below.
		regs, err := s.lockRegistrations(ctx, tx, evs, skip)
		if err != nil {
			return err
		}
		// The Shouqianba cancels settled before the payments of the batch.
		if err := s.readPendingCancels(ctx, tx, evs, skip, orders); err != nil {
			return err
		}

		// (3) Decide each event in order on its (locked, in-memory) order.
		touched := map[tradeKey]bool{}
		var ledger []ledgerRow
		fence := make(map[idempotent.TenantKey]idempotent.Settlement, len(evs))
		var moved []idempotent.TenantKey // settled cancels whose reversal this batch posts
		var reversals []ledgerRow        // their rows, and those of cancels in the batch
		var outbox []outboxRow           // the settled events, in settlement order
		var paid []paidOrder             // the payments posted: their registrations become SUCCEEDED
		for i, ev := range evs {
			if skip[i] {
				continue
			}
			t := tradeOf(ev)
			cancel := orders[t].cancel // as decide found it: it clears it
			next, write, err := decide(&sts[i], *orders[t], now)
			if err != nil {
				return fmt.Errorf("%s: %w", ev.Key, err)
			}
			if write {
				*orders[t] = next
				touched[t] = true
			}
			if sts[i].outcome == idempotent.OutcomePosted {
				if ev.Type == idempotent.PaymentReceived {
					paid = append(paid, paidOrder{tenant: ev.TenantID, channel: ev.Channel, merchantOrderNo: ev.MerchantOrderNo, tradeNo: ev.TradeNo})
				}
				rows, err := postingRows(ev, sts[i].amount, now)
				if err != nil {
					return err
				}
				ledger = append(ledger, rows...)
				// Its settled event, with the order as this event left it: a
				// payment reversed at once reports the order paid, and the
				// reversal's own event (below) the order after it.
				view := next
				if sts[i].reversal > 0 {
					view.RefundedAmount -= sts[i].reversal
					view.Status = DeriveStatus(view.Amount, view.PaidAmount, view.RefundedAmount)
				}
				if !s.noSettled {
					row, err := outboxEvent(orders[t], view, claimOf(ev, sts[i].amount, sts[i].source), now)
					if err != nil {
						return err
					}
					outbox = append(outbox, row)
				}
			}
			if sts[i].reversal > 0 {
				// The payment of a cancelled trade: its reversal, under the
				// cancel's key, whose claim moves from NO_MONEY to POSTED
				// (in this batch's fence when the cancel is one of its
				// events, else by MarkMoved after the fence).
				rev, err := cancelReversal(ev)
				if err != nil {
					return err
				}
				rows, err := postingRows(rev, sts[i].reversal, now)
				if err != nil {
					return err
				}
				reversals = append(reversals, rows...)
				// The cancel's claim becomes POSTED: its settled event, after
				// the payment's, with the cancel's own time and source.
				c := claimOf(rev, sts[i].reversal, cancel.source)
				c.occurredAt = cancel.occurredAt
				if j := sts[i].cancelIndex; j >= 0 {
					c.occurredAt, c.source = evs[j].OccurredAt, sts[j].source
				}
				if c.occurredAt.IsZero() { // the cancel's stored event is purged
					c.occurredAt = ev.OccurredAt
				}
				if c.source == "" {
					c.source = settled.SourceCallback
				}
				if !s.noSettled {
					row, err := outboxEvent(orders[t], next, c, now)
					if err != nil {
						return err
					}
					outbox = append(outbox, row)
				}
				if j := sts[i].cancelIndex; j >= 0 {
					f := fence[keys[j]]
					f.Outcome = idempotent.OutcomePosted
					fence[keys[j]] = f
				} else {
					moved = append(moved, idempotent.TenantKey{TenantID: rev.TenantID, Key: rev.Key})
				}
			}
			// A Shouqianba cancel is the end of /upay/v2/cancel or a
			// revoke, never a refund an operator registers: no
			// registration is looked for or expected of it.
			if ev.Type == idempotent.RefundSucceeded && sts[i].outcome != idempotent.OutcomeOverRefund && !ev.IsCancel() {
				trade := regs[t]
				reg, found := &Registration{}, false
				for _, r := range trade {
					if r.RefundNo == ev.RefundNo {
						reg, found = r, true
						break
					}
				}
				sums := func() (regSums, error) { return sumRegistrations(trade), nil }
				if err := s.applyRegistration(ctx, tx, &sts[i], next, now, reg, found, sums); err != nil {
					return fmt.Errorf("%s: %w", ev.Key, err)
				}
			}
			fence[keys[i]] = idempotent.Settlement{Outcome: sts[i].outcome, Fingerprint: ev.Fingerprint}
		}

		// (4) Write: orders, the payment registrations, ledger, then the
		// fence. The order rows are written (inserted or locked) before the
		// registrations are looked for: see RegisterPayment.
		if err := s.writeOrders(ctx, tx, orders, touched); err != nil {
			return err
		}
		if err := markPaymentsRegistered(ctx, tx, paid, now); err != nil {
			return err
		}
		if len(ledger) > 0 {
			if err := insertLedger(ctx, tx, ledger); err != nil {
				return fmt.Errorf("post %d rows: %w", len(ledger), err)
			}
		}
		if len(reversals) > 0 {
			// Apart from the events' own rows: a reversal already in the
			// ledger says nothing about whether the payment is posted, so
			// it must not pass for the event's own duplicate posting
			// (errAlreadyPosted), which settles the claim without posting.
			if err := insertLedger(ctx, tx, reversals); err != nil {
				if errors.Is(err, errAlreadyPosted) {
					return fmt.Errorf("post %d cancel reversal rows: the ledger already holds a reversal whose cancel claim says NO_MONEY: %s", len(reversals), err.Error())
				}
				return fmt.Errorf("post %d cancel reversal rows: %w", len(reversals), err)
			}
		}
		if err := insertOutbox(ctx, tx, outbox); err != nil {
			return err
		}
		if err := s.claims.SettleMany(ctx, tx, fence); err != nil {
			return fmt.Errorf("fence: %w", err)
		}
		for _, k := range moved {
			if err := s.claims.MarkMoved(ctx, tx, k.TenantID, k.Key); err != nil {
				return fmt.Errorf("cancel reversal: %w", err)
			}
		}
		return nil
	})
}

// readPendingCancels marks, on the locked order rows, the trades of the
// batch's payments of channels with a cancel (Shouqianba) whose cancel was settled before with nothing
// to reverse (its claim SETTLED, NO_MONEY, and no payment posted): the
// payment is then reversed at once. A trade whose order row this
// transaction inserted is not read: a cancel settled before would have
// created the row. Read after the order rows are locked,
// so it sees every cancel committed before (settling a cancel locks the
// order row first, and at READ COMMITTED each statement reads the latest
// commit); a cancel claimed but not settled yet finds the payment posted
// when it is settled, and reverses it then.
func (s *Service) readPendingCancels(ctx context.Context, tx bun.Tx, evs []channels.Event, skip []bool, orders map[tradeKey]*Order) error {
	var keys []idempotent.TenantKey
	trades := map[idempotent.TenantKey]tradeKey{}
	for i, ev := range evs {
		if o := orders[tradeOf(ev)]; skip[i] || !ev.Channel.HasCancel() || ev.Type != idempotent.PaymentReceived || o.PaidAmount > 0 || o.created {
			// A row this transaction created has no cancel settled before
			// it: settling the cancel would have created the row.
			continue
		}
		k, err := channels.CancelKey(ev.Channel, ev.TradeNo)
		if err != nil {
			return fmt.Errorf("%s: %w", ev.Key, err)
		}
		tk := idempotent.TenantKey{TenantID: ev.TenantID, Key: k}
		if _, ok := trades[tk]; !ok {
			keys = append(keys, tk)
			trades[tk] = tradeOf(ev)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	recs, err := s.claims.ReadMany(ctx, tx, keys)
	if err != nil {
		return fmt.Errorf("read the cancels of %d trades: %w", len(keys), err)
	}
	var pending []idempotent.TenantKey
	for tk, t := range trades {
		if rec, ok := recs[tk]; ok && rec.Status == idempotent.StatusSettled && rec.Outcome == idempotent.OutcomeNoMoney {
			orders[t].cancel = pendingCancel{pending: true, batchIndex: -1}
			pending = append(pending, tk)
		}
	}
	return readCancelOrigins(ctx, tx, pending, trades, orders)
}

// readCancelOrigins reads, for the pending cancels (rare: a cancel settled
// before its trade's payment), when each occurred and what produced it,
// for the settled event its reversal writes: one read of their claims'
// occurred_at and stored event (ReadMany gives a settled claim's event
// only while it is ACQUIRED).
func readCancelOrigins(ctx context.Context, tx bun.Tx, pending []idempotent.TenantKey, trades map[idempotent.TenantKey]tradeKey, orders map[tradeKey]*Order) error {
	if len(pending) == 0 {
		return nil
	}
	var rows []struct {
		TenantID   int64      `bun:"tenant_id"`
		Key        string     `bun:"idempotent_key"`
		OccurredAt *time.Time `bun:"occurred_at"`
		Event      []byte     `bun:"event_json"`
	}
	q := tx.NewSelect().Table("ss_channel_idempotent").Column("tenant_id", "idempotent_key", "occurred_at", "event_json")
	q = q.WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
		for _, k := range pending {
			q = q.WhereOr("(tenant_id = ? AND idempotent_key = ?)", k.TenantID, string(k.Key))
		}
		return q
	})
	if err := q.Scan(ctx, &rows); err != nil {
		return fmt.Errorf("read the origins of %d cancels: %w", len(pending), err)
	}
	for _, r := range rows {
		t, ok := trades[idempotent.TenantKey{TenantID: r.TenantID, Key: idempotent.Key(r.Key)}]
		if !ok {
			continue
		}
		at, src, _ := storedOrigin(r.Event)
		if r.OccurredAt != nil {
			at = r.OccurredAt.UTC()
		}
		if src == "" {
			src = settled.SourceCallback
		}
		orders[t].cancel.occurredAt, orders[t].cancel.source = at, src
	}
	return nil
}

// cancelReversal is the event whose posting reverses the payment ev of a
// cancelled trade (Shouqianba): a refund under the cancel's key.
func cancelReversal(ev channels.Event) (channels.Event, error) {
	k, err := channels.CancelKey(ev.Channel, ev.TradeNo)
	if err != nil {
		return channels.Event{}, fmt.Errorf("%s: cancel key: %w", ev.Key, err)
	}
	rev := ev
	rev.Type, rev.Key, rev.RefundNo = idempotent.RefundSucceeded, k, ev.Channel.CancelRefundNo()
	return rev, nil
}

// lockOrders locks the order rows of the batch's trades, creating those
// that do not exist yet (the first event of a trade in the batch sets its
// total, merchant order number and currency; later events never change
// them). Rows are locked by primary key; the missing ones are made in
// memory (created) and inserted by writeOrders, with their final values,
// in (tenant, channel, trade) order; a trade another settler creates
// first fails that insert, and the transaction, with errOrderRace.
func (s *Service) lockOrders(ctx context.Context, tx bun.Tx, evs []channels.Event, lost []bool, now time.Time, mode lockMode) (map[tradeKey]*Order, map[tradeKey]bool, error) {
	fresh, firsts := newOrders(evs, lost, now)
	orders := make(map[tradeKey]*Order, len(fresh))
	busy := map[tradeKey]bool{}
	if len(fresh) == 0 {
		return orders, busy, nil
	}
	if mode == skipBusyCreated || mode == waitForCreated {
		// Every row exists: a locking read of exactly these trades by the
		// unique key (at READ COMMITTED it locks only the rows it returns)
		// takes them in one statement.
		lock := "UPDATE SKIP LOCKED"
		if mode == waitForCreated {
			lock = "UPDATE"
		}
		if err := s.selectOrders(ctx, tx, fresh, firsts, orders, lock); err != nil {
			return nil, nil, err
		}
		for t := range firsts {
			if orders[t] == nil {
				busy[t] = true
			}
		}
		if mode == waitForCreated && len(busy) > 0 {
			// A row that createOrders committed cannot be missing: only a
			// read that skips rows leaves one out.
			return nil, nil, fmt.Errorf("lock %d orders: %d not found: %w", len(firsts), len(busy), errNoOrder)
		}
		return orders, busy, nil
	}
	// Find what exists with a plain read and lock exactly those rows by
	// primary key. A locking read that probes a trade with no row would
	// lock (and wait for) whatever row comes next in the index, and an
	// upsert takes next-key locks: either makes concurrent batches of
	// unrelated trades queue or deadlock. The rows still missing are this
	// transaction's to create: decided on in memory as new PENDING_PAYMENT
	// rows (created, no id yet) and inserted by writeOrders with their
	// final values, one plain INSERT that needs no read-back and no update.
	// A concurrent insert of the same trade (another settler of one of its
	// events, often a channel retry on another partition) that committed
	// first fails that insert with a duplicate-key error: errOrderRace,
	// and the transaction runs again on the row now committed.
	existing := map[tradeKey]*Order{}
	if err := s.selectOrders(ctx, tx, fresh, firsts, existing, ""); err != nil {
		return nil, nil, err
	}
	if err := s.lockByID(ctx, tx, existing, orders, mode); err != nil {
		return nil, nil, err
	}
	for _, o := range fresh {
		t := tradeKey{o.TenantID, o.Channel, o.TradeNo}
		switch {
		case orders[t] != nil:
		case existing[t] != nil: // skipped: another transaction holds it
			busy[t] = true
		default:
			o := o
			// As the row reads back: DATETIME(6), UTC.
			o.CreatedAt, o.UpdatedAt = o.CreatedAt.Truncate(time.Microsecond), o.UpdatedAt.Truncate(time.Microsecond)
			o.normalise()
			o.created = true
			orders[t] = &o
		}
	}
	for t := range firsts {
		if orders[t] == nil && !busy[t] {
			return nil, nil, fmt.Errorf("order %s/%s: %w", t.channel, t.tradeNo, errNoOrder)
		}
	}
	return orders, busy, nil
}

// newOrders returns the order row each trade of evs gets if it is created
// now, in (tenant, channel, trade) order, and the set of those trades.
// The first event of a trade (in the order of evs, leaving out skip[i];
// skip may be nil) sets its total, merchant order number and currency.
func newOrders(evs []channels.Event, skip []bool, now time.Time) ([]Order, map[tradeKey]bool) {
	firsts := map[tradeKey]bool{}
	var rows []Order
	for i, ev := range evs {
		t := tradeOf(ev)
		if (skip != nil && skip[i]) || firsts[t] {
			continue
		}
		firsts[t] = true
		rows = append(rows, Order{
			TenantID: ev.TenantID, Channel: ev.Channel, TradeNo: ev.TradeNo, MerchantOrderNo: ev.MerchantOrderNo,
			Amount: ev.OrderTotal, Currency: ev.Currency, Status: OrderPendingPayment, CreatedAt: now, UpdatedAt: now,
		})
	}
	slices.SortFunc(rows, func(a, b Order) int {
		return compareTrades(tradeKey{a.TenantID, a.Channel, a.TradeNo}, tradeKey{b.TenantID, b.Channel, b.TradeNo})
	})
	return rows, firsts
}

// insertOrders is the INSERT of new order rows on db, every column but the
// id (a row createOrders makes PENDING_PAYMENT carries the columns'
// defaults: zero amounts, no times, no bound merchant).
func insertOrders(db bun.IDB, rows *[]Order) *bun.InsertQuery {
	return db.NewInsert().Model(rows).
		Column("tenant_id", "channel_code", "channel_trade_no", "merchant_order_no", "amount", "paid_amount",
			"refunded_amount", "max_cumulative_refund", "currency", "status", "paid_at", "last_refund_at",
			"bound_merchant_id", "settled_seq", "created_at", "updated_at").
		Returning("")
}

// lockByID locks the rows of existing by primary key, in id order, and
// puts the locked (current) rows into orders. In mode skipBusyRows, a row
// another transaction holds is skipped (left out of orders) rather than
// waited for; in failOnBusyRows the read fails instead; otherwise it waits.
func (s *Service) lockByID(ctx context.Context, tx bun.Tx, existing, orders map[tradeKey]*Order, mode lockMode) error {
	if len(existing) == 0 {
		return nil
	}
	ids := make([]int64, 0, len(existing))
	for _, o := range existing {
		ids = append(ids, o.ID)
	}
	slices.Sort(ids)
	var rows []Order
	q := tx.NewSelect().Model(&rows).Where("id IN (?)", bun.List(ids)).OrderExpr("id")
	switch {
	case s.sqlite: // one writer at a time: nothing to lock
	case mode == skipBusyRows:
		q = q.For("UPDATE SKIP LOCKED")
	case mode == failOnBusyRows:
		q = q.For("UPDATE NOWAIT")
	default:
		q = q.For("UPDATE")
	}
	if err := q.Scan(ctx); err != nil {
		return fmt.Errorf("lock %d orders: %w", len(ids), err)
	}
	for i := range rows {
		rows[i].normalise()
		orders[tradeKey{rows[i].TenantID, rows[i].Channel, rows[i].TradeNo}] = &rows[i]
	}
	return nil
}

// selectOrders reads the order rows of want into orders, keeping only the
// trades in firsts; lock, when not empty, makes it a locking read (FOR
// lock) on MySQL.
func (s *Service) selectOrders(ctx context.Context, tx bun.IDB, want []Order, firsts map[tradeKey]bool, orders map[tradeKey]*Order, lock string) error {
	trades := make([]tradeKey, len(want))
	for i, o := range want {
		trades[i] = tradeKey{o.TenantID, o.Channel, o.TradeNo}
	}
	var rows []Order
	sel := whereTrades(tx.NewSelect().Model(&rows), trades).
		OrderExpr("tenant_id, channel_code, channel_trade_no")
	if lock != "" && !s.sqlite {
		sel = sel.For(lock)
	}
	if err := sel.Scan(ctx); err != nil {
		return fmt.Errorf("read %d orders: %w", len(want), err)
	}
	for i := range rows {
		rows[i].normalise()
		if t := (tradeKey{rows[i].TenantID, rows[i].Channel, rows[i].TradeNo}); firsts[t] {
			orders[t] = &rows[i]
		}
	}
	return nil
}

// lockRegistrations reads, with one locking read, the refund registrations
// of every trade the batch refunds, by trade.
func (s *Service) lockRegistrations(ctx context.Context, tx bun.Tx, evs []channels.Event, skip []bool) (map[tradeKey][]*Registration, error) {
	out := map[tradeKey][]*Registration{}
	want := map[tradeKey]bool{}
	var trades []tradeKey
	for i, ev := range evs {
		if skip[i] || ev.Type != idempotent.RefundSucceeded || want[tradeOf(ev)] {
			continue
		}
		want[tradeOf(ev)] = true
		trades = append(trades, tradeOf(ev))
	}
	if len(want) == 0 {
		return out, nil
	}
	var rows []Registration
	q := whereTrades(tx.NewSelect().Model(&rows), trades).OrderExpr("id")
	if !s.sqlite {
		q = q.For("UPDATE")
	}
	if err := q.Scan(ctx); err != nil {
		return nil, fmt.Errorf("lock registrations of %d trades: %w", len(want), err)
	}
	for i := range rows {
		rows[i].normalise()
		if t := (tradeKey{rows[i].TenantID, rows[i].Channel, rows[i].TradeNo}); want[t] {
			out[t] = append(out[t], &rows[i])
		}
	}
	return out, nil
}

// writeOrders writes the amounts, status and times of the touched orders
// (locked by tx) with one statement that takes only the rows' own locks.
// On MySQL it is an UPDATE joined, by primary key, to a derived table of
// the new values (a UNION ALL of one-row SELECTs, which every MySQL
// dialect accepts): linear in the rows, where an UPDATE … SET col = CASE
// id … END compares every row with every WHEN (about 3× the server's time
// at 256 rows). SQLite, one writer in process, keeps the CASE form.
func (s *Service) writeOrders(ctx context.Context, tx bun.Tx, orders map[tradeKey]*Order, touched map[tradeKey]bool) error {
	if err := s.insertCreatedOrders(ctx, tx, orders); err != nil {
		return err
	}
	rows := make([]*Order, 0, len(touched))
	for t := range touched {
		if o := orders[t]; !o.created {
			rows = append(rows, o)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	slices.SortFunc(rows, func(a, b *Order) int { return cmp.Compare(a.ID, b.ID) })
	ids := make([]int64, len(rows))
	for i, o := range rows {
		ids[i] = o.ID
	}
	cols := []struct {
		name string
		val  func(o *Order) any
	}{
		{"paid_amount", func(o *Order) any { return o.PaidAmount }},
		{"refunded_amount", func(o *Order) any { return o.RefundedAmount }},
		{"max_cumulative_refund", func(o *Order) any { return o.MaxCumulativeRefund }},
		{"status", func(o *Order) any { return string(o.Status) }},
		{"paid_at", func(o *Order) any { return o.PaidAt }},
		{"last_refund_at", func(o *Order) any { return o.LastRefundAt }},
		{"bound_merchant_id", func(o *Order) any { return o.BoundMerchantID }},
		{"settled_seq", func(o *Order) any { return o.SettledSeq }},
		{"updated_at", func(o *Order) any { return o.UpdatedAt }},
	}
	var b strings.Builder
	args := make([]any, 0, len(cols)*len(rows)*2+1)
	if s.sqlite {
		b.WriteString("UPDATE ss_channel_order SET ")
		for c, col := range cols {
			if c > 0 {
				b.WriteString(", ")
			}
			b.WriteString(col.name + " = CASE id")
			for _, o := range rows {
				b.WriteString(" WHEN ? THEN ?")
				args = append(args, o.ID, col.val(o))
			}
			b.WriteString(" END")
		}
		b.WriteString(" WHERE id IN (?)")
		args = append(args, bun.List(ids))
	} else {
		// InnoDB (MySQL, MariaDB) locks every row a multi-table UPDATE
		// reads, with no semi-consistent read to pass over a row another
		// transaction holds, and the optimizer, which guesses two rows for
		// the derived table whatever its size, reads a small order table
		// whole (a full scan joined to the derived table) rather than by
		// primary key: the update would wait for any order row another
		// settler holds, the very row the batch skipped. The index hint and
		// the id list confine it to the batch's own rows, by primary key,
		// whatever the table's size and statistics. TiDB locks only the
		// rows it writes and keeps the plain form.
		tidb, err := s.onTiDB(ctx)
		if err != nil {
			return fmt.Errorf("update %d orders: %w", len(rows), err)
		}
		b.WriteString("UPDATE ss_channel_order o ")
		if !tidb {
			b.WriteString("FORCE INDEX (PRIMARY) ")
		}
		b.WriteString("JOIN (")
		for i, o := range rows {
			if i == 0 {
				b.WriteString("SELECT ? AS id")
				for _, col := range cols {
					b.WriteString(", ? AS " + col.name)
				}
			} else {
				b.WriteString(" UNION ALL SELECT ?" + strings.Repeat(", ?", len(cols)))
			}
			args = append(args, o.ID)
			for _, col := range cols {
				args = append(args, col.val(o))
			}
		}
		b.WriteString(") v ON o.id = v.id SET ")
		for c, col := range cols {
			if c > 0 {
				b.WriteString(", ")
			}
			b.WriteString("o." + col.name + " = v." + col.name)
		}
		if !tidb {
			b.WriteString(" WHERE o.id IN (?)")
			args = append(args, bun.List(ids))
		}
	}
	res, err := tx.NewRaw(b.String(), args...).Exec(ctx)
	if err != nil {
		return fmt.Errorf("update %d orders: %w", len(rows), err)
	}
	if n, err := res.RowsAffected(); err == nil && n > int64(len(rows)) {
		return fmt.Errorf("update %d orders: %d rows affected", len(rows), n)
	}
	return nil
}

// insertCreatedOrders inserts the order rows the transaction created (in
// memory, by lockOrders), each with its final values, in (tenant,
// channel, trade) order, with one plain INSERT. A duplicate key means
// another settler committed one of these trades first: errOrderRace (the
// transaction's decisions were made without that row).
func (s *Service) insertCreatedOrders(ctx context.Context, tx bun.Tx, orders map[tradeKey]*Order) error {
	var rows []Order
	for _, o := range orders {
		if o.created {
			rows = append(rows, *o)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	slices.SortFunc(rows, func(a, b Order) int {
		return compareTrades(tradeKey{a.TenantID, a.Channel, a.TradeNo}, tradeKey{b.TenantID, b.Channel, b.TradeNo})
	})
	_, err := insertOrders(tx, &rows).Exec(ctx)
	if err == nil {
		return nil
	}
	if errors.Is(idempotent.ClassifyDuplicate(err), idempotent.ErrDuplicateKey) {
		// ss_channel_order's one unique key besides the primary key is
		// uk_order.
		return fmt.Errorf("create %d orders: %w: %w", len(rows), errOrderRace, err)
	}
	return fmt.Errorf("create %d orders: %w", len(rows), err)
}

// whereTrades limits q to the rows of trades: for each (tenant, channel)
// one equality prefix of the (tenant_id, channel_code, channel_trade_no)
// index and the list of its trade numbers, so the server probes exactly
// those trades (a locking read locks no row of another trade), where three
// independent IN lists would probe, and lock, their cross product.
func whereTrades(q *bun.SelectQuery, trades []tradeKey) *bun.SelectQuery {
	type group struct {
		tenant  int64
		channel channels.Channel
	}
	byGroup := map[group][]string{}
	var groups []group
	for _, t := range trades {
		g := group{t.tenant, t.channel}
		if byGroup[g] == nil {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], t.tradeNo)
	}
	slices.SortFunc(groups, func(a, b group) int {
		return cmp.Or(cmp.Compare(a.tenant, b.tenant), cmp.Compare(a.channel, b.channel))
	})
	return q.WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
		for _, g := range groups {
			list := byGroup[g]
			slices.Sort(list)
			q = q.WhereOr("(tenant_id = ? AND channel_code = ? AND channel_trade_no IN (?))", g.tenant, string(g.channel), bun.List(list))
		}
		return q
	})
}
