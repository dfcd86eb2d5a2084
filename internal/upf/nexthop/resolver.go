// Package nexthop resolves next hops in the control plane so that the XDP
// program finds a packet's Ethernet header in one map lookup instead of
// asking the kernel FIB for every packet.
//
// A Resolver owns the nexthops map and the uplink route tables (routes4,
// routes6) of a data path:
//
//   - Downlink: Acquire(gNB) returns a slot for a FAR. The slot holds the
//     output interface, the MAC addresses and the VLAN tag of the route the
//     kernel would take to the gNB, refreshed whenever the kernel's route,
//     neighbour or link tables change.
//   - Uplink: the kernel's main routing table is mirrored into the uplink
//     route tables (Datapath.PutRoute: an LPM trie and, for IPv4, its
//     DIR-24-8 flattening that the packet reads). A route through a gateway on a core interface points at the
//     gateway's slot; every other route (connected routes, routes through
//     other interfaces, blackholes, multipath) points at slot 0, which is
//     never valid, so the XDP program hands those packets to the kernel. A
//     neighbour on a connected core subnet gets a host route to its own slot.
//
// Slot 0 is reserved and always invalid, so a zeroed FAR never forwards.
package nexthop

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/platform/slotpool"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// KernelSlot is the slot of routes the kernel forwards: its next hop is
// never valid.
const KernelSlot = upfxdp.KernelSlot

// Tunables. A freed slot is not handed out again before the pool's reuse
// delay has passed, so a packet that read a slot number just before the
// free never gets another destination's MAC address.
const (
	resyncInterval = 30 * time.Second
	pokeInterval   = 200 * time.Millisecond // at most one resolution request per neighbour per interval
	routeDebounce  = 20 * time.Millisecond
)

// ErrClosed is returned by calls on a closed Resolver.
var ErrClosed = errors.New("nexthop: resolver closed")

// usableStates are the neighbour states whose link-layer address the data
// path may use.
const usableStates = netlink.NUD_REACHABLE | netlink.NUD_STALE | netlink.NUD_DELAY |
	netlink.NUD_PROBE | netlink.NUD_PERMANENT

// nbrKey is a neighbour as the kernel knows it: an address on the output
// interface of a route (a VLAN device, not its parent). The zero value
// means "no next hop": the slot stays invalid.
type nbrKey struct {
	ip      netip.Addr
	ifindex int
}

func (k nbrKey) valid() bool { return k.ip.IsValid() && k.ifindex > 0 }

// slotState is one allocated slot and what was last written to it.
type slotState struct {
	slot    uint32
	key     nbrKey
	nh      upfxdp.Nexthop
	written bool
}

// dstEntry is a destination handed out by Acquire.
type dstEntry struct {
	slotState
	refs int
}

// nbrEntry is a neighbour the mirrored routes point at; refs counts the
// routes.
type nbrEntry struct {
	slotState
	refs int
}

type linkInfo struct {
	name   string
	mac    net.HardwareAddr
	ether  bool
	up     bool // administratively up with carrier
	vlanID int  // 802.1Q VLAN device when > 0
	qinq   bool // 802.1ad VLAN device: not supported by the data path
	parent int
}

type neighInfo struct {
	state int
	mac   net.HardwareAddr
}

type connectedRoute struct {
	prefix  netip.Prefix
	ifindex int
}

