package pdcp

import (
	"errors"
	"fmt"
	"time"
)

// QueueStats are what a Queue did with its SDUs.
type QueueStats struct {
	Queued    uint64 `json:"queued"`
	Pulled    uint64 `json:"pulled"`
	Discarded uint64 `json:"discarded"` // by the discard timer
	Full      uint64 `json:"full"`      // refused for want of room
}

// Queue holds the SDUs of a transmitting entity that the DU's flow control
// (its desired buffer size, TS 38.425) does not take yet, each with its
// discardTimer (38.323 5.2.1, 7.3): an SDU still queued when its timer
// expires is discarded. T is whatever the caller keeps an SDU in (a
// buffer, a frame address).
//
// The timer starts when Push takes the SDU from upper layers and is the
// same for all, so SDUs expire in the order they came: checking the oldest
// is enough, and no per-SDU timer runs.
type Queue[T any] struct {
	ring         []queued[T]
	head, n      int
	discardTimer time.Duration
	onDiscard    func(T)
	stats        QueueStats
}

type queued[T any] struct {
	item     T
	size     int
	deadline time.Time
}

// ErrQueueFull is returned by Push when the queue holds its limit.
var ErrQueueFull = errors.New("PDCP queue full")

// NewQueue returns a queue of at most limit SDUs that discards them
// discardTimer after they were pushed (Infinity: never). onDiscard, if not
// nil, is given each SDU the timer discards, to recycle its buffer.
func NewQueue[T any](limit int, discardTimer time.Duration, onDiscard func(T)) (*Queue[T], error) {
	if limit <= 0 {
		return nil, fmt.Errorf("queue limit %d: must be positive", limit)
	}
	if discardTimer <= 0 {
		return nil, fmt.Errorf("discard timer %v: must be positive or Infinity", discardTimer)
	}
	return &Queue[T]{ring: make([]queued[T], limit), discardTimer: discardTimer, onDiscard: onDiscard}, nil
}

// Push queues an SDU of size octets received from upper layers at now. A
// full queue refuses it with ErrQueueFull, and the caller keeps it.
func (q *Queue[T]) Push(item T, size int, now time.Time) error {
	if q.n == len(q.ring) {
		q.stats.Full++
		return ErrQueueFull
	}
	var deadline time.Time
	if q.discardTimer != Infinity {
		deadline = now.Add(q.discardTimer)
	}
	q.ring[(q.head+q.n)%len(q.ring)] = queued[T]{item: item, size: size, deadline: deadline}
	q.n++
	q.stats.Queued++
	return nil
}

// Pull discards the expired SDUs, then appends to dst, oldest first, the
// SDUs that fit in maxBytes together, stopping at the first that does not.
func (q *Queue[T]) Pull(dst []T, maxBytes int, now time.Time) []T {
	q.Expire(now)
	for q.n > 0 && q.ring[q.head].size <= maxBytes {
		e := q.pop()
		maxBytes -= e.size
		dst = append(dst, e.item)
		q.stats.Pulled++
	}
	return dst
}

// Expire discards the SDUs whose discard timer has expired at now and
// returns how many.
func (q *Queue[T]) Expire(now time.Time) int {
	expired := 0
	for q.n > 0 && !q.ring[q.head].deadline.IsZero() && !now.Before(q.ring[q.head].deadline) {
		e := q.pop()
		expired++
		if q.onDiscard != nil {
			q.onDiscard(e.item)
		}
	}
	q.stats.Discarded += uint64(expired)
	return expired
}

func (q *Queue[T]) pop() queued[T] {
	e := q.ring[q.head]
	q.ring[q.head] = queued[T]{} // let go of the caller's buffer
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	return e
}

// NextDeadline is when the oldest SDU expires; false when none will.
func (q *Queue[T]) NextDeadline() (time.Time, bool) {
	if q.n == 0 || q.ring[q.head].deadline.IsZero() {
		return time.Time{}, false
	}
	return q.ring[q.head].deadline, true
}

// Len is the number of SDUs queued.
func (q *Queue[T]) Len() int { return q.n }

// Stats returns the counters.
func (q *Queue[T]) Stats() QueueStats { return q.stats }
