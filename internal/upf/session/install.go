package session

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/xdp5g/xdp5g/internal/upf/buffer"
	"github.com/xdp5g/xdp5g/internal/upf/sdf"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// txn collects what an install took, so a failure can give it back.
type txn struct {
	s        *Store
	in       *installed
	keep     *installed   // whose URR slots and PDR counts the session keeps; nil: none
	old      *installed   // the session replaced, whose unchanged QERs stay in their slots; nil: none
	mod      Modification // its created PDRs and URRs keep nothing
	nexthops []netip.Addr
	statics  []Neighbour  // the entries before this install took a reference
	dupls    []uint32     // PDR slots given Duplicating Parameters
	sources  []netip.Addr // each FAR's TunnelSource, invalid for one without a tunnel
}

func (t *txn) undo() {
	for _, slot := range t.dupls {
		t.s.dp.DeleteDupl(slot)
	}
	releaseAll(t.s.pdrSlots, t.in.PDRSlots, true)
	for _, e := range t.in.QERSlots {
		if _, kept := t.keptQER(e.ID); !kept {
			t.s.qerSlots.ReleaseNow(e.Slot)
		}
	}
	for _, e := range t.in.URRSlots {
		if _, _, kept := t.keptURR(e.ID); !kept {
			t.s.urrSlots.ReleaseNow(e.Slot)
		}
	}
	releaseAll(t.s.sdfSlots, t.in.SDFSlots, true)
	for _, e := range t.in.BufferSlots {
		if t.keep == nil || t.keep.BufferSlots.of(e.ID) != e.Slot { // armed by this install
			t.s.buffers.Discard(e.Slot)
			t.s.bufSlots.ReleaseNow(e.Slot)
		}
	}
	for _, dst := range t.nexthops {
		t.s.nh.Release(dst)
	}
	for _, before := range t.statics {
		t.s.unrefStatic(before.IP)
		if st := t.s.statics[before.IP]; st != nil && !bytes.Equal(st.mac, before.MAC) {
			st.mac = before.MAC
			t.s.nh.SetStatic(before.IP, before.MAC)
		}
	}
}

// install writes sess into fresh slots, then points its keys at them; old,
// when replacing, is removed only once the new rules are live. URRs that
// keep has (the replaced session, or the one a previous run saved) stay in
// their slots with their counts, and PDRs it has carry theirs, but those m
// created anew. m.DropBuffered drops what the kept buffers hold.
func (s *Store) install(sess Session, old, keep *installed, m Modification) error {
	if err := Validate(&sess); err != nil {
		return err
	}
	if err := s.checkAddresses(&sess); err != nil {
		return err
	}
	sources := s.tunnelSources(&sess)
	for i, f := range sess.FARs {
		if f.Action == ActionBuffer && s.buffers == nil {
			return invalid(fmt.Sprintf("fars[%d].applyAction", i), "buffering is not available")
		}
		if o := f.OuterHeaderCreation; o != nil && !sources[i].IsValid() {
			return invalid(fmt.Sprintf("fars[%d].forwardingParameters.outerHeaderCreation", i),
				"no GTP-U address of the peer %v's family to send from", o.Peer)
		}
		// The copies' tunnels are IPv4 (validateDuplicating).
		if d := f.Duplicating; d != nil && d.OuterHeaderCreation != nil && !SideAddress(s.dp.N3Addresses(), nil, false, netip.Addr.Is4).IsValid() {
			return invalid(fmt.Sprintf("fars[%d].duplicatingParameters.outerHeaderCreation", i),
				"no IPv4 N3 address to send the copies' tunnel from")
		}
	}
	keys := s.keysOf(&sess)
	for _, k := range keys {
		if owner, ok := s.owner(k); ok && owner != sess.SEID {
			return &ConflictError{fmt.Sprintf("%s is used by session %d", k, owner)}
		}
	}
	if err := s.staticConflict(&sess, old); err != nil {
		return err
	}
	t := &txn{s: s, keep: keep, old: old, mod: m, sources: sources, in: &installed{Session: sess, PDRSlots: make(ruleSlots, 0, len(sess.PDRs))}}
	if err := t.writeRules(); err != nil {
		t.undo()
		return err
	}
	for i, k := range keys {
		set, fromCP, _ := s.pdrSet(t.in, k)
		if err := s.putKey(k, set, fromCP); err != nil {
			s.restoreKeys(keys[:i+1], old)
			t.undo()
			return fmt.Errorf("installing %s: %w", k, err)
		}
	}
	if old != nil {
		live := map[dpKey]bool{}
		for _, k := range keys {
			live[k] = true
		}
		for _, k := range s.keysOf(&old.Session) {
			if !live[k] {
				// Best effort: the key is unreachable once dropped
				// from the owners, and a later install overwrites it.
				s.deleteKey(k)
			}
		}
		s.forget(old, t.in)
	}
	// Written only now that nothing can fail, the new limits of kept URRs
	// need no restoring; unchanged ones are not written, which would re-arm
	// the events they sent.
	for _, u := range sess.URRs {
		if slot, limits, kept := t.keptURR(u.ID); kept && limits != u.Limits {
			_ = s.dp.SetURRLimits(slot, u.Limits) // cannot fail: the slot is in use
		}
	}
	for _, e := range t.in.URRSlots {
		s.urrs[e.Slot] = urrRef{sess.SEID, e.ID}
	}
	for _, k := range keys {
		s.setOwner(k, sess.SEID)
	}
	// A FAR that forwards again sends what it held first, unless dropped;
	// one that buffers again stops a release under way.
	if m.DropBuffered {
		s.dropHeld(t.in)
	}
	for _, f := range sess.FARs {
		if slot, ok := t.in.BufferSlots.lookup(f.ID); ok {
			if f.Action == ActionForward {
				s.buffers.Release(slot)
			} else {
				s.buffers.Hold(slot)
			}
		}
	}
	s.sessions[sess.SEID] = t.in
	s.changedOrigin(sess.Origin)
	return nil
}

