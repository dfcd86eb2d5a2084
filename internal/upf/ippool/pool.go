// Package ippool allocates UE addresses out of a prefix, as a UPF does when
// the SMF asks it to choose them (PFCP CHV4/CHV6 flags, TS 29.244 §5.21).
//
// An IPv4 pool hands out single addresses; an IPv6 pool hands out /64
// prefixes, the one a UE gets (TS 23.501 §5.8.2.2.3), each denoted by its
// first address. Never-used units go first; after that, the unit released
// longest ago, so that late packets of an old session are unlikely to reach
// a new UE.
package ippool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
)

// maxHostBits bounds a pool to 2^24 units, an IPv4 /8 or the /64s of an
// IPv6 /40, so that each of its bitmaps stays within 2 MiB.
const maxHostBits = 24

// ErrExhausted is returned by Allocate when no unit is free.
var ErrExhausted = errors.New("no free address")

// poolError is an error about the pool of prefix, as users read it in
// logs, PFCP causes and REST answers.
func poolError(prefix netip.Prefix, format string, args ...any) error {
	return fmt.Errorf("UE address pool %v: "+format, append([]any{prefix}, args...)...)
}

// Exhausted is the error of an allocation from the pool when it is full:
// ErrExhausted, naming the pool.
func (p *Pool) Exhausted() error { return poolError(p.prefix, "%w", ErrExhausted) }

// Pool allocates the units (IPv4 addresses or IPv6 /64 prefixes) of a
// prefix. It is safe for concurrent use.
type Pool struct {
	prefix   netip.Prefix
	first    uint64 // unit number of index 0
	units    uint32
	excluded map[uint32]bool

	mu        sync.Mutex
	taken     bitmap // allocated or excluded
	queued    bitmap // has an entry in released
	cursor    uint32 // indices from here on have never been handed out
	released  []uint32
	head      int // released[head:] await reuse, oldest first; taken ones are stale
	allocated int
}

// New returns a pool of the units of prefix, less exclude (gateway
// addresses, say). For IPv4 the network and broadcast addresses are left out
// too, except in a /31 or /32 (RFC 3021). An IPv6 prefix must be /64 or
// shorter.
func New(prefix netip.Prefix, exclude ...netip.Addr) (*Pool, error) {
	if !prefix.IsValid() {
		return nil, errors.New("a UE address pool needs a valid prefix")
	}
	prefix = prefix.Masked()
	p := &Pool{prefix: prefix, excluded: map[uint32]bool{}}
	hostBits, unit := 32-prefix.Bits(), "addresses"
	if prefix.Addr().Is6() {
		if prefix.Bits() > 64 {
			return nil, poolError(prefix, "an IPv6 pool hands out /64 prefixes, so it must be /64 or shorter")
		}
		hostBits, unit = 64-prefix.Bits(), "/64 prefixes"
	}
	if hostBits > maxHostBits {
		return nil, poolError(prefix, "holds 2^%d %s, more than the 2^%d a pool supports", hostBits, unit, maxHostBits)
	}
	p.first = unitOf(prefix.Addr())
	p.units = 1 << hostBits
	if prefix.Addr().Is4() && hostBits > 1 {
		p.first++
		p.units -= 2
	}
	p.taken = newBitmap(p.units)
	p.queued = newBitmap(p.units)
	for _, a := range exclude {
		i, err := p.index(a)
		if err != nil {
			return nil, err
		}
		p.excluded[i] = true
		p.taken.set(i)
	}
	return p, nil
}

// Prefix returns the prefix the pool hands out units of.
func (p *Pool) Prefix() netip.Prefix { return p.prefix }

// Size returns how many units the pool holds, excluded ones left out.
func (p *Pool) Size() int { return int(p.units) - len(p.excluded) }

// Allocated returns how many units are allocated.
func (p *Pool) Allocated() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.allocated
}

// Allocate takes a free unit and returns its first address.
func (p *Pool) Allocate() (netip.Addr, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.cursor < p.units {
		i := p.cursor
		p.cursor++
		if !p.taken.get(i) {
			return p.take(i), nil
		}
	}
	for p.head < len(p.released) {
		i := p.popReleased()
		if !p.taken.get(i) {
			return p.take(i), nil
		}
	}
	return netip.Addr{}, p.Exhausted()
}

// Reserve takes the unit holding addr, as if Allocate had handed it out:
// a restored session's.
func (p *Pool) Reserve(addr netip.Addr) error {
	i, err := p.index(addr)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.excluded[i]:
		return poolError(p.prefix, "%v is excluded", addr)
	case p.taken.get(i):
		return poolError(p.prefix, "%v is already allocated", addr)
	}
	// An entry in released becomes stale; Allocate skips it.
	p.take(i)
	return nil
}

// Release frees the unit holding addr.
func (p *Pool) Release(addr netip.Addr) error {
	i, err := p.index(addr)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.excluded[i] || !p.taken.get(i) {
		return poolError(p.prefix, "%v is not allocated", addr)
	}
	p.taken.clear(i)
	p.allocated--
	// Units past the cursor are found by it. A unit still queued from an
	// earlier release keeps its place rather than getting a second entry.
	if i < p.cursor && !p.queued.get(i) {
		p.queued.set(i)
		p.released = append(p.released, i)
	}
	return nil
}

func (p *Pool) take(i uint32) netip.Addr {
	p.taken.set(i)
	p.allocated++
	return p.addr(i)
}

// popReleased dequeues the oldest entry of released.
func (p *Pool) popReleased() uint32 {
	i := p.released[p.head]
	p.head++
	p.queued.clear(i)
	// Reclaim the consumed front once it is half the slice: each entry is
	// copied at most once per pop, so popping stays O(1) amortized.
	if p.head*2 >= len(p.released) {
		p.released = p.released[:copy(p.released, p.released[p.head:])]
		p.head = 0
	}
	return i
}

// index returns the index of the unit holding a.
func (p *Pool) index(a netip.Addr) (uint32, error) {
	if !p.prefix.Contains(a) {
		return 0, poolError(p.prefix, "%v is outside the pool", a)
	}
	i := unitOf(a) - p.first // wraps for the network address
	if i >= uint64(p.units) {
		return 0, poolError(p.prefix, "%v is the network or broadcast address", a)
	}
	return uint32(i), nil
}

func (p *Pool) addr(i uint32) netip.Addr {
	u := p.first + uint64(i)
	if p.prefix.Addr().Is4() {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(u))
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], u)
	return netip.AddrFrom16(b)
}

// unitOf numbers the unit holding a: an IPv4 address or an IPv6 /64.
func unitOf(a netip.Addr) uint64 {
	if a.Is4() {
		b := a.As4()
		return uint64(binary.BigEndian.Uint32(b[:]))
	}
	b := a.As16()
	return binary.BigEndian.Uint64(b[:8])
}

type bitmap []uint64

func newBitmap(n uint32) bitmap { return make(bitmap, (n+63)/64) }

func (b bitmap) get(i uint32) bool { return b[i/64]&(1<<(i%64)) != 0 }
func (b bitmap) set(i uint32)      { b[i/64] |= 1 << (i % 64) }
func (b bitmap) clear(i uint32)    { b[i/64] &^= 1 << (i % 64) }
