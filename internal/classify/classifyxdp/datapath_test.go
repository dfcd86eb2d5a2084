package classifyxdp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/fielderr"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// randomFrame is a nested packet of one of the paper's traffic types or
// GRE, over small domains of addresses, ports, tunnel ids and video
// layers, so that rules over the same domains match it often.
func randomFrame(random *rand.Rand) []byte {
	pick := func(n int) int { return random.IntN(n) }
	srcs, dsts := []string{"10.45.0.2", "10.45.1.2", "10.46.0.2"}, []string{"10.100.6.2", "10.100.6.3", "10.100.7.2"}
	inner := []gopacket.SerializableLayer{ipv4(srcs[pick(3)], dsts[pick(3)], layers.IPProtocolUDP),
		udp(40000, []layers.UDPPort{5004, 5005, 80, 5001}[pick(4)])}
	if pick(3) > 0 {
		inner = append(inner, demo.RTPH265(0xcafe, 1, byte(pick(2)), 1))
	}
	vxlanOuter := []gopacket.SerializableLayer{eth(layers.EthernetTypeIPv4), ipv4("192.0.2.1", "192.0.2.2", layers.IPProtocolUDP),
		udp(50000, 4789), &layers.VXLAN{ValidIDFlag: true, VNI: []uint32{100, 200}[pick(2)]}, eth(layers.EthernetTypeIPv4)}
	gtp := []gopacket.SerializableLayer{ipv4("10.100.3.1", "10.100.3.2", layers.IPProtocolUDP), udp(2152, 2152),
		&layers.GTPv1U{Version: 1, ProtocolType: 1, MessageType: 255, TEID: []uint32{0x100, 0x101}[pick(2)]}}
	var ls []gopacket.SerializableLayer
	switch pick(4) {
	case 0: // IP flow
		ls = slices.Concat([]gopacket.SerializableLayer{eth(layers.EthernetTypeIPv4)}, inner)
	case 1: // multi-tenant flow
		ls = slices.Concat(vxlanOuter, inner)
	case 2: // 5G multi-tenant flow
		ls = slices.Concat(vxlanOuter, gtp, inner)
	default:
		ls = slices.Concat([]gopacket.SerializableLayer{eth(layers.EthernetTypeIPv4), ipv4("192.0.2.1", "192.0.2.2", layers.IPProtocolGRE),
			&layers.GRE{KeyPresent: true, Key: uint32(pick(2)), Protocol: layers.EthernetTypeIPv4}}, inner)
	}
	return demo.Serialize(false, ls...)
}

// randomRule is a rule of one of a few shapes over the domains of
// randomFrame: the distinct masks stay within what the data path takes.
func randomRule(random *rand.Rand, id uint32) Rule {
	pick := func(n int) int { return random.IntN(n) }
	prefix := func(s string) Match {
		return Match{Field: []string{"innerSrc", "innerDst"}[pick(2)], Prefix: netip.MustParsePrefix(s)}
	}
	exact := func(field string, values ...uint64) Match {
		f, _ := FieldByName(field)
		return Match{Field: field, Value: values[pick(len(values))], Mask: f.max()}
	}
	ranges := [][2]uint64{{5000, 5007}, {5004, 5005}, {0, 1023}}
	shapes := [][]Match{
		{prefix([]string{"10.100.6.0/24", "10.45.0.0/16"}[pick(2)]), exact("dstPort", 5004, 5005, 80)},
		{prefix([]string{"10.100.6.2/32", "10.46.0.2/32"}[pick(2)]), {Field: "layerId", Value: uint64(pick(2)), Mask: 0x3f}},
		{exact("tunnels", 0, 1, 2), exact("tunnel1Id", 100, 200, 0, 1)},
		{exact("tunnel2Id", 0x100, 0x101), exact("layerId", 0, 1)},
		{exact("tunnel1", uint64(TunnelVXLAN), uint64(TunnelGRE)), exact("rtp", 0, 1)},
		{func() Match { r := ranges[pick(3)]; return Match{Field: "dstPort", Ranged: true, Lo: r[0], Hi: r[1]} }()},
		{exact("h265", 1), exact("dscp", 46, 0)},
	}
	return Rule{ID: id, Priority: uint32(pick(5)), Matches: shapes[pick(len(shapes))],
		Action: []ActionKind{ActionDrop, ActionPass, ActionCount}[pick(3)]}
}