// checkAddresses refuses a local F-TEID at an address that is none of the
// data path's GTP-U addresses.
func (s *Store) checkAddresses(sess *Session) error {
	for i := range sess.PDRs {
		if a := s.localAddress(sess.PDRs[i].PDI.LocalAddress); sess.PDRs[i].gtpu() && !slices.Contains(s.dp.N3Addresses(), a) && !slices.Contains(s.dp.N9Addresses(), a) {
			return invalid(fmt.Sprintf("pdrs[%d].pdi.localAddress", i), "%v is not an N3 or N9 address of this UPF", a)
		}
	}
	return nil
}

// TunnelSource is the outer source address of the tunnel of FAR f of
// sess, of its peer's family: towards an IPv4 peer, the address of the
// session's local F-TEID on the side the FAR sends to, where the peer
// sends the other way (the N9 one of an I-UPF's PDR from the core for a
// FAR towards the core; the N3 one of an uplink PDR, or the N9 one at a
// PSA, for a FAR towards access); without one, and towards an IPv6 peer
// always (a next hop's IPv6 tunnel has one source), the first address of the
// peer's family on that side: N9 towards the core or where the F-TEID is
// an N9 one, if the UPF has one of that family, else N3. Invalid when the
// UPF has no GTP-U address of that family.
func (s *Store) TunnelSource(sess *Session, f *FAR) netip.Addr {
	toCore := f.DestinationInterface == InterfaceCore
	v6 := f.OuterHeaderCreation != nil && f.OuterHeaderCreation.Peer.Is6()
	n9 := toCore
	for i := range sess.PDRs {
		if p := &sess.PDRs[i]; p.gtpu() && (p.PDI.SourceInterface == InterfaceCore) == toCore {
			a := s.localAddress(p.PDI.LocalAddress)
			if a.Is4() && !v6 {
				return a
			}
			n9 = slices.Contains(s.dp.N9Addresses(), a)
			break
		}
	}
	return SideAddress(s.dp.N3Addresses(), s.dp.N9Addresses(), n9, func(a netip.Addr) bool { return a.Is6() == v6 })
}

// tunnelSources are the TunnelSource of each FAR of sess with a tunnel,
// by index; invalid for the others.
func (s *Store) tunnelSources(sess *Session) []netip.Addr {
	sources := make([]netip.Addr, len(sess.FARs))
	for i := range sess.FARs {
		if sess.FARs[i].OuterHeaderCreation != nil {
			sources[i] = s.TunnelSource(sess, &sess.FARs[i])
		}
	}
	return sources
}

