package upfxdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Values of routes4_tbl24 (enum route_value): a slot below routeGroup,
// routeGroup|g for group g of routes4_tbl8, routeLPM when every group is
// taken.
const (
	routeGroup = uint16(upfRouteValueROUTE_GROUP)
	routeLPM   = uint16(upfRouteValueROUTE_LPM)
	groupSize  = 256 // addresses of a /24
)

// routeTables keeps the uplink route maps: the routes4 and routes6 tries,
// which hold every route, and their IPv4 flattening routes4_tbl24/routes4_tbl8 that
// the packet reads first. The IPv4 routes are mirrored here so that a change
// repaints only the addresses it covers.
type routeTables struct {
	mu     sync.Mutex
	by24   []byte // routes4_tbl24, mmapped: one native-endian u16 per /24
	by8    []byte // routes4_tbl8: groupSize u16 per group
	v4     map[netip.Prefix]uint32
	long   map[uint32][]netip.Prefix // /24 index to the routes longer than /24 inside it
	groups map[uint32]uint16         // /24 index to its group
	free   []uint16                  // free groups, least recently freed first
}

func (r *routeTables) open(m *upfMaps) (err error) {
	if r.by24, err = mmap(m.Routes4Tbl24); err != nil {
		return err
	}
	if r.by8, err = mmap(m.Routes4Tbl8); err != nil {
		return err
	}
	r.v4, r.long, r.groups = map[netip.Prefix]uint32{}, map[uint32][]netip.Prefix{}, map[uint32]uint16{}
	// A restarted daemon finds the tables painted: take the groups in use
	// from routes4_tbl24 and the routes from routes4.
	used := map[uint16]bool{}
	for block := range uint32(len(r.by24) / 2) {
		if v := r.load(r.by24, block); v >= routeGroup && v != routeLPM {
			r.groups[block] = v &^ routeGroup
			used[v&^routeGroup] = true
		}
	}
	for g := range uint16(len(r.by8) / 2 / groupSize) {
		if !used[g] {
			r.free = append(r.free, g)
		}
	}
	var k upfRoute4Key
	var slot uint32
	it := m.Routes4.Iterate()
	for it.Next(&k, &slot) {
		r.add(prefix4(k), slot)
	}
	return it.Err()
}

func (r *routeTables) close() error {
	var errs []error
	for _, b := range [][]byte{r.by24, r.by8} {
		if b != nil {
			errs = append(errs, unix.Munmap(b))
		}
	}
	return errors.Join(errs...)
}

func (r *routeTables) load(b []byte, i uint32) uint16 {
	return binary.NativeEndian.Uint16(b[2*i:])
}

// store is one aligned 16-bit write, so a packet reads either the old value
// or the new one, never half of each.
func (r *routeTables) store(b []byte, i uint32, v uint16) {
	*(*uint16)(unsafe.Pointer(&b[2*i])) = v
}

func (r *routeTables) add(p netip.Prefix, slot uint32) {
	if _, had := r.v4[p]; !had && p.Bits() > 24 {
		block := block24(p)
		r.long[block] = append(r.long[block], p)
	}
	r.v4[p] = slot
}

func (r *routeTables) remove(p netip.Prefix) {
	delete(r.v4, p)
	if p.Bits() > 24 {
		block := block24(p)
		r.long[block] = slices.DeleteFunc(r.long[block], func(q netip.Prefix) bool { return q == p })
		if len(r.long[block]) == 0 {
			delete(r.long, block)
		}
	}
}

// block24 is the index of the /24 holding p's first address.
func block24(p netip.Prefix) uint32 { return addr32(p.Addr()) >> 8 }

func addr32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

// span is the range of addresses a prefix covers, in units of 1<<shift.
func span(p netip.Prefix, shift int) (first, n uint32) {
	bits := max(32-shift-p.Bits(), 0)
	return addr32(p.Addr()) >> shift, 1 << bits
}

// paint fills out[i] for the units first..first+len(out)-1 (of 1<<shift
// addresses) with the slot of the longest route of routes covering it;
// routes must be sorted by length.
func paint(out []uint16, first uint32, shift int, routes []netip.Prefix, slots map[netip.Prefix]uint32) {
	end := first + uint32(len(out))
	for _, q := range routes {
		qFirst, n := span(q, shift)
		lo, hi := max(first, qFirst), min(end, qFirst+n)
		slot := uint16(slots[q])
		for i := lo; i < hi; i++ {
			out[i-first] = slot
		}
	}
}

// covering lists the routes of at most 24 bits that overlap p, shortest
// first: p's ancestors by lookup, its descendants (only a short p has any
// worth a scan) from the whole table.
func (r *routeTables) covering(p netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for bits := range min(p.Bits(), 24) + 1 {
		if q := netip.PrefixFrom(p.Addr(), bits).Masked(); r.has(q) {
			out = append(out, q)
		}
	}
	if p.Bits() < 24 {
		for q := range r.v4 {
			if q.Bits() > p.Bits() && q.Bits() <= 24 && p.Contains(q.Addr()) {
				out = append(out, q)
			}
		}
	}
	slices.SortFunc(out, byLength)
	return out
}

func (r *routeTables) has(p netip.Prefix) bool {
	_, ok := r.v4[p]
	return ok
}

func byLength(a, b netip.Prefix) int { return a.Bits() - b.Bits() }

