package upfxdp

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// chainUPF is newUPF with the classifier in front: the chain classify,
// upf on the interface a test run's packets come in on (the loopback of
// the test's namespace, fakeIfindex).
func chainUPF(t *testing.T, roles Role) (*upf, *classifyxdp.Datapath) {
	t.Helper()
	return chainOn(t, newUPF(t, roles), roles)
}

// chainOn puts the classifier in front of u, whose program has roles.
func chainOn(t *testing.T, u *upf, roles Role) (*upf, *classifyxdp.Datapath) {
	t.Helper()
	rules, err := classifyxdp.OpenDatapath(classifyxdp.Config{Chain: u.d.ChainMaps()})
	testsupport.CheckLoad(t, err)
	t.Cleanup(func() { rules.Close() })
	classify, _, _ := rules.Stages()
	slot, _, err := u.d.slotOf("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := u.d.setChain(fakeIfindex, slot, Chain{Classify: classify}, chainStage(t, u.d, slot, roles)); err != nil {
		t.Fatal(err)
	}
	return &upf{d: u.d, prog: classify, ifindex: u.ifindex}, rules
}

// chainStage loads the UPF's stage and its CPU-map variant for the
// interface in slot, closed with the test.
func chainStage(t *testing.T, d *Datapath, slot uint32, roles Role) chainPrograms {
	t.Helper()
	var stage chainPrograms
	testsupport.CheckLoad(t, d.loadPrograms(slot, roles, &stage))
	t.Cleanup(stage.close)
	return stage
}

// The chain with only the UPF is the UPF's program, alone on the
// interface; a chain of more stages runs the UPF's program unchanged as
// its last stage: with no rule, every frame comes out as from the UPF
// alone, byte for byte, counted the same.
func TestChainForwardsAsTheUPF(t *testing.T) {
	if prog := new(ebpf.Program); (Chain{}).entry(prog) != prog {
		t.Fatal("the chain of the UPF alone does not attach the UPF's program")
	}
	alone := newUPF(t, RoleAccess|RoleCore)
	chained, _ := chainUPF(t, RoleAccess|RoleCore)
	v4 := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 100, id: 7}
	frames := map[string][]byte{
		"uplink":            gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS, ulPSC(9)), v4.bytes(t)),
		"uplink IPv6":       gtpFrame(t, fromGNB, n3Addr, gpdu(teidV6), ipPacket{src: ue6, dst: dn6, ttl: 64, size: 100}.bytes(t)),
		"unknown TEID":      gtpFrame(t, fromGNB, n3Addr, gpdu(0xdead), v4.bytes(t)),
		"echo":              gtpFrame(t, fromGNB, n3Addr, gtpMsg(1, 0), nil),
		"downlink":          ipPacket{src: dn4, dst: ue4, ttl: 64, size: 100}.frame(t, fromGNB),
		"not ours":          ipPacket{src: dn4, dst: ue4Unknown, ttl: 64, size: 10}.frame(t, fromGNB),
		"malformed GTP-U":   withBytes(gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS), v4.bytes(t)), gtpOffset, 0x20),
		"uplink FAR drops":  gtpFrame(t, fromGNB, n3Addr, gpdu(teidFARDrop), v4.bytes(t)),
		"downlink with PSC": ipPacket{src: dn6, dst: ue6, ttl: 64, size: 30}.frame(t, fromGNB),
	}
	for name, in := range frames {
		t.Run(name, func(t *testing.T) { sameAsAlone(t, alone, chained, in) })
	}
}

// sameAsAlone runs in on the UPF alone and on the chain: the same verdict,
// the same outcome counters, the same frame, byte for byte.
func sameAsAlone(t *testing.T, alone, chained *upf, in []byte) {
	t.Helper()
	before := alone.counters(t)
	act, want := alone.run(t, in)
	var reasons []string
	for r, c := range alone.counters(t) {
		if c != before[r] {
			reasons = append(reasons, r)
		}
	}
	testsupport.EqualFrames(t, chained.expect(t, in, act, reasons...), want)
}

// h265RTP is an RTP packet of payload type 96 with an H.265 NAL unit of
// the layer given (0, the base layer; above, enhancement layers).
func h265RTP(layer uint8) []byte {
	const nalType = 1 // a coded slice
	return []byte{
		0x80, 96, 0, 1, 0, 0, 0, 9, 0xca, 0xfe, 0, 1, // RTP: version 2, PT 96, sequence, timestamp, SSRC
		nalType<<1 | layer>>5, (layer&0x1f)<<3 | 1, // NAL unit header: TID 0
		0xaa, 0xbb, 0xcc}
}

