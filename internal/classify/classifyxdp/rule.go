package classifyxdp

import (
	"fmt"
	"math/bits"
	"net"
	"net/netip"

	"github.com/xdp5g/xdp5g/internal/fielderr"
)

// Match is what a rule asks of one field: the field's value under a mask,
// or, for a number field, a range (Lo to Hi, Ranged set).
type Match struct {
	Field string
	// Value and Mask are numbers for number fields; for address fields,
	// Prefix is used instead.
	Value, Mask uint64
	Prefix      netip.Prefix
	Ranged      bool
	Lo, Hi      uint64
}

// ActionKind is what a rule does with the packets it matches.
type ActionKind uint8

const (
	ActionDrop     = ActionKind(classifyClassifyActionCLASSIFY_DROP)
	ActionPass     = ActionKind(classifyClassifyActionCLASSIFY_PASS)     // to the kernel
	ActionMirror   = ActionKind(classifyClassifyActionCLASSIFY_MIRROR)   // a copy out of a mirror interface, then on to the rules below
	ActionRedirect = ActionKind(classifyClassifyActionCLASSIFY_REDIRECT) // out of an interface
	ActionSteer    = ActionKind(classifyClassifyActionCLASSIFY_STEER)    // to a CPU of a slice
	ActionCount    = ActionKind(classifyClassifyActionCLASSIFY_COUNT)    // counted, then on to the rules below
)

// maxChain is the most rules one packet meets: count and mirror rules,
// each handing it on to the best rule below, then one that decides.
const maxChain = int(classifyClassifyLimitsCLASSIFY_MAX_CHAIN)

// handsOn tells whether a rule with the action hands the packets it
// matches on to the best rule below it, as if it had not matched.
func (a ActionKind) handsOn() bool { return a == ActionCount || a == ActionMirror }

// ActionNames name the actions as rules write them: enum classify_action's
// names in lower case, without CLASSIFY_. CLASSIFY_NONE, the verdict of no
// rule, has none.
var ActionNames = [...]string{ActionDrop: "drop", ActionPass: "pass", ActionMirror: "mirror",
	ActionRedirect: "redirect", ActionSteer: "steer", ActionCount: "count"}

// Rule is a wildcard rule. Of the rules a key matches, the one with the
// highest Priority wins; of equal priorities, the one added first.
type Rule struct {
	ID       uint32
	Priority uint32
	Matches  []Match
	Action   ActionKind
	Out      *Egress // where ActionRedirect sends packets, ActionMirror copies; nil for the other actions
	Slice    uint32  // whose CPUs ActionSteer sends packets to, on to the kernel; 0 for the other actions
}

// Egress is where a redirecting rule sends packets, or a mirroring one
// their copies: out of an interface (its index, in the namespace the
// classifier runs in), with the outermost Ethernet header's addresses
// rewritten.
type Egress struct {
	Interface      string // the interface's name, as the rule gave it
	Ifindex        int
	DstMAC, SrcMAC net.HardwareAddr
}

// invalid is a rule refused: field names what is wrong with it, as
// matches[i] or a rule field.
func invalid(field, format string, args ...any) *fielderr.Error {
	return fielderr.New(field, format, args...)
}

// ternary is one value under one mask over the whole key: what a rule is
// made of once its ranges are split into prefixes.
type ternary struct {
	value, mask Key
}

// ternaries checks a rule and turns it into the ternaries it matches: the
// product of its ranges' prefix splits.
func (r *Rule) ternaries() ([]ternary, error) {
	switch {
	case r.Action < ActionDrop || r.Action > ActionCount:
		return nil, invalid("action", "unknown action %d", r.Action)
	case (r.Action != ActionRedirect && r.Action != ActionMirror) && r.Out != nil:
		return nil, invalid("out", "only a rule that redirects or mirrors has an egress")
	case r.Action != ActionSteer && r.Slice != 0:
		return nil, invalid("slice", "only a rule that steers has a slice")
	case (r.Action == ActionRedirect || r.Action == ActionMirror) && (r.Out == nil || r.Out.Ifindex <= 0):
		return nil, invalid("out", "a rule that redirects or mirrors needs the interface to send out of")
	case (r.Action == ActionRedirect || r.Action == ActionMirror) && (len(r.Out.DstMAC) != 6 || len(r.Out.SrcMAC) != 6):
		return nil, invalid("out", "a rule that redirects or mirrors needs the Ethernet addresses to write")
	}
	out := []ternary{{}}
	seen := map[string]bool{}
	for i, m := range r.Matches {
		where := fmt.Sprintf("matches[%d]", i)
		f, ok := FieldByName(m.Field)
		if !ok {
			return nil, invalid(where+".field", "no field %q", m.Field)
		}
		if seen[m.Field] {
			return nil, invalid(where+".field", "%s is matched twice", m.Field)
		}
		seen[m.Field] = true
		parts, err := m.parts(f, where)
		if err != nil {
			return nil, err
		}
		if len(out)*len(parts) > maxTernaries {
			return nil, invalid(where+".range", "the rule's ranges split into more than %d prefixes", maxTernaries)
		}
		var next []ternary
		for _, t := range out {
			for _, p := range parts {
				c := t
				p.apply(f, &c)
				next = append(next, c)
			}
		}
		out = next
	}
	return out, nil
}