// SideAddress is the first address that fits of a side of the UPF: of the
// N9 addresses n9 when onN9 says so and one fits, else of the N3 ones n3;
// invalid when none fits.
func SideAddress(n3, n9 []netip.Addr, onN9 bool, fits func(netip.Addr) bool) netip.Addr {
	first := func(addrs []netip.Addr) netip.Addr {
		if i := slices.IndexFunc(addrs, fits); i >= 0 {
			return addrs[i]
		}
		return netip.Addr{}
	}
	if a := first(n9); onN9 && a.IsValid() {
		return a
	}
	return first(n3)
}

// restoreKeys puts keys back the way they were before a failed install.
func (s *Store) restoreKeys(keys []dpKey, old *installed) {
	for _, k := range keys {
		if set, fromCP, ok := s.pdrSet(old, k); ok {
			s.putKey(k, set, fromCP)
		} else {
			s.deleteKey(k)
		}
	}
}

// keptPDR is the slot PDR id had in t.keep, unless created anew. A slot
// past the table, which t.keep had in the maps of a larger data path
// (detached and pinned again for fewer sessions), is none to keep.
func (t *txn) keptPDR(id uint16) (uint32, bool) {
	if t.keep == nil || slices.Contains(t.mod.CreatedPDRs, id) {
		return 0, false
	}
	slot, ok := t.keep.PDRSlots.lookup(uint32(id))
	return slot, ok && slot < t.s.pdrSlots.Size()
}

// keptQER is the slot QER id keeps from the session replaced, which has
// it as it is: its URRs keep their slots, so moving the QER would part
// the pairs that share a usage line.
func (t *txn) keptQER(id uint32) (uint32, bool) {
	if t.old == nil {
		return 0, false
	}
	i := slices.IndexFunc(t.old.QERs, func(q QER) bool { return q.ID == id })
	j := slices.IndexFunc(t.in.QERs, func(q QER) bool { return q.ID == id })
	if i < 0 || j < 0 || t.old.QERs[i] != t.in.QERs[j] {
		return 0, false
	}
	return t.old.QERSlots.lookup(id)
}

// keptURR is the slot URR id keeps from t.keep and its limits there,
// unless created anew; a slot past the table is none to keep, as for
// keptPDR, and so is one another session's URR holds (a restore of two
// states that both name it).
func (t *txn) keptURR(id uint32) (slot uint32, limits upfxdp.URRLimits, ok bool) {
	if t.keep == nil || slices.Contains(t.mod.CreatedURRs, id) {
		return 0, limits, false
	}
	for _, u := range t.keep.URRs {
		if u.ID == id {
			limits = u.Limits
		}
	}
	slot, ok = t.keep.URRSlots.lookup(id)
	if owner, held := t.s.urrs[slot]; held && owner.seid != t.in.SEID {
		return slot, limits, false
	}
	return slot, limits, ok && slot < t.s.urrSlots.Size()
}

// keptBuffer is the buffer FAR id had in t.keep, if it still holds packets
// or is releasing them, unless the FAR is created anew.
func (t *txn) keptBuffer(id uint32) (uint32, bool) {
	if t.keep == nil || t.s.buffers == nil || slices.Contains(t.mod.CreatedFARs, id) {
		return 0, false
	}
	slot, ok := t.keep.BufferSlots.lookup(id)
	return slot, ok && t.s.buffers.Pending(slot)
}

// buffer is the buffer slot of a FAR, 0 for none: a buffering FAR keeps
// the buffer it has, or gets a fresh one; a forwarding one keeps it until
// what it held is out.
func (t *txn) buffer(f *FAR) (uint32, error) {
	s := t.s
	if f.Action == ActionDrop {
		return 0, nil
	}
	if slot, ok := t.keptBuffer(f.ID); ok {
		t.in.BufferSlots.set(f.ID, slot)
		return slot, nil
	}
	if f.Action != ActionBuffer {
		return 0, nil
	}
	slot, err := s.bufSlots.Alloc()
	if err != nil {
		return 0, err
	}
	t.in.BufferSlots.set(f.ID, slot)
	return slot, s.buffers.Arm(slot, buffer.Owner{SEID: t.in.SEID, FAR: f.ID})
}

