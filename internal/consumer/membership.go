package consumer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

// groupRequestTimeout bounds each request of the consumer group to its
// coordinator (kafka-go's ConsumerGroupConfig.Timeout) and each membership
// probe.
const groupRequestTimeout = 5 * time.Second

// joinGroupBackoff is how long the consumer group waits after a failed
// attempt to join before the next (kafka-go's JoinGroupBackoff).
const joinGroupBackoff = time.Second

// maxProbeInterval caps how often the membership is probed: every
// HeartbeatInterval, at least this often.
const maxProbeInterval = 2 * time.Second

// probeInterval is how often the worker asks the coordinator to confirm
// its membership.
func (w *Worker) probeInterval() time.Duration { return min(w.cfg.HeartbeatInterval, maxProbeInterval) }

// confirmWithin is how long a membership counts without the
// coordinator's confirmation: one probe interval, the probe's timeout, and
// a second for the answer. Past it the worker is not joined, whatever
// kafka-go still holds (its own heartbeat shares a connection whose
// deadline other requests push back, so its failure can come later).
func (w *Worker) confirmWithin() time.Duration {
	return w.probeInterval() + groupRequestTimeout + time.Second
}

// groupState is what the worker knows of the group while it is not a
// member, for readiness to say why.
type groupState struct {
	// lostAt is when the last generation ended; zero before the first.
	lostAt  time.Time
	lostGen int32
	// joinErr is the error of the last failed attempt to join since the
	// worker was last a member, and joinErrAt when it failed.
	joinErr   string
	joinErrAt time.Time
	// probeErr is the last membership probe's error; empty once one was
	// answered.
	probeErr string
}

// joined records that the worker is a member of gen.
func (w *Worker) joined(gen *kafka.Generation) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.member, w.generation = gen, gen.ID
	w.confirmedAt = time.Now()
	w.group.joinErr, w.group.joinErrAt, w.group.probeErr = "", time.Time{}, ""
	w.metrics.SetGroupJoined(true)
}

// memberNow reports whether the worker is a member of a live generation
// that the coordinator confirmed within confirmWithin; w.mu is held.
func (w *Worker) memberNow(now time.Time) bool {
	return w.member != nil && now.Sub(w.confirmedAt) <= w.confirmWithin()
}

// refreshJoined sets paycb_group_joined from memberNow: an unconfirmed
// membership turns it 0 without waiting for the generation to end.
func (w *Worker) refreshJoined() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.metrics.SetGroupJoined(w.memberNow(time.Now()))
}

// probeMembership asks the group's coordinator to confirm gen's
// membership every probeInterval, with a Heartbeat of the generation's own
// from a connection of its own, until genCtx ends. An answer without error
// confirms it; a refusal or no answer within groupRequestTimeout does not.
func (w *Worker) probeMembership(genCtx context.Context, gen *kafka.Generation) {
	client := w.cfg.Client
	if client == nil {
		client = &kafka.Client{Addr: kafka.TCP(w.cfg.Brokers...), Timeout: groupRequestTimeout}
	}
	tick := time.NewTicker(w.probeInterval())
	defer tick.Stop()
	var coordinator net.Addr
	for {
		select {
		case <-genCtx.Done():
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(genCtx, groupRequestTimeout)
		err := w.heartbeat(ctx, client, gen, &coordinator)
		cancel()
		if genCtx.Err() != nil {
			return
		}
		w.probed(gen, err)
	}
}

// heartbeat sends one Heartbeat of gen to the group's coordinator, found
// first when *coordinator is nil and forgotten when it fails.
func (w *Worker) heartbeat(ctx context.Context, client *kafka.Client, gen *kafka.Generation, coordinator *net.Addr) error {
	if *coordinator == nil {
		resp, err := client.FindCoordinator(ctx, &kafka.FindCoordinatorRequest{Key: w.cfg.GroupID, KeyType: kafka.CoordinatorKeyTypeConsumer})
		if err == nil && resp.Error != nil {
			err = resp.Error
		}
		if err == nil && resp.Coordinator == nil {
			err = errors.New("no coordinator in the answer")
		}
		if err != nil {
			return fmt.Errorf("find the coordinator of group %s: %w", w.cfg.GroupID, err)
		}
		*coordinator = kafka.TCP(net.JoinHostPort(resp.Coordinator.Host, strconv.Itoa(resp.Coordinator.Port)))
	}
	resp, err := client.Heartbeat(ctx, &kafka.HeartbeatRequest{Addr: *coordinator, GroupID: w.cfg.GroupID, GenerationID: gen.ID, MemberID: gen.MemberID})
	if err == nil && resp.Error != nil {
		err = resp.Error
	}
	if err != nil {
		*coordinator = nil
		return fmt.Errorf("heartbeat of generation %d: %w", gen.ID, err)
	}
	return nil
}

// probed records a membership probe's answer: err nil confirms gen.
func (w *Worker) probed(gen *kafka.Generation, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.member != gen {
		return
	}
	if err != nil {
		w.group.probeErr = err.Error()
		return
	}
	w.confirmedAt, w.group.probeErr = time.Now(), ""
}

// left records that gen has ended; nothing when the worker is already a
// member of a later one.
func (w *Worker) left(gen *kafka.Generation) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.member != gen {
		return
	}
	w.member, w.generation = nil, 0
	w.group.lostAt, w.group.lostGen = time.Now(), gen.ID
	w.metrics.SetGroupJoined(false)
}