// In front of the UPF, a rule that drops the enhancement layers of H.265
// inside GTP-U drops exactly those (the UPF never sees them), and the UPF
// forwards the rest; a counting rule counts a packet that the UPF then
// forwards.
func TestChainClassifyInFrontOfUPF(t *testing.T) {
	u, rules := chainUPF(t, RoleAccess|RoleCore)
	const dropEnhancement, countTEID = 1, 2
	err := rules.Add(
		classifyxdp.Rule{ID: dropEnhancement, Priority: 10, Action: classifyxdp.ActionDrop, Matches: []classifyxdp.Match{
			{Field: "tunnel1", Value: uint64(classifyxdp.TunnelGTPU), Mask: 0xff},
			{Field: "h265", Value: 1, Mask: 1},
			{Field: "layerId", Ranged: true, Lo: 1, Hi: 63}}},
		classifyxdp.Rule{ID: countTEID, Priority: 5, Action: classifyxdp.ActionCount, Matches: []classifyxdp.Match{
			{Field: "tunnel1Id", Value: uint64(teidQoS), Mask: 0xffffffff},
			{Field: "innerSrc", Prefix: netip.PrefixFrom(ue4, 32)}}},
	)
	if err != nil {
		t.Fatal(err)
	}
	base := ipPacket{src: ue4, dst: dn4, ttl: 64, payload: h265RTP(0), id: 1}
	enhancement := base
	enhancement.payload = h265RTP(1)
	top := base
	top.payload = h265RTP(63)
	downlink := ipPacket{src: dn4, dst: ue4, ttl: 64, payload: h265RTP(2)}
	cases := []struct {
		name    string
		in      []byte
		act     xdplink.Action
		reason  string // the UPF's, "" for none
		out     []byte
		dropped bool // by the drop rule
		counted bool // by the count rule
	}{
		{name: "base layer", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS, ulPSC(9)), base.bytes(t)),
			act: xdplink.Redirect, reason: "uplink_forward", out: base.hop().frame(t, nhL2(nhCore)), counted: true},
		{name: "enhancement layer 1", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS, ulPSC(9)), enhancement.bytes(t)),
			act: xdplink.Drop, dropped: true},
		{name: "enhancement layer 63", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS), top.bytes(t)),
			act: xdplink.Drop, dropped: true},
		// Not in GTP-U: the drop rule asks for a tunnel.
		{name: "enhancement layer downlink", in: downlink.frame(t, fromGNB), act: xdplink.Redirect,
			reason: "downlink_forward", out: encapFrame(t, nhL2(nhGNB), n3Addr, gnb, dlTEID, 9, downlink.hop().bytes(t))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			counts := func(id uint32) uint64 {
				p, _, err := rules.Counters(id)
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			dropped, counted := counts(dropEnhancement), counts(countTEID)
			var reasons []string
			if c.reason != "" {
				reasons = append(reasons, c.reason)
			}
			out := u.expect(t, c.in, c.act, reasons...)
			if c.out != nil {
				testsupport.EqualFrames(t, out, c.out)
			}
			if got := counts(dropEnhancement) - dropped; got != b2u(c.dropped) {
				t.Errorf("the drop rule counted %d packets, want %d", got, b2u(c.dropped))
			}
			if got := counts(countTEID) - counted; got != b2u(c.counted) {
				t.Errorf("the count rule counted %d packets, want %d", got, b2u(c.counted))
			}
		})
	}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// steering is a UPF with the classifier's stages for the chains that
// steer on its interface, to a slice of one CPU.
type steering struct {
	u              *upf
	slot           uint32
	stage          chainPrograms
	walked, parsed Chain // the steer stage behind the classify stage; first
}

func newSteering(t *testing.T) steering {
	t.Helper()
	u := newUPF(t, RoleAccess|RoleCore)
	rules, err := classifyxdp.OpenDatapath(classifyxdp.Config{Chain: u.d.ChainMaps()})
	testsupport.CheckLoad(t, err)
	t.Cleanup(func() { rules.Close() })
	const slice = 1
	check(t, rules.SetSlice(classifyxdp.Slice{ID: slice, CPUs: []int{0}}))
	classify, steer, steerFirst := rules.Stages()
	slot, _, err := u.d.slotOf("lo")
	check(t, err)
	return steering{u: u, slot: slot, stage: chainStage(t, u.d, slot, RoleAccess|RoleCore),
		walked: Chain{Classify: classify, Steer: steer, SteerFirst: steerFirst, Slice: slice},
		parsed: Chain{Steer: steer, SteerFirst: steerFirst, Slice: slice}}
}