// Resolver keeps the next-hop slots and uplink routes of a data path in step
// with a network namespace's routing, neighbour and link tables.
type Resolver struct {
	dp   *upfxdp.Datapath
	ns   netns.NsHandle // our own duplicate of the caller's handle
	h    *netlink.Handle
	core map[string]bool
	log  *slog.Logger

	mu     sync.Mutex
	closed bool
	pool   *slotpool.Pool

	dsts map[netip.Addr]*dstEntry
	nbrs map[nbrKey]*nbrEntry
	// previous are the slots a previous run left written that no FAR has
	// taken up again (Adopt) yet, by slot: ReleasePrevious quarantines them.
	previous []bool
	statics  map[netip.Addr]net.HardwareAddr

	links     map[int]linkInfo
	neighs    map[nbrKey]neighInfo
	coreIdx   []int // ifindexes of the core interfaces, ascending
	kroutes   map[netip.Prefix]nbrKey
	connected []connectedRoute

	installed map[netip.Prefix]nbrKey // what the route maps hold

	poked       map[nbrKey]time.Time
	pendingPoke map[nbrKey]bool

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// New starts resolving next hops for the interfaces of the network namespace
// ns (netns.None() for the caller's). coreIfaces name the N6 interfaces whose
// routes are mirrored for the uplink. New takes over the nexthops map, leaving
// a previous run's slots in place until their quarantine ends. The handle ns is duplicated; the caller may close its own.
func New(dp *upfxdp.Datapath, ns netns.NsHandle, coreIfaces []string) (*Resolver, error) {
	r := &Resolver{
		dp: dp, ns: netns.None(), core: map[string]bool{}, log: slog.Default().With("component", "nexthop"),
		dsts: map[netip.Addr]*dstEntry{}, nbrs: map[nbrKey]*nbrEntry{}, statics: map[netip.Addr]net.HardwareAddr{},
		links: map[int]linkInfo{}, neighs: map[nbrKey]neighInfo{}, kroutes: map[netip.Prefix]nbrKey{},
		installed: map[netip.Prefix]nbrKey{}, poked: map[nbrKey]time.Time{}, pendingPoke: map[nbrKey]bool{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	for _, name := range coreIfaces {
		r.core[name] = true
	}
	if ns.IsOpen() {
		fd, err := unix.FcntlInt(uintptr(ns), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("duplicating the namespace handle: %w", err)
		}
		r.ns = netns.NsHandle(fd)
	}
	ok := false
	defer func() {
		if !ok {
			r.release()
		}
	}()
	h, err := netlink.NewHandleAt(r.ns)
	if err != nil {
		return nil, fmt.Errorf("netlink handle: %w", err)
	}
	r.h = h
	// A previous run's slots keep serving its FARs until the sessions are
	// restored, in place (Adopt) or into fresh slots, so they are held
	// until ReleasePrevious, then quarantined, not cleared.
	previous := make([]bool, dp.NexthopCapacity())
	for slot := uint32(KernelSlot + 1); slot < dp.NexthopCapacity(); slot++ {
		nh, err := dp.Nexthop(slot)
		if err != nil {
			return nil, fmt.Errorf("reading next-hop slot %d: %w", slot, err)
		}
		if nh != (upfxdp.Nexthop{}) {
			previous[slot] = true
		}
	}
	// Slots never used go out first: a previous run's wait as long as
	// they can.
	r.pool = slotpool.New(slotpool.Config{Name: "next-hop", First: KernelSlot + 1, Size: dp.NexthopCapacity(), PreferNew: true})
	r.pool.Adopt(previous)
	r.previous = previous
	routes, err := dp.Routes()
	if err != nil {
		return nil, fmt.Errorf("reading the route maps: %w", err)
	}

	// Subscribe before dumping so no change falls between the two.
	s, err := r.subscribe()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	err = r.resync()
	for p := range routes {
		if _, keep := r.installed[p]; !keep && err == nil {
			err = dp.DeleteRoute(p)
		}
	}
	r.mu.Unlock()
	if err != nil {
		s.close()
		return nil, err
	}
	ok = true
	go r.run(s)
	return r, nil
}

// Close stops following the kernel. The maps keep their contents, so
// traffic keeps flowing with the last resolved next hops.
func (r *Resolver) Close() error {
	r.closeOnce.Do(func() {
		close(r.stop)
		<-r.done
		r.mu.Lock()
		r.closed = true
		r.release()
		r.mu.Unlock()
	})
	return nil
}

func (r *Resolver) release() {
	if r.h != nil {
		r.h.Close()
		r.h = nil
	}
	if r.ns.IsOpen() {
		r.ns.Close()
		r.ns = netns.None()
	}
}

// Acquire returns the next-hop slot for sending to dst, taking a reference:
// the same slot for the same dst until every reference is released. The
// slot is written at once; until the kernel knows dst's next hop (or when
// there is no route) it is invalid and the data path drops downlink packets
// to it, while the resolution the call started completes.
func (r *Resolver) Acquire(dst netip.Addr) (uint32, error) {
	dst = dst.Unmap()
	if !dst.IsValid() || dst.IsUnspecified() || dst.IsMulticast() {
		return 0, fmt.Errorf("nexthop: %v is not a unicast address", dst)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, ErrClosed
	}
	if e, ok := r.dsts[dst]; ok {
		e.refs++
		return e.slot, nil
	}
	slot, err := r.pool.Alloc()
	if err != nil {
		return 0, err
	}
	return r.newDst(dst, slot)
}

// newDst gives dst slot, writing it, with a first reference; under mu.
func (r *Resolver) newDst(dst netip.Addr, slot uint32) (uint32, error) {
	e := &dstEntry{slotState: slotState{slot: slot, key: r.routeTo(dst)}, refs: 1}
	if err := r.write(&e.slotState, true); err != nil {
		r.pool.Release(slot)
		return 0, fmt.Errorf("writing next-hop slot %d: %w", slot, err)
	}
	r.dsts[dst] = e
	return slot, nil
}

// Adopt is Acquire for a FAR that a previous run installed with slot: dst
// keeps that slot, if the previous run left it and dst has none yet, so
// that the FAR needs no rewriting. Otherwise it gets what Acquire gives.
func (r *Resolver) Adopt(dst netip.Addr, slot uint32) (uint32, error) {
	dst = dst.Unmap()
	r.mu.Lock()
	_, has := r.dsts[dst]
	if has || int(slot) >= len(r.previous) || !r.previous[slot] || r.closed {
		r.mu.Unlock()
		return r.Acquire(dst)
	}
	defer r.mu.Unlock()
	r.previous[slot] = false
	return r.newDst(dst, slot)
}

// ReleasePrevious quarantines the previous run's slots that no FAR took up
// again: no restored session uses them.
func (r *Resolver) ReleasePrevious() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for slot, held := range r.previous {
		if held {
			r.pool.Release(uint32(slot))
		}
	}
	r.previous = nil
}

// Release drops a reference taken by Acquire; the last one clears the slot
// and frees it (for reuse after a quarantine).
func (r *Resolver) Release(dst netip.Addr) {
	dst = dst.Unmap()
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.dsts[dst]
	if !ok || r.closed {
		return
	}
	if e.refs--; e.refs > 0 {
		return
	}
	delete(r.dsts, dst)
	r.freeSlot(e.slot)
}

// SetStatic makes ip resolve to mac whatever the kernel's neighbour table
// says (the REST document's arpTable). A static neighbour on a connected
// core subnet also gets a host route for the uplink.
func (r *Resolver) SetStatic(ip netip.Addr, mac net.HardwareAddr) {
	ip = ip.Unmap()
	if len(mac) != 6 {
		r.log.Warn("ignoring a static neighbour without an Ethernet address", "ip", ip, "mac", mac.String())
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.statics[ip] = append(net.HardwareAddr(nil), mac...)
	r.refreshSlots(false)
	r.syncHostRoute(ip)
}

// ClearStatic removes a static neighbour; the kernel's entry applies again.
func (r *Resolver) ClearStatic(ip netip.Addr) {
	ip = ip.Unmap()
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.statics[ip]; !ok || r.closed {
		return
	}
	delete(r.statics, ip)
	r.refreshSlots(false)
	r.syncHostRoute(ip)
}

// Slot describes one allocated next-hop slot.
type Slot struct {
	Slot uint32 `json:"slot"`
	// Dst is the destination given to Acquire, or for a route slot the
	// neighbour the routes point at.
	Dst netip.Addr `json:"dst"`
	// Route is true for a slot of the mirrored uplink routes.
	Route bool `json:"route"`
	Refs  int  `json:"refs"`
	// Neighbour is the address whose MAC address is used (Dst itself or a
	// gateway) and Interface the kernel's output interface; both are unset
	// when there is no route.
	Neighbour netip.Addr `json:"neighbour,omitzero"`
	Interface string     `json:"interface,omitempty"`
	// What the data path uses: Ifindex is the interface the frame leaves by
	// (a VLAN device's parent), VLAN the tag it carries (0: untagged).
	Ifindex uint32 `json:"ifindex"`
	VLAN    uint16 `json:"vlan,omitempty"`
	SrcMAC  string `json:"smac"`
	DstMAC  string `json:"dmac"`
	Valid   bool   `json:"valid"`
	Static  bool   `json:"static,omitempty"`
}

// Slots lists the allocated slots by slot number.
func (r *Resolver) Slots() []Slot {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Slot
	add := func(dst netip.Addr, route bool, refs int, s *slotState) {
		v := Slot{
			Slot: s.slot, Dst: dst, Route: route, Refs: refs, Neighbour: s.key.ip,
			Ifindex: s.nh.Ifindex, VLAN: vlanID(s.nh.VlanTci), Valid: s.nh.Valid != 0,
			SrcMAC: net.HardwareAddr(s.nh.Smac[:]).String(), DstMAC: net.HardwareAddr(s.nh.Dmac[:]).String(),
		}
		if l, ok := r.links[s.key.ifindex]; ok {
			v.Interface = l.name
		}
		_, v.Static = r.statics[s.key.ip]
		out = append(out, v)
	}
	for dst, e := range r.dsts {
		add(dst, false, e.refs, &e.slotState)
	}
	for k, e := range r.nbrs {
		add(k.ip, true, e.refs, &e.slotState)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slot < out[j].Slot })
	return out
}

// Routes returns the mirrored uplink routes and the slot each points at.
func (r *Resolver) Routes() map[netip.Prefix]uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[netip.Prefix]uint32, len(r.installed))
	for p, k := range r.installed {
		out[p] = r.slotOf(k)
	}
	return out
}

