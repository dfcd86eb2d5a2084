package nexthop

import (
	"errors"
	"net"
	"net/netip"
	"sort"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// dumpRetries bounds the retries of a dump the kernel interrupted because
// the table changed meanwhile.
const dumpRetries = 5

func retryDump[T any](dump func() ([]T, error)) ([]T, error) {
	var out []T
	var err error
	for range dumpRetries {
		out, err = dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return out, err
		}
	}
	return out, nil // inconsistent at worst; the events that follow fix it
}

func linkInfoOf(l netlink.Link) linkInfo {
	a := l.Attrs()
	info := linkInfo{
		name:  a.Name,
		mac:   append(net.HardwareAddr(nil), a.HardwareAddr...),
		ether: a.EncapType == "ether" && len(a.HardwareAddr) == 6,
		up:    a.Flags&net.FlagUp != 0 && a.RawFlags&unix.IFF_RUNNING != 0,
	}
	if v, ok := l.(*netlink.Vlan); ok {
		info.vlanID = v.VlanId
		info.parent = a.ParentIndex
		info.qinq = v.VlanProtocol == netlink.VLAN_PROTOCOL_8021AD
	}
	return info
}

// neighOf converts a netlink neighbour; ok is false for entries that are
// not IP neighbours (bridge FDB, proxy entries).
func neighOf(n *netlink.Neigh) (nbrKey, neighInfo, bool) {
	if n.Family != netlink.FAMILY_V4 && n.Family != netlink.FAMILY_V6 || n.Flags&netlink.NTF_PROXY != 0 {
		return nbrKey{}, neighInfo{}, false
	}
	ip := addrOf(n.IP)
	if !ip.IsValid() || n.LinkIndex <= 0 {
		return nbrKey{}, neighInfo{}, false
	}
	info := neighInfo{state: n.State}
	if len(n.HardwareAddr) == 6 {
		info.mac = append(net.HardwareAddr(nil), n.HardwareAddr...)
	}
	return nbrKey{ip, n.LinkIndex}, info, true
}

func (r *Resolver) loadLinks() error {
	links, err := retryDump(r.h.LinkList)
	if err != nil {
		return err
	}
	r.links = make(map[int]linkInfo, len(links))
	for _, l := range links {
		r.links[l.Attrs().Index] = linkInfoOf(l)
	}
	r.updateCore()
	return nil
}

func (r *Resolver) loadNeighs() error {
	neighs := map[nbrKey]neighInfo{}
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		list, err := retryDump(func() ([]netlink.Neigh, error) { return r.h.NeighList(0, family) })
		if err != nil {
			return err
		}
		for i := range list {
			if k, info, ok := neighOf(&list[i]); ok {
				neighs[k] = info
			}
		}
	}
	r.neighs = neighs
	return nil
}

// updateCore finds the ifindexes of the core interfaces; it reports whether
// they changed.
func (r *Resolver) updateCore() bool {
	var idx []int
	for i, l := range r.links {
		if r.core[l.name] {
			idx = append(idx, i)
		}
	}
	sort.Ints(idx)
	changed := len(idx) != len(r.coreIdx)
	for i := 0; !changed && i < len(idx); i++ {
		changed = idx[i] != r.coreIdx[i]
	}
	r.coreIdx = idx
	return changed
}

func (r *Resolver) isCore(ifindex int) bool {
	for _, i := range r.coreIdx {
		if i == ifindex {
			return true
		}
	}
	return false
}