// hash runs the frame in, behind the metadata meta, through the chain c
// and returns the flow's hash in the metadata the steer stage leaves for
// the CPU it steers to: exactly a struct slice_meta, its hash the second
// word.
func (s steering) hash(t *testing.T, c Chain, meta, in []byte) uint32 {
	t.Helper()
	check(t, s.u.d.setChain(fakeIfindex, s.slot, c, s.stage))
	data := append(bytes.Clone(meta), in...)
	out := make([]byte, len(data)+256)
	var ctx xdplink.Context
	ret, err := c.entry(s.u.prog).Run(&ebpf.RunOptions{Data: data, DataOut: out,
		Context: xdplink.Context{Data: uint32(len(meta)), DataEnd: uint32(len(data))}, ContextOut: &ctx})
	check(t, err)
	if xdplink.Action(ret) != xdplink.Redirect || ctx.Data != 12 {
		t.Fatalf("%v with %d octets of metadata, want a redirect to the CPU map with its 12", xdplink.Action(ret), ctx.Data)
	}
	return binary.NativeEndian.Uint32(out[4:])
}

// The steer stage first in a chain parses the packets of a UPF's
// interfaces itself, without the classifier's walk, yet hashes each flow
// as the steer stage behind the classify stage does (on the walk's key):
// a flow keeps its CPU when the classify stage comes or goes. The hash is
// in the metadata the steer stage leaves for the CPU it steers to.
func TestSteerParseHashesAsTheWalk(t *testing.T) {
	s := newSteering(t)
	v4 := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 100}
	v6 := ipPacket{src: ue6, dst: dn6, ttl: 64, size: 20}
	opts := v4
	opts.options = true
	tagged := fromGNB
	tagged.tci = 42
	cases := []struct {
		name   string
		in     []byte
		sameAs string // the flow of an earlier case; "": a flow of its own
	}{
		{name: "uplink", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS, ulPSC(9)), v4.bytes(t))},
		{name: "uplink, another TEID", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidRoute), v4.bytes(t))},
		{name: "uplink, inner IPv6", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidV6), v6.bytes(t))},
		{name: "downlink", in: ipPacket{src: dn4, dst: ue4, ttl: 64, size: 10}.frame(t, fromGNB)},
		{name: "downlink IPv6", in: ipPacket{src: dn6, dst: ue6, ttl: 64, size: 10}.frame(t, fromGNB)},
		{name: "uplink, tagged", in: gtpFrame(t, tagged, n3Addr, gpdu(teidQoS), v4.bytes(t)), sameAs: "uplink"},
		{name: "uplink, inner options", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS, ext(extRAN, 2), ulPSC(9)), opts.bytes(t)),
			sameAs: "uplink"},
	}
	hashes := map[string]uint32{} // by flow: a case's sameAs, or its name
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			walked := s.hash(t, s.walked, nil, c.in)
			parsed := s.hash(t, s.parsed, nil, c.in)
			if parsed != walked {
				t.Errorf("the steer stage first hashes the flow %#x, behind the classify stage %#x", parsed, walked)
			}
			flow := cmp.Or(c.sameAs, c.name)
			for other, h := range hashes {
				if (h == walked) != (other == flow) {
					t.Errorf("hash %#x, the flow of %s %#x", walked, other, h)
				}
			}
			hashes[flow] = walked
		})
	}
}

