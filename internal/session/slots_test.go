package session

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// A pool with reset resets every slot before handing it out, a batch at a
// time: slots never handed out (a previous run may have used them) and
// slots given back, after the reuse delay. A failed reset hands out
// nothing, and the next alloc tries again.
func TestSlotPoolResets(t *testing.T) {
	now := time.Unix(0, 0)
	var resets [][]uint32
	var fail error
	p := newSlotPool("test", 1, resetBatch+2, func(slots []uint32) error {
		if fail != nil {
			return fail
		}
		resets = append(resets, slices.Sorted(slices.Values(slots)))
		return nil
	})
	p.now = func() time.Time { return now }
	var got []uint32
	for range resetBatch {
		s, err := p.alloc()
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

	p.release(1)
	now = now.Add(slotReuseDelay)
	fail = errors.New("no reset")
	if s, err := p.alloc(); err == nil {
		t.Fatalf("slot %d handed out without its reset", s)
	}
	fail = nil
	if s, err := p.alloc(); err != nil || s != 1 || !slices.Equal(resets[1], []uint32{1}) {
		t.Fatalf("after the delay: slot %d, %v, resets %v; want slot 1 reset", s, err, resets)
	}
	if s, err := p.alloc(); err != nil || s != resetBatch+1 || !slices.Equal(resets[2], []uint32{resetBatch + 1}) {
		t.Fatalf("the last slot: %d, %v, resets %v", s, err, resets)
	}
	if s, err := p.alloc(); err == nil {
		t.Fatalf("a full pool gave slot %d", s)
	}
}
