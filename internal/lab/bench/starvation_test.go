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
		{loops: nil, want: slowed{}},
		{loops: []time.Duration{ms, ms, ms, slowOver * ms, slowOver*ms + 1}, want: slowed{loops: 5, slow: 1}},
		{loops: []time.Duration{ms, 2 * ms, 30 * ms}, want: slowed{loops: 3, slow: 1}},
	} {
		if got := countSlow(tc.loops); got != tc.want {
			t.Errorf("countSlow(%v) = %+v, want %+v", tc.loops, got, tc.want)
		}
	}
	if s := (slowed{loops: 8, slow: 2}).plus(slowed{loops: 2, slow: 0}); s != (slowed{loops: 10, slow: 2}) || s.share() != 20 {
		t.Errorf("pooled %+v, %.1f%%; want 10 loops, 2 slow, 20%%", s, s.share())
	}
}