// A frame may come to the stages with metadata that is not theirs: what
// the last receiver of a live test run's recycled page left there (its
// frame keeps the metadata's length when its data did not move: a packet
// a full CPU queue dropped), or what the program that redirected it
// wrote. The first stage drops it: the CPU a packet is steered to finds
// its own flow's hash in exactly its steering metadata, never another
// flow's hash (with two steering metadata before it, the steer stage had
// no room for its own) nor a copy's request no rule made.
func TestSteerDropsMetadataTheFrameCameWith(t *testing.T) {
	s := newSteering(t)
	in := gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS, ulPSC(9)), ipPacket{src: ue4, dst: dn4, ttl: 64, size: 100}.bytes(t))
	steered := func(hash uint32) []byte { // struct slice_meta, of the chain's slot
		m := binary.NativeEndian.AppendUint32(nil, 0x736c6963) // "slic"
		m = binary.NativeEndian.AppendUint32(m, hash)
		m = binary.NativeEndian.AppendUint16(m, 1)
		return binary.NativeEndian.AppendUint16(m, uint16(s.slot+1))
	}
	request := binary.NativeEndian.AppendUint32(nil, uint32(upfChainMagicCHAIN_MIRROR_MAGIC))
	request = binary.NativeEndian.AppendUint32(request, fakeIfindex)
	request = append(request, make([]byte, 12)...)
	for _, c := range []struct {
		name  string
		chain Chain
	}{{"classify, steer", s.walked}, {"steer first", s.parsed}} {
		own := s.hash(t, c.chain, nil, in)
		other := ^own
		for _, m := range []struct {
			name string
			meta []byte
		}{
			{"another flow's steering, as often as the headroom holds", bytes.Repeat(steered(other), 18)},
			{"another flow's steering, twice", slices.Concat(steered(other), steered(other))},
			{"another flow's steering", steered(other)},
			{"a copy's request", request},
		} {
			t.Run(c.name+", "+m.name, func(t *testing.T) {
				if got := s.hash(t, c.chain, m.meta, in); got != own {
					t.Errorf("the CPU steered to reads the hash %#x, the flow's is %#x", got, own)
				}
			})
		}
	}
}

// Interfaces with chains take their places in the table of chains by
// their index modulo its size: an interface whose place another holds is
// refused, and the other's chain stays.
func TestChainPlaceTaken(t *testing.T) {
	u, rules := chainUPF(t, RoleAccess|RoleCore)
	classify, _, _ := rules.Stages()
	slot, _, err := u.d.slotOf("lo")
	if err != nil {
		t.Fatal(err)
	}
	stage := chainStage(t, u.d, slot, RoleAccess|RoleCore)
	if err := u.d.setChain(fakeIfindex+chainPlaces, slot, Chain{Classify: classify}, stage); err == nil {
		t.Fatal("a chain at a place another interface holds was accepted")
	}
	// The first interface's chain runs on: the classify stage takes the
	// packet on to the UPF.
	v4 := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 100}
	u.expect(t, gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS, ulPSC(9)), v4.bytes(t)), xdplink.Redirect, "uplink_forward")
	// Gone from its place, the chain takes a packet no further.
	if err := u.d.clearChain(fakeIfindex, slot, rules); err != nil {
		t.Fatal(err)
	}
	u.expect(t, gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS, ulPSC(9)), v4.bytes(t)), xdplink.Pass)
}

