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

// resetBatch is how many slots a pool resets at once: it bounds the work
// one allocation does for the others.
const resetBatch = 32

type cooling struct {
	slot  uint32
	since time.Time
}

// slotPool hands out indexes of one array map, from first on. A pool with
// reset clears what the data path counted in a slot before handing it out
// again: after the reuse delay, when no packet can count in it any more,
// and in batches.
type slotPool struct {
	name  string
	size  uint32
	first uint32
	next  uint32 // slots from next on were never handed out by this pool
	// zeroed: the slots from next on hold zeros, as in a new map; else a
	// previous run may have used them.
	zeroed  bool
	free    []uint32 // reset, ready to hand out
	dirty   []uint32 // out of use, not reset yet
	cooling []cooling
	reset   func(slots []uint32) error
	now     func() time.Time
}

func newSlotPool(name string, first, size uint32, reset func([]uint32) error) *slotPool {
	return &slotPool{name: name, size: size, first: first, next: first, reset: reset, now: time.Now}
}

func (p *slotPool) alloc() (uint32, error) {
	now := p.now()
	for len(p.cooling) > 0 && now.Sub(p.cooling[0].since) >= slotReuseDelay {
		p.dirty = append(p.dirty, p.cooling[0].slot)
		p.cooling = p.cooling[1:]
	}
	if len(p.free) == 0 {
		if err := p.refill(); err != nil {
			return 0, err
		}
	}
	n := len(p.free)
	s := p.free[n-1]
	p.free = p.free[:n-1]
	return s, nil
}

// refill resets a batch of the dirty slots, or else of those never handed
// out unless they are zeroed, and frees them.
func (p *slotPool) refill() error {
	var batch []uint32
	switch {
	case len(p.dirty) > 0:
		batch = p.dirty[max(0, len(p.dirty)-resetBatch):]
	case p.next < p.size:
		for s := min(p.size, p.next+resetBatch); s > p.next; s-- { // the lowest is handed out first
			batch = append(batch, s-1)
		}
	default:
		return fmt.Errorf("the %s table is full (%d entries)", p.name, p.size)
	}
	if p.reset != nil && (len(p.dirty) > 0 || !p.zeroed) {
		if err := p.reset(batch); err != nil {
			return fmt.Errorf("resetting %s slots: %w", p.name, err)
		}
	}
	p.free = append(p.free, batch...)
	if len(p.dirty) > 0 {
		p.dirty = p.dirty[:len(p.dirty)-len(batch)]
	} else {
		p.next += uint32(len(batch))
	}
	return nil
}

func (p *slotPool) release(slot uint32) {
	p.cooling = append(p.cooling, cooling{slot, p.now()})
}

// releaseNow returns a slot of a failed install, which no packet can still
// be reading; it is reset all the same, should a key have pointed at it
// for a moment.
func (p *slotPool) releaseNow(slot uint32) {
	p.dirty = append(p.dirty, slot)
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
			p.dirty = append(p.dirty, s)
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
