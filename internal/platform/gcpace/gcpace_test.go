package gcpace

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestLimit(t *testing.T) {
	for _, c := range []struct {
		live, overhead, ceiling uint64
		want                    int64
	}{
		{live: 970 << 20, overhead: 10 << 20, ceiling: 8 << 30, want: 3000<<20 + 10<<20},
		{live: 1 << 20, overhead: 1 << 20, ceiling: 8 << 30, want: floor},
		{live: 4 << 30, overhead: 0, ceiling: 8 << 30, want: 8 << 30},
	} {
		if got := Limit(c.live, c.overhead, c.ceiling); got != c.want {
			t.Errorf("Limit(%d, %d, %d) = %d, want %d", c.live, c.overhead, c.ceiling, got, c.want)
		}
	}
}

func gauge(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// waitFor polls cond for up to ten of Start's polls.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * poll); !cond(); time.Sleep(poll / 10) {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
	}
}

var kept [][]byte // the test's live heap

// Start turns GOGC off, moves the limit to three times the live heap after
// a collection, still collects when garbage reaches the limit, and gives
// back the settings it found.
func TestPace(t *testing.T) {
	oldPercent := debug.SetGCPercent(150)
	oldLimit := debug.SetMemoryLimit(1 << 40)
	defer func() { debug.SetGCPercent(oldPercent); debug.SetMemoryLimit(oldLimit) }()

	stop := Start(16 << 30)
	if p := debug.SetGCPercent(-1); p != -1 {
		t.Errorf("GOGC under Start: %d, want off", p)
	}

	for range 256 {
		kept = append(kept, make([]byte, 1<<20))
	}
	runtime.GC()
	live := gauge("/gc/heap/live:bytes")
	waitFor(t, "the limit did not follow the collection", func() bool {
		l := debug.SetMemoryLimit(-1)
		return l >= int64(3*live*100/97) && l < int64(3*live*100/97)+64<<20
	})

	// Past the limit by twice the live heap, a collection is due; the
	// counter counts cycles that ended, and on a loaded host the cycle
	// under way may end after the allocations.
	before := gauge("/gc/cycles/automatic:gc-cycles")
	for i := 0; i < 10*len(kept) && gauge("/gc/cycles/automatic:gc-cycles") == before; i++ {
		sink = make([]byte, 1<<20)
	}
	waitFor(t, "no collection ended after nine times the live heap was allocated past the limit", func() bool {
		return gauge("/gc/cycles/automatic:gc-cycles") != before
	})
	kept = nil

	stop()
	if p := debug.SetGCPercent(150); p != 150 {
		t.Errorf("GOGC after stop: %d, want 150", p)
	}
	if l := debug.SetMemoryLimit(-1); l != 1<<40 {
		t.Errorf("memory limit after stop: %d, want %d", l, int64(1<<40))
	}
}

var sink []byte