func (r *Resolver) slotOf(k nbrKey) uint32 {
	if e, ok := r.nbrs[k]; ok {
		return e.slot
	}
	return KernelSlot
}

// freeSlot clears a slot no key points at any more and quarantines it.
func (r *Resolver) freeSlot(slot uint32) {
	if err := r.dp.PutNexthop(slot, upfxdp.Nexthop{}); err != nil {
		r.log.Error("clearing a freed next-hop slot", "slot", slot, "err", err)
	}
	r.pool.Release(slot)
}

// write computes a slot's next hop and writes it when it changed (or always
// when force is set), requesting resolution when the kernel lacks it.
func (r *Resolver) write(s *slotState, force bool) error {
	nh, poke := r.compute(s.key)
	if poke {
		r.poke(s.key)
	}
	if !force && s.written && nh == s.nh {
		return nil
	}
	if err := r.dp.PutNexthop(s.slot, nh); err != nil {
		s.written = false
		return err
	}
	s.nh, s.written = nh, true
	return nil
}

// refreshSlots rewrites every slot whose next hop changed.
func (r *Resolver) refreshSlots(force bool) {
	var first error
	failed := 0
	note := func(err error) {
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	for _, e := range r.dsts {
		note(r.write(&e.slotState, force))
	}
	for _, e := range r.nbrs {
		note(r.write(&e.slotState, force))
	}
	if first != nil {
		r.log.Error("writing next-hop slots", "failed", failed, "err", first)
	}
}

// compute builds the next hop for a neighbour from the caches; poke says
// the kernel should be asked to (re)resolve the neighbour.
func (r *Resolver) compute(k nbrKey) (nh upfxdp.Nexthop, poke bool) {
	if !k.valid() {
		return nh, false
	}
	l, ok := r.links[k.ifindex]
	if !ok {
		return nh, false
	}
	nh.Ifindex = uint32(k.ifindex)
	up := l.up
	if l.vlanID > 0 {
		p, ok := r.links[l.parent]
		if !ok || p.vlanID > 0 || p.qinq || l.qinq {
			return nh, false // stacked or 802.1ad tags: the kernel forwards
		}
		nh.Ifindex = uint32(l.parent)
		nh.VlanTci = vlanTCI(l.vlanID)
		up = up && p.up
	}
	if !l.ether || l.qinq {
		return nh, false
	}
	copy(nh.Smac[:], l.mac)
	if !up {
		return nh, false
	}
	if mac, ok := r.statics[k.ip]; ok {
		copy(nh.Dmac[:], mac)
		nh.Valid = 1
		return nh, false
	}
	n, ok := r.neighs[k]
	if ok && n.state&usableStates != 0 && len(n.mac) == 6 {
		copy(nh.Dmac[:], n.mac)
		nh.Valid = 1
		// The data path's traffic never confirms a neighbour, so a stale
		// one is probed now rather than trusted until it is collected.
		return nh, n.state&netlink.NUD_STALE != 0
	}
	return nh, !ok || n.state&(netlink.NUD_INCOMPLETE|netlink.NUD_NOARP|netlink.NUD_PERMANENT) == 0
}

// poke asks the kernel to resolve a neighbour (as if it had a packet for
// it), at most once per pokeInterval; later requests are deferred.
func (r *Resolver) poke(k nbrKey) {
	now := timeNow()
	if t, ok := r.poked[k]; ok && now.Sub(t) < pokeInterval {
		if !r.pendingPoke[k] {
			r.pendingPoke[k] = true
			time.AfterFunc(t.Add(pokeInterval).Sub(now), func() {
				r.mu.Lock()
				defer r.mu.Unlock()
				if r.pendingPoke[k] && !r.closed {
					delete(r.pendingPoke, k)
					r.refreshSlots(false) // pokes k again if it still needs it
				}
			})
		}
		return
	}
	r.poked[k] = now
	family := netlink.FAMILY_V4
	if k.ip.Is6() {
		family = netlink.FAMILY_V6
	}
	// NTF_USE makes the kernel run neigh_event_send: it creates the entry
	// if needed and sends a solicitation (or a unicast probe for a stale
	// one) without changing an entry's address or state by itself.
	err := r.h.NeighSet(&netlink.Neigh{LinkIndex: k.ifindex, Family: family, IP: k.ip.AsSlice(), Flags: netlink.NTF_USE})
	if err != nil {
		r.log.Debug("requesting neighbour resolution", "ip", k.ip, "ifindex", k.ifindex, "err", err)
	}
}

// routeTo finds the neighbour the kernel would send dst to.
func (r *Resolver) routeTo(dst netip.Addr) nbrKey {
	rs, err := r.h.RouteGet(dst.AsSlice())
	if err != nil || len(rs) == 0 {
		return nbrKey{}
	}
	rt := rs[0]
	if rt.Type != unix.RTN_UNICAST || rt.LinkIndex <= 0 {
		return nbrKey{}
	}
	if gw := addrOf(rt.Gw); gw.IsValid() {
		return nbrKey{gw, rt.LinkIndex}
	}
	if rt.Via != nil {
		return nbrKey{} // a gateway of the other family: the kernel forwards
	}
	return nbrKey{dst, rt.LinkIndex}
}

// vlanTCI is the tag of a VLAN as the BPF program reads it (__be16): the
// value whose bytes in memory are the tag in network order.
func vlanTCI(id int) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], uint16(id&0x0fff))
	return binary.NativeEndian.Uint16(b[:])
}

func vlanID(tci uint16) uint16 {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], tci)
	return binary.BigEndian.Uint16(b[:]) & 0x0fff
}

func addrOf(ip net.IP) netip.Addr {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}
	}
	return a.Unmap()
}
