package session

import (
	"encoding/json"
	"testing"
	"time"
)

// A pool hands out its slots from the first, a slot given back only after
// the reuse delay, one of a failed install at once, and one a previous run
// left unused as any other; a full pool says so.
func TestSlotPool(t *testing.T) {
	now := time.Unix(0, 0)
	p := newSlotPool("test", 1, 5)
	p.now = func() time.Time { return now }
	p.adopt(map[uint32]bool{2: true}) // slot 1 is free, 2 taken
	alloc := func(want uint32) {
		t.Helper()
		if s, err := p.alloc(); err != nil || s != want {
			t.Fatalf("slot %d, %v; want %d", s, err, want)
		}
	}
	alloc(1)
	alloc(3)
	p.release(1)
	p.releaseNow(3)
	alloc(3)
	alloc(4)
	now = now.Add(slotReuseDelay)
	alloc(1)
	if s, err := p.alloc(); err == nil {
		t.Fatalf("a full pool gave slot %d", s)
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