// writeRules allocates and writes the QER, URR and PDR slots of t.in; a
// PDR's slot carries a copy of its FAR.
func (t *txn) writeRules() error {
	s, sess := t.s, &t.in.Session
	for _, n := range sess.Neighbours {
		t.statics = append(t.statics, Neighbour{n.IP, s.staticMAC(n.IP)})
		s.refStatic(n)
	}
	for _, q := range sess.QERs {
		if slot, kept := t.keptQER(q.ID); kept {
			t.in.QERSlots.set(q.ID, slot)
			continue
		}
		slot, err := t.qerSlot(q.ID)
		if err != nil {
			return err
		}
		t.in.QERSlots.set(q.ID, slot)
		if err := s.dp.PutQER(slot, dataPathQER(q)); err != nil {
			return err
		}
	}
	for _, u := range sess.URRs {
		if slot, _, kept := t.keptURR(u.ID); kept {
			t.in.URRSlots.set(u.ID, slot)
			continue
		}
		slot, err := t.urrSlot(u.ID)
		if err != nil {
			return err
		}
		t.in.URRSlots.set(u.ID, slot)
		if err := s.dp.ResetURR(slot, u.Limits); err != nil {
			return err
		}
	}
	fars := make([]upfxdp.FAR, len(sess.FARs))
	dupls := make([]upfxdp.Dupl, len(sess.FARs))
	for i := range sess.FARs {
		dupls[i] = s.dataPathDupl(sess.FARs[i].Duplicating)
		f := &sess.FARs[i]
		buf, err := t.buffer(f)
		if err != nil {
			return err
		}
		nh, err := t.acquire(f.nexthop())
		if err != nil {
			return err
		}
		if err := s.putTunnel6(f, nh, t.sources[i]); err != nil {
			return err
		}
		fars[i] = dataPathFAR(f, buf, nh, t.sources[i])
		if d := f.Duplicating; d != nil {
			if dupls[i].Nexthop, err = t.acquire(d.nexthop()); err != nil {
				return err
			}
		}
	}
	for i := range sess.PDRs {
		p := &sess.PDRs[i]
		if pk := p.keys(); pk.n == 0 {
			continue
		}
		slot, err := s.pdrSlots.Alloc()
		if err != nil {
			return err
		}
		t.in.PDRSlots.set(uint32(p.ID), slot)
		// The PDR counts on from what it counted in its slot before,
		// taken while no packet can count in the new slot yet.
		if from, ok := t.keptPDR(p.ID); ok {
			if err := s.dp.CarryPDRCounter(from, slot); err != nil {
				return err
			}
		}
		set, filtered := dataPathSDF(p)
		if filtered {
			sdfSlot, err := s.sdfSlots.Alloc()
			if err != nil {
				return err
			}
			t.in.SDFSlots.set(uint32(p.ID), sdfSlot)
			if err := s.dp.PutSDFSet(sdfSlot, set); err != nil {
				return err
			}
		}
		far := slices.IndexFunc(sess.FARs, func(f FAR) bool { return f.ID == p.FARID }) // validated
		if sess.FARs[far].Duplicating != nil {
			t.dupls = append(t.dupls, slot)
			if err := s.dp.PutDupl(slot, dupls[far]); err != nil {
				return err
			}
		}
		if err := s.dp.PutPDR(slot, dataPathPDR(p, fars[far], sess.FARs[far].DestinationInterface, t.in)); err != nil {
			return err
		}
	}
	return nil
}

// qerSlot is a fresh slot for QER id: where it can, one whose usage line
// the packets of the first PDR on an F-TEID that applies it first read
// beside their record, so that the line's miss overlaps the record's;
// else, in a data path with such slots, one out of their way.
func (t *txn) qerSlot(id uint32) (uint32, error) {
	if !t.s.dp.ReadsAhead() {
		return t.s.qerSlots.Alloc()
	}
	for _, p := range t.in.PDRs {
		if p.gtpu() && len(p.QERIDs) > 0 && p.QERIDs[0] == id {
			if slot, ok := t.s.dp.UplinkUsageSlot(t.s.canonical(p.keys().key[0]).fteid); ok {
				return t.s.qerSlots.AllocPreferred(slot)
			}
		}
	}
	return t.s.qerSlots.AllocHigh()
}