// The data path's verdicts, against the linear reference over the keys the
// data path parsed: random rules, random nested packets, each packet twice
// (the second from the flow cache), then again after half the rules went
// (the flow cache must not answer for the old rules).
func TestDatapathAgreesWithReference(t *testing.T) {
	p := newParser(t)
	p.grace = 0 // nothing runs the program between the test's runs
	random := rand.New(rand.NewPCG(17, 19))
	var rules []Rule
	for id := range uint32(200) {
		r := randomRule(random, id+1)
		if err := p.Add(r); err != nil {
			t.Fatalf("rule %+v: %v", r, err)
		}
		rules = append(rules, r)
	}
	frames := make([][]byte, 2000)
	for i := range frames {
		frames[i] = randomFrame(random)
	}
	ruleOf := func() map[uint32]uint32 {
		m := map[uint32]uint32{}
		for id, slot := range p.slots {
			m[slot] = id
		}
		return m
	}
	met := map[uint32]uint64{} // runs that met each rule
	compare := func(what string) {
		t.Helper()
		bySlot := ruleOf()
		winners := map[uint32]bool{}
		for i, frame := range frames {
			for pass := range 2 {
				action, st := p.run(t, frame)
				key := Key(bytesOf(st.Key))
				want, ok := referenceLookup(rules, &key)
				got, gotOK := bySlot[st.Rule]
				if ok != gotOK || got != want.ID {
					t.Fatalf("%s: frame %d, run %d: the data path's last rule is %d (%t), the reference's %d (%t); key % x",
						what, i, pass, got, gotOK, want.ID, ok, key[:])
				}
				if wantAction := xdplink.Pass; ok && want.Action == ActionDrop && action != xdplink.Drop || (!ok || want.Action != ActionDrop) && action != wantAction {
					t.Fatalf("%s: frame %d: action %d for rule %+v", what, i, action, want)
				}
				if gotOK {
					winners[got] = true
				}
				for _, r := range referenceChain(rules, &key) {
					met[r.ID]++
				}
			}
		}
		t.Logf("%s: %d rules, %d masks, %d rules won", what, p.Len(), p.table.Masks(), len(winners))
		if len(winners) < 10 {
			t.Errorf("%s: only %d rules won: the test shows little", what, len(winners))
		}
	}
	compare("added")
	for i := len(rules) - 1; i >= 0; i -= 2 {
		if err := p.Delete(rules[i].ID); err != nil {
			t.Fatal(err)
		}
		rules = slices.Delete(rules, i, i+1)
	}
	compare("half deleted")

	// Every run counted by every rule it met, and only there.
	handedOn := 0
	for _, r := range rules {
		n, _, err := p.Counters(r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if n != met[r.ID] {
			t.Errorf("rule %d counted %d packets, met %d", r.ID, n, met[r.ID])
		}
	}
	for _, frame := range frames {
		_, st := p.run(t, frame)
		key := Key(bytesOf(st.Key))
		if chain := referenceChain(rules, &key); len(chain) > 1 && !chain[len(chain)-1].Action.handsOn() {
			handedOn++
		}
	}
	t.Logf("%d of %d frames met a count rule and then one that decided", handedOn, len(frames))
	if handedOn < len(frames)/20 {
		t.Errorf("only %d of %d frames met a count rule and then one that decided: the test shows little", handedOn, len(frames))
	}
}

// Rules change while packets are classified on another CPU: every verdict
// is that of a whole rule set, the one before a change or the one after,
// never of a half-written one.
func TestRuleChangesAreHitless(t *testing.T) {
	p := newParser(t)
	random := rand.New(rand.NewPCG(23, 29))
	frames := make([][]byte, 50)
	for i := range frames {
		frames[i] = randomFrame(random)
	}
	// A version is the rule set after a change, and which rule each
	// counter slot held then.
	type version struct {
		rules  []Rule
		bySlot map[uint32]uint32
	}
	snapshot := func(rules []Rule) version {
		v := version{rules: slices.Clone(rules), bySlot: map[uint32]uint32{}}
		for id, slot := range p.slots {
			v.bySlot[slot] = id
		}
		return v
	}
	var rules []Rule
	for id := range uint32(60) {
		r := randomRule(random, id+1)
		if err := p.Add(r); err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r)
	}
	versions := []version{snapshot(rules)}
	var done atomic.Bool
	var current atomic.Int64 // index of the last version wholly in place
	type observation struct {
		frame         int
		slot          uint32
		before, after int64
	}
	seen := make(chan []observation)
	failed := make(chan error, 1)
	go func() {
		var obs []observation
		for i := 0; !done.Load(); i++ {
			before := current.Load()
			_, st, err := p.try(frames[i%len(frames)])
			if err != nil {
				failed <- err
				break
			}
			obs = append(obs, observation{frame: i % len(frames), slot: st.Rule, before: before, after: current.Load()})
		}
		seen <- obs
	}()
	next := uint32(1000)
	for range 150 {
		if random.IntN(2) == 0 && len(rules) > 1 {
			i := random.IntN(len(rules))
			if err := p.Delete(rules[i].ID); err != nil {
				t.Fatal(err)
			}
			rules = slices.Delete(rules, i, i+1)
		} else {
			r := randomRule(random, next)
			next++
			if err := p.Add(r); err != nil {
				t.Fatal(err)
			}
			rules = append(rules, r)
		}
		versions = append(versions, snapshot(rules))
		current.Store(int64(len(versions) - 1))
	}
	done.Store(true)
	obs := <-seen
	select {
	case err := <-failed:
		t.Fatal(err)
	default:
	}
	keys := make([]Key, len(frames)) // a key does not depend on the rules
	for i, f := range frames {
		_, st := p.run(t, f)
		keys[i] = Key(bytesOf(st.Key))
	}
	for _, o := range obs {
		key := keys[o.frame]
		ok := false
		// The change after o.after may have been switched to already.
		for v := o.before; v <= min(o.after+1, int64(len(versions)-1)) && !ok; v++ {
			want, found := referenceLookup(versions[v].rules, &key)
			got, gotFound := versions[v].bySlot[o.slot]
			ok = found == gotFound && got == want.ID
		}
		if !ok {
			t.Fatalf("frame %d between versions %d and %d got rule slot %d: no whole rule set gives that", o.frame, o.before, o.after, o.slot)
		}
	}
	t.Logf("%d packets classified during %d changes", len(obs), len(versions)-1)
	if len(obs) < 1000 {
		t.Errorf("only %d packets classified during the changes", len(obs))
	}
}

