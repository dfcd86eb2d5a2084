package bench

import (
	"testing"
	"time"
)

// A loop is slow when it takes over slowOver times the median loop.
func TestCountSlow(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		loops []time.Duration
		want  slowed
	}{
		{nil, slowed{}},
		{[]time.Duration{ms, ms, ms, slowOver * ms, slowOver*ms + 1}, slowed{5, 1}},
		{[]time.Duration{ms, 2 * ms, 30 * ms}, slowed{3, 1}},
	} {
		if got := countSlow(tc.loops); got != tc.want {
			t.Errorf("countSlow(%v) = %+v, want %+v", tc.loops, got, tc.want)
		}
	}
	if s := (slowed{8, 2}).plus(slowed{2, 0}); s != (slowed{10, 2}) || s.share() != 20 {
		t.Errorf("pooled %+v, %.1f%%; want 10 loops, 2 slow, 20%%", s, s.share())
	}
}
