package nexthop

import (
	"fmt"
	"time"
)

// slotPool hands out next-hop slots 1..capacity-1 (0 is KernelSlot). A
// freed slot waits out the quarantine before it is handed out again.
type slotPool struct {
	capacity uint32
	next     uint32 // lowest slot never handed out
	freed    []freedSlot
	held     map[uint32]bool // a previous run's slots: handed out only from freed
}

type freedSlot struct {
	slot uint32
	at   time.Time
}

// newSlotPool quarantines the slots a previous run left in use: its FARs
// still point at them until the sessions are restored into fresh slots.
func newSlotPool(capacity uint32, previous []uint32, now time.Time) slotPool {
	p := slotPool{capacity: capacity, next: KernelSlot + 1, held: map[uint32]bool{}}
	for _, s := range previous {
		p.held[s] = true
		p.freed = append(p.freed, freedSlot{s, now})
	}
	return p
}

// alloc prefers a never-used slot, so that a freed one (a previous run's
// above all, whose FARs may not be restored yet) waits as long as possible.
func (p *slotPool) alloc(now time.Time) (uint32, error) {
	for p.next < p.capacity && p.held[p.next] {
		p.next++
	}
	if p.next < p.capacity {
		s := p.next
		p.next++
		return s, nil
	}
	if len(p.freed) > 0 && now.Sub(p.freed[0].at) >= quarantine {
		s := p.freed[0].slot
		p.freed = p.freed[1:]
		return s, nil
	}
	if len(p.freed) > 0 {
		return 0, fmt.Errorf("nexthop: all %d next-hop slots are in use or were freed less than %v ago", p.capacity-1, quarantine)
	}
	return 0, fmt.Errorf("nexthop: all %d next-hop slots are in use", p.capacity-1)
}

func (p *slotPool) free(slot uint32, now time.Time) {
	p.freed = append(p.freed, freedSlot{slot, now})
}
