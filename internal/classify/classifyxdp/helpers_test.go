package classifyxdp

import (
	"encoding/binary"
	"math/bits"
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

// FlowHash is the hash steering gives a packet with this key (bpf/classify/steer.h
// flow_hash): over the innermost addresses, protocol and ports and the
// tunnel ids. The prioritised flows are known by it.
func FlowHash(k *Key) uint32 {
	word := func(off int) uint32 { return binary.NativeEndian.Uint32(k[off:]) }
	half := func(off int) uint32 { return uint32(binary.NativeEndian.Uint16(k[off:])) }
	src, dst, tunnelIDs := fieldOffset("innerSrc"), fieldOffset("innerDst"), fieldOffset("tunnel1Id")
	var h uint32
	for i := range 4 {
		h = hashWord(h, word(src+4*i))
		h = hashWord(h, word(dst+4*i))
		h = hashWord(h, word(tunnelIDs+4*i))
	}
	h = hashWord(h, half(fieldOffset("srcPort"))<<16|half(fieldOffset("dstPort")))
	h = hashWord(h, uint32(k[fieldOffset("proto")]))
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	return h ^ h>>16
}

// hashWord takes one word into a MurmurHash3 state.
func hashWord(h, w uint32) uint32 {
	w *= 0xcc9e2d51
	w = bits.RotateLeft32(w, 15)
	w *= 0x1b873593
	h ^= w
	return bits.RotateLeft32(h, 13)*5 + 0xe6546b64
}

func fieldOffset(name string) int {
	f, _ := FieldByName(name)
	return f.Offset
}
