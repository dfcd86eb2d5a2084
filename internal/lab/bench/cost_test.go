package bench

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/demo/demotest"
	"github.com/xdp5g/xdp5g/internal/lab/baseline"
)

// The floor's table that a cost row reports is the one measured: the
// UPF's PDR table's size rounded up to whole pages of lines.
func TestCostFloorLines(t *testing.T) {
	tb, b := testbedWithBaselines(t)
	const sessions = 10
	row, err := measureCost(context.Background(), tb, b, sessions, []int{4}, 1, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	u, err := tb.OpenUPF(sessions)
	if err != nil {
		t.Fatal(err)
	}
	pdrs := u.Datapath.PDRCapacity()
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	const page = 4096 / baseline.LineSize
	if row.floorLines%page != 0 || row.floorLines < pdrs || row.floorLines >= pdrs+page {
		t.Errorf("the floor's table has %d lines; want the PDR table's %d in whole pages of %d", row.floorLines, pdrs, page)
	}
}

// testbedWithBaselines is the demo's testbed and the baselines set up for
// it, removed when the test ends.
func testbedWithBaselines(t *testing.T) (*demo.Testbed, *baselines) {
	tb := demotest.Testbed(t)
	b, err := loadBaselines(tb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return tb, b
}

// The test runs' schedule runs every subject once a round, each frame of
// a subject once in as many of its runs as it has frames, and draws what
// a rotation kept: the subject before each one, and the frames' order,
// which two subjects of the same frames do not share.
func TestSchedule(t *testing.T) {
	const frames, rounds = 64, 9
	subjects := make([]subject, 6)
	for i := range subjects {
		subjects[i].frames = make([][]byte, frames)
	}
	s := newSchedule(subjects, rounds)
	before := map[[2]int]bool{} // subject, the one run before it
	for range rounds {
		order := s.round()
		if got := slices.Sorted(slices.Values(order)); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5}) {
			t.Fatalf("a round runs %v", order)
		}
		for k := 1; k < len(order); k++ {
			before[[2]int{order[k], order[k-1]}] = true
		}
	}
	if len(before) <= len(subjects) {
		t.Errorf("each subject ran after %d others in %d rounds: the order is not drawn", len(before), rounds)
	}
	var walks [2][]int
	for i := range walks {
		taken := make([]int, frames)
		for range 2 * frames {
			f := s.frame(i)
			taken[f]++
			walks[i] = append(walks[i], f)
		}
		for f, n := range taken {
			if n != 2 {
				t.Fatalf("subject %d took frame %d %d times in %d runs, want 2", i, f, n, 2*frames)
			}
		}
	}
	if slices.Equal(walks[0], walks[1]) {
		t.Error("two subjects of the same frames take them in the same order")
	}
}

// TestUPFTargetLines checks that the report judges each UPF target
// docs/benchmarks.md names: the attached programs by bpf_stats and the
// spread at a million sessions against the two-read floor.
func TestUPFTargetLines(t *testing.T) {
	r := func(v float64) rounds { return rounds{v} }
	costs := []costRow{{sessions: 1_000_000, empty: r(40), tx: r(44), uplink: r(60), downlink: r(58),
		spread: []spreadCost{{flows: 65536, uplink: r(640), downlink: r(800), floor: floorCost{two: r(640)}}}}}
	live := []liveRow{{direction: "uplink", upf: liveResult{ns: r(46), rate: r(8), loss: r(0)}, baseline: liveResult{ns: r(24), rate: r(10), loss: r(0)}, tx: r(23)}}
	var out strings.Builder
	p := linesTo(&out)
	costTargets(p, costs)
	liveTargets(p, live)
	for _, want := range []string{
		"- uplink attached with 1 installed, by bpf_stats: 2.000× the XDP_TX baseline, 1.917× the redirect baseline (target ≤ 2× XDP_TX): met",
		"- uplink over 65536 of 1000000 installed, less the empty program: 1.000× the two-read floor (target ≤ 1.3×): met",
		"- downlink over 65536 of 1000000 installed, less the empty program: 1.267× the two-read floor (target ≤ 1.3×): met",
	} {
		if !strings.Contains(out.String(), want+"\n") {
			t.Errorf("no line %q in\n%s", want, out.String())
		}
	}
}