// A batch of rules goes in whole or not at all; a refusal names the rule.
func TestBatchesAreAllOrNothing(t *testing.T) {
	p := newParser(t)
	frame := randomFrame(rand.New(rand.NewPCG(1, 1)))
	catchAll := func(id uint32, a ActionKind) Rule {
		return Rule{ID: id, Priority: id, Action: a, Matches: []Match{{Field: "tunnels", Mask: 0}}}
	}
	toNoSlice := catchAll(2, ActionSteer)
	toNoSlice.Slice = 7
	for _, c := range []struct {
		name  string
		batch []Rule
		field string
	}{
		{name: "a slice that is not there", batch: []Rule{catchAll(1, ActionDrop), toNoSlice}, field: "rules[1].slice"},
		{name: "an ID twice", batch: []Rule{catchAll(1, ActionDrop), catchAll(1, ActionDrop)}, field: "rules[1].id"},
	} {
		var re *fielderr.Error
		if err := p.Add(c.batch...); !errors.As(err, &re) || re.Field != c.field {
			t.Errorf("%s: %v, want an error naming %s", c.name, err, c.field)
		}
		if action, st := p.run(t, frame); p.Len() != 0 || action != xdplink.Pass || st.Rule != 0 {
			t.Errorf("%s: %d rules, action %d, rule slot %d after the refusal", c.name, p.Len(), action, st.Rule)
		}
	}
	if err := p.Add(catchAll(1, ActionCount), catchAll(2, ActionDrop)); err != nil {
		t.Fatal(err)
	}
	if action, _ := p.run(t, frame); action != xdplink.Drop {
		t.Errorf("action %d with the batch in place, want XDP_DROP", action)
	}
	// Rules are about IP: an ARP frame goes on whatever they say.
	arp := demo.Serialize(false, eth(layers.EthernetTypeARP), &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4,
		HwAddressSize: 6, ProtAddressSize: 4, Operation: 1, SourceHwAddress: macA, SourceProtAddress: []byte{10, 0, 0, 1},
		DstHwAddress: make([]byte, 6), DstProtAddress: []byte{10, 0, 0, 2}})
	if action, st := p.run(t, arp); action != xdplink.Pass || st.Rule != 0 {
		t.Errorf("an ARP frame under a catch-all drop: action %d, rule slot %d", action, st.Rule)
	}
	if err := p.Delete(2, 7); err == nil || p.Len() != 2 {
		t.Errorf("deleting a rule that is not there: %v, %d rules left", err, p.Len())
	}
	if err := p.Delete(1, 2); err != nil || p.Len() != 0 {
		t.Fatalf("%v, %d rules left", err, p.Len())
	}
	if action, st := p.run(t, frame); action != xdplink.Pass || st.Rule != 0 {
		t.Errorf("action %d, rule slot %d with no rules", action, st.Rule)
	}
}

