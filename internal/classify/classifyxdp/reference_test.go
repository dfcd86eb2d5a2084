package classifyxdp

import "net/netip"

// referenceLookup is the classifier the data path and Table are tested
// against: every rule checked in turn, each match by its plain meaning
// (value under mask, prefix, range), apart from how rules are compiled. It
// returns the rule of highest priority that k matches, of equal priorities
// the first in rules (the one added first).
func referenceLookup(rules []Rule, k *Key) (Rule, bool) {
	var best Rule
	found := false
	for _, r := range rules {
		if matchesAll(r, k) && (!found || r.Priority > best.Priority) {
			best, found = r, true
		}
	}
	return best, found
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
