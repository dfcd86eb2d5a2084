package session

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/xdp5g/xdp5g/internal/platform/slotpool"
)

// ruleSlots are the data-path slots of a session's rules of one kind, by
// rule ID: a session's few rules take less memory than in a map. JSON
// has them as an object by ID, as it had the maps they replace.
type ruleSlots []RuleSlot

// RuleSlot is the data-path slot of a rule.
type RuleSlot struct{ ID, Slot uint32 }

// Slots are where the rules of a session are in the data path, by rule
// ID, kind by kind; SDF is by PDR ID, Buffer by FAR ID.
type Slots struct{ PDR, QER, URR, SDF, Buffer []RuleSlot }

// lookup is the slot of rule id.
func (r ruleSlots) lookup(id uint32) (uint32, bool) {
	for _, e := range r {
		if e.ID == id {
			return e.Slot, true
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
func (r *ruleSlots) set(id, slot uint32) { *r = append(*r, RuleSlot{id, slot}) }

func (r ruleSlots) MarshalJSON() ([]byte, error) {
	byID := make(map[uint32]uint32, len(r))
	for _, e := range r {
		byID[e.ID] = e.Slot
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
func releaseAll(p *slotpool.Pool, slots ruleSlots, now bool) {
	for _, e := range slots {
		if now {
			p.ReleaseNow(e.Slot)
		} else {
			p.Release(e.Slot)
		}
	}
}
