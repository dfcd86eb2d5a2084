package bench

import (
	"context"
	"slices"
	"testing"
)

// Live traffic spread over sessions reaches every one of them, both ways:
// each active session's uplink and downlink PDR counts packets.
func TestLiveSpread(t *testing.T) {
	tb, b := testbedWithBaselines(t)
	const sessions, flows, rounds = 1000, 16, 2
	row, err := measureCost(context.Background(), tb, b, sessions, []int{flows}, rounds, false, 8192)
	if err != nil {
		t.Fatal(err)
	}
	live := row.live
	if live == nil || !slices.Equal(live.flows, []int{flows}) || !slices.Equal(live.first, []int{sessions - flows}) {
		t.Fatalf("live traffic with %d sessions over %d: %+v, want one spread from session %d", sessions, flows, live, sessions-flows)
	}
	if live.reached[0] != [2]int{flows, flows} {
		t.Errorf("sessions reached, uplink and downlink: %v, want %d each", live.reached[0], flows)
	}
	for set, r := range live.upf {
		for d := range r {
			if len(r[d].ns) != rounds || slices.Min(r[d].ns) <= 0 || len(r[d].rate) != rounds || slices.Min(r[d].rate) <= 0 {
				t.Errorf("traffic %d, direction %d: %+v, want %d rounds' run times and rates", set, d, r[d], rounds)
			}
		}
	}
}

// The sessions live traffic spreads over share the upper 16 bits of their
// TEIDs, the last such of those installed.
func TestSpreadStart(t *testing.T) {
	for _, tc := range []struct {
		n, k, first int
		ok          bool
	}{
		{1000, 16, 984, true},
		{1_000_000, 4096, 995_904, true},
		{1_000_000, 65536, 917_503, true}, // TEIDs 14·65536 on
		{100_000, 65536, 0, false},        // TEID 0 is no session's
		{65535, 65535, 0, true},
	} {
		first, ok := spreadStart(tc.n, tc.k)
		if ok != tc.ok || ok && first != tc.first {
			t.Errorf("%d of %d: %d, %v; want %d, %v", tc.k, tc.n, first, ok, tc.first, tc.ok)
			continue
		}
		if ok && (teid(first)>>16 != teid(first+tc.k-1)>>16 || first+tc.k > tc.n) {
			t.Errorf("%d of %d: sessions %d to %d", tc.k, tc.n, first, first+tc.k-1)
		}
	}
}
