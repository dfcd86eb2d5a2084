package session

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"sync"

	"github.com/xdp5g/xdp5g/internal/platform/slotpool"
	"github.com/xdp5g/xdp5g/internal/upf/buffer"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// Origin is the interface a session was created through.
type Origin uint8

const (
	// OriginREST is also the origin of sessions saved before origins
	// were recorded.
	OriginREST Origin = iota
	OriginPFCP
)

var originNames = []string{OriginREST: "rest", OriginPFCP: "pfcp"}

func (o Origin) MarshalText() ([]byte, error) {
	if int(o) >= len(originNames) {
		return nil, fmt.Errorf("unknown session origin %d", o)
	}
	return []byte(originNames[o]), nil
}

func (o *Origin) UnmarshalText(b []byte) error {
	i := slices.Index(originNames, string(b))
	if i < 0 {
		return fmt.Errorf("unknown session origin %q", b)
	}
	*o = Origin(i)
	return nil
}

// state is what a restarted daemon needs to take over the REST API's
// sessions of the running data path: each session and the slots it
// occupies. The PFCP sessions have a state of their own (the n4state
// package), which gives them to Restore as Kept.
type state struct {
	Sessions []*installed `json:"sessions"`
}

// MarshalState encodes the REST API's sessions for Restore.
func (s *Store) MarshalState() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := state{Sessions: []*installed{}}
	for _, in := range s.sessions {
		if in.Origin != OriginPFCP {
			st.Sessions = append(st.Sessions, in)
		}
	}
	return json.Marshal(st)
}

// Kept is a PFCP session that a previous run installed, as its PFCP state
// kept it: its rules, and the slots they hold.
type Kept struct {
	Session Session
	Slots   Slots
}

// Slots returns where a session's rules are in the data path.
func (s *Store) Slots(seid uint64) (Slots, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.sessions[seid]
	if !ok {
		return Slots{}, false
	}
	return Slots{PDR: in.PDRSlots, QER: in.QERSlots, URR: in.URRSlots, SDF: in.SDFSlots, Buffer: in.BufferSlots}, true
}

func (k *Kept) installed() *installed {
	return &installed{Session: k.Session, PDRSlots: k.Slots.PDR, QERSlots: k.Slots.QER, URRSlots: k.Slots.URR,
		SDFSlots: k.Slots.SDF, BufferSlots: k.Slots.Buffer}
}

// Restored says what Restore did.
type Restored struct {
	// Sessions are the REST API's sessions, installed again; Kept the
	// PFCP sessions taken over in place, and Repaired (by UP SEID) those
	// of them that the data path had otherwise, installed again.
	Sessions, Kept int
	Repaired       []uint64
	// Dropped are PFCP sessions of a state file written by a version
	// that kept them there.
	Dropped int
	// StrayKeys are keys that no session owned, removed from the data
	// path: those of PFCP sessions not kept.
	StrayKeys int
	// BufferedLost are the downlink packets the buffers of kept sessions
	// held in the previous run's memory, lost with it.
	BufferedLost uint64
}

// SavedError is a restore's failure at the REST API's saved sessions, not
// at the PFCP sessions kept: a state file to mend, which a restore without
// the PFCP sessions would fail at as well.
type SavedError struct{ Err error }

func (e *SavedError) Error() string { return e.Err.Error() }
func (e *SavedError) Unwrap() error { return e.Err }