// urrSlot is a fresh slot for URR id: where it can, that of the first QER
// of the first PDR that applies both, so that a packet finds the QER's
// credit and the URR's counts in one usage line; else one out of the way
// of the QERs' next slots.
func (t *txn) urrSlot(id uint32) (uint32, error) {
	for _, p := range t.in.PDRs {
		if len(p.QERIDs) > 0 && slices.Contains(p.URRIDs, id) {
			return t.s.urrSlots.AllocPreferred(t.in.QERSlots.of(p.QERIDs[0]))
		}
	}
	return t.s.urrSlots.AllocHigh()
}

// acquire takes the next-hop slot of dst, given back by undo; 0 for none.
func (t *txn) acquire(dst netip.Addr) (uint32, error) {
	if !dst.IsValid() {
		return 0, nil
	}
	nh, err := t.s.nh.Acquire(dst)
	if err != nil {
		return 0, fmt.Errorf("next hop for %s: %w", dst, err)
	}
	t.nexthops = append(t.nexthops, dst)
	return nh, nil
}

// dataPathDupl is the Duplicating Parameters d as the slots of its FAR's
// PDRs have them, but for the next hop's slot; the zero Dupl for none.
func (s *Store) dataPathDupl(d *Forwarding) upfxdp.Dupl {
	if d == nil {
		return upfxdp.Dupl{}
	}
	dp := upfxdp.Dupl{Nexthop: upfxdp.NexthopRoute}
	if o := d.OuterHeaderCreation; o != nil {
		dp.Flags = upfxdp.FARGTPUv4
		dp.Teid = upfxdp.NetworkOrder32(o.TEID)
		dp.Peer = upfxdp.AddrKey(o.Peer)
		dp.Local = upfxdp.AddrKey(SideAddress(s.dp.N3Addresses(), nil, false, netip.Addr.Is4))
		dp.Tos = d.DSCP << 2
	}
	return dp
}

// dataPathFAR is a FAR as its PDRs' slots hold it: with the slot of its
// buffer (0: none), for one that sends to a next hop of its own the next
// hop's, and its tunnel's source address.
func dataPathFAR(f *FAR, buf, nexthop uint32, source netip.Addr) upfxdp.FAR {
	dp := upfxdp.FAR{Nexthop: upfxdp.NexthopRoute}
	if f.Action == ActionForward {
		dp.Action = upfxdp.FARForward
	}
	if buf != 0 {
		dp.Action, dp.Buffer = upfxdp.FARBuffer, buf
	}
	if f.nexthop().IsValid() {
		dp.Nexthop = nexthop
	}
	if o := f.OuterHeaderCreation; o != nil && f.Action == ActionForward {
		dp.Teid = upfxdp.NetworkOrder32(o.TEID)
		dp.Tos = f.DSCP << 2
		if o.Peer.Is4() {
			dp.Flags = upfxdp.FARGTPUv4
			dp.Peer = upfxdp.AddrKey(o.Peer)
			dp.Local = upfxdp.AddrKey(source)
		} else {
			dp.Flags = upfxdp.FARGTPUv6 // the endpoints are at the next hop's slot: putTunnel6
		}
		if f.DestinationInterface == InterfaceCPFunction {
			dp.Flags |= upfxdp.FARToCPFunction
		}
	}
	if f.Duplicating != nil {
		dp.Flags |= upfxdp.FARDuplicate
	}
	return dp
}

// putTunnel6 writes the endpoints of a forwarding FAR's tunnel to an IPv6
// peer, from source, at the slot of its next hop, the peer's own
// (upfxdp.FARGTPUv6):
// before the PDRs that carry the FAR. Rewriting them is harmless: they
// are the same while the slot is the peer's, a peer being on one side (N3
// or N9) of the UPF, whose first IPv6 address the tunnels leave from.
func (s *Store) putTunnel6(f *FAR, nexthop uint32, source netip.Addr) error {
	if o := f.OuterHeaderCreation; o != nil && f.Action == ActionForward && o.Peer.Is6() {
		return s.dp.PutTunnel6(nexthop, o.Peer, source)
	}
	return nil
}

