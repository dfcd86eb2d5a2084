package session

import (
	"encoding/json"
	"errors"
	"reflect"
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

// Over new maps, slots never handed out hold zeros already: they go out
// without a reset, and slots given back are reset all the same.
func TestSlotPoolOfZeroedSlots(t *testing.T) {
	now := time.Unix(0, 0)
	var resets [][]uint32
	p := newSlotPool("test", 1, 3, func(slots []uint32) error {
		resets = append(resets, slices.Clone(slots))
		return nil
	})
	p.now, p.zeroed = func() time.Time { return now }, true
	for want := uint32(1); want <= 2; want++ {
		if s, err := p.alloc(); err != nil || s != want {
			t.Fatalf("slot %d, %v; want %d", s, err, want)
		}
	}
	p.release(1)
	now = now.Add(slotReuseDelay)
	if s, err := p.alloc(); err != nil || s != 1 || !reflect.DeepEqual(resets, [][]uint32{{1}}) {
		t.Fatalf("slot %d, %v after resets %v; want slot 1 after its reset alone", s, err, resets)
	}
}

// Rule slots are written to JSON as the maps by rule ID they replace, so
// that a state saved before reads back.
func TestRuleSlotsJSON(t *testing.T) {
	const saved = `{"1":5,"7":9}`
	var r ruleSlots
	if err := json.Unmarshal([]byte(saved), &r); err != nil || r.of(1) != 5 || r.of(7) != 9 || len(r) != 2 {
		t.Fatalf("%s read as %v, %v", saved, r, err)
	}
	if _, ok := r.lookup(2); ok {
		t.Fatal("rule 2 has a slot")
	}
	if b, err := json.Marshal(r); err != nil || string(b) != saved {
		t.Fatalf("written as %s, %v; want %s", b, err, saved)
	}
}
