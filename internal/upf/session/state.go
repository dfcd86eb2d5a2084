package session

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"

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

// Restore takes over the sessions a previous run left in the pinned maps:
// those of the REST API saved in data (nil for none), and the PFCP
// sessions kept. The store must be empty.
//
// A kept session whose keys point at the slots it kept, holding its rules,
// is taken over in place: nothing is written, its URRs keep counting. One
// that the data path has otherwise (a request the previous run applied but
// had not recorded in its state when it stopped) is installed again as it
// was kept, its URRs keeping their slots and counts. Keys no session owns
// are removed first. The REST API's sessions are written into fresh slots
// and their keys switched atomically, URRs keeping their slots. Slots no
// session owns are given back once no key points at them.
func (s *Store) Restore(data []byte, kept []Kept) (Restored, error) {
	var st state
	if data != nil {
		if err := json.Unmarshal(data, &st); err != nil {
			return Restored{}, fmt.Errorf("reading saved sessions: %w", err)
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
	used := map[*slotpool.Pool]map[uint32]bool{s.pdrSlots: {}, s.qerSlots: {}, s.urrSlots: {}, s.sdfSlots: {}, s.bufSlots: {}}
	owned := map[dpKey]bool{}
	var rest []*installed
	for _, in := range st.Sessions {
		s.markUsed(used, in)
		if in.Origin == OriginPFCP {
			res.Dropped++
			continue
		}
		rest = append(rest, in)
		for _, k := range keysOf(&in.Session) {
			owned[k] = true
		}
	}
	keep := make([]*installed, len(kept))
	for i := range kept {
		keep[i] = kept[i].installed()
		s.markUsed(used, keep[i])
		for _, k := range keysOf(&keep[i].Session) {
			owned[k] = true
		}
	}
	s.markReached(used)
	stray, err := s.removeStrayKeys(owned)
	if err != nil {
		return res, err
	}
	res.StrayKeys = stray
	for pool, slots := range used {
		pool.Adopt(slots)
	}
	var repair []*installed
	buffers := map[uint32]buffer.Owner{}
	for _, in := range keep {
		if s.takeOver(in) {
			res.Kept++
		} else {
			repair = append(repair, in)
		}
		for _, e := range in.BufferSlots {
			buffers[e.Slot] = buffer.Owner{SEID: in.SEID, FAR: e.ID}
		}
	}
	if len(buffers) > 0 && s.buffers != nil {
		res.BufferedLost = s.buffers.Adopt(buffers)
	}
	for _, in := range rest {
		if err := s.install(in.Session, nil, in, false); err != nil {
			return res, fmt.Errorf("restoring session %d: %w", in.SEID, err)
		}
		res.Sessions++
	}
	for _, in := range repair {
		if err := s.install(in.Session, nil, in, false); err != nil {
			return res, fmt.Errorf("installing PFCP session %d again: %w", in.SEID, err)
		}
		res.Repaired = append(res.Repaired, in.SEID)
	}
	s.releaseUnowned(used)
	s.nh.ReleasePrevious()
	return res, nil
}

// markUsed notes the slots a saved or kept session names.
func (s *Store) markUsed(used map[*slotpool.Pool]map[uint32]bool, in *installed) {
	for pool, slots := range map[*slotpool.Pool]ruleSlots{s.pdrSlots: in.PDRSlots, s.qerSlots: in.QERSlots,
		s.urrSlots: in.URRSlots, s.sdfSlots: in.SDFSlots, s.bufSlots: in.BufferSlots} {
		for _, e := range slots {
			used[pool][e.Slot] = true
		}
	}
}

// markReached notes the slots the data path's keys reach: the PDRs of
// their sets, and the QERs, URRs, SDF filters and buffers of those.
func (s *Store) markReached(used map[*slotpool.Pool]map[uint32]bool) {
	var sets []upfxdp.PDRSet
	for _, teid := range s.dp.UplinkTEIDs() {
		if set, err := s.dp.Uplink(teid); err == nil {
			sets = append(sets, set)
		}
	}
	for _, ue := range s.dp.DownlinkUEs() {
		if set, err := s.dp.Downlink(ue); err == nil {
			sets = append(sets, set)
		}
	}
	for _, set := range sets {
		for _, slot := range set.Pdr[:min(int(set.Count), len(set.Pdr))] {
			p, err := s.dp.PDR(slot)
			if err != nil {
				continue
			}
			used[s.pdrSlots][slot] = true
			for pool, slots := range map[*slotpool.Pool][]uint32{s.qerSlots: p.Qer[:], s.urrSlots: p.Urr[:],
				s.sdfSlots: {p.Sdf}, s.bufSlots: {p.Far.Buffer}} {
				for _, slot := range slots {
					if slot != 0 { // none
						used[pool][slot] = true
					}
				}
			}
		}
	}
}

// takeOver makes a kept session the store's as the data path holds it,
// if it holds it as kept: its keys point at its PDRs' slots, which hold
// its rules with the next hops the resolver gives their destinations
// again. It writes nothing but URR limits that differ (those of a report
// the previous run had not recorded).
func (s *Store) takeOver(in *installed) bool {
	keys := keysOf(&in.Session)
	for _, k := range keys {
		want, _ := pdrSet(in, k)
		have, err := s.getKey(k)
		if err != nil || have != want {
			return false
		}
	}
	if len(in.Neighbours) > 0 {
		return false
	}
	var acquired []netip.Addr
	moved, ok := s.checkRules(in, func(dst netip.Addr, hint uint32) (uint32, error) {
		slot, err := s.nh.Adopt(dst, hint)
		if err == nil {
			acquired = append(acquired, dst)
		}
		return slot, err
	})
	if !ok {
		for _, dst := range acquired {
			s.nh.Release(dst)
		}
		return false
	}
	for pdr, nh := range moved {
		_ = s.dp.SetPDRNexthop(pdr, nh) // cannot fail: read just now
	}
	for _, u := range in.URRs {
		slot := in.URRSlots.of(u.ID)
		if l, err := s.dp.URRLimits(slot); err == nil && l != u.Limits {
			_ = s.dp.SetURRLimits(slot, u.Limits) // cannot fail: read just now
		}
		s.urrs[slot] = urrRef{in.SEID, u.ID}
	}
	for _, k := range keys {
		s.setOwner(k, in.SEID)
	}
	s.sessions[in.SEID] = in
	return true
}

// checkRules says whether a kept session's PDR, SDF filter and URR slots
// hold its rules, taking a next hop for each FAR that has one (adopt,
// hinted with the slot its destination has in the PDRs). A next hop
// whose slot the resolver could not keep (one it had not written, say)
// has another, and moved says which PDR slots are to point at which.
func (s *Store) checkRules(in *installed, adopt func(dst netip.Addr, hint uint32) (uint32, error)) (moved map[uint32]uint32, ok bool) {
	have := map[uint16]upfxdp.PDR{}
	for i := range in.PDRs {
		p := &in.PDRs[i]
		if _, ok := p.key(); !ok {
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
		have[p.ID] = entry
	}
	// The slot each destination had: the one the PDRs of its FARs hold.
	hints := map[netip.Addr]uint32{}
	for _, p := range in.PDRs {
		e, ok := have[p.ID]
		far := slices.IndexFunc(in.FARs, func(f FAR) bool { return f.ID == p.FARID })
		if ok && far >= 0 && in.FARs[far].nexthop().IsValid() {
			hints[in.FARs[far].nexthop()] = e.Far.Nexthop
		}
	}
	fars, moved := map[uint32]upfxdp.FAR{}, map[uint32]uint32{}
	for i := range in.FARs {
		f := &in.FARs[i]
		var nh uint32
		if dst := f.nexthop(); dst.IsValid() {
			var err error
			if nh, err = adopt(dst, hints[dst]); err != nil {
				return nil, false
			}
		}
		fars[f.ID] = s.dataPathFAR(f, in.BufferSlots.of(f.ID), nh)
	}
	for i := range in.PDRs {
		p := &in.PDRs[i]
		entry, ok := have[p.ID]
		if !ok {
			continue
		}
		far := slices.IndexFunc(in.FARs, func(f FAR) bool { return f.ID == p.FARID })
		if far < 0 {
			return nil, false
		}
		want := dataPathPDR(p, fars[p.FARID], in.FARs[far].DestinationInterface, in)
		if nh := want.Far.Nexthop; nh != entry.Far.Nexthop {
			moved[in.PDRSlots.of(uint32(p.ID))] = nh
			want.Far.Nexthop = entry.Far.Nexthop
		}
		if entry != want {
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

// getKey reads what a key points at.
func (s *Store) getKey(k dpKey) (upfxdp.PDRSet, error) {
	if k.ue.IsValid() {
		return s.dp.Downlink(k.ue)
	}
	return s.dp.Uplink(k.teid)
}

// releaseUnowned gives back, after the reuse delay, the used slots that no
// session owns now.
func (s *Store) releaseUnowned(used map[*slotpool.Pool]map[uint32]bool) {
	for _, in := range s.sessions {
		for pool, slots := range map[*slotpool.Pool]ruleSlots{s.pdrSlots: in.PDRSlots, s.qerSlots: in.QERSlots,
			s.urrSlots: in.URRSlots, s.sdfSlots: in.SDFSlots, s.bufSlots: in.BufferSlots} {
			for _, e := range slots {
				delete(used[pool], e.Slot)
			}
		}
	}
	for pool, slots := range used {
		for slot := range slots {
			pool.Release(slot)
		}
	}
}

// removeStrayKeys deletes the map keys that are not owned and returns how
// many there were.
func (s *Store) removeStrayKeys(owned map[dpKey]bool) (int, error) {
	n := 0
	for _, teid := range s.dp.UplinkTEIDs() {
		if !owned[teidKey(teid)] {
			if err := s.dp.DeleteUplink(teid); err != nil {
				return n, err
			}
			n++
		}
	}
	for _, ue := range s.dp.DownlinkUEs() {
		if !owned[dpKey{ue: ue}] {
			if err := s.dp.DeleteDownlink(ue); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}