// Restore takes over the sessions a previous run left in the pinned maps:
// those of the REST API saved in data (nil for none), and the PFCP
// sessions kept. The store must be empty.
//
// A kept session whose keys point at the slots it kept, holding its rules,
// is taken over in place: nothing is written, its URRs keep counting. One
// that the data path has otherwise (a request the previous run applied but
// had not recorded in its state when it stopped) is installed again as it
// was kept, its URRs keeping their slots and counts. Keys no session owns
// are removed. The REST API's sessions are written into fresh slots and
// their keys switched atomically, URRs keeping their slots. Slots no
// session owns are given back once no key points at them.
func (s *Store) Restore(data []byte, kept []Kept) (Restored, error) {
	var st state
	if data != nil {
		if err := json.Unmarshal(data, &st); err != nil {
			return Restored{}, &SavedError{fmt.Errorf("reading saved sessions: %w", err)}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var res Restored
	if len(s.sessions) != 0 {
		return res, fmt.Errorf("restore into a store with %d sessions", len(s.sessions))
	}
	// Slots are freed only after the reuse delay, and no key may still
	// point at them: those of every session saved or kept, and those the
	// data path's keys reach, are held until the sessions are restored.
	used := s.newUsed()
	var rest []*installed
	for _, in := range st.Sessions {
		used.mark(in)
		if in.Origin == OriginPFCP {
			res.Dropped++
			continue
		}
		rest = append(rest, in)
	}
	s.sessions = make(map[uint64]*installed, len(kept)+len(rest))
	s.urrs = make(map[uint32]urrRef, len(kept))
	// In place first: that hands out no slot and changes no key.
	ins := make([]*installed, len(kept))
	for i := range kept {
		ins[i] = kept[i].installed()
		used.mark(ins[i])
	}
	checked := s.checkAll(ins)
	s.teids, s.ues = ownerMaps(checked)
	var repair []*installed
	taken := 0 // keys
	for i, found := range checked {
		if found.ok && s.takeOver(ins[i], found) {
			res.Kept++
			taken += len(found.keys)
		} else {
			repair = append(repair, ins[i])
		}
	}
	owned := map[dpKey]bool{}
	for _, in := range slices.Concat(rest, repair) {
		for _, k := range s.keysOf(&in.Session) {
			owned[k] = true
		}
	}
	// With the sessions taken over owning every key, no other is left.
	if inUse, _ := s.dp.PDRSets(); inUse != taken {
		stray, err := s.removeStrayKeys(owned, &used)
		if err != nil {
			return res, err
		}
		res.StrayKeys = stray
	}
	s.adopt(used)
	buffers := map[uint32]buffer.Owner{}
	for _, in := range ins { // taken over, or to repair
		for _, e := range in.BufferSlots { // not armed again: their packets are the data path's count
			buffers[e.Slot] = buffer.Owner{SEID: in.SEID, FAR: e.ID}
		}
	}
	if len(buffers) > 0 && s.buffers != nil {
		res.BufferedLost = s.buffers.Adopt(buffers)
	}
	for _, in := range rest {
		if err := s.install(in.Session, nil, in, Modification{}); err != nil {
			return res, &SavedError{fmt.Errorf("restoring session %d: %w", in.SEID, err)}
		}
		res.Sessions++
	}
	for _, in := range repair {
		if err := s.install(in.Session, nil, in, Modification{}); err != nil {
			return res, fmt.Errorf("installing PFCP session %d again: %w", in.SEID, err)
		}
		res.Repaired = append(res.Repaired, in.SEID)
	}
	s.releaseUnowned(used)
	s.nh.ReleasePrevious()
	return res, nil
}

// usedSlots are the slots held through a restore, by slot, of each pool
// in the order of Store.pools.
type usedSlots [5][]bool

// Indexes of usedSlots.
const (
	usedPDR = iota
	usedQER
	usedURR
	usedSDF
	usedBuffer
)

func (s *Store) newUsed() usedSlots {
	var u usedSlots
	for i, p := range s.pools() {
		u[i] = make([]bool, p.Size())
	}
	return u
}

func (s *Store) pools() [5]*slotpool.Pool {
	return [5]*slotpool.Pool{s.pdrSlots, s.qerSlots, s.urrSlots, s.sdfSlots, s.bufSlots}
}

// slotsOf are an installed session's slots, pool by pool.
func slotsOf(in *installed) [5]ruleSlots {
	return [5]ruleSlots{in.PDRSlots, in.QERSlots, in.URRSlots, in.SDFSlots, in.BufferSlots}
}

// mark notes the slots a saved or kept session names.
func (u *usedSlots) mark(in *installed) {
	for i, slots := range slotsOf(in) {
		for _, e := range slots {
			u.set(i, e.Slot)
		}
	}
}

// set notes a slot of a pool; one out of its range is no slot of it.
func (u *usedSlots) set(pool int, slot uint32) {
	if int(slot) < len(u[pool]) {
		u[pool][slot] = true
	}
}

// adopt hands the held slots to their pools.
func (s *Store) adopt(u usedSlots) {
	for i, p := range s.pools() {
		p.Adopt(u[i])
	}
}

// reach notes the slots a key's set reaches: its PDRs, and their QERs,
// URRs, SDF filters and buffers.
func (s *Store) reach(u *usedSlots, set upfxdp.PDRSet) {
	for _, slot := range set.Pdr[:min(int(set.Count), len(set.Pdr))] {
		p, err := s.dp.PDR(slot)
		if err != nil {
			continue
		}
		u.set(usedPDR, slot)
		for pool, slots := range [...][]uint32{usedQER: p.Qer[:], usedURR: p.Urr[:], usedSDF: {p.Sdf}, usedBuffer: {p.Far.Buffer}} {
			for _, slot := range slots {
				if slot != 0 { // none: their slot 0 stands for no rule
					u.set(pool, slot)
				}
			}
		}
	}
}

// inPlace is what checking a kept session against the data path found:
// whether it holds the session as kept, with the next hops taken for it
// and the PDRs whose next hop moved.
type inPlace struct {
	ok       bool
	keys     []dpKey
	sets     []upfxdp.PDRSet // what each key is to point at
	nexthops []netip.Addr
	moved    []movedNexthop
}

// checkAll checks the kept sessions against the data path (check), on
// every CPU, each taking a run of them in their order: the order the
// journal's reading put them in memory, which a million sessions' memory
// is read far faster in than in any other.
func (s *Store) checkAll(ins []*installed) []inPlace {
	found := make([]inPlace, len(ins))
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w * len(ins) / workers; i < (w+1)*len(ins)/workers; i++ {
				found[i] = s.check(ins[i])
			}
		})
	}
	wg.Wait()
	return found
}