// Fragments take the verdict of their packet's first fragment, at
// whichever level the packet was fragmented; one whose first fragment was
// not seen gets the configured action.
func TestFragmentsFollowTheFirst(t *testing.T) {
	fragment := func(src, dst string, id uint16, offset uint16, more bool, rest ...gopacket.SerializableLayer) []gopacket.SerializableLayer {
		ip := ipv4(src, dst, layers.IPProtocolUDP)
		ip.Id, ip.FragOffset = id, offset
		if more {
			ip.Flags = layers.IPv4MoreFragments
		}
		return append([]gopacket.SerializableLayer{ip}, rest...)
	}
	frame := func(ls ...[]gopacket.SerializableLayer) []byte { return demo.Serialize(false, slices.Concat(ls...)...) }
	l2 := []gopacket.SerializableLayer{eth(layers.EthernetTypeIPv4)}
	junk := gopacket.Payload(make([]byte, 24))
	first := frame(l2, fragment("10.45.0.2", "10.100.6.2", 7, 0, true, udp(40000, 5004), junk))
	later := frame(l2, fragment("10.45.0.2", "10.100.6.2", 7, 4, false, junk))
	orphan := frame(l2, fragment("10.45.0.2", "10.100.6.2", 8, 4, false, junk))
	// The first's Identification, from another source: another packet's.
	stranger := frame(l2, fragment("10.45.0.9", "10.100.6.2", 7, 4, false, junk))
	// A VXLAN packet fragmented outside, the rule's flow inside.
	outerFirst := frame(l2, fragment("192.0.2.1", "192.0.2.2", 9, 0, true, udp(50000, 4789),
		&layers.VXLAN{ValidIDFlag: true, VNI: 1}, eth(layers.EthernetTypeIPv4)), []gopacket.SerializableLayer{
		ipv4("10.45.0.2", "10.100.6.2", layers.IPProtocolUDP), udp(40000, 5004), junk})
	outerLater := frame(l2, fragment("192.0.2.1", "192.0.2.2", 9, 10, false, junk))
	// The same over IPv6, with a Fragment header.
	ip6 := func(next layers.IPProtocol) *layers.IPv6 {
		return &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: next, SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("2001:db8::2")}
	}
	v6First := demo.Serialize(false, eth(layers.EthernetTypeIPv6), ip6(layers.IPProtocolIPv6Fragment),
		&layers.IPv6Fragment{NextHeader: layers.IPProtocolUDP, Identification: 0x1234, MoreFragments: true}, udp(40000, 5004), junk)
	v6Later := demo.Serialize(false, eth(layers.EthernetTypeIPv6), ip6(layers.IPProtocolIPv6Fragment),
		&layers.IPv6Fragment{NextHeader: layers.IPProtocolUDP, Identification: 0x1234, FragmentOffset: 20}, junk)

	p := newParser(t)
	drop := func(id uint32, dst string) Rule {
		return Rule{ID: id, Action: ActionDrop, Matches: []Match{{Field: "innerDst", Prefix: netip.MustParsePrefix(dst)},
			{Field: "dstPort", Value: 5004, Mask: 0xffff}}}
	}
	if err := p.Add(drop(1, "10.100.6.2/32"), drop(2, "2001:db8::2/128")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		frame  []byte
		action xdplink.Action
		rule   uint32
	}{
		{name: "first fragment", frame: first, action: xdplink.Drop, rule: 1},
		{name: "a later one", frame: later, action: xdplink.Drop, rule: 1},
		{name: "an orphan", frame: orphan, action: xdplink.Pass, rule: 0},
		{name: "another source's", frame: stranger, action: xdplink.Pass, rule: 0},
		{name: "outer first fragment", frame: outerFirst, action: xdplink.Drop, rule: 1},
		{name: "outer later fragment", frame: outerLater, action: xdplink.Drop, rule: 1},
		{name: "IPv6 first fragment", frame: v6First, action: xdplink.Drop, rule: 2},
		{name: "IPv6 later fragment", frame: v6Later, action: xdplink.Drop, rule: 2},
	} {
		action, st := p.run(t, c.frame)
		if action != c.action || st.Rule != p.slots[c.rule] {
			t.Errorf("%s: action %d, rule slot %d; want %d, rule %d (slot %d)", c.name, action, st.Rule, c.action, c.rule, p.slots[c.rule])
		}
	}
	if n, _, _ := p.Counters(1); n != 4 {
		t.Errorf("rule 1 counted %d packets, want its 4 fragments", n)
	}

	strict := newParserWith(t, Config{OrphanFragments: ActionDrop})
	if action, _ := strict.run(t, orphan); action != xdplink.Drop {
		t.Errorf("an orphan with orphans dropped: action %d", action)
	}
}

