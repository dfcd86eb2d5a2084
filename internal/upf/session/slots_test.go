package session

import (
	"encoding/json"
	"testing"
)

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