// check says whether the data path holds a kept session's rules as kept:
// its PDRs' slots hold them, with the next hops the resolver gives their
// destinations again, and its keys point at them.
func (s *Store) check(in *installed) inPlace {
	if len(in.Neighbours) > 0 {
		return inPlace{}
	}
	found := inPlace{keys: s.keysOf(&in.Session)}
	for _, k := range found.keys {
		set, _, _ := s.pdrSet(in, k)
		if held, err := s.getKey(k); err != nil || held != set {
			return inPlace{}
		}
		found.sets = append(found.sets, set)
	}
	moved, ok := s.checkRules(in, func(dst netip.Addr, hint uint32) (uint32, error) {
		slot, err := s.nh.Adopt(dst, hint)
		if err == nil {
			found.nexthops = append(found.nexthops, dst)
		}
		return slot, err
	})
	if !ok {
		s.release(found.nexthops)
		return inPlace{}
	}
	found.ok, found.moved = true, moved
	return found
}

func (s *Store) release(nexthops []netip.Addr) {
	for _, dst := range nexthops {
		s.nh.Release(dst)
	}
}

// ownerMaps are the maps of the keys' owners, sized for the keys of the
// sessions found in place: growing them is a large part of a take-over.
func ownerMaps(found []inPlace) (map[upfxdp.FTEID]uint64, map[netip.Addr]uint64) {
	teids, ues := 0, 0
	for i := range found {
		for _, k := range found[i].keys {
			if k.ue.IsValid() {
				ues++
			} else {
				teids++
			}
		}
	}
	return make(map[upfxdp.FTEID]uint64, teids), make(map[netip.Addr]uint64, ues)
}

// takeOver makes a kept session that check found in place the store's,
// unless another took one of its keys. It writes nothing but the next
// hops that moved and URR limits that differ (those of a report the
// previous run had not recorded).
func (s *Store) takeOver(in *installed, found inPlace) bool {
	for _, k := range found.keys {
		if _, taken := s.owner(k); taken {
			s.release(found.nexthops)
			return false
		}
	}
	for _, m := range found.moved {
		_ = s.dp.SetPDRNexthop(m.pdr, m.nexthop) // cannot fail: read just now
	}
	for _, u := range in.URRs {
		slot := in.URRSlots.of(u.ID)
		if l, err := s.dp.URRLimits(slot); err == nil && l != u.Limits {
			_ = s.dp.SetURRLimits(slot, u.Limits) // cannot fail: read just now
		}
		s.urrs[slot] = urrRef{in.SEID, u.ID}
	}
	for _, k := range found.keys {
		s.setOwner(k, in.SEID)
	}
	s.sessions[in.SEID] = in
	return true
}