// A count or mirror rule hands the packet on to the best rule below it,
// which acts as if the count or mirror rule had not matched; every rule a
// packet meets counts it. A mirror with a drop or redirect below passes the
// packet to TC with the copies and that rule in its metadata.
func TestCountAndMirrorHandOn(t *testing.T) {
	frame := demo.Serialize(false, eth(layers.EthernetTypeIPv4), ipv4("10.45.0.2", "10.100.6.2", layers.IPProtocolUDP),
		udp(40000, 5004), gopacket.Payload(make([]byte, 32)))
	port := Match{Field: "dstPort", Value: 5004, Mask: 0xffff}
	udpProto := Match{Field: "proto", Value: 17, Mask: 0xff}
	dst := Match{Field: "innerDst", Prefix: netip.MustParsePrefix("10.100.6.0/24")}
	out := &Egress{Interface: "lo", Ifindex: 1, DstMAC: macB, SrcMAC: macA}
	rule := func(id, priority uint32, a ActionKind, m ...Match) Rule {
		r := Rule{ID: id, Priority: priority, Action: a, Matches: m}
		if a == ActionMirror || a == ActionRedirect {
			r.Out = out
		}
		return r
	}
	const drop, redirect = uint8(ActionDrop), uint8(ActionRedirect)
	for _, c := range []struct {
		name   string
		rules  []Rule
		action xdplink.Action
		met    []uint32 // the rules that count the packet, in order
		// then is the rule below the mirrors that TC applies, thenAction
		// its action; mirrors the mirroring rules. No metadata without.
		mirrors    []uint32
		then       uint32
		thenAction uint8
	}{
		{name: "count, then a drop of another mask", rules: []Rule{rule(1, 30, ActionCount, port), rule(2, 20, ActionDrop, udpProto)},
			action: xdplink.Drop, met: []uint32{1, 2}},
		{name: "count, then a drop of the same match", rules: []Rule{rule(1, 30, ActionCount, port), rule(2, 20, ActionDrop, port)},
			action: xdplink.Drop, met: []uint32{1, 2}},
		{name: "two counts of one match, a count between, then a drop", rules: []Rule{rule(1, 30, ActionCount, port),
			rule(2, 20, ActionDrop, port), rule(3, 25, ActionCount, dst), rule(4, 28, ActionCount, port), rule(5, 10, ActionPass)},
			action: xdplink.Drop, met: []uint32{1, 4, 3, 2}},
		{name: "counts, then a pass above a drop", rules: []Rule{rule(1, 30, ActionCount, port), rule(2, 25, ActionCount, dst),
			rule(3, 20, ActionPass, udpProto), rule(4, 10, ActionDrop)}, action: xdplink.Pass, met: []uint32{1, 2, 3}},
		{name: "count, then a redirect", rules: []Rule{rule(1, 30, ActionCount, port), rule(2, 20, ActionRedirect, dst)},
			action: xdplink.Redirect, met: []uint32{1, 2}},
		{name: "count alone", rules: []Rule{rule(1, 30, ActionCount, port), rule(2, 20, ActionDrop, Match{Field: "proto", Value: 6, Mask: 0xff})},
			action: xdplink.Pass, met: []uint32{1}},
		{name: "a count above the last rule a packet meets is not applied", rules: []Rule{rule(1, 40, ActionCount, port),
			rule(2, 30, ActionCount, port), rule(3, 20, ActionCount, port), rule(4, 10, ActionCount, port), rule(5, 0, ActionDrop, port)},
			action: xdplink.Pass, met: []uint32{1, 2, 3, 4}},
		{name: "a mirror, then a drop", rules: []Rule{rule(1, 30, ActionMirror, port), rule(2, 20, ActionDrop, dst)},
			action: xdplink.Pass, met: []uint32{1, 2}, mirrors: []uint32{1}, then: 2, thenAction: drop},
		{name: "a mirror, a count, a mirror, then a redirect", rules: []Rule{rule(1, 30, ActionMirror, port), rule(2, 25, ActionCount, dst),
			rule(3, 22, ActionMirror, udpProto), rule(4, 20, ActionRedirect, port)},
			action: xdplink.Pass, met: []uint32{1, 2, 3, 4}, mirrors: []uint32{1, 0, 3}, then: 4, thenAction: redirect},
		{name: "a mirror, then a pass", rules: []Rule{rule(1, 30, ActionMirror, port), rule(2, 20, ActionPass, dst)},
			action: xdplink.Pass, met: []uint32{1, 2}, mirrors: []uint32{1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newParser(t)
			if err := p.Add(c.rules...); err != nil {
				t.Fatal(err)
			}
			for run := range 2 { // the second from the flow cache
				action, st := p.run(t, frame)
				if last := c.met[len(c.met)-1]; action != c.action || st.Rule != p.slots[last] {
					t.Errorf("run %d: action %d, last rule slot %d; want %d, rule %d (slot %d)", run, action, st.Rule, c.action, last, p.slots[last])
				}
			}
			for _, r := range c.rules {
				want := uint64(0)
				if slices.Contains(c.met, r.ID) {
					want = 2
				}
				if n, _, _ := p.Counters(r.ID); n != want {
					t.Errorf("rule %d counted %d packets, want %d", r.ID, n, want)
				}
			}
			p.checkEntries(t, "with the rules")
			// A rule above them all that decides: every list of its value
			// is one level now.
			top := Rule{ID: 99, Priority: 99, Action: ActionDrop, Matches: c.rules[0].Matches}
			if err := p.Add(top); err != nil {
				t.Fatal(err)
			}
			p.checkEntries(t, "with a drop above")
			if err := p.Delete(top.ID); err != nil {
				t.Fatal(err)
			}
			p.checkEntries(t, "without it")
			_, left := p.runOut(t, frame)
			meta := left[:len(left)-len(frame)]
			want := []byte{}
			if c.mirrors != nil {
				want = binary.NativeEndian.AppendUint32(want, 0x6d697272) // CLASSIFY_MIRROR_MAGIC
				for i := range maxChain {
					var slot uint32
					if i < len(c.mirrors) && c.mirrors[i] != 0 {
						slot = p.slots[c.mirrors[i]]
					}
					want = binary.NativeEndian.AppendUint32(want, slot)
				}
				want = binary.NativeEndian.AppendUint32(want, p.slots[c.then])
				want = append(want, c.thenAction, 0, 0, 0)
			}
			if !bytes.Equal(meta, want) {
				t.Errorf("metadata % x, want % x", meta, want)
			}
			if err := p.Clear(); err != nil {
				t.Fatal(err)
			}
			p.checkEntries(t, "cleared")
		})
	}
}