// qerBurst is how long a QER's bucket lets a flow send at line rate. It
// bounds the excess over the maximum bit rate in any second (4%), and it is
// the longest pause in a sender (a descheduled thread, a batching NIC)
// whose tokens are not lost: ten ticks of the coarse clock the data path
// refills by.
const qerBurst = 40 * time.Millisecond

// minQERBurst lets at least two full-size packets through a slow QER.
const minQERBurst = 3000 // bytes

func dataPathQER(q QER) upfxdp.QER {
	var dq upfxdp.QER
	for _, c := range []struct {
		dir    int
		closed bool
		bps    uint64
	}{{upfxdp.QERUplink, q.GateULClosed, q.MBRUL}, {upfxdp.QERDownlink, q.GateDLClosed, q.MBRDL}} {
		if c.closed {
			dq.GateClosed |= 1 << c.dir
		}
		rate := c.bps / 8
		dq.Bucket[c.dir] = upfxdp.QERBucket(rate, max(rate*uint64(qerBurst)/uint64(time.Second), minQERBurst))
	}
	return dq
}

func dataPathPDR(p *PDR, far upfxdp.FAR, to Interface, in *installed) upfxdp.PDR {
	dp := upfxdp.PDR{Far: far, Id: p.ID, Qfi: p.PDI.QFI, Sdf: in.SDFSlots.of(uint32(p.ID))}
	// A QER named twice applies once, not twice the tokens a packet; the
	// data path stops at the first empty place, so the others close up.
	n := 0
	for i, id := range p.QERIDs {
		if !slices.Contains(p.QERIDs[:i], id) {
			dp.Qer[n] = in.QERSlots.of(id)
			n++
		}
	}
	for i, id := range p.URRIDs {
		dp.Urr[i] = in.URRSlots.of(id)
		if slices.ContainsFunc(in.URRs, func(u URR) bool { return u.ID == id && u.BeforeQoS }) {
			dp.Flags |= upfxdp.URRBeforeQoS << i
		}
	}
	if p.PDI.SourceInterface != InterfaceAccess {
		// Found by TEID, yet going to the UE: from the CP function, or
		// from the PSA over N9 at an I-UPF.
		if p.gtpu() {
			dp.Flags |= upfxdp.ToUE
		}
		for _, q := range in.QERs { // without its own, a downlink PDR marks its QERs' QFI
			if !slices.Contains(p.QERIDs, q.ID) {
				continue
			}
			if dp.Qfi == 0 {
				dp.Qfi = q.QFI
			}
			if q.RQI {
				dp.Flags |= upfxdp.MarkRQI
			}
		}
		if dp.Qfi != 0 {
			dp.Flags |= upfxdp.MarkQFI
		} else {
			dp.Flags &^= upfxdp.MarkRQI // the RQI travels in the container only
		}
		return dp
	}
	if p.PDI.QFI != 0 {
		dp.Flags |= upfxdp.MatchQFI
	}
	switch {
	// Indirect data forwarding, from the source gNB to the target one,
	// which maps the packets to its radio bearers by their QFI. A FAR that
	// drops goes nowhere, whatever its destination says (none given: 0,
	// access): the packets stay uplink for the QERs and URRs.
	case to == InterfaceAccess && far.Action != upfxdp.FARDrop:
		dp.Flags |= upfxdp.ToUE
		if dp.Qfi != 0 {
			dp.Flags |= upfxdp.MarkQFI
		}
	// Over N9 to the next UPF, in an UL PDU Session Container with the
	// PDR's QFI or, without, its QERs'.
	case to == InterfaceCore && far.Flags&(upfxdp.FARGTPUv4|upfxdp.FARGTPUv6) != 0:
		for _, q := range in.QERs {
			if dp.Qfi == 0 && slices.Contains(p.QERIDs, q.ID) {
				dp.Qfi = q.QFI
			}
		}
		if dp.Qfi != 0 {
			dp.Flags |= upfxdp.MarkQFI
		}
	}
	ue, flags := upfxdp.PDRUE(p.PDI.UEAddress, p.PDI.UEIPv6Prefix)
	dp.Ue, dp.Flags = ue, dp.Flags|flags
	return dp
}

