package ops

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/kafkaops"
)

// ReplayTarget says where to move the group's offsets. Exactly one of
// Earliest, At and Offsets is set.
type ReplayTarget struct {
	// Earliest moves every partition to its first retained offset.
	Earliest bool
	// At moves every partition to the first message whose timestamp is at or
	// after At (the partition's end when there is none).
	At time.Time
	// Offsets moves the listed partitions to the given offsets and leaves
	// the others alone.
	Offsets map[int]int64
}

// ErrInvalidTarget is returned, wrapped, for a replay target that cannot be
// applied: none or several kinds set, an unknown partition, or an offset
// outside the partition's retained range.
var ErrInvalidTarget = errors.New("invalid replay target")

func (t ReplayTarget) validate() error {
	n := 0
	if t.Earliest {
		n++
	}
	if !t.At.IsZero() {
		n++
	}
	if t.Offsets != nil {
		n++
		if len(t.Offsets) == 0 {
			return fmt.Errorf("%w: no partition offsets given", ErrInvalidTarget)
		}
	}
	if n != 1 {
		return fmt.Errorf("%w: give exactly one of earliest, a datetime or partition offsets", ErrInvalidTarget)
	}
	return nil
}

// ParseOffsets parses "P:O,P:O,..." (partition:offset pairs) as given to
// --to-offset. The error wraps ErrInvalidTarget.
func ParseOffsets(s string) (map[int]int64, error) {
	out := map[int]int64{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		ps, os, ok := strings.Cut(item, ":")
		if !ok {
			return nil, fmt.Errorf("%w: %q is not partition:offset", ErrInvalidTarget, item)
		}
		p, err := strconv.Atoi(strings.TrimSpace(ps))
		if err != nil || p < 0 {
			return nil, fmt.Errorf("%w: partition %q is not a non-negative integer", ErrInvalidTarget, ps)
		}
		o, err := strconv.ParseInt(strings.TrimSpace(os), 10, 64)
		if err != nil || o < 0 {
			return nil, fmt.Errorf("%w: offset %q is not a non-negative integer", ErrInvalidTarget, os)
		}
		if _, dup := out[p]; dup {
			return nil, fmt.Errorf("%w: partition %d given twice", ErrInvalidTarget, p)
		}
		out[p] = o
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no partition offsets in %q", ErrInvalidTarget, s)
	}
	return out, nil
}

// PartitionReset is one partition's move.
type PartitionReset struct {
	Partition int
	// Current is the group's committed offset, -1 when it committed none
	// (the worker then starts at First).
	Current int64
	// Target is the offset the group will resume from.
	Target int64
	// First and End are the partition's first retained offset and the
	// offset its next message will get.
	First, End int64
}

// from is where the group would resume without the reset.
func (p PartitionReset) from() int64 {
	if p.Current < 0 {
		return p.First
	}
	return p.Current
}

// Replay is how many messages the group will read again: those from Target
// up to where it would have resumed. 0 when the reset moves forward.
func (p PartitionReset) Replay() int64 { return max(p.from()-p.Target, 0) }

// Skip is how many messages the group will never read because the reset
// moves forward past them. Their claims, if any were made, are settled by
// the orphan sweeper; messages never claimed are lost to the worker.
func (p PartitionReset) Skip() int64 { return max(p.Target-p.from(), 0) }

// ReplayPlan is what a replay will do, partition by partition.
type ReplayPlan struct {
	Topic, Group string
	Partitions   []PartitionReset
}

// TotalReplay sums Replay over the plan's partitions.
func (p ReplayPlan) TotalReplay() int64 {
	var n int64
	for _, r := range p.Partitions {
		n += r.Replay()
	}
	return n
}

// TotalSkip sums Skip over the plan's partitions.
func (p ReplayPlan) TotalSkip() int64 {
	var n int64
	for _, r := range p.Partitions {
		n += r.Skip()
	}
	return n
}

// KafkaCommandOptions shape the command KafkaCommand prints.
type KafkaCommandOptions struct {
	// Execute prints --execute (the reset that was applied) instead of
	// --dry-run (the preview).
	Execute bool
	// CommandConfig, when not empty, is the client properties file the
	// command names with --command-config: the brokers need TLS or SASL.
	CommandConfig string
}