// repaint rewrites the /24s that p covers from the mirrored routes.
func (r *routeTables) repaint(p netip.Prefix) {
	first, n := span(p, 8)
	values := make([]uint16, n)
	paint(values, first, 8, r.covering(p), r.v4)
	// The /24s holding longer routes, or a group from before, get theirs
	// resolved per address; a long scan only looks at those.
	inRange := func(block uint32) bool { return block-first < n }
	var special []uint32
	if int(n) > len(r.long)+len(r.groups) {
		for block := range r.long {
			if inRange(block) {
				special = append(special, block)
			}
		}
		for block := range r.groups {
			if _, long := r.long[block]; inRange(block) && !long {
				special = append(special, block)
			}
		}
	} else {
		for block := first; block < first+n; block++ {
			if _, long := r.long[block]; long || r.hasGroup(block) {
				special = append(special, block)
			}
		}
	}
	for _, block := range special {
		values[block-first] = r.resolveBlock(block, values[block-first])
	}
	for i, v := range values {
		r.store(r.by24, first+uint32(i), v)
	}
}

func (r *routeTables) hasGroup(block uint32) bool {
	_, ok := r.groups[block]
	return ok
}

// resolveBlock gives a /24 whose routes of at most 24 bits say slot its
// routes4_tbl24 value: a group when longer routes lie inside it.
func (r *routeTables) resolveBlock(block uint32, slot uint16) uint16 {
	long := r.long[block]
	g, grouped := r.groups[block]
	switch {
	case len(long) > 0 && !grouped && len(r.free) == 0:
		return routeLPM
	case len(long) > 0:
		if !grouped {
			g, r.free = r.free[0], r.free[1:]
			r.groups[block] = g
		}
		addrs := slices.Repeat([]uint16{slot}, groupSize)
		slices.SortFunc(long, byLength)
		paint(addrs, block<<8, 0, long, r.v4)
		// The group is complete before the /24 points at it.
		for i, a := range addrs {
			r.store(r.by8, uint32(g)*groupSize+uint32(i), a)
		}
		return routeGroup | g
	case grouped:
		// Freed groups go to the back of the queue, so a packet that read
		// the group number just before finds it unchanged.
		delete(r.groups, block)
		r.free = append(r.free, g)
	}
	return slot
}

// PutRoute and DeleteRoute mirror a route into the uplink route tables.
func (d *Datapath) PutRoute(p netip.Prefix, nexthop uint32) error {
	if nexthop >= uint32(routeGroup) {
		return fmt.Errorf("route %s: next-hop slot %d out of range", p, nexthop)
	}
	p = p.Masked()
	m, key := d.routeKey(p)
	d.routes.mu.Lock()
	defer d.routes.mu.Unlock()
	if err := m.Put(key, nexthop); err != nil {
		return err
	}
	if p.Addr().Is4() {
		d.routes.add(p, nexthop)
		d.routes.repaint(p)
	}
	return nil
}

func (d *Datapath) DeleteRoute(p netip.Prefix) error {
	p = p.Masked()
	m, key := d.routeKey(p)
	d.routes.mu.Lock()
	defer d.routes.mu.Unlock()
	if p.Addr().Is4() {
		if d.routes.has(p) {
			d.routes.remove(p)
			d.routes.repaint(p)
		}
	}
	return ignoreMissing(m.Delete(key))
}

func (d *Datapath) routeKey(p netip.Prefix) (*ebpf.Map, any) {
	if p.Addr().Is4() {
		return d.maps.Routes4, upfRoute4Key{Prefixlen: uint32(p.Bits()), Addr: AddrKey(p.Addr())}
	}
	return d.maps.Routes6, upfRoute6Key{Prefixlen: uint32(p.Bits()), Addr: p.Addr().As16()}
}

func prefix4(k upfRoute4Key) netip.Prefix {
	var b [4]byte
	nativeEndianPut32(b[:], k.Addr)
	return netip.PrefixFrom(netip.AddrFrom4(b), int(k.Prefixlen))
}

// Routes lists the uplink route tables: prefix to next-hop slot.
func (d *Datapath) Routes() (map[netip.Prefix]uint32, error) {
	out := map[netip.Prefix]uint32{}
	var k4 upfRoute4Key
	var slot uint32
	it := d.maps.Routes4.Iterate()
	for it.Next(&k4, &slot) {
		out[prefix4(k4)] = slot
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	var k6 upfRoute6Key
	it = d.maps.Routes6.Iterate()
	for it.Next(&k6, &slot) {
		out[netip.PrefixFrom(netip.AddrFrom16(k6.Addr), int(k6.Prefixlen))] = slot
	}
	return out, it.Err()
}

// LookupRoute is the uplink route lookup the XDP program does: the slot of
// the longest prefix containing dst, KernelSlot when none does.
func (d *Datapath) LookupRoute(dst netip.Addr) (uint32, error) {
	if dst.Is4() {
		if slot, ok := d.routes.lookup4(addr32(dst)); ok {
			return slot, nil
		}
	}
	m, key := d.routeKey(netip.PrefixFrom(dst, dst.BitLen()))
	var slot uint32
	return slot, ignoreMissing(m.Lookup(key, &slot))
}

// lookup4 reads the flattened tables as route4() in bpf/upf/upf.c does; false
// when the answer is in the trie.
func (r *routeTables) lookup4(host uint32) (uint32, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.load(r.by24, host>>8)
	if v >= routeGroup && v != routeLPM {
		v = r.load(r.by8, uint32(v&^routeGroup)*groupSize+host&0xff)
	}
	return uint32(v), v != routeLPM
}
