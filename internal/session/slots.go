package session

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"
)

// slotReuseDelay keeps a freed slot out of use long enough for every packet
// that read the old key to be done with it.
const slotReuseDelay = time.Second

type cooling struct {
	slot  uint32
	since time.Time
}

// slotPool hands out indexes of one array map, from first on. What the data
// path counted in a slot needs no clearing before it is handed out again:
// a PDR's counters count for the generation of its slot
// (datapath.PutPDR), the other rules are written whole.
type slotPool struct {
	name    string
	size    uint32
	first   uint32
	next    uint32   // slots from next on were never handed out by this pool
	free    []uint32 // ready to hand out again
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

// release gives a slot back after the reuse delay.
func (p *slotPool) release(slot uint32) {
	p.cooling = append(p.cooling, cooling{slot, p.now()})
}

// releaseNow gives back a slot of a failed install, which no packet can
// still be reading.
func (p *slotPool) releaseNow(slot uint32) {
	p.free = append(p.free, slot)
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

// ruleSlots are the data-path slots of a session's rules of one kind, by
// rule ID: a session's few rules take less memory than in a map. JSON
// has them as an object by ID, as it had the maps they replace.
type ruleSlots []ruleSlot

type ruleSlot struct{ id, slot uint32 }

// lookup is the slot of rule id.
func (r ruleSlots) lookup(id uint32) (uint32, bool) {
	for _, e := range r {
		if e.id == id {
			return e.slot, true
		}
	}
	return 0, false
}

// of is the slot of rule id, 0 when it has none.
func (r ruleSlots) of(id uint32) uint32 {
	slot, _ := r.lookup(id)
	return slot
}

// set gives rule id, which has no slot yet, its slot.
func (r *ruleSlots) set(id, slot uint32) { *r = append(*r, ruleSlot{id, slot}) }

func (r ruleSlots) MarshalJSON() ([]byte, error) {
	byID := make(map[uint32]uint32, len(r))
	for _, e := range r {
		byID[e.id] = e.slot
	}
	return json.Marshal(byID)
}

func (r *ruleSlots) UnmarshalJSON(b []byte) error {
	var byID map[uint32]uint32
	if err := json.Unmarshal(b, &byID); err != nil {
		return err
	}
	*r = nil
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		r.set(id, byID[id])
	}
	return nil
}

// releaseAll releases the slots of a session's rules, now or after the
// reuse delay.
func releaseAll(p *slotPool, slots ruleSlots, now bool) {
	for _, e := range slots {
		if now {
			p.releaseNow(e.slot)
		} else {
			p.release(e.slot)
		}
	}
}
