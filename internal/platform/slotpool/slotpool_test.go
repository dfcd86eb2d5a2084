package slotpool

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// clock is a pool's time, moved by the test.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

// resetLog records the resets of a pool.
type resetLog [][]uint32

func (r *resetLog) reset(slots []uint32) error {
	*r = append(*r, slices.Clone(slots))
	return nil
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A pool with reset resets every slot before handing it out, a batch at a
// time: slots never handed out (a previous run may have used them) and
// slots given back, after the reuse delay. A failed reset hands out
// nothing, and the next alloc tries again.
func TestResets(t *testing.T) {
	c := &clock{time.Unix(0, 0)}
	var resets [][]uint32
	var fail error
	p := New(Config{Name: "test", First: 1, Size: resetBatch + 2, Now: c.Now, Reset: func(slots []uint32) error {
		if fail != nil {
			return fail
		}
		resets = append(resets, slices.Sorted(slices.Values(slots)))
		return nil
	}})
	var got []uint32
	for range resetBatch {
		s, err := p.Alloc()
		check(t, err)
		got = append(got, s)
	}
	first := make([]uint32, resetBatch)
	for i := range first {
		first[i] = uint32(i) + 1
	}
	if !slices.Equal(got, first) || len(resets) != 1 || !slices.Equal(resets[0], first) {
		t.Fatalf("handed out %v after resets %v, want 1 to %d after one reset of them", got, resets, resetBatch)
	}

	p.Release(1)
	c.now = c.now.Add(ReuseDelay)
	fail = errors.New("no reset")
	if s, err := p.Alloc(); err == nil {
		t.Fatalf("slot %d handed out without its reset", s)
	}
	fail = nil
	if s, err := p.Alloc(); err != nil || s != 1 || !slices.Equal(resets[1], []uint32{1}) {
		t.Fatalf("after the delay: slot %d, %v, resets %v; want slot 1 reset", s, err, resets)
	}
	if s, err := p.Alloc(); err != nil || s != resetBatch+1 || !slices.Equal(resets[2], []uint32{resetBatch + 1}) {
		t.Fatalf("the last slot: %d, %v, resets %v", s, err, resets)
	}
	if s, err := p.Alloc(); err == nil {
		t.Fatalf("a full pool gave slot %d", s)
	}
}

// Over new maps, slots never handed out hold zeros already: they go out
// without a reset, and slots given back are reset all the same.
func TestZeroedSlots(t *testing.T) {
	c := &clock{time.Unix(0, 0)}
	var resets resetLog
	p := New(Config{Name: "test", First: 1, Size: 3, Zeroed: true, Now: c.Now, Reset: resets.reset})
	for want := uint32(1); want <= 2; want++ {
		if s, err := p.Alloc(); err != nil || s != want {
			t.Fatalf("slot %d, %v; want %d", s, err, want)
		}
	}
	p.Release(1)
	c.now = c.now.Add(ReuseDelay)
	if s, err := p.Alloc(); err != nil || s != 1 || !reflect.DeepEqual(resets, resetLog{{1}}) {
		t.Fatalf("slot %d, %v after resets %v; want slot 1 after its reset alone", s, err, resets)
	}
}

// A released slot goes out again only after the reuse delay; one released
// at once goes out at once.
func TestDelaysReuse(t *testing.T) {
	c := &clock{time.Unix(0, 0)}
	p := New(Config{Name: "test", Size: 2, Now: c.Now})
	a, _ := p.Alloc()
	b, _ := p.Alloc()
	if _, err := p.Alloc(); err == nil {
		t.Fatal("a full pool gave a slot")
	}
	p.Release(a)
	c.now = c.now.Add(ReuseDelay / 2)
	if _, err := p.Alloc(); err == nil {
		t.Fatal("a slot was reused before the delay")
	}
	c.now = c.now.Add(ReuseDelay / 2)
	if got, err := p.Alloc(); err != nil || got != a {
		t.Fatalf("after the delay: got %d, %v; want %d", got, err, a)
	}
	p.ReleaseNow(b)
	if got, _ := p.Alloc(); got != b {
		t.Fatalf("ReleaseNow: got %d, want %d", got, b)
	}
}

// A pool that prefers new slots hands out those never used before one past
// its delay, and a previous run's slots, adopted and released, last.
func TestPreferNew(t *testing.T) {
	c := &clock{time.Unix(1000, 0)}
	p := New(Config{Name: "next-hop", First: 1, Size: 6, PreferNew: true, Now: c.Now})
	p.Adopt([]bool{2: true})
	p.Release(2)
	c.now = c.now.Add(ReuseDelay)
	var got []uint32
	for range 5 {
		s, err := p.Alloc()
		check(t, err)
		got = append(got, s)
	}
	if want := []uint32{1, 3, 4, 5, 2}; !slices.Equal(got, want) {
		t.Fatalf("handed out %v, want %v", got, want)
	}
	p.Release(3)
	if s, err := p.Alloc(); err == nil {
		t.Fatalf("slot %d handed out before its delay", s)
	}
}

// At high churn the pool reuses the memory of its queue of released slots,
// and counts what is in use.
func TestChurn(t *testing.T) {
	c := &clock{time.Unix(0, 0)}
	p := New(Config{Name: "test", First: 1, Size: 1 << 12, Now: c.Now})
	held := make([]uint32, 0, 100)
	for range 100 {
		s, err := p.Alloc()
		check(t, err)
		held = append(held, s)
	}
	for round := range 1000 {
		for i, s := range held {
			p.Release(s)
			if held[i], _ = p.Alloc(); held[i] == 0 {
				t.Fatalf("round %d: the pool ran out", round)
			}
		}
		if n := p.InUse(); n != len(held) {
			t.Fatalf("round %d: %d slots in use, want %d", round, n, len(held))
		}
		c.now = c.now.Add(ReuseDelay / 4)
	}
	// Within a delay the pool releases at most 5 rounds of 100.
	if n := len(p.cool.buf); n > 1024 {
		t.Errorf("the queue of released slots grew to %d", n)
	}
}

// Adopted slots stay in use until released; the others a previous run may
// have used are reset before they go out.
func TestAdopt(t *testing.T) {
	c := &clock{time.Unix(0, 0)}
	var resets [][]uint32
	p := New(Config{Name: "test", First: 1, Size: 5, Now: c.Now, Reset: func(slots []uint32) error {
		resets = append(resets, slices.Sorted(slices.Values(slots)))
		return nil
	}})
	p.Adopt([]bool{1: true, 3: true})
	if n := p.InUse(); n != 2 {
		t.Fatalf("%d slots in use after adopting 2", n)
	}
	var got []uint32
	for range 2 {
		s, err := p.Alloc()
		check(t, err)
		got = append(got, s)
	}
	if !slices.Equal(got, []uint32{2, 4}) || !reflect.DeepEqual(resets, [][]uint32{{2, 4}}) {
		t.Fatalf("handed out %v after resets %v, want 2 and 4 after their reset", got, resets)
	}
	if s, err := p.Alloc(); err == nil {
		t.Fatalf("slot %d handed out while every slot is in use", s)
	}
	p.Release(3)
	c.now = c.now.Add(ReuseDelay)
	if s, err := p.Alloc(); err != nil || s != 3 || p.InUse() != 4 {
		t.Fatalf("slot %d, %v with %d in use; want the released slot 3 and 4 in use", s, err, p.InUse())
	}
}

// A preferred slot goes out when it is free or was never handed out, and
// then never again while in use; otherwise the highest slot never handed
// out does, and Alloc hands out neither of them.
func TestAllocPreferred(t *testing.T) {
	c := &clock{time.Unix(0, 0)}
	var resets resetLog
	p := New(Config{Name: "test", First: 1, Size: 3 * resetBatch, Now: c.Now, Reset: resets.reset})
	p.Adopt([]bool{40: true})
	first, err := p.Alloc() // frees 1 to resetBatch
	check(t, err)
	ahead := uint32(resetBatch + 10) // never handed out, past the free ones
	for _, want := range []uint32{5, ahead} {
		if s, err := p.AllocPreferred(want); err != nil || s != want {
			t.Fatalf("preferring slot %d: got %d, %v", want, s, err)
		}
	}
	if want := (resetLog{resets[0], {ahead}}); !reflect.DeepEqual(resets, want) {
		t.Fatalf("resets %v, want %v: the slot handed out ahead reset alone", resets, want)
	}
	high := uint32(3*resetBatch - 1)
	for _, taken := range []uint32{first, 5, ahead, 40} { // in use, or adopted
		if s, err := p.AllocPreferred(taken); err != nil || s != high {
			t.Fatalf("preferring slot %d, in use: got %d, %v; want the highest, %d", taken, s, err, high)
		}
		high--
	}
	if s, err := p.AllocPreferred(7); err != nil || s != 7 {
		t.Fatalf("preferring the free slot 7: got %d, %v", s, err)
	}
	seen := map[uint32]bool{}
	for _, s := range []uint32{first, 5, ahead, 40, 7} {
		seen[s] = true
	}
	for s := high + 1; s < 3*resetBatch; s++ {
		seen[s] = true
	}
	for p.InUse() < int(3*resetBatch-1) {
		c.now = c.now.Add(ReuseDelay / 4)
		s, err := p.Alloc()
		check(t, err)
		if seen[s] {
			t.Fatalf("slot %d handed out twice", s)
		}
		seen[s] = true
	}
	if s, err := p.AllocPreferred(7); err == nil {
		t.Fatalf("a full pool gave slot %d", s)
	}
}

// A slot given back is preferred once past its reuse delay, never within
// it, and goes out reset.
func TestAllocPreferredWaitsOutTheDelay(t *testing.T) {
	c := &clock{time.Unix(0, 0)}
	var resets resetLog
	p := New(Config{Name: "test", First: 1, Size: 5, Zeroed: true, Now: c.Now, Reset: resets.reset})
	a, err := p.Alloc()
	check(t, err)
	p.Release(a)
	if s, err := p.AllocPreferred(a); err != nil || s == a {
		t.Fatalf("preferring slot %d in its delay: got %d, %v", a, s, err)
	}
	c.now = c.now.Add(ReuseDelay)
	if s, err := p.AllocPreferred(a); err != nil || s != a || !reflect.DeepEqual(resets, resetLog{{a}}) {
		t.Fatalf("preferring slot %d past its delay: got %d, %v after resets %v", a, s, err, resets)
	}
}

// Paired with another pool's slots as they come and go, a pool hands out
// the same numbers though slots of its own come and go too, and its list
// of slots past their delay stays as long as the slots in it.
func TestAllocPreferredChurn(t *testing.T) {
	c := &clock{time.Unix(0, 0)}
	qers := New(Config{Name: "QER", First: 1, Size: 1 << 10, Now: c.Now})
	urrs := New(Config{Name: "URR", First: 1, Size: 1 << 10, Now: c.Now})
	alone, err := urrs.AllocHigh() // a URR without a QER, which comes and goes
	check(t, err)
	held := make([][2]uint32, 100)
	for round := range 200 {
		urrs.Release(alone)
		if alone, err = urrs.AllocHigh(); err != nil {
			t.Fatal(err)
		}
		for i := range held {
			if round > 0 {
				qers.Release(held[i][0])
				urrs.Release(held[i][1])
			}
			q, err := qers.Alloc()
			check(t, err)
			u, err := urrs.AllocPreferred(q)
			check(t, err)
			if u != q {
				t.Fatalf("round %d: QER slot %d, URR slot %d", round, q, u)
			}
			held[i] = [2]uint32{q, u}
		}
		c.now = c.now.Add(ReuseDelay / 4)
	}
	if n, slots := len(urrs.dirty), len(urrs.dirty)-urrs.stale; n > 2*slots+resetBatch {
		t.Errorf("%d entries of slots past their delay, with %d such slots", n, slots)
	}
}

// Whatever the mix of allocations, releases and time, a pool hands out no
// slot in use or in its reuse delay, none out of its bounds, and none
// holding what the data path left in it; and it counts what is in use.
func TestAllocMix(t *testing.T) {
	for name, cfg := range map[string]Config{"plain": {}, "prefer new": {PreferNew: true}, "zeroed": {Zeroed: true}, "from 1": {First: 1}} {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			c := &clock{time.Unix(0, 0)}
			const size = 200
			cfg.Name, cfg.Size, cfg.Now = "test", size, c.Now
			dirty := make([]bool, size) // a previous run's, or used since the reset
			for s := range dirty {
				dirty[s] = !cfg.Zeroed
			}
			cfg.Reset = func(slots []uint32) error {
				for _, s := range slots {
					dirty[s] = false
				}
				return nil
			}
			p := New(cfg)
			used := make([]bool, size)
			used[size/2] = true
			p.Adopt(slices.Clone(used))
			dirty[size/2] = true
			released := map[uint32]time.Time{}
			var inUse []uint32
			for s := range used {
				if used[s] {
					inUse = append(inUse, uint32(s))
				}
			}
			for step := range 20000 {
				var s uint32
				var err error
				switch op := rng.IntN(10); {
				case op < 3 && len(inUse) > 0:
					i := rng.IntN(len(inUse))
					s = inUse[i]
					inUse = slices.Delete(inUse, i, i+1)
					used[s] = false
					if op == 0 {
						p.ReleaseNow(s)
					} else {
						p.Release(s)
						released[s] = c.now
					}
					continue
				case op == 3:
					c.now = c.now.Add(ReuseDelay / 8)
					continue
				case op < 6:
					s, err = p.Alloc()
				case op < 9:
					s, err = p.AllocPreferred(uint32(rng.IntN(size + 2)))
				default:
					s, err = p.AllocHigh()
				}
				if err != nil {
					if len(inUse)+p.cool.n < size-int(cfg.First) {
						t.Fatalf("step %d: %v with %d in use", step, err, len(inUse))
					}
					continue
				}
				if s < cfg.First || s >= size || used[s] || dirty[s] || c.now.Sub(released[s]) < ReuseDelay {
					t.Fatalf("step %d: handed out slot %d (in use %v, not reset %v, released at %v, now %v)",
						step, s, used[s], dirty[s], released[s], c.now)
				}
				used[s], dirty[s] = true, true
				delete(released, s)
				inUse = append(inUse, s)
				if len(p.dirty) > 2*size+resetBatch {
					t.Fatalf("step %d: %d entries of slots past their delay", step, len(p.dirty))
				}
				if p.InUse() != len(inUse) {
					t.Fatalf("step %d: %d in use, want %d", step, p.InUse(), len(inUse))
				}
			}
		})
	}
}
