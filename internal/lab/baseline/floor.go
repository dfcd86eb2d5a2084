package baseline

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Floor is the memory floor of bpf/lab/floor.c: XDP_TX after a chain of
// dependent reads of cache lines over a table, the first line chosen by
// the frame's IPv4 destination. With a table as large as the UPF's and
// frames of many sessions, every read is a cache miss: the least a lookup
// of that many reads can cost on this machine.
type Floor struct {
	One     *ebpf.Program // one read
	Two     *ebpf.Program // two, the second anywhere in the table
	TwoNear *ebpf.Program // two, the second in the first's 4 KiB page: no second page walk
	// Two, then a count per line and CPU (as the UPF counts per PDR)
	// that nothing waits for.
	TwoCount      *ebpf.Program
	lines, counts *ebpf.Map
}

// LineSize is the size of a line of the floor's table: a cache line.
const LineSize = 64

// pageLines is how many lines a 4 KiB page holds.
const pageLines = 4096 / LineSize

// LoadFloor loads the floor's programs, or with twoOnly Two alone (the
// others nil), over a table of at least lines cache lines (whole pages of
// them), created with BPF_F_MMAPABLE if mmapable, as the UPF's lookup
// tables are.
func LoadFloor(lines uint32, mmapable, twoOnly bool) (*Floor, error) {
	if lines == 0 || lines > 1<<31 {
		return nil, fmt.Errorf("a floor of %d lines: want 1 to 2^31", lines)
	}
	lines = (lines + pageLines - 1) / pageLines * pageLines
	spec, err := loadFloor()
	if err != nil {
		return nil, err
	}
	var specs floorSpecs
	if err := spec.Assign(&specs); err != nil {
		return nil, err
	}
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, err
	}
	if uint64(lines)*uint64(cpus) > 1<<31 {
		return nil, fmt.Errorf("a floor of %d lines counts on %d CPUs: more than a map holds", lines, cpus)
	}
	specs.Lines.MaxEntries = lines
	specs.Counts.MaxEntries = lines * uint32(cpus)
	if mmapable {
		specs.Lines.Flags |= unix.BPF_F_MMAPABLE
	}
	if err := specs.LineCount.Set(lines); err != nil {
		return nil, err
	}
	var objs floorObjects
	var two struct { // what LoadAndAssign loads of the floor with twoOnly
		floorMaps
		XdpFloorTwo *ebpf.Program `ebpf:"xdp_floor_two"`
	}
	into := any(&objs)
	if twoOnly {
		into = &two
	}
	if err := spec.LoadAndAssign(into, nil); err != nil {
		return nil, fmt.Errorf("load the memory floor (%d lines): %w", lines, err)
	}
	if twoOnly {
		objs.floorMaps, objs.XdpFloorTwo = two.floorMaps, two.XdpFloorTwo
	}
	return &Floor{One: objs.XdpFloorOne, Two: objs.XdpFloorTwo, TwoNear: objs.XdpFloorTwoNear, TwoCount: objs.XdpFloorTwoCount,
		lines: objs.Lines, counts: objs.Counts}, nil
}

// Lines is how many lines the table holds.
func (f *Floor) Lines() uint32 { return f.lines.MaxEntries() }

func (f *Floor) Close() error {
	return errors.Join(f.One.Close(), f.Two.Close(), f.TwoNear.Close(), f.TwoCount.Close(), f.lines.Close(), f.counts.Close())
}