// part is a value under a mask of one number field, or a prefix of an
// address field.
type part struct {
	value, mask uint64
	prefix      netip.Prefix
}

func (p part) apply(f Field, t *ternary) {
	if f.kind == address {
		a := p.prefix.Addr().As16()
		copy(t.value[f.Offset:], a[:])
		bitsOn := p.prefix.Bits()
		if p.prefix.Addr().Is4() {
			bitsOn += 96
		}
		for i := range f.Size {
			n := min(max(bitsOn-8*i, 0), 8)
			t.mask[f.Offset+i] = byte(0xff << (8 - n))
		}
		return
	}
	t.value.SetNumber(f, p.value&p.mask)
	t.mask.SetNumber(f, p.mask)
}

// CheckValues refuses matches on values the parser never writes into a
// field narrower than its octets (a DSCP of 64, a temporalId of 7): a rule
// on one could never match. Add does not call it, so that a rules file an
// earlier version wrote still loads; what users add now goes through it.
func CheckValues(matches []Match) error {
	for i, m := range matches {
		f, ok := FieldByName(m.Field)
		if !ok || f.kind != number || m.Prefix.IsValid() {
			continue // Add says what is wrong
		}
		if err := m.beyond(f, f.largest, fmt.Sprintf("matches[%d]", i)); err != nil {
			return err
		}
	}
	return nil
}

// beyond refuses a number match whose value or range goes beyond largest
// (or whose range ends before it starts).
func (m Match) beyond(f Field, largest uint64, where string) error {
	switch {
	case m.Ranged && (m.Lo > m.Hi || m.Hi > largest):
		return invalid(where+".range", "%d to %d is not a range of %s (0 to %d)", m.Lo, m.Hi, f.Name, largest)
	case !m.Ranged && m.Value > largest:
		return invalid(where, "%s holds values up to %d", f.Name, largest)
	}
	return nil
}

// maxTernaries bounds the prefixes a rule's ranges split into, together: a
// range of a 16-bit field takes at most 30.
const maxTernaries = 64

func (m Match) parts(f Field, where string) ([]part, error) {
	switch {
	case f.kind == address:
		if m.Ranged || m.Mask != 0 || m.Value != 0 {
			return nil, invalid(where, "%s is an address: give a prefix", f.Name)
		}
		if !m.Prefix.IsValid() {
			return nil, invalid(where+".prefix", "%s needs a prefix", f.Name)
		}
		if m.Prefix.Addr().Is4In6() {
			return nil, invalid(where+".prefix", "write the IPv4 prefix %s as IPv4", m.Prefix)
		}
		return []part{{prefix: m.Prefix.Masked()}}, nil
	case m.Prefix.IsValid():
		return nil, invalid(where+".prefix", "%s is a number, not an address", f.Name)
	}
	if err := m.beyond(f, f.max(), where); err != nil {
		return nil, err
	}
	switch {
	case m.Ranged:
		return splitRange(m.Lo, m.Hi, f.max()), nil
	case m.Mask > f.max():
		return nil, invalid(where, "%s holds values up to %d", f.Name, f.max())
	case m.Value&^m.Mask != 0:
		return nil, invalid(where+".value", "%#x has bits outside the mask %#x", m.Value, m.Mask)
	}
	return []part{{value: m.Value, mask: m.Mask}}, nil
}

// splitRange covers lo to hi with the fewest aligned blocks of a power of
// two, each a value under a prefix mask of a field whose largest value is
// all.
func splitRange(lo, hi, all uint64) []part {
	var out []part
	for lo <= hi {
		// The largest block that starts at lo and ends within hi.
		size := uint64(1) << bits.TrailingZeros64(lo|(all+1))
		for size > hi-lo+1 {
			size >>= 1
		}
		out = append(out, part{value: lo, mask: all &^ (size - 1)})
		if lo+size-1 == all {
			break
		}
		lo += size
	}
	return out
}
