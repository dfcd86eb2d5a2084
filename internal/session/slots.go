package session

import (
	"fmt"
	"time"
)

// slotReuseDelay keeps a freed slot out of use long enough for every packet
// that read the old key to be done with it.
const slotReuseDelay = time.Second

type cooling struct {
	slot  uint32
	since time.Time
}

// slotPool hands out indexes of one array map, from first on.
type slotPool struct {
	name    string
	size    uint32
	first   uint32
	next    uint32
	free    []uint32
	cooling []cooling
	now     func() time.Time
}

func newSlotPool(name string, first, size uint32) *slotPool {
	return &slotPool{name: name, size: size, first: first, next: first, now: time.Now}
}

func (p *slotPool) alloc() (uint32, error) {
	now := p.now()
	for len(p.cooling) > 0 && now.Sub(p.cooling[0].since) >= slotReuseDelay {
		p.free = append(p.free, p.cooling[0].slot)
		p.cooling = p.cooling[1:]
	}
	if n := len(p.free); n > 0 {
		s := p.free[n-1]
		p.free = p.free[:n-1]
		return s, nil
	}
	if p.next < p.size {
		p.next++
		return p.next - 1, nil
	}
	return 0, fmt.Errorf("the %s table is full (%d entries)", p.name, p.size)
}

func (p *slotPool) release(slot uint32) {
	p.cooling = append(p.cooling, cooling{slot, p.now()})
}

// releaseNow returns a slot no packet can have seen (a failed install).
func (p *slotPool) releaseNow(slot uint32) {
	p.free = append(p.free, slot)
}

// releaseAll releases the slots of a session's rules, now or after the
// reuse delay.
func releaseAll[K comparable](p *slotPool, slots map[K]uint32, now bool) {
	for _, slot := range slots {
		if now {
			p.releaseNow(slot)
		} else {
			p.release(slot)
		}
	}
}

// adopt marks slots a previous run left in use; call before any alloc.
func (p *slotPool) adopt(used map[uint32]bool) {
	for s := range used {
		if s >= p.next {
			p.next = s + 1
		}
	}
	for s := p.first; s < p.next; s++ {
		if !used[s] {
			p.free = append(p.free, s)
		}
	}
}
