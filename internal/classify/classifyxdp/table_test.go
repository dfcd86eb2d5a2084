package classifyxdp

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/xdp5g/xdp5g/internal/fielderr"
)

func field(t *testing.T, name string) Field {
	t.Helper()
	f, ok := FieldByName(name)
	if !ok {
		t.Fatalf("no field %s", name)
	}
	return f
}

// Random rules over small domains, so that keys match several of them,
// and random keys: the table finds what the reference finds, before and
// after rules go.
func TestTableAgreesWithReference(t *testing.T) {
	random := rand.New(rand.NewPCG(7, 11))
	prefixes := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("10.1.2.0/24"),
		netip.MustParsePrefix("10.1.2.3/32"), netip.MustParsePrefix("10.1.3.0/24"),
		netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("2001:db8:0:1::/64"), netip.MustParsePrefix("2001:db8::1/128"),
	}
	addrs := []netip.Addr{netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("10.1.2.4"), netip.MustParseAddr("10.1.3.1"),
		netip.MustParseAddr("10.2.0.1"), netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1"),
		netip.MustParseAddr("2001:db8:0:1::5"), netip.MustParseAddr("2001:db9::1")}
	// Numbers near the ends of a field's range and a few in between.
	number := func(f Field) uint64 {
		all := uint64(1)<<(8*f.Size) - 1
		return []uint64{0, 1, 2, 3, 5, 8, 13, all, all - 1, all / 2}[random.IntN(10)] & all
	}
	randomRule := func(id uint32) Rule {
		r := Rule{ID: id, Priority: uint32(random.IntN(8)), Action: ActionDrop}
		for _, i := range random.Perm(len(Fields))[:2+random.IntN(3)] {
			f := Fields[i]
			m := Match{Field: f.Name}
			all := uint64(1)<<(8*f.Size) - 1
			switch {
			case f.Size == 16:
				m.Prefix = prefixes[random.IntN(len(prefixes))]
			case random.IntN(3) == 0:
				m.Ranged = true
				m.Lo, m.Hi = number(f), number(f)
				if m.Lo > m.Hi {
					m.Lo, m.Hi = m.Hi, m.Lo
				}
			default:
				m.Mask = []uint64{all, all, 0x1, 0x3, all &^ 0x3}[random.IntN(5)]
				m.Value = number(f) & m.Mask
			}
			r.Matches = append(r.Matches, m)
		}
		return r
	}
	randomKey := func() *Key {
		var k Key
		for _, f := range Fields {
			if f.Size == 16 {
				k.SetAddr(f, addrs[random.IntN(len(addrs))])
			} else if random.IntN(4) == 0 {
				k.SetNumber(f, random.Uint64()&(uint64(1)<<(8*f.Size)-1))
			} else {
				k.SetNumber(f, number(f))
			}
		}
		return &k
	}

	table := NewTable(1 << 16)
	var rules []Rule
	for id := range uint32(400) {
		r := randomRule(id)
		var re *fielderr.Error
		switch err := table.Add(r); {
		case errors.As(err, &re) && re.Reason != "" && len(r.Matches) > 1 && re.Field[len(re.Field)-6:] == ".range":
			continue // ranges that split into too many prefixes together
		case err != nil:
			t.Fatalf("rule %+v: %v", r, err)
		}
		rules = append(rules, r)
	}
	if len(rules) < 350 {
		t.Fatalf("only %d of 400 random rules taken", len(rules))
	}
	// Many rules must win somewhere, over keys that match several.
	compare := func(what string) {
		t.Helper()
		winners := map[uint32]bool{}
		for range 20000 {
			k := randomKey()
			got, gotOK := table.Lookup(k)
			want, wantOK := referenceLookup(rules, k)
			if gotOK != wantOK || got.ID != want.ID {
				t.Fatalf("%s: key % x: table found rule %d (%t), the reference %d (%t)", what, k[:], got.ID, gotOK, want.ID, wantOK)
			}
			if gotOK {
				winners[got.ID] = true
			}
		}
		t.Logf("%s: %d rules, %d masks, %d rules won", what, table.Len(), table.Masks(), len(winners))
		if len(winners) < table.Len()/4 {
			t.Errorf("%s: %d of %d rules won: the test shows little", what, len(winners), table.Len())
		}
	}
	compare("added")
	for i := len(rules) - 1; i >= 0; i-- {
		if random.IntN(2) == 0 {
			if err := table.Delete(rules[i].ID); err != nil {
				t.Fatal(err)
			}
			rules = append(rules[:i], rules[i+1:]...)
		}
	}
	compare("half deleted")
}

