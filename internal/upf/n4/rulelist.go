package n4

import (
	"slices"

	"github.com/xdp5g/xdp5g/internal/upf/session"
)

// A session keeps its PDRs, FARs and QERs in slices sorted by ID, in the
// store's own form: the store keeps these very slices, with nothing to
// copy and a session's few rules in less memory than maps take. So a
// committed session's slices are never written: a request changes a copy
// (pfcpSession.clone).

// ruleKind reads the ID of a kind of rule.
type ruleKind[T any] func(*T) uint32

var (
	pdrRules ruleKind[session.PDR] = func(p *session.PDR) uint32 { return uint32(p.ID) }
	farRules ruleKind[session.FAR] = func(f *session.FAR) uint32 { return f.ID }
	qerRules ruleKind[session.QER] = func(q *session.QER) uint32 { return q.ID }
)

// find is the index of rule id in rules, or where it would go, and
// whether rules has it. A session has a few rules of a kind: a scan that
// copies none of them beats a binary search.
func (k ruleKind[T]) find(rules []T, id uint32) (int, bool) {
	for i := range rules {
		if at := k(&rules[i]); at >= id {
			return i, at == id
		}
	}
	return len(rules), false
}

// get is rule id; false when rules lacks it.
func (k ruleKind[T]) get(rules []T, id uint32) (T, bool) {
	if i, ok := k.find(rules, id); ok {
		return rules[i], true
	}
	var none T
	return none, false
}

// put writes r in place of the rule with its ID, or adds it.
func (k ruleKind[T]) put(rules []T, r T) []T {
	i, ok := k.find(rules, k(&r))
	if ok {
		rules[i] = r
		return rules
	}
	return slices.Insert(rules, i, r)
}

// remove takes rule id out of rules; false when rules lacks it.
func (k ruleKind[T]) remove(rules []T, id uint32) ([]T, bool) {
	i, ok := k.find(rules, id)
	if !ok {
		return rules, false
	}
	return slices.Delete(rules, i, i+1), true
}