// A mirroring rule in front of the UPF: the UPF forwards the packet as
// without the rule and broadcasts it through the fanout of its interface
// and the rule's, with what the copy needs in its metadata (where the UE's
// packet lies in the frame, its length, TTL and checksum as they came, the
// two interfaces and the rule's addresses), counted as a copy sent, on the
// downlink and the uplink alike; without that fanout the copy is counted
// lost and the packet goes all the same. The UE's other traffic and other
// UEs' pass uncopied. A packet that a lower rule drops leaves as its own
// copy: the frame as it came, behind the rule's Ethernet addresses, out of
// the rule's interface.
func TestChainMirror(t *testing.T) {
	u, rules := chainUPF(t, RoleAccess|RoleCore)
	// The next hops' interface and the mirror port are the loopback: a
	// test run sends nothing, but a fanout must name devices.
	const port = fakeIfindex
	for _, slot := range []uint32{nhGNB, nhCore} {
		hop := testNexthops[slot].l2
		check(t, u.d.PutNexthop(slot, Nexthop{Ifindex: port, Dmac: [6]uint8(hop.dst), Smac: [6]uint8(hop.src), Valid: 1}))
	}
	copier, err := u.d.copyProgram()
	testsupport.CheckLoad(t, err)
	check(t, u.d.putFanout(port, port, copier))
	monitor := l2{dst: mac(0x77), src: mac(0x78)}
	out := &classifyxdp.Egress{Ifindex: port, DstMAC: monitor.dst, SrcMAC: monitor.src}
	const mirrorUE, dropOther, mirrorTunnel = 1, 2, 3
	check(t, rules.Add(
		classifyxdp.Rule{ID: mirrorUE, Priority: 10, Action: classifyxdp.ActionMirror, Out: out, Matches: []classifyxdp.Match{
			{Field: "innerDst", Prefix: netip.PrefixFrom(ue4, 32)},
			{Field: "innerSrc", Prefix: netip.PrefixFrom(dn4, 24)}}},
		classifyxdp.Rule{ID: dropOther, Priority: 5, Action: classifyxdp.ActionDrop, Matches: []classifyxdp.Match{
			{Field: "innerSrc", Prefix: netip.PrefixFrom(dn4b, 32)}}},
		classifyxdp.Rule{ID: mirrorTunnel, Priority: 10, Action: classifyxdp.ActionMirror, Out: out, Matches: []classifyxdp.Match{
			{Field: "tunnel1Id", Value: uint64(teidQoS), Mask: 0xffffffff}}},
	))
	down := ipPacket{src: dn4, dst: ue4, ttl: 64, size: 60, id: 3}
	up := ipPacket{src: ue4, dst: dn4, ttl: 9, size: 30, id: 4}
	counts := func(id uint32) uint64 {
		p, _, err := rules.Counters(id)
		check(t, err)
		return p
	}
	for _, c := range []struct {
		name      string
		rule      uint32
		in        []byte
		packet    []byte // the UE's
		forwarded []byte
		reason    string
	}{
		{name: "downlink", rule: mirrorUE, in: down.frame(t, fromDN), packet: down.bytes(t), reason: "downlink_forward",
			forwarded: encapFrame(t, nhL2(nhGNB), n3Addr, gnb, dlTEID, 9, down.hop().bytes(t))},
		{name: "uplink", rule: mirrorTunnel, in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS, ulPSC(9)), up.bytes(t)),
			packet: up.bytes(t), reason: "uplink_forward", forwarded: up.hop().frame(t, nhL2(nhCore))},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := counts(c.rule)
			got := u.expect(t, c.in, xdplink.Redirect, c.reason, "duplicate")
			const metaLen = 32
			if len(got) < metaLen {
				t.Fatalf("%d bytes out, want the metadata and the frame", len(got))
			}
			testsupport.EqualFrames(t, got[metaLen:], c.forwarded)
			le, m := binary.LittleEndian, got[:metaLen]
			for _, f := range []struct {
				name      string
				got, want uint64
			}{
				{"magic", uint64(le.Uint32(m)), uint64(upfDuplMagicMIRROR_MAGIC)},
				{"packet offset", uint64(le.Uint16(m[4:])), uint64(len(c.forwarded) - len(c.packet))},
				{"packet length", uint64(le.Uint16(m[6:])), uint64(len(c.packet))},
				{"checksum", uint64(binary.BigEndian.Uint16(m[8:])), uint64(binary.BigEndian.Uint16(c.packet[10:]))},
				{"TTL", uint64(m[10]), uint64(c.packet[8])},
				{"packet's interface", uint64(le.Uint32(m[12:])), port},
				{"copy's interface", uint64(le.Uint32(m[16:])), port},
			} {
				if f.got != f.want {
					t.Errorf("metadata: %s %d, want %d", f.name, f.got, f.want)
				}
			}
			if !bytes.Equal(m[20:26], monitor.dst) || !bytes.Equal(m[26:32], monitor.src) {
				t.Errorf("metadata: the copy's addresses %x, want %s then %s", m[20:32], monitor.dst, monitor.src)
			}
			if got := counts(c.rule) - before; got != 1 {
				t.Errorf("the mirror rule counted %d packets, want 1", got)
			}
		})
	}
	t.Run("no fanout", func(t *testing.T) {
		check(t, u.d.deleteFanouts(port))
		defer func() { check(t, u.d.putFanout(port, port, copier)) }()
		got := u.expect(t, down.frame(t, fromDN), xdplink.Redirect, "downlink_forward", "drop_duplicate")
		testsupport.EqualFrames(t, got, encapFrame(t, nhL2(nhGNB), n3Addr, gnb, dlTEID, 9, down.hop().bytes(t)))
	})
	for name, p := range map[string]ipPacket{
		"other source": {src: dn4NoRoute, dst: ue4, ttl: 64, size: 20},
		"other UE":     {src: dn4, dst: ue4b, ttl: 64, size: 20},
	} {
		t.Run(name, func(t *testing.T) {
			before := counts(mirrorUE)
			u.expect(t, p.frame(t, fromDN), xdplink.Redirect, "downlink_forward")
			if got := counts(mirrorUE) - before; got != 0 {
				t.Errorf("the mirror rule counted %d packets, want none", got)
			}
		})
	}
	t.Run("dropped below", func(t *testing.T) {
		dropped := ipPacket{src: dn4b, dst: ue4, ttl: 64, size: 40}
		before := counts(dropOther)
		got := u.expect(t, dropped.frame(t, fromDN), xdplink.Redirect)
		testsupport.EqualFrames(t, got, dropped.frame(t, monitor))
		if got := counts(dropOther) - before; got != 1 {
			t.Errorf("the drop rule counted %d packets, want 1", got)
		}
	})
}