// uplinkFamily is the IP family, upfxdp.SDFIPv4 or SDFIPv6, that every
// SDF filter of an uplink PDR is of, so that the packets of the other pass
// the PDR by; 0 for none, and for a PDR of another direction.
func uplinkFamily(p *PDR) uint8 {
	if p.PDI.SourceInterface != InterfaceAccess || len(p.PDI.SDFFilters) == 0 {
		return 0
	}
	set, _ := dataPathSDF(p)
	all := uint8(upfxdp.SDFIPv4 | upfxdp.SDFIPv6)
	for _, f := range set.Filter[:set.Count] {
		all &= f.Flags
	}
	if all == upfxdp.SDFIPv4 || all == upfxdp.SDFIPv6 {
		return all
	}
	return 0
}

// dataPathSDF is a PDR's SDF filters as its packets see them: turned
// around for an uplink PDR (TS 29.244 5.2.1A.2A), one data-path filter per
// pair of source and destination port ranges. "assigned" matches any
// address: the rest of the PDI (the UE address the packet was found by or
// matched against) holds the packet to the UE already. false when the
// filters let every packet through, as Open5GS's "permit out ip from any
// to assigned" does: the PDR is then better off without.
func dataPathSDF(p *PDR) (upfxdp.SDFSet, bool) {
	var set upfxdp.SDFSet
	for _, f := range p.PDI.SDFFilters {
		if p.PDI.SourceInterface == InterfaceAccess {
			f.Filter = f.Uplink()
		}
		for _, srcPorts := range portRanges(f.Src.Ports) {
			for _, dstPorts := range portRanges(f.Dst.Ports) {
				df := upfxdp.SDFFilter{Proto: f.Proto, SportLo: srcPorts.Lo, SportHi: srcPorts.Hi,
					DportLo: dstPorts.Lo, DportHi: dstPorts.Hi}
				var srcFamily, dstFamily uint8
				df.Src, df.SrcMask, srcFamily = upfxdp.SDFPrefix(address(f.Src))
				df.Dst, df.DstMask, dstFamily = upfxdp.SDFPrefix(address(f.Dst))
				df.Flags = srcFamily | dstFamily
				if len(f.Src.Ports)+len(f.Dst.Ports) > 0 {
					df.Flags |= upfxdp.SDFPorts
				}
				if df.Proto == 0 && df.Flags == 0 { // any protocol, address and port
					return upfxdp.SDFSet{}, false
				}
				set.Filter[set.Count] = df
				set.Count++
			}
		}
	}
	return set, set.Count > 0
}

// portRanges are the ports an endpoint matches: all when it names none.
func portRanges(ports []sdf.PortRange) []sdf.PortRange {
	if len(ports) == 0 {
		return []sdf.PortRange{{Lo: 0, Hi: 0xffff}}
	}
	return ports
}

// address is the prefix an endpoint matches, the zero Prefix for any.
func address(e sdf.Endpoint) netip.Prefix {
	if e.Assigned {
		return netip.Prefix{}
	}
	return e.Prefix
}

// pdrSet is the set of the PDR slots of an installed session (nil: none)
// found by key k, highest precedence first, and whether every one of its
// PDRs takes the CP function's packets (the SMF's own to the UE); ok is
// false when no PDR is.
func (s *Store) pdrSet(in *installed, k dpKey) (set upfxdp.PDRSet, fromCPFunction, ok bool) {
	if in == nil {
		return set, false, false
	}
	idx := make([]int, 0, upfxdp.PDRsPerKey)
	fromCPFunction = true
	for i := range in.PDRs {
		pk := in.PDRs[i].keys()
		if slices.ContainsFunc(pk.all(), func(key dpKey) bool { return s.canonical(key) == k }) {
			idx = append(idx, i)
			fromCPFunction = fromCPFunction && in.PDRs[i].PDI.SourceInterface == InterfaceCPFunction
		}
	}
	byPrecedence(in.PDRs, idx)
	for _, i := range idx {
		p := &in.PDRs[i]
		switch uplinkFamily(p) {
		case upfxdp.SDFIPv4:
			set.OnlyV4 |= 1 << set.Count
		case upfxdp.SDFIPv6:
			set.OnlyV6 |= 1 << set.Count
		}
		set.Pdr[set.Count] = in.PDRSlots.of(uint32(p.ID))
		set.Count++
	}
	return set, fromCPFunction && len(idx) > 0, len(idx) > 0
}