// KafkaCommand returns the equivalent kafka-consumer-groups.sh invocation,
// one line per invocation (--to-offset needs one per partition), ending in
// --dry-run, or --execute when o.Execute.
func (p ReplayPlan) KafkaCommand(brokers []string, t ReplayTarget, o KafkaCommandOptions) string {
	var b strings.Builder
	fmt.Fprintf(&b, "kafka-consumer-groups.sh --bootstrap-server %s", strings.Join(brokers, ","))
	if o.CommandConfig != "" {
		fmt.Fprintf(&b, " --command-config %s", o.CommandConfig)
	}
	fmt.Fprintf(&b, " --group %s --reset-offsets", p.Group)
	mode := " --dry-run"
	if o.Execute {
		mode = " --execute"
	}
	switch {
	case t.Earliest:
		fmt.Fprintf(&b, " --topic %s --to-earliest", p.Topic)
	case !t.At.IsZero():
		fmt.Fprintf(&b, " --topic %s --to-datetime %s", p.Topic, t.At.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	default:
		// One invocation per partition: --to-offset takes a single offset.
		parts := make([]string, 0, len(p.Partitions))
		for _, r := range p.Partitions {
			parts = append(parts, fmt.Sprintf("--topic %s:%d --to-offset %d", p.Topic, r.Partition, r.Target))
		}
		return b.String() + " " + strings.Join(parts, mode+"\n"+b.String()+" ") + mode
	}
	b.WriteString(mode)
	return b.String()
}

// PlanReplay reads the group's committed offsets and the partitions' bounds
// and works out the reset for t. It refuses, with an error wrapping
// ErrGroupActive, while the group has live members, with one wrapping
// ErrTopicNotFound when the topic does not exist (it never creates it), and
// with one wrapping ErrInvalidTarget when t names an unknown partition or an
// offset outside [first, end].
func PlanReplay(ctx context.Context, k kafkaops.Kafka, t ReplayTarget) (ReplayPlan, error) {
	if err := t.validate(); err != nil {
		return ReplayPlan{}, err
	}
	if err := requireEmptyGroup(ctx, k); err != nil {
		return ReplayPlan{}, err
	}
	if err := k.RequireTopic(ctx, k.Topic); err != nil {
		return ReplayPlan{}, err
	}
	parts, err := k.Partitions(ctx, k.Topic)
	if err != nil {
		return ReplayPlan{}, err
	}
	first, err := k.ListOffsets(ctx, k.Topic, parts, kafka.FirstOffset)
	if err != nil {
		return ReplayPlan{}, err
	}
	end, err := k.ListOffsets(ctx, k.Topic, parts, kafka.LastOffset)
	if err != nil {
		return ReplayPlan{}, err
	}
	current, err := k.Committed(ctx, parts)
	if err != nil {
		return ReplayPlan{}, err
	}
	var at map[int]int64
	if !t.At.IsZero() {
		if at, err = k.ListOffsets(ctx, k.Topic, parts, t.At.UnixMilli()); err != nil {
			return ReplayPlan{}, err
		}
	}
	known := map[int]bool{}
	for _, p := range parts {
		known[p] = true
	}
	for p := range t.Offsets {
		if !known[p] {
			return ReplayPlan{}, fmt.Errorf("%w: topic %s has no partition %d (it has %d)", ErrInvalidTarget, k.Topic, p, len(parts))
		}
	}
	plan := ReplayPlan{Topic: k.Topic, Group: k.Group}
	for _, p := range parts {
		cur, ok := current[p]
		if !ok {
			cur = -1
		}
		r := PartitionReset{Partition: p, Current: cur, First: first[p], End: end[p]}
		switch {
		case t.Earliest:
			r.Target = r.First
		case !t.At.IsZero():
			r.Target = at[p]
			if r.Target < 0 { // no message at or after t
				r.Target = r.End
			}
		default:
			o, ok := t.Offsets[p]
			if !ok {
				continue
			}
			if o < r.First || o > r.End {
				return ReplayPlan{}, fmt.Errorf("%w: offset %d of partition %d is outside its retained range [%d, %d]", ErrInvalidTarget, o, p, r.First, r.End)
			}
			r.Target = o
		}
		plan.Partitions = append(plan.Partitions, r)
	}
	sort.Slice(plan.Partitions, func(i, j int) bool { return plan.Partitions[i].Partition < plan.Partitions[j].Partition })
	return plan, nil
}

// ApplyReplay commits plan's targets for the group through Kafka's
// OffsetCommit API, as an empty group's administrative commit (generation
// -1, no member). It checks again that the group has no live members
// (ErrGroupActive) right before committing, and reports any partition the
// broker refused.
func ApplyReplay(ctx context.Context, k kafkaops.Kafka, plan ReplayPlan) error {
	if len(plan.Partitions) == 0 {
		return nil
	}
	if err := requireEmptyGroup(ctx, k); err != nil {
		return err
	}
	commits := make([]kafka.OffsetCommit, 0, len(plan.Partitions))
	for _, r := range plan.Partitions {
		commits = append(commits, kafka.OffsetCommit{Partition: r.Partition, Offset: r.Target, Metadata: "consumer replay"})
	}
	resp, err := k.Client().OffsetCommit(ctx, &kafka.OffsetCommitRequest{
		GroupID:      plan.Group,
		GenerationID: -1,
		Topics:       map[string][]kafka.OffsetCommit{plan.Topic: commits},
	})
	if err != nil {
		return fmt.Errorf("commit offsets for group %s: %w", plan.Group, err)
	}
	var errs []error
	for _, p := range resp.Topics[plan.Topic] {
		if p.Error != nil {
			errs = append(errs, fmt.Errorf("partition %d: %w", p.Partition, p.Error))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("commit offsets for group %s: %w", plan.Group, errors.Join(errs...))
	}
	return nil
}

// ErrTopicNotFound is returned, wrapped, when the topic an operation works
// on does not exist (kafkaops.ErrTopicNotFound). The operations never
// create topics.
var ErrTopicNotFound = kafkaops.ErrTopicNotFound
