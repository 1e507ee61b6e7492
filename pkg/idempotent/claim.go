package idempotent

import (
	"errors"
	"fmt"
	"time"
)

// Status is a claim's state: ACQUIRED from the claim's commit until the
// business transaction commits, then SETTLED for good.
type Status string

// Claim statuses.
const (
	StatusAcquired Status = "ACQUIRED"
	StatusSettled  Status = "SETTLED"
)

// Outcome is what settling a claim did.
type Outcome string

// Settle outcomes (the contract's settle_outcome values).
const (
	// OutcomePosted means balanced ledger entries were posted.
	OutcomePosted Outcome = "POSTED"
	// OutcomeNoMoney means the event moved no money, e.g. a late cumulative
	// refund lower than one already recorded.
	OutcomeNoMoney Outcome = "NO_MONEY"
	// OutcomeOverRefund means the refunds would exceed the order total:
	// nothing was posted and the message is dead-lettered.
	OutcomeOverRefund Outcome = "OVER_REFUND"
)

// Valid reports whether o is one of the settle outcomes.
func (o Outcome) Valid() bool {
	return o == OutcomePosted || o == OutcomeNoMoney || o == OutcomeOverRefund
}

// Source is where the message that made a claim came from. The zero Source
// (empty topic, partition and offset -1) marks a claim made outside Kafka.
type Source struct {
	Topic     string
	Partition int
	Offset    int64
}

// NoSource is the Source of a claim that no Kafka message made.
var NoSource = Source{Partition: -1, Offset: -1}

// String formats the source as topic/partition@offset.
func (s Source) String() string { return fmt.Sprintf("%s/%d@%d", s.Topic, s.Partition, s.Offset) }

// Claim is what Acquire records: the key under its tenant, the payload
// fingerprint that tells a channel retry from a conflicting event, the
// canonical event itself (so the claim can be settled later without Kafka)
// and the message that made it.
type Claim struct {
	TenantID    int64
	Key         Key
	EventType   EventType
	Fingerprint string
	Event       []byte
	Source      Source
	// OccurredAt is when the channel says the payment or refund happened,
	// stored in its own column (occurred_at) so that a statement of the
	// channel's day can be reconciled against the claims after purge has
	// cleared the stored event. Zero stores NULL.
	OccurredAt time.Time
}

// MaxFingerprintLen is the longest fingerprint the column holds (a hex
// SHA-256).
const MaxFingerprintLen = 64

// Validate checks the claim before it reaches the database. The error wraps
// ErrInvalidClaim (and ErrInvalidKey for a bad key).
func (c Claim) Validate() error {
	if c.TenantID <= 0 {
		return fmt.Errorf("%w: tenant %d is not positive", ErrInvalidClaim, c.TenantID)
	}
	k, et, err := ParseKey(string(c.Key))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidClaim, err)
	}
	if k != c.Key || et != c.EventType {
		return fmt.Errorf("%w: event type %q does not match key %q", ErrInvalidClaim, c.EventType, c.Key)
	}
	if c.Fingerprint == "" || len(c.Fingerprint) > MaxFingerprintLen {
		return fmt.Errorf("%w: fingerprint must be 1 to %d bytes", ErrInvalidClaim, MaxFingerprintLen)
	}
	return nil
}

// ErrInvalidClaim is returned, wrapped, for a claim Acquire refuses before
// touching the database.
var ErrInvalidClaim = errors.New("invalid claim")

// Record is a claim as stored.
type Record struct {
	ID             int64
	TenantID       int64
	Key            Key
	EventType      EventType
	Status         Status
	Outcome        Outcome // empty while ACQUIRED
	Fingerprint    string
	Event          []byte // nil once purged
	Source         Source
	Attempts       int
	LastError      string
	DeadLetteredAt *time.Time
	CreatedAt      time.Time
	SettledAt      *time.Time
}

// Age is how long ago the claim was made, as of now.
func (r Record) Age(now time.Time) time.Duration { return now.Sub(r.CreatedAt) }

// MadeBy reports whether the message at src made this claim: seeing it again
// is a redelivery (a replay or a retry after a crash), not a channel retry.
func (r Record) MadeBy(src Source) bool {
	return src.Topic != "" && r.Source == src
}

// ResultKind says what Acquire found.
type ResultKind int

// The results of Acquire.
const (
	// Acquired: this call made the claim, and it has committed.
	Acquired ResultKind = iota + 1
	// Duplicate: the key was already claimed with the same fingerprint.
	Duplicate
	// Conflict: the key was already claimed with a different fingerprint.
	Conflict
)

// String names the kind.
func (k ResultKind) String() string {
	switch k {
	case Acquired:
		return "acquired"
	case Duplicate:
		return "duplicate"
	case Conflict:
		return "conflict"
	default:
		return fmt.Sprintf("ResultKind(%d)", int(k))
	}
}

// Result is Acquire's answer. Existing is the stored claim, read after the
// duplicate-key error so it reflects the latest committed row; it is the zero
// Record when Kind is Acquired.
type Result struct {
	Kind     ResultKind
	Existing Record
}
