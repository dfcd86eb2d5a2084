package classifyxdp

import (
	"cmp"
	"net/netip"
	"slices"
)

// referenceChain is the classifier the data path and Table are tested
// against: every rule checked in turn, each match by its plain meaning
// (value under mask, prefix, range), apart from how rules are compiled. It
// returns the rules a packet with key k meets: those it matches by
// priority, highest first, of equal priorities in the order of rules (the
// one added first), down to the first that neither counts nor mirrors,
// maxChain at most.
func referenceChain(rules []Rule, k *Key) []Rule {
	var matched []Rule
	for _, r := range rules {
		if matchesAll(r, k) {
			matched = append(matched, r)
		}
	}
	slices.SortStableFunc(matched, func(a, b Rule) int { return cmp.Compare(b.Priority, a.Priority) })
	for i, r := range matched {
		if i+1 == maxChain || !r.Action.handsOn() {
			return matched[:i+1]
		}
	}
	return matched
}

// referenceLookup is the last rule of referenceChain: the one whose
// counter slot the program leaves in its walk, and whose action decides
// the packet unless it counts or mirrors.
func referenceLookup(rules []Rule, k *Key) (Rule, bool) {
	chain := referenceChain(rules, k)
	if len(chain) == 0 {
		return Rule{}, false
	}
	return chain[len(chain)-1], true
}

func matchesAll(r Rule, k *Key) bool {
	for _, m := range r.Matches {
		f, _ := FieldByName(m.Field)
		var ok bool
		switch {
		case m.Prefix.IsValid():
			b := k[f.Offset : f.Offset+f.Size]
			addr := netip.AddrFrom16([16]byte(b)).Unmap()
			ok = m.Prefix.Contains(addr)
		case m.Ranged:
			v := k.Number(f)
			ok = m.Lo <= v && v <= m.Hi
		default:
			ok = k.Number(f)&m.Mask == m.Value
		}
		if !ok {
			return false
		}
	}
	return true
}