// loadRoutes reads the main table (and the local table's own addresses) into
// the routes to mirror: per prefix, the lowest-metric route decides.
func (r *Resolver) loadRoutes() error {
	routes, err := retryDump(func() ([]netlink.Route, error) {
		return r.h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return err
	}
	type best struct {
		want nbrKey
		prio int
	}
	chosen := map[netip.Prefix]best{}
	var connected []connectedRoute
	for i := range routes {
		rt := &routes[i]
		p, ok := prefixOf(rt)
		if !ok {
			continue
		}
		switch {
		case rt.Table == unix.RT_TABLE_LOCAL && rt.Type == unix.RTN_LOCAL:
			// Our own addresses: the kernel delivers them, whatever
			// the main table says (it looks in the local table first).
			chosen[p] = best{prio: -1}
			continue
		case rt.Table != unix.RT_TABLE_MAIN:
			continue
		}
		want := r.mirror(rt, p, &connected)
		if b, ok := chosen[p]; ok && b.prio <= rt.Priority {
			continue
		}
		chosen[p] = best{want, rt.Priority}
	}
	r.kroutes = make(map[netip.Prefix]nbrKey, len(chosen))
	for p, b := range chosen {
		r.kroutes[p] = b.want
	}
	r.connected = connected
	return nil
}

// mirror says where the data path sends packets matching a main-table
// route: to a gateway's slot, or (zero nbrKey) to the kernel.
func (r *Resolver) mirror(rt *netlink.Route, p netip.Prefix, connected *[]connectedRoute) nbrKey {
	if rt.Type != unix.RTN_UNICAST || len(rt.MultiPath) > 0 || !r.isCore(rt.LinkIndex) {
		return nbrKey{}
	}
	if gw := addrOf(rt.Gw); gw.IsValid() {
		return nbrKey{gw, rt.LinkIndex}
	}
	if rt.Via == nil {
		*connected = append(*connected, connectedRoute{p, rt.LinkIndex})
	}
	return nbrKey{}
}

func prefixOf(rt *netlink.Route) (netip.Prefix, bool) {
	if rt.Dst == nil {
		switch rt.Family {
		case netlink.FAMILY_V4:
			return netip.PrefixFrom(netip.IPv4Unspecified(), 0), true
		case netlink.FAMILY_V6:
			return netip.PrefixFrom(netip.IPv6Unspecified(), 0), true
		}
		return netip.Prefix{}, false
	}
	a := addrOf(rt.Dst.IP)
	ones, bits := rt.Dst.Mask.Size()
	if !a.IsValid() || bits == 0 {
		return netip.Prefix{}, false
	}
	if bits == 128 && a.Is4() {
		ones -= 96
	}
	p, err := a.Prefix(ones)
	return p, err == nil
}

func hostPrefix(ip netip.Addr) netip.Prefix { return netip.PrefixFrom(ip, ip.BitLen()) }

// hostRoute says where a host route of its own should send packets for ip,
// a neighbour on a connected core subnet: ok is false when none is due.
func (r *Resolver) hostRoute(ip netip.Addr) (nbrKey, bool) {
	if ip.IsMulticast() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() {
		return nbrKey{}, false
	}
	_, static := r.statics[ip]
	for _, c := range r.connected {
		if !c.prefix.Contains(ip) {
			continue
		}
		k := nbrKey{ip, c.ifindex}
		if n, ok := r.neighs[k]; static || ok && n.state&usableStates != 0 && len(n.mac) == 6 {
			return k, true
		}
	}
	return nbrKey{}, false
}

// desiredRoutes is the kernel's routes plus a host route per neighbour.
func (r *Resolver) desiredRoutes() map[netip.Prefix]nbrKey {
	want := make(map[netip.Prefix]nbrKey, len(r.kroutes)+len(r.neighs))
	for p, k := range r.kroutes {
		want[p] = k
	}
	addHost := func(ip netip.Addr) {
		p := hostPrefix(ip)
		if _, ok := want[p]; ok {
			return
		}
		if k, ok := r.hostRoute(ip); ok {
			want[p] = k
		}
	}
	for k := range r.neighs {
		if r.isCore(k.ifindex) {
			addHost(k.ip)
		}
	}
	for ip := range r.statics {
		addHost(ip)
	}
	return want
}

// applyRoutes makes the route maps hold want.
func (r *Resolver) applyRoutes(want map[netip.Prefix]nbrKey) {
	var first error
	failed := 0
	for p, k := range want {
		if err := r.setRoute(p, k); err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	for p := range r.installed {
		if _, ok := want[p]; !ok {
			if err := r.deleteRoute(p); err != nil {
				failed++
				if first == nil {
					first = err
				}
			}
		}
	}
	if first != nil {
		r.log.Error("mirroring routes", "failed", failed, "err", first)
	}
}

// syncHostRoute adds or removes the host route of one neighbour.
func (r *Resolver) syncHostRoute(ip netip.Addr) {
	p := hostPrefix(ip)
	if _, ok := r.kroutes[p]; ok {
		return // a kernel route of the same prefix wins
	}
	var err error
	if k, ok := r.hostRoute(ip); ok {
		err = r.setRoute(p, k)
	} else if _, ok := r.installed[p]; ok {
		err = r.deleteRoute(p)
	}
	if err != nil {
		r.log.Error("mirroring a neighbour route", "prefix", p, "err", err)
	}
}

// setRoute points a prefix at a neighbour's slot (taking a reference) or at
// the kernel. Without a free slot the prefix goes to the kernel, and the
// next resync tries again.
func (r *Resolver) setRoute(p netip.Prefix, k nbrKey) error {
	old, had := r.installed[p]
	if had && old == k {
		return nil
	}
	slot := uint32(KernelSlot)
	if k.valid() {
		e, err := r.refNbr(k)
		if err != nil {
			r.log.Warn("routing to the kernel", "prefix", p, "err", err)
			k = nbrKey{}
			if had && !old.valid() {
				return nil
			}
		} else {
			slot = e.slot
		}
	}
	if err := r.dp.PutRoute(p, slot); err != nil {
		if k.valid() {
			r.unrefNbr(k)
		}
		return err
	}
	r.installed[p] = k
	if had && old.valid() {
		r.unrefNbr(old)
	}
	return nil
}

func (r *Resolver) deleteRoute(p netip.Prefix) error {
	if err := r.dp.DeleteRoute(p); err != nil {
		return err
	}
	old := r.installed[p]
	delete(r.installed, p)
	if old.valid() {
		r.unrefNbr(old)
	}
	return nil
}

func (r *Resolver) refNbr(k nbrKey) (*nbrEntry, error) {
	if e, ok := r.nbrs[k]; ok {
		e.refs++
		return e, nil
	}
	slot, err := r.pool.Alloc()
	if err != nil {
		return nil, err
	}
	e := &nbrEntry{slotState: slotState{slot: slot, key: k}, refs: 1}
	if err := r.write(&e.slotState, true); err != nil {
		r.pool.Release(slot)
		return nil, err
	}
	r.nbrs[k] = e
	return e, nil
}

func (r *Resolver) unrefNbr(k nbrKey) {
	e, ok := r.nbrs[k]
	if !ok {
		return
	}
	if e.refs--; e.refs > 0 {
		return
	}
	delete(r.nbrs, k)
	r.freeSlot(e.slot)
}

// resync reloads everything from the kernel and rewrites every slot.
func (r *Resolver) resync() error {
	if err := r.loadLinks(); err != nil {
		return err
	}
	if err := r.loadNeighs(); err != nil {
		return err
	}
	if err := r.recomputeRoutes(); err != nil {
		return err
	}
	r.refreshSlots(true)
	now := timeNow()
	for k, t := range r.poked {
		if now.Sub(t) > resyncInterval {
			delete(r.poked, k)
		}
	}
	return nil
}

// recomputeRoutes follows a change of the routing tables: the mirrored
// routes and the routes to the acquired destinations.
func (r *Resolver) recomputeRoutes() error {
	if err := r.loadRoutes(); err != nil {
		return err
	}
	for dst, e := range r.dsts {
		e.key = r.routeTo(dst)
	}
	r.applyRoutes(r.desiredRoutes())
	r.refreshSlots(false)
	return nil
}
