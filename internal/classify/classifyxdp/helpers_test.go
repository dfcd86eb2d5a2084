package classifyxdp

import (
	"encoding/binary"
	"net/netip"
)

// What the tests need of keys and tables beyond what the data path does.

// Number reads a number field.
func (k *Key) Number(f Field) uint64 {
	var b [8]byte
	copy(b[8-f.Size:], k[f.Offset:f.Offset+f.Size])
	return binary.BigEndian.Uint64(b[:])
}

// SetAddr writes an address field.
func (k *Key) SetAddr(f Field, a netip.Addr) {
	b := a.As16()
	copy(k[f.Offset:f.Offset+f.Size], b[:])
}

// Masks is the number of distinct masks: the probes of a lookup.
func (t *Table) Masks() int { return len(t.groups) }

// Lookup returns the rule a key matches, as the data path finds it: one
// probe per mask.
func (t *Table) Lookup(k *Key) (Rule, bool) {
	var best *entry
	for _, g := range t.groups {
		var masked Key
		for i := range k {
			masked[i] = k[i] & g.mask[i]
		}
		if list := g.values[masked]; len(list) > 0 && (best == nil || list[0].beats(best)) {
			best = list[0]
		}
	}
	if best == nil {
		return Rule{}, false
	}
	return best.rule, true
}
