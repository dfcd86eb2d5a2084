package pfcp

import (
	"testing"
	"time"
)

// Each request answered counts once in the handling histogram, in the
// bucket of its time; a retransmission answered from the cache does not.
func TestHandlingTimes(t *testing.T) {
	s, _ := startServer(t, nil)
	m := newSMF(t, s.Addr())
	m.associate()
	m.exchange(sessionEstablishmentRequest(0x10))
	m.exchange(sessionEstablishmentRequest(0x10))
	handled := func() (n uint64) {
		for _, c := range s.Stats().Handling {
			n += c
		}
		return n
	}
	// Counted once the response is out, maybe after the SMF has it.
	for deadline := time.Now().Add(time.Second); handled() < 2 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := handled(); n != 2 {
		t.Fatalf("%d requests in the handling histogram, want 2: the association and one establishment", n)
	}
	if p := HandlingPercentile(s.Stats().Handling, 100); p <= 0 || p > time.Second {
		t.Errorf("slowest request handled within %v", p)
	}
}

// A time falls in the first bucket whose bound it does not exceed; the
// percentile of a histogram is its bucket's bound.
func TestHandlingBuckets(t *testing.T) {
	var c counters
	for _, d := range []time.Duration{0, HandlingBound(9), HandlingBound(9) + 1, time.Hour} {
		c.handled(d)
	}
	h := c.snapshot().Handling
	if h[0] != 1 || h[9] != 1 || h[10] != 1 || h[HandlingBuckets-1] != 1 {
		t.Fatalf("histogram %v: want one in buckets 0, 9, 10 and the last", h)
	}
	for i, want := range map[int]time.Duration{39: 10 * time.Microsecond, 119: time.Millisecond, 199: 100 * time.Millisecond} {
		if b := HandlingBound(i); b != want {
			t.Errorf("bound of bucket %d %v, want %v", i, b, want)
		}
	}
	if p := HandlingPercentile(h, 50); p != HandlingBound(9) {
		t.Errorf("median %v, want %v", p, HandlingBound(9))
	}
	if p := HandlingPercentile(h, 75); p != HandlingBound(10) {
		t.Errorf("75th percentile %v, want %v", p, HandlingBound(10))
	}
}
