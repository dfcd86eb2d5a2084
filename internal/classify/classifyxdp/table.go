package classifyxdp

import (
	"fmt"
	"slices"
)

// DefaultMaxMasks is a Table's bound on distinct masks when none is given:
// a lookup probes each once.
const DefaultMaxMasks = 16

// Table is a set of rules as a tuple space: the rules' ternaries grouped
// by mask, each group an exact-match table of masked values. A lookup
// probes every group once, so its cost follows the number of masks, never
// the number of rules.
type Table struct {
	maxMasks int
	rules    map[uint32]*entry
	groups   []*group
	added    uint64 // rules added so far: the order of equal priorities
}

// entry is a rule in the table.
type entry struct {
	rule      Rule
	ternaries []ternary
	order     uint64
}

// beats says whether e wins over o when a key matches both.
func (e *entry) beats(o *entry) bool {
	if e.rule.Priority != o.rule.Priority {
		return e.rule.Priority > o.rule.Priority
	}
	return e.order < o.order
}

// group holds the ternaries of one mask: by masked value, the entries
// that have it, best first.
type group struct {
	mask       Key
	values     map[Key][]*entry
	n          int            // ternaries in the group
	priorities map[uint32]int // ternaries by their rule's priority
}

// maxPriority is the highest priority of the group's rules: a lookup that
// has found a better one need not probe the group.
func (g *group) maxPriority() uint32 {
	var top uint32
	for p := range g.priorities {
		top = max(top, p)
	}
	return top
}

// NewTable returns an empty table that takes at most maxMasks distinct
// masks (DefaultMaxMasks for 0).
func NewTable(maxMasks int) *Table {
	if maxMasks <= 0 {
		maxMasks = DefaultMaxMasks
	}
	return &Table{maxMasks: maxMasks, rules: map[uint32]*entry{}}
}

// Len is the number of rules.
func (t *Table) Len() int { return len(t.rules) }

// Add adds a rule; a refused one (a *fielderr.Error, or an ID in use) changes
// nothing.
func (t *Table) Add(r Rule) error {
	if _, ok := t.rules[r.ID]; ok {
		return invalid("id", "rule %d exists", r.ID)
	}
	ternaries, err := r.ternaries()
	if err != nil {
		return err
	}
	newMasks := 0
	for i, tr := range ternaries {
		if t.group(tr.mask) == nil && !slices.ContainsFunc(ternaries[:i], func(o ternary) bool { return o.mask == tr.mask }) {
			newMasks++
		}
	}
	if n := len(t.groups) + newMasks; n > t.maxMasks {
		return invalid("matches", "the rule would make %d distinct masks (fields and prefix lengths); the table takes %d", n, t.maxMasks)
	}
	e := &entry{rule: r, ternaries: ternaries, order: t.added}
	t.added++
	t.rules[r.ID] = e
	for _, tr := range ternaries {
		g := t.group(tr.mask)
		if g == nil {
			g = &group{mask: tr.mask, values: map[Key][]*entry{}, priorities: map[uint32]int{}}
			t.groups = append(t.groups, g)
		}
		list := g.values[tr.value]
		at, _ := slices.BinarySearchFunc(list, e, func(a, b *entry) int {
			if a.beats(b) {
				return -1
			}
			return 1
		})
		g.values[tr.value] = slices.Insert(list, at, e)
		g.n++
		g.priorities[r.Priority]++
	}
	return nil
}

// Delete removes a rule.
func (t *Table) Delete(id uint32) error {
	e, ok := t.rules[id]
	if !ok {
		return fmt.Errorf("no rule %d", id)
	}
	delete(t.rules, id)
	for _, tr := range e.ternaries {
		g := t.group(tr.mask)
		list := slices.DeleteFunc(g.values[tr.value], func(o *entry) bool { return o == e })
		if len(list) == 0 {
			delete(g.values, tr.value)
		} else {
			g.values[tr.value] = list
		}
		if g.priorities[e.rule.Priority]--; g.priorities[e.rule.Priority] == 0 {
			delete(g.priorities, e.rule.Priority)
		}
		if g.n--; g.n == 0 {
			t.groups = slices.DeleteFunc(t.groups, func(o *group) bool { return o == g })
		}
	}
	return nil
}

func (t *Table) group(mask Key) *group {
	for _, g := range t.groups {
		if g.mask == mask {
			return g
		}
	}
	return nil
}

// rulesOf are the entries of a value under a mask, best first.
func (t *Table) rulesOf(mask, value Key) []*entry {
	if g := t.group(mask); g != nil {
		return g.values[value]
	}
	return nil
}