// checkEntries brings the half packets do not use up to date and checks
// that the entries of both are those of the table: each masked value's
// rules, best first, down to the first that neither counts nor mirrors.
func (p *parser) checkEntries(t *testing.T, what string) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.commit(nil); err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, g := range p.table.groups {
		for _, list := range g.values {
			levels := 0
			for _, e := range list {
				levels++
				if levels == maxChain || !e.rule.Action.handsOn() {
					break
				}
			}
			want += 2 * levels
		}
	}
	got := 0
	var k classifyClassifyEntryKey
	for it := p.objs.ClassifyEntries.Iterate(); it.Next(&k, new(classifyClassifyVerdict)); {
		got++
	}
	if got != want {
		t.Errorf("%s: %d entries in the data path, want %d", what, got, want)
	}
}

// fragmentIP splits an IP packet built whole into fragments at the given
// offsets of its payload (multiples of 8), by hand: the header copied with
// the fragment offset, the More Fragments flag and its lengths set; for
// IPv6 a Fragment header after the fixed header.
func fragmentIP(t *testing.T, ip []byte, id uint32, cuts ...int) [][]byte {
	t.Helper()
	hlen, v6 := int(ip[0]&0x0f)*4, ip[0]>>4 == 6
	if v6 {
		hlen = 40
	}
	payload := ip[hlen:]
	bounds := append(append([]int{0}, cuts...), len(payload))
	var out [][]byte
	for i := range len(bounds) - 1 {
		piece, more, offset := payload[bounds[i]:bounds[i+1]], i < len(bounds)-2, uint16(bounds[i]/8)
		var frame []byte
		if v6 {
			var outer layers.IPv6
			if err := outer.DecodeFromBytes(ip, gopacket.NilDecodeFeedback); err != nil {
				t.Fatal(err)
			}
			next := outer.NextHeader
			outer.NextHeader = layers.IPProtocolIPv6Fragment
			frame = demo.Serialize(false, eth(layers.EthernetTypeIPv6), &outer,
				&layers.IPv6Fragment{NextHeader: next, FragmentOffset: offset, MoreFragments: more, Identification: id}, gopacket.Payload(piece))
		} else {
			var outer layers.IPv4
			if err := outer.DecodeFromBytes(ip, gopacket.NilDecodeFeedback); err != nil {
				t.Fatal(err)
			}
			outer.Id, outer.FragOffset, outer.Flags = uint16(id), offset, 0
			if more {
				outer.Flags = layers.IPv4MoreFragments
			}
			frame = demo.Serialize(true, eth(layers.EthernetTypeIPv4), &outer, gopacket.Payload(piece))
		}
		out = append(out, frame)
	}
	return out
}

