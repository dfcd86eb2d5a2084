// Package slotpool hands out the slots of a BPF array map: a slot given
// back waits out a reuse delay before it is handed out again, so that no
// packet that read the old key meets the slot's next owner.
package slotpool

import (
	"fmt"
	"slices"
	"time"
)

// ReuseDelay keeps a released slot out of use long enough for every packet
// that read the old key to be done with it.
const ReuseDelay = time.Second

// resetBatch is how many slots a pool resets at once: it bounds the work
// one allocation does for the others.
const resetBatch = 32

// Config describes a pool.
type Config struct {
	// Name is the table's in errors: "the PDR table is full".
	Name string
	// First and Size bound the slots handed out: First to Size-1 (slots
	// below First stand for none).
	First, Size uint32
	// Reset, if set, clears what the data path left in slots before they
	// are handed out again, in batches.
	Reset func(slots []uint32) error
	// Zeroed: the slots never handed out hold zeros, as in a new map, and
	// need no Reset; else a previous run may have used them.
	Zeroed bool
	// PreferNew hands out slots never used before any given back, so that
	// those (a previous run's above all) wait as long as possible.
	PreferNew bool
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Pool hands out slots; it is not safe for concurrent use.
type Pool struct {
	cfg   Config
	next  uint32 // slots from next to top were never handed out,
	top   uint32
	held  []bool // but for these, by slot: a previous run's, or handed out ahead of next (AllocPreferred)
	inUse int
	free  []uint32 // ready to hand out
	dirty []uint32 // out of use and past the delay, not reset yet: of a slot's entries the last, if past says so;
	past  []bool   // by slot
	stale int      // the other entries, whose slots AllocPreferred took
	cool  ring     // released, in the order of their release
}

// New returns a pool in which no slot is in use.
func New(cfg Config) *Pool {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Pool{cfg: cfg, next: cfg.First, top: cfg.Size}
}

// Alloc hands out a slot, reset if the pool resets slots.
func (p *Pool) Alloc() (uint32, error) {
	if err := p.ready(); err != nil {
		return 0, err
	}
	return p.take(len(p.free) - 1), nil
}

// AllocPreferred hands out slot if it is out of use and past its delay or
// was never handed out; else, as AllocHigh, one out of the way of those
// Alloc hands out next. Two pools whose slots go together (a QER's and a
// URR's share a usage line) keep their numbers paired so.
func (p *Pool) AllocPreferred(slot uint32) (uint32, error) {
	if err := p.ready(); err != nil {
		return 0, err
	}
	if i := slices.Index(p.free, slot); i >= 0 {
		return p.take(i), nil
	}
	if int(slot) < len(p.past) && p.past[slot] {
		if err := p.resetAlone(slot, true); err != nil {
			return 0, err
		}
		p.past[slot] = false
		p.stale++
		if p.stale > resetBatch && p.stale > len(p.dirty)/2 {
			p.compact()
		}
		p.inUse++
		return slot, nil
	}
	if p.unusedSlot(slot) {
		if err := p.resetAlone(slot, false); err != nil {
			return 0, err
		}
		if len(p.held) < int(p.cfg.Size) {
			p.held = append(p.held, make([]bool, int(p.cfg.Size)-len(p.held))...)
		}
		p.held[slot] = true
		p.inUse++
		return slot, nil
	}
	return p.AllocHigh()
}

// AllocHigh hands out the highest slot never handed out, the last Alloc
// would reach, so that a slot with no pair in another pool keeps out of
// the way of those that have one; when none is left, a slot as Alloc.
func (p *Pool) AllocHigh() (uint32, error) {
	if err := p.ready(); err != nil {
		return 0, err
	}
	for s := p.top; s > p.next; s-- {
		if !p.unusedSlot(s - 1) {
			continue
		}
		if err := p.resetAlone(s-1, false); err != nil {
			return 0, err
		}
		p.top = s - 1
		p.inUse++
		return s - 1, nil
	}
	return p.take(len(p.free) - 1), nil
}

// ready moves the slots past the delay out of its queue, and frees a
// batch when none is free.
func (p *Pool) ready() error {
	now := p.cfg.Now()
	for p.cool.n > 0 && now.Sub(p.cool.front().since) >= ReuseDelay {
		p.addDirty(p.cool.pop().slot)
	}
	if len(p.free) == 0 {
		return p.refill()
	}
	return nil
}

// take hands out free slot i.
func (p *Pool) take(i int) uint32 {
	s := p.free[i]
	p.free = slices.Delete(p.free, i, i+1)
	p.inUse++
	return s
}

// unusedSlot says whether slot was never handed out.
func (p *Pool) unusedSlot(slot uint32) bool {
	return slot >= p.next && slot < p.top && (int(slot) >= len(p.held) || !p.held[slot])
}

// resetAlone resets a slot before it goes out alone: one used before, or
// one never handed out, which a previous run may have used.
func (p *Pool) resetAlone(slot uint32, used bool) error {
	if p.cfg.Reset == nil || (!used && p.cfg.Zeroed) {
		return nil
	}
	if err := p.cfg.Reset([]uint32{slot}); err != nil {
		return fmt.Errorf("resetting %s slots: %w", p.cfg.Name, err)
	}
	return nil
}

// refill frees a batch of slots never handed out or of those past the
// delay, resetting them unless they are zeroed.
func (p *Pool) refill() error {
	var batch []uint32
	next := p.next
	if p.cfg.PreferNew || len(p.dirty) == p.stale {
		next, batch = p.unused()
	}
	fresh := len(batch) > 0
	if !fresh {
		batch = p.dirtyBatch()
	}
	switch {
	case len(batch) > 0:
	case p.cool.n > 0:
		return fmt.Errorf("the %s table is full (%d entries, %d of them released less than %v ago)",
			p.cfg.Name, p.cfg.Size-p.cfg.First, p.cool.n, ReuseDelay)
	default:
		return fmt.Errorf("the %s table is full (%d entries)", p.cfg.Name, p.cfg.Size-p.cfg.First)
	}
	if p.cfg.Reset != nil && (!fresh || !p.cfg.Zeroed) {
		if err := p.cfg.Reset(batch); err != nil {
			if !fresh {
				for _, s := range slices.Backward(batch) {
					p.addDirty(s)
				}
			}
			return fmt.Errorf("resetting %s slots: %w", p.cfg.Name, err)
		}
	}
	p.free = append(p.free, batch...)
	if fresh {
		p.next = next
	}
	return nil
}

// addDirty notes a slot out of use and past its delay.
func (p *Pool) addDirty(slot uint32) {
	if len(p.past) == 0 {
		p.past = make([]bool, p.cfg.Size)
	}
	p.dirty = append(p.dirty, slot)
	p.past[slot] = true
}

// dirtyBatch takes a batch of slots out of dirty, the last entries first,
// which are a slot's last, and drops the stale ones it meets.
func (p *Pool) dirtyBatch() []uint32 {
	var batch []uint32
	for len(p.dirty) > 0 && len(batch) < resetBatch {
		s := p.dirty[len(p.dirty)-1]
		p.dirty = p.dirty[:len(p.dirty)-1]
		if p.past[s] {
			p.past[s] = false
			batch = append(batch, s)
		} else {
			p.stale--
		}
	}
	return batch
}

// compact drops the stale entries of dirty, so that it grows no larger
// than the slots in it however many AllocPreferred takes out.
func (p *Pool) compact() {
	kept := make([]uint32, 0, len(p.dirty)-p.stale)
	for _, s := range slices.Backward(p.dirty) {
		if p.past[s] {
			p.past[s] = false
			kept = append(kept, s)
		}
	}
	slices.Reverse(kept)
	for _, s := range kept {
		p.past[s] = true
	}
	p.dirty, p.stale = kept, 0
}

// unused is a batch of the slots never handed out, the lowest last, and
// where those after it begin.
func (p *Pool) unused() (uint32, []uint32) {
	var batch []uint32
	s := p.next
	for ; s < p.top && len(batch) < resetBatch; s++ {
		if p.unusedSlot(s) {
			batch = append(batch, s)
		}
	}
	slices.Reverse(batch)
	return s, batch
}

// Release gives a slot back, to be handed out after the reuse delay.
func (p *Pool) Release(slot uint32) {
	p.cool.push(cooling{slot, p.cfg.Now()})
	p.inUse--
}

// ReleaseNow gives back the slot of a failed install, which no packet can
// still be reading; it is reset all the same, should a key have pointed at
// it for a moment.
func (p *Pool) ReleaseNow(slot uint32) {
	p.addDirty(slot)
	p.inUse--
}

// Adopt marks the slots a previous run left in use (used[slot]), to be
// released when no key points at them any more; call it before any Alloc.
func (p *Pool) Adopt(used []bool) {
	p.held = slices.Clone(used)
	for _, u := range used {
		if u {
			p.inUse++
		}
	}
}

// Size bounds the slots: they are below it.
func (p *Pool) Size() uint32 { return p.cfg.Size }

// InUse is the number of slots handed out and not given back.
func (p *Pool) InUse() int { return p.inUse }

// Capacity is the number of slots the pool hands out.
func (p *Pool) Capacity() int { return int(p.cfg.Size - p.cfg.First) }

type cooling struct {
	slot  uint32
	since time.Time
}

// ring is a queue of released slots that reuses its memory: at high churn
// it grows to the slots released within the delay and no further.
type ring struct {
	buf     []cooling
	head, n int
}

func (r *ring) push(c cooling) {
	if r.n == len(r.buf) {
		grown := make([]cooling, max(8, 2*len(r.buf)))
		copy(grown, r.buf[r.head:])
		copy(grown[len(r.buf)-r.head:], r.buf[:r.head])
		r.buf, r.head = grown, 0
	}
	r.buf[(r.head+r.n)%len(r.buf)] = c
	r.n++
}

func (r *ring) front() cooling { return r.buf[r.head] }

func (r *ring) pop() cooling {
	c := r.buf[r.head]
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return c
}