// joinFailed records a failed attempt to join the group.
func (w *Worker) joinFailed(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.group.joinErr, w.group.joinErrAt = err.Error(), time.Now()
}

// leave records that the worker has left the group for good (Run is
// returning): not a member, and no partition's series left behind.
func (w *Worker) leave() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.member != nil {
		w.group.lostAt, w.group.lostGen = time.Now(), w.generation
	}
	w.member, w.generation = nil, 0
	w.metrics.SetGroupJoined(false)
	for p := range w.partitions {
		w.metrics.DeleteConsumerLag(p)
		w.metrics.DeletePartitionStalled(p)
	}
	w.partitions = map[int]*partitionState{}
}

// notMember says why the worker is not a member of the group, as of now,
// short enough for /readyz to show the last attempt's error whole; w.mu
// is held.
func (w *Worker) notMember(now time.Time) error {
	var b strings.Builder
	fmt.Fprintf(&b, "not a member of group %s", w.cfg.GroupID)
	if w.member != nil {
		fmt.Fprintf(&b, ": generation %d unconfirmed by the coordinator for %s (last %s)", w.generation,
			now.Sub(w.confirmedAt).Round(time.Second), w.confirmedAt.UTC().Format(time.RFC3339))
		if w.group.probeErr != "" {
			fmt.Fprintf(&b, "; last heartbeat: %s", w.group.probeErr)
		}
		return errors.New(b.String())
	}
	if w.group.lostAt.IsZero() {
		b.WriteString(" yet: joining")
	} else {
		fmt.Fprintf(&b, " since %s (%s ago): generation %d ended",
			w.group.lostAt.UTC().Format(time.RFC3339), now.Sub(w.group.lostAt).Round(time.Second), w.group.lostGen)
	}
	switch since, ok := w.attemptSince(now); {
	case w.group.joinErr == "" && !w.group.lostAt.IsZero():
		fmt.Fprintf(&b, "; rejoining for %s", since.Round(time.Second))
	case w.group.joinErr != "" && ok:
		// The error is the previous attempt's: saying it as the last
		// would cite a frozen broker's timeout long after it answers.
		if !w.group.lostAt.IsZero() {
			b.WriteString("; rejoining:")
		} else {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " an attempt in flight for %s; the previous one failed %s ago: %s",
			since.Round(time.Second), now.Sub(w.group.joinErrAt).Round(time.Second), w.group.joinErr)
	case w.group.joinErr != "":
		fmt.Fprintf(&b, "; last join attempt (%s ago): %s", now.Sub(w.group.joinErrAt).Round(time.Second), w.group.joinErr)
	}
	return errors.New(b.String())
}

// attemptSince returns how long the group's current join attempt has been
// in flight, and false while none is (the back-off after a failed one):
// kafka-go's group tries again joinGroupBackoff after each failure, and at
// once when a generation ends; w.mu is held.
func (w *Worker) attemptSince(now time.Time) (time.Duration, bool) {
	if w.group.joinErr != "" {
		since := now.Sub(w.group.joinErrAt) - joinGroupBackoff
		return since, since >= 0
	}
	if w.group.lostAt.IsZero() {
		return 0, false
	}
	return now.Sub(w.group.lostAt), true
}

// GroupJoined reports whether the worker is a member of a generation of
// the group that has not ended and that the coordinator confirmed within
// the last few seconds (paycb_group_joined).
func (w *Worker) GroupJoined() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.memberNow(time.Now())
}