// A tunnel whose outer IP packet is fragmented in three, every header in
// the first fragment: the first fragment gives the key of the packet
// whole (although its inner IP header, and GTP-U's length, claim more than
// it holds), and all three get the verdict of a rule on the tunnel and the
// inner flow, as the packet whole does.
func TestFragmentedTunnelsAreClassified(t *testing.T) {
	const ue, dn = "10.45.0.2", "10.100.6.2"
	inner := []gopacket.SerializableLayer{ipv4(ue, dn, layers.IPProtocolUDP), udp(40000, 5004), demo.RTPH265(0xcafe, 19, 1, 1),
		gopacket.Payload(make([]byte, 200))}
	vxlan := slices.Concat([]gopacket.SerializableLayer{udp(50000, 4789), &layers.VXLAN{ValidIDFlag: true, VNI: 100},
		eth(layers.EthernetTypeIPv4)}, inner)
	gtpu := slices.Concat([]gopacket.SerializableLayer{udp(2152, 2152), &layers.GTPv1U{Version: 1, ProtocolType: 1, MessageType: 255,
		TEID: 0x100, GTPExtensionHeaders: []layers.GTPExtensionHeader{{Type: 0x85, Content: []byte{0x10, 9}}}}}, inner)
	outer4 := func(ls []gopacket.SerializableLayer) []byte {
		return demo.Serialize(false, slices.Concat([]gopacket.SerializableLayer{ipv4("192.0.2.1", "192.0.2.2", layers.IPProtocolUDP)}, ls)...)
	}
	outer6 := func(ls []gopacket.SerializableLayer) []byte {
		ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP,
			SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("2001:db8::2")}
		return demo.Serialize(false, slices.Concat([]gopacket.SerializableLayer{ip}, ls)...)
	}
	flow := []Match{{Field: "innerSrc", Prefix: netip.MustParsePrefix(ue + "/32")}, {Field: "innerDst", Prefix: netip.MustParsePrefix(dn + "/32")},
		{Field: "proto", Value: 17, Mask: 0xff}, {Field: "srcPort", Value: 40000, Mask: 0xffff}, {Field: "dstPort", Value: 5004, Mask: 0xffff}}
	tunnel := func(typ uint8, id uint64, more ...Match) []Match {
		return slices.Concat([]Match{{Field: "tunnels", Value: 1, Mask: 0xff}, {Field: "tunnel1", Value: uint64(typ), Mask: 0xff},
			{Field: "tunnel1Id", Value: id, Mask: 0xffffffff}}, more, flow)
	}
	for i, c := range []struct {
		name string
		ip   []byte
		rule []Match
	}{
		{name: "VXLAN in IPv4", ip: outer4(vxlan), rule: tunnel(TunnelVXLAN, 100)},
		{name: "VXLAN in IPv6", ip: outer6(vxlan), rule: tunnel(TunnelVXLAN, 100)},
		{name: "GTP-U in IPv4", ip: outer4(gtpu), rule: tunnel(TunnelGTPU, 0x100, Match{Field: "qfi", Value: 9, Mask: 0x3f})},
		{name: "GTP-U in IPv6", ip: outer6(gtpu), rule: tunnel(TunnelGTPU, 0x100, Match{Field: "qfi", Value: 9, Mask: 0x3f})},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newParser(t)
			whole := demo.Ethernet(macB, macA, c.ip)
			wholeKey := p.parse(t, whole).Key
			// What the packet would be taken for if its tunnel were not
			// read: a higher rule that must not match.
			untunnelled := Rule{ID: 2, Priority: 9, Action: ActionPass, Matches: []Match{{Field: "tunnels", Value: 0, Mask: 0xff}}}
			if err := p.Add(Rule{ID: 1, Priority: 1, Action: ActionDrop, Matches: c.rule}, untunnelled); err != nil {
				t.Fatal(err)
			}
			if action, st := p.run(t, whole); action != xdplink.Drop || st.Rule != p.slots[1] {
				t.Fatalf("the packet whole: action %d, rule slot %d", action, st.Rule)
			}
			for j, frame := range fragmentIP(t, c.ip, uint32(0x4000+i), 80, 160) {
				action, st := p.run(t, frame)
				if action != xdplink.Drop || st.Rule != p.slots[1] {
					t.Errorf("fragment %d: action %d, rule slot %d; want XDP_DROP by rule 1 (slot %d)", j+1, action, st.Rule, p.slots[1])
				}
				if got, want := bytesOf(st.Key), bytesOf(wholeKey); j == 0 && !bytes.Equal(got, want) {
					t.Errorf("the first fragment's key differs from the packet's:%s", describe(got, want))
				}
			}
			if n, _, _ := p.Counters(1); n != 4 {
				t.Errorf("rule 1 counted %d packets, want the packet whole and its 3 fragments", n)
			}
		})
	}
}