// checkRules says whether a kept session's PDR, SDF filter and URR slots
// hold its rules, taking a next hop for each FAR that has one (adopt,
// hinted with the slot its destination has in the PDRs). A next hop
// whose slot the resolver could not keep (one it had not written, say)
// has another: moved says which PDR slots are to point at which.
func (s *Store) checkRules(in *installed, adopt func(dst netip.Addr, hint uint32) (uint32, error)) (moved []movedNexthop, ok bool) {
	// The PDRs' slots, by index in in.PDRs, the Duplicating Parameters
	// they hold for a FAR that duplicates, and whether they were read:
	// those without a key have none.
	have, read := make([]upfxdp.PDR, len(in.PDRs)), make([]bool, len(in.PDRs))
	dupl := make([]upfxdp.Dupl, len(in.PDRs))
	far := make([]int, len(in.PDRs)) // the index of each PDR's FAR
	for i := range in.PDRs {
		p := &in.PDRs[i]
		if far[i] = slices.IndexFunc(in.FARs, func(f FAR) bool { return f.ID == p.FARID }); far[i] < 0 {
			return nil, false
		}
		if pk := p.keys(); pk.n == 0 {
			continue
		}
		slot, ok := in.PDRSlots.lookup(uint32(p.ID))
		if !ok {
			return nil, false
		}
		entry, err := s.dp.PDR(slot)
		if err != nil {
			return nil, false
		}
		if in.FARs[far[i]].Duplicating != nil {
			var held bool
			if dupl[i], held, err = s.dp.Dupl(slot); err != nil || !held {
				return nil, false
			}
		}
		have[i], read[i] = entry, true
	}
	fars, sources := make([]upfxdp.FAR, len(in.FARs)), s.tunnelSources(&in.Session)
	for i := range in.FARs {
		f := &in.FARs[i]
		var nh uint32
		if dst := f.nexthop(); dst.IsValid() {
			// The slot the destination had: the one the PDRs of its
			// FARs hold.
			var hint uint32
			for j := range in.PDRs {
				if g := &in.FARs[far[j]]; read[j] && g.nexthop() == dst {
					hint = have[j].Far.Nexthop
				}
			}
			var err error
			if nh, err = adopt(dst, hint); err != nil || s.putTunnel6(f, nh, sources[i]) != nil {
				return nil, false
			}
		}
		fars[i] = dataPathFAR(f, in.BufferSlots.of(f.ID), nh, sources[i])
	}
	dupls, ok := s.checkDupls(in, read, dupl, adopt)
	if !ok {
		return nil, false
	}
	for i := range in.PDRs {
		p := &in.PDRs[i]
		if pk := p.keys(); pk.n == 0 {
			continue
		}
		if in.FARs[far[i]].Duplicating != nil && dupl[i] != dupls[far[i]] {
			return nil, false
		}
		want := dataPathPDR(p, fars[far[i]], in.FARs[far[i]].DestinationInterface, in)
		if nh := want.Far.Nexthop; nh != have[i].Far.Nexthop {
			moved = append(moved, movedNexthop{in.PDRSlots.of(uint32(p.ID)), nh})
			want.Far.Nexthop = have[i].Far.Nexthop
		}
		if have[i] != want {
			return nil, false
		}
		if set, filtered := dataPathSDF(p); filtered {
			if have, err := s.dp.SDFSet(in.SDFSlots.of(uint32(p.ID))); err != nil || have != set {
				return nil, false
			}
		}
	}
	for _, u := range in.URRs {
		if in.URRSlots.of(u.ID) == 0 {
			return nil, false
		}
	}
	return moved, true
}

// checkDupls is the Duplicating Parameters of a kept session's FARs, by
// index in in.FARs, as their PDRs' slots are to hold them, taking their
// next hops (adopt, hinted with the slot the first of those PDRs holds:
// held, by index in in.PDRs, for those read).
// A next hop that moved is not written again in place: the session is
// not in place then.
func (s *Store) checkDupls(in *installed, read []bool, held []upfxdp.Dupl,
	adopt func(dst netip.Addr, hint uint32) (uint32, error)) ([]upfxdp.Dupl, bool) {
	dupls := make([]upfxdp.Dupl, len(in.FARs))
	for i := range in.FARs {
		d := in.FARs[i].Duplicating
		if d == nil {
			continue
		}
		dupls[i] = s.dataPathDupl(d)
		dst := d.nexthop()
		if !dst.IsValid() {
			continue
		}
		var have upfxdp.Dupl
		j := slices.IndexFunc(in.PDRs, func(p PDR) bool { return p.FARID == in.FARs[i].ID })
		inSlot := j >= 0 && read[j] // a PDR's slot holds the copies' next hop
		if inSlot {
			have = held[j]
		}
		nh, err := adopt(dst, have.Nexthop)
		if err != nil || (inSlot && nh != have.Nexthop) {
			return nil, false
		}
		dupls[i].Nexthop = nh
	}
	return dupls, true
}

// movedNexthop is a PDR slot whose FAR is to point at another next hop.
type movedNexthop struct{ pdr, nexthop uint32 }

// releaseUnowned gives back, after the reuse delay, the used slots that no
// session owns now.
func (s *Store) releaseUnowned(used usedSlots) {
	for _, in := range s.sessions {
		for i, slots := range slotsOf(in) {
			for _, e := range slots {
				if int(e.Slot) < len(used[i]) {
					used[i][e.Slot] = false
				}
			}
		}
	}
	for i, p := range s.pools() {
		for slot, held := range used[i] {
			if held {
				p.Release(uint32(slot))
			}
		}
	}
}

// removeStrayKeys deletes the keys that neither a session taken over nor
// one of owned has, noting the slots they reach as used, and returns how
// many there were.
func (s *Store) removeStrayKeys(owned map[dpKey]bool, used *usedSlots) (int, error) {
	var stray []dpKey
	s.dp.EachSet(func(fteid upfxdp.FTEID, ue netip.Addr, set upfxdp.PDRSet) {
		k := dpKey{fteid: fteid, ue: ue}
		if _, taken := s.owner(k); taken {
			return // its session's slots, which are used
		}
		s.reach(used, set)
		if !owned[k] {
			stray = append(stray, k)
		}
	})
	for _, k := range stray {
		if err := s.deleteKey(k); err != nil {
			return 0, err
		}
	}
	return len(stray), nil
}