// forget gives back what an installed session owned, once no key points at
// it any more, but for the QER and URR slots that next, replacing it, keeps.
func (s *Store) forget(in, next *installed) {
	releaseAll(s.pdrSlots, in.PDRSlots, false)
	for _, e := range in.QERSlots {
		if next == nil || next.QERSlots.of(e.ID) != e.Slot {
			s.qerSlots.Release(e.Slot)
		}
	}
	for _, e := range in.URRSlots {
		if next == nil || next.URRSlots.of(e.ID) != e.Slot {
			s.urrSlots.Release(e.Slot)
			delete(s.urrs, e.Slot)
		}
	}
	releaseAll(s.sdfSlots, in.SDFSlots, false)
	for _, e := range in.BufferSlots {
		if next == nil || next.BufferSlots.of(e.ID) != e.Slot {
			s.buffers.Discard(e.Slot)
			s.bufSlots.Release(e.Slot)
		}
	}
	var duplicating []uint32 // the FARs that duplicate
	for i := range in.FARs {
		f := &in.FARs[i]
		if dst := f.nexthop(); dst.IsValid() {
			s.nh.Release(dst)
		}
		if f.Duplicating == nil {
			continue
		}
		duplicating = append(duplicating, f.ID)
		if dst := f.Duplicating.nexthop(); dst.IsValid() {
			s.nh.Release(dst)
		}
	}
	for _, p := range in.PDRs {
		if !slices.Contains(duplicating, p.FARID) {
			continue
		}
		if slot, ok := in.PDRSlots.lookup(uint32(p.ID)); ok {
			// Best effort, as the slot waits before its reuse: a packet
			// still holding it loses its copy.
			s.dp.DeleteDupl(slot)
		}
	}
	for _, n := range in.Neighbours {
		s.unrefStatic(n.IP)
	}
	for _, k := range s.keysOf(&in.Session) {
		if owner, ok := s.owner(k); ok && owner == in.SEID {
			s.dropOwner(k)
		}
	}
}

// static is a static neighbour and the number of sessions that list it.
type static struct {
	mac  net.HardwareAddr
	refs int
}

func (s *Store) staticMAC(ip netip.Addr) net.HardwareAddr {
	if st := s.statics[ip]; st != nil {
		return st.mac
	}
	return nil
}

// staticConflict names a neighbour of sess that another session lists with
// another MAC address; old, being replaced by sess, does not count.
func (s *Store) staticConflict(sess *Session, old *installed) error {
	for _, n := range sess.Neighbours {
		st := s.statics[n.IP]
		if st == nil || bytes.Equal(st.mac, n.MAC) {
			continue
		}
		if old == nil || st.refs > countNeighbour(old.Neighbours, n.IP) {
			return &ConflictError{fmt.Sprintf("neighbour %s has MAC address %s in another session", n.IP, st.mac)}
		}
	}
	return nil
}

func countNeighbour(ns []Neighbour, ip netip.Addr) (n int) {
	for _, x := range ns {
		if x.IP == ip {
			n++
		}
	}
	return n
}

func (s *Store) refStatic(n Neighbour) {
	st := s.statics[n.IP]
	if st == nil {
		st = &static{}
		s.statics[n.IP] = st
	}
	st.refs++
	if !bytes.Equal(st.mac, n.MAC) {
		st.mac = n.MAC
		s.nh.SetStatic(n.IP, n.MAC)
	}
}

func (s *Store) unrefStatic(ip netip.Addr) {
	if st := s.statics[ip]; st != nil {
		if st.refs--; st.refs <= 0 {
			delete(s.statics, ip)
			s.nh.ClearStatic(ip)
		}
	}
}
