package pfcp

import "github.com/wmnsk/go-pfcp/ie"

// go-pfcp asks whether an IE type is grouped for every IE it parses, sizes
// or encodes, each time under one global read lock: on two CPUs a tenth of
// the CPU time of establishments went to that lock's cache line. The same
// answers, taken once into a table, need no lock. (Grouped types added to
// go-pfcp later, with ie.AddGroupedIEType, would not be seen: we add none.)
func init() {
	var grouped [1 << 16 / 64]uint64
	for t := range 1 << 16 {
		if (&ie.IE{Type: uint16(t)}).IsGrouped() {
			grouped[t/64] |= 1 << (t % 64)
		}
	}
	ie.SetIsGroupedFun(func(t uint16) bool { return grouped[t/64]&(1<<(t%64)) != 0 })
}