// A full table cleared and filled again at once: the slots of the rules
// gone are given again once they have cooled.
func TestFullTableRefilled(t *testing.T) {
	p := newParser(t)
	full := func(first uint32) []Rule {
		rules := make([]Rule, MaxRules)
		for i := range rules {
			dst := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
			rules[i] = Rule{ID: first + uint32(i), Action: ActionCount, Matches: []Match{{Field: "innerDst", Prefix: netip.PrefixFrom(dst, 32)}}}
		}
		return rules
	}
	if err := p.Add(full(1)...); err != nil {
		t.Fatal(err)
	}
	if err := p.Add(Rule{ID: 1 << 20, Action: ActionDrop}); err == nil {
		t.Error("a rule over the limit was taken")
	}
	if err := p.Clear(); err != nil {
		t.Fatal(err)
	}
	if err := p.Add(full(1 << 20)...); err != nil {
		t.Fatal(err)
	}
	if p.Len() != MaxRules {
		t.Errorf("%d rules after the refill", p.Len())
	}
}

// Every action and tunnel type of the data path has its name in rules, and
// no other.
func TestNamesAreTheDataPaths(t *testing.T) {
	spec, err := loadClassify()
	if err != nil {
		t.Fatal(err)
	}
	// The zero of each enum, no rule's action and no tunnel, is named here
	// only for the check: rules cannot name it.
	actions, tunnels := ActionNames, TunnelNames
	actions[0], tunnels[TunnelNone] = "none", "none"
	testsupport.CheckEnumNames(t, spec, "classify_action", "CLASSIFY_", "", actions[:])
	testsupport.CheckEnumNames(t, spec, "tunnel_type", "TUNNEL_", "", tunnels[:])
}
