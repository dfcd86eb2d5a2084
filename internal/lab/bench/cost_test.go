package bench

import (
	"context"
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
