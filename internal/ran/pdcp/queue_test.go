package pdcp

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestQueue(t *testing.T) {
	t0 := time.Unix(50, 0)
	var discarded []string
	q, err := NewQueue(3, 20*ms, func(s string) { discarded = append(discarded, s) })
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range []string{"a", "bb", "ccc"} {
		if err := q.Push(s, len(s), t0.Add(time.Duration(i)*5*ms)); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Push("d", 1, t0); !errors.Is(err, ErrQueueFull) {
		t.Errorf("push into a full queue: %v", err)
	}
	if q.Len() != 3 || q.Bytes() != 6 {
		t.Errorf("Len %d Bytes %d, want 3 and 6", q.Len(), q.Bytes())
	}
	if d, ok := q.NextDeadline(); !ok || !d.Equal(t0.Add(20*ms)) {
		t.Errorf("NextDeadline %v %v", d, ok)
	}

	// The DU takes 1 octet: "a" fits, "bb" does not and stops the pull.
	got := q.Pull(nil, 1, t0.Add(ms))
	if !slices.Equal(got, []string{"a"}) {
		t.Errorf("pulled %q", got)
	}
	// "bb" expires at 25 ms (pushed at 5), "ccc" at 30.
	if n := q.Expire(t0.Add(24 * ms)); n != 0 {
		t.Errorf("expired %d before any deadline", n)
	}
	got = q.Pull(got[:0], 100, t0.Add(25*ms))
	if !slices.Equal(got, []string{"ccc"}) || !slices.Equal(discarded, []string{"bb"}) {
		t.Errorf("pulled %q, discarded %q", got, discarded)
	}
	if _, ok := q.NextDeadline(); ok || q.Len() != 0 || q.Bytes() != 0 {
		t.Errorf("empty queue: Len %d Bytes %d, a deadline %v", q.Len(), q.Bytes(), ok)
	}
	want := QueueStats{Queued: 3, Pulled: 2, Discarded: 1, Full: 1}
	if s := q.Stats(); s != want {
		t.Errorf("stats %+v, want %+v", s, want)
	}

	// The ring wraps: push and pull more than its size.
	for i := range 10 {
		if err := q.Push("x", 1, t0); err != nil {
			t.Fatalf("push %d: %v", i, err)
		}
		if got := q.Pull(nil, 1, t0); len(got) != 1 {
			t.Fatalf("pull %d: %q", i, got)
		}
	}
}

func TestQueueInfinity(t *testing.T) {
	q, err := NewQueue[int](2, Infinity, nil)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(0, 0)
	if err := q.Push(7, 1500, t0); err != nil {
		t.Fatal(err)
	}
	if n := q.Expire(t0.Add(1000 * time.Hour)); n != 0 {
		t.Errorf("an SDU without discard timer expired")
	}
	if _, ok := q.NextDeadline(); ok {
		t.Error("a deadline without discard timer")
	}
	if got := q.Pull(nil, 1500, t0.Add(time.Hour)); !slices.Equal(got, []int{7}) {
		t.Errorf("pulled %v", got)
	}

	for _, tc := range []struct {
		limit int
		timer time.Duration
	}{{limit: 0, timer: ms}, {limit: 1, timer: 0}, {limit: 1, timer: -ms}} {
		if _, err := NewQueue[int](tc.limit, tc.timer, nil); err == nil {
			t.Errorf("NewQueue(%d, %v) accepted", tc.limit, tc.timer)
		}
	}
}

func BenchmarkQueue(b *testing.B) {
	q, err := NewQueue[[]byte](1024, 100*ms, nil)
	if err != nil {
		b.Fatal(err)
	}
	sdu := make([]byte, 1400)
	batch := make([][]byte, 0, 32)
	now := time.Unix(0, 0)
	b.ReportAllocs()
	for b.Loop() {
		for range 32 {
			if err := q.Push(sdu, len(sdu), now); err != nil {
				b.Fatal(err)
			}
		}
		batch = q.Pull(batch[:0], 64*1400, now)
	}
}

// Bytes is the total size of the SDUs queued.
func (q *Queue[T]) Bytes() int {
	n := 0
	for i := range q.n {
		n += q.ring[(q.head+i)%len(q.ring)].size
	}
	return n
}