// A range is covered by aligned prefix blocks: exactly the values from lo
// to hi match, for every range of an 8-bit field.
func TestRangesSplitExactly(t *testing.T) {
	f := field(t, "rtpPayloadType")
	for lo := range 256 {
		for hi := lo; hi < 256; hi++ {
			table := NewTable(64)
			r := Rule{ID: 1, Action: ActionDrop,
				Matches: []Match{{Field: f.Name, Ranged: true, Lo: uint64(lo), Hi: uint64(hi)}}}
			if err := table.Add(r); err != nil {
				t.Fatalf("%d to %d: %v", lo, hi, err)
			}
			for v := range 256 {
				var k Key
				k.SetNumber(f, uint64(v))
				if _, ok := table.Lookup(&k); ok != (lo <= v && v <= hi) {
					t.Fatalf("range %d to %d: %d matches: %t", lo, hi, v, ok)
				}
			}
		}
	}
}

// Bad rules are refused, naming what is wrong, and change nothing.
func TestBadRulesAreRefused(t *testing.T) {
	table := NewTable(2)
	good := Rule{ID: 1, Priority: 5, Action: ActionDrop,
		Matches: []Match{{Field: "layerId", Value: 1, Mask: 0x3f}}}
	if err := table.Add(good); err != nil {
		t.Fatal(err)
	}
	drop := ActionDrop
	for _, c := range []struct {
		name  string
		rule  Rule
		field string
	}{
		{name: "ID in use", rule: Rule{ID: 1, Action: drop}, field: "id"},
		{name: "no action", rule: Rule{ID: 2}, field: "action"},
		{name: "unknown field", rule: Rule{ID: 2, Action: drop, Matches: []Match{{Field: "vlan"}}}, field: "matches[0].field"},
		{name: "field twice", rule: Rule{ID: 2, Action: drop, Matches: []Match{{Field: "qfi", Mask: 1}, {Field: "qfi", Mask: 2}}},
			field: "matches[1].field"},
		{name: "value beyond the field", rule: Rule{ID: 2, Action: drop, Matches: []Match{{Field: "qfi", Value: 256, Mask: 0x1ff}}},
			field: "matches[0]"},
		{name: "value outside the mask", rule: Rule{ID: 2, Action: drop, Matches: []Match{{Field: "qfi", Value: 3, Mask: 1}}},
			field: "matches[0].value"},
		{name: "reversed range", rule: Rule{ID: 2, Action: drop, Matches: []Match{{Field: "dstPort", Ranged: true, Lo: 9, Hi: 8}}},
			field: "matches[0].range"},
		{name: "address without a prefix", rule: Rule{ID: 2, Action: drop, Matches: []Match{{Field: "innerDst"}}},
			field: "matches[0].prefix"},
		{name: "prefix on a number", rule: Rule{ID: 2, Action: drop,
			Matches: []Match{{Field: "qfi", Prefix: netip.MustParsePrefix("10.0.0.0/8")}}}, field: "matches[0].prefix"},
		{name: "IPv4 written as IPv6", rule: Rule{ID: 2, Action: drop,
			Matches: []Match{{Field: "innerDst", Prefix: netip.MustParsePrefix("::ffff:10.0.0.0/104")}}}, field: "matches[0].prefix"},
		{name: "ranges that split too far", rule: Rule{ID: 2, Action: drop, Matches: []Match{
			{Field: "srcPort", Ranged: true, Lo: 1, Hi: 65534}, {Field: "dstPort", Ranged: true, Lo: 1, Hi: 65534}}}, field: "matches[1].range"},
		{name: "a third mask", rule: Rule{ID: 2, Action: drop, Matches: []Match{{Field: "dstPort", Ranged: true, Lo: 1, Hi: 3}}},
			field: "matches"}, // 1 under one mask, 2 and 3 under another
	} {
		err := table.Add(c.rule)
		var re *fielderr.Error
		if !errors.As(err, &re) || re.Field != c.field {
			t.Errorf("%s: %v, want an error naming %s", c.name, err, c.field)
		}
		if table.Len() != 1 || table.Masks() != 1 {
			t.Errorf("%s: the table has %d rules and %d masks after the refusal", c.name, table.Len(), table.Masks())
		}
	}
	var k Key
	k.SetNumber(field(t, "layerId"), 1)
	if r, ok := table.Lookup(&k); !ok || r.ID != 1 {
		t.Errorf("the good rule no longer matches: %+v %t", r, ok)
	}
}

