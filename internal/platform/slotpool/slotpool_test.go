package slotpool

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"
)

// clock is a pool's time, moved by the test.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

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
	var resets [][]uint32
	p := New(Config{Name: "test", First: 1, Size: 3, Zeroed: true, Now: c.Now, Reset: func(slots []uint32) error {
		resets = append(resets, slices.Clone(slots))
		return nil
	}})
	for want := uint32(1); want <= 2; want++ {
		if s, err := p.Alloc(); err != nil || s != want {
			t.Fatalf("slot %d, %v; want %d", s, err, want)
		}
	}
	p.Release(1)
	c.now = c.now.Add(ReuseDelay)
	if s, err := p.Alloc(); err != nil || s != 1 || !reflect.DeepEqual(resets, [][]uint32{{1}}) {
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
