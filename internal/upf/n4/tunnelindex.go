package n4

import (
	"maps"
	"slices"
)

// tunnelIndex files sessions under the gNB tunnels their FARs send into,
// for the gNBs' Error Indications. A tunnel mostly has one session, kept in
// first (less memory than a set or a slice each); the others of a tunnel
// that several share (an SMF giving all its sessions one TEID of its own,
// say) are in a set, so that filing and removing one costs the same
// whatever their number.
type tunnelIndex struct {
	first map[gnbTunnel]uint64
	more  map[gnbTunnel]map[uint64]struct{}
}

func newTunnelIndex() tunnelIndex {
	return tunnelIndex{first: map[gnbTunnel]uint64{}, more: map[gnbTunnel]map[uint64]struct{}{}}
}

func (x tunnelIndex) add(t gnbTunnel, seid uint64) {
	if _, ok := x.first[t]; !ok {
		x.first[t] = seid
		return
	}
	if x.more[t] == nil {
		x.more[t] = map[uint64]struct{}{}
	}
	x.more[t][seid] = struct{}{}
}

func (x tunnelIndex) remove(t gnbTunnel, seid uint64) {
	more := x.more[t]
	if first, ok := x.first[t]; ok && first == seid {
		delete(x.first, t)
		for other := range more { // another takes its place
			x.first[t] = other
			delete(more, other)
			break
		}
	} else {
		delete(more, seid)
	}
	if more != nil && len(more) == 0 {
		delete(x.more, t)
	}
}

// sessions are those filed under t, by SEID.
func (x tunnelIndex) sessions(t gnbTunnel) []uint64 {
	first, ok := x.first[t]
	if !ok {
		return nil
	}
	seids := append([]uint64{first}, slices.Collect(maps.Keys(x.more[t]))...)
	slices.Sort(seids)
	return seids
}