// Values the parser never writes into a field narrower than its octets are
// refused by CheckValues, naming the match; those it writes pass.
func TestCheckValues(t *testing.T) {
	for _, c := range []struct {
		name  string
		match Match
		field string // "" for a match that passes
	}{
		{name: "DSCP beyond 6 bits", match: Match{Field: "dscp", Value: 64, Mask: 0xff}, field: "matches[0]"},
		{name: "DSCP 63", match: Match{Field: "dscp", Value: 63, Mask: 0xff}},
		{name: "QFI beyond 6 bits", match: Match{Field: "qfi", Value: 64, Mask: 0xff}, field: "matches[0]"},
		{name: "temporalId beyond TID 7", match: Match{Field: "temporalId", Value: 7, Mask: 0xff}, field: "matches[0]"},
		{name: "temporalId 6", match: Match{Field: "temporalId", Value: 6, Mask: 0xff}},
		{name: "layerId range beyond 6 bits", match: Match{Field: "layerId", Ranged: true, Lo: 1, Hi: 64}, field: "matches[0].range"},
		{name: "layerId range to 63", match: Match{Field: "layerId", Ranged: true, Lo: 1, Hi: 63}},
		{name: "nalType beyond 6 bits", match: Match{Field: "nalType", Value: 64, Mask: 0xff}, field: "matches[0]"},
		{name: "more tunnels than levels", match: Match{Field: "tunnels", Value: 5, Mask: 0xff}, field: "matches[0]"},
		{name: "no such tunnel type", match: Match{Field: "tunnel1", Value: 9, Mask: 0xff}, field: "matches[0]"},
		{name: "GTP-U tunnel", match: Match{Field: "tunnel1", Value: uint64(TunnelGTPU), Mask: 0xff}},
		{name: "rtp neither 0 nor 1", match: Match{Field: "rtp", Value: 2, Mask: 0xff}, field: "matches[0]"},
		{name: "h265 neither 0 nor 1", match: Match{Field: "h265", Value: 2, Mask: 0xff}, field: "matches[0]"},
		{name: "RTP payload type beyond 7 bits", match: Match{Field: "rtpPayloadType", Value: 128, Mask: 0xff}, field: "matches[0]"},
		{name: "a masked value within the bits", match: Match{Field: "dscp", Value: 0x20, Mask: 0xe0}},
		{name: "a whole octet", match: Match{Field: "proto", Value: 255, Mask: 0xff}},
	} {
		err := CheckValues([]Match{c.match})
		var re *fielderr.Error
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.field != "" && (!errors.As(err, &re) || re.Field != c.field):
			t.Errorf("%s: %v, want an error naming %s", c.name, err, c.field)
		}
	}
}