// The UPF stage sends a copy only for metadata that is a classify
// stage's request: exactly its size, with its magic. A frame with other
// metadata (a recycled frame's, what another program left) is forwarded
// uncopied.
func TestChainMirrorRequestNeedsItsMagic(t *testing.T) {
	u, _ := chainUPF(t, RoleAccess|RoleCore)
	const port = fakeIfindex
	hop := testNexthops[nhGNB].l2
	check(t, u.d.PutNexthop(nhGNB, Nexthop{Ifindex: port, Dmac: [6]uint8(hop.dst), Smac: [6]uint8(hop.src), Valid: 1}))
	copier, err := u.d.copyProgram()
	testsupport.CheckLoad(t, err)
	check(t, u.d.putFanout(port, port, copier))
	slot, _, err := u.d.slotOf("lo")
	check(t, err)
	stage := &upf{d: u.d, prog: chainStage(t, u.d, slot, RoleAccess|RoleCore).Stage, ifindex: u.ifindex}
	frame := ipPacket{src: dn4, dst: ue4, ttl: 64, size: 60, id: 3}.frame(t, fromDN)
	request := func(magic uint32, size int) []byte {
		m := binary.LittleEndian.AppendUint32(nil, magic)
		m = binary.LittleEndian.AppendUint32(m, port)
		return append(m, make([]byte, size-len(m))...)
	}
	for _, c := range []struct {
		name   string
		meta   []byte
		copied bool
	}{
		{"request", request(uint32(upfChainMagicCHAIN_MIRROR_MAGIC), 20), true},
		{"another magic", request(uint32(upfChainMagicCHAIN_MIRROR_MAGIC)+1, 20), false},
		{"no magic, a request's size before", request(port, 16)[4:], false},
		{"longer", request(uint32(upfChainMagicCHAIN_MIRROR_MAGIC), 24), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := stage.counters(t)
			in := append(bytes.Clone(c.meta), frame...)
			var ctx xdplink.Context
			ret, err := stage.prog.Run(&ebpf.RunOptions{Data: in, DataOut: make([]byte, len(in)+256),
				Context: xdplink.Context{Data: uint32(len(c.meta)), DataEnd: uint32(len(in))}, ContextOut: &ctx})
			check(t, err)
			after := stage.counters(t)
			copies := after["duplicate"].Packets - before["duplicate"].Packets
			if xdplink.Action(ret) != xdplink.Redirect || after["downlink_forward"].Packets-before["downlink_forward"].Packets != 1 ||
				copies != b2u(c.copied) {
				t.Errorf("%v, %d copies; want a redirect with %d", xdplink.Action(ret), copies, b2u(c.copied))
			}
			if c.copied && ctx.Data != 32 {
				t.Errorf("%d bytes of metadata, want the copy's 32", ctx.Data)
			}
		})
	}
}

// heldQueues are a classifier's queues, holding their packets until
// released.
type heldQueues struct {
	*classifyxdp.Datapath
	released chan struct{}
}

func (q heldQueues) AwaitSteered(time.Duration) { <-q.released }

// When steering goes, the UPF stage behind the CPU map stays until the
// packets queued for the CPUs are through, however long they take.
func TestCPUStageStaysUntilTheQueuesDrain(t *testing.T) {
	u, rules := chainUPF(t, RoleAccess|RoleCore)
	slot, _, err := u.d.slotOf("lo")
	check(t, err)
	queues := heldQueues{rules, make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- u.d.clearChain(fakeIfindex, slot, queues) }()
	cpuStage := func() bool {
		var id uint32
		return u.d.maps.ChainCpuStages.Lookup(slot, &id) == nil
	}
	time.Sleep(100 * time.Millisecond)
	if !cpuStage() {
		t.Fatal("the UPF stage behind the CPU map went with packets still queued")
	}
	close(queues.released)
	select {
	case err := <-done:
		check(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the chain was not cleared once the queues drained")
	}
	if cpuStage() {
		t.Error("the UPF stage behind the CPU map stays after the queues drained")
	}
}
