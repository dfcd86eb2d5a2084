package upfxdp

// BPF_PROG_TEST_RUN tests of xdp_upf: rules go in through the Put* methods,
// frames built with gopacket go through the program, and the verdict, the
// counters and the resulting frame are compared byte for byte with the frame
// built independently from the same rules.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// onN3 is a local F-TEID at the first N3 address, where the tests send.
func onN3(teid uint32) FTEID { return FTEID{n3Addr, teid} }

// The test network.
var (
	n3Addr  = mustAddr("192.0.2.1")
	n3Addr2 = mustAddr("192.0.2.2")
	gnb     = mustAddr("198.51.100.10")
	gnb2    = mustAddr("198.51.100.20")
	notN3   = mustAddr("192.0.2.9")
	n9Addr  = mustAddr("192.0.2.3")

	ue4          = mustAddr("10.45.0.2") // uplink pdrQoS and pdrUE4, downlink pdrDown
	ue4b         = mustAddr("10.45.0.3") // downlink pdrDownVLAN
	ue4FARDrop   = mustAddr("10.45.0.4")
	ue4NoGTP     = mustAddr("10.45.0.5")
	ue4NoNexthop = mustAddr("10.45.0.6")
	ue4Empty     = mustAddr("10.45.0.7")
	ue4Unknown   = mustAddr("10.45.0.99")
	ue6          = mustAddr("2001:db8:1:2::5") // uplink pdrUE6, downlink pdrDown6 (its /64)
	ue6b         = mustAddr("2001:db8:1:2:ffff::9")
	ue6Other     = mustAddr("2001:db8:1:3::5")

	dn4        = mustAddr("203.0.113.7")   // routes4 /24 -> nhCore
	dn4b       = mustAddr("203.0.113.200") // routes4 /25 -> nhCoreVLAN
	dn4BadSlot = mustAddr("198.18.0.1")    // routes4 -> a slot outside nexthops
	dn4NoRoute = mustAddr("100.64.0.1")
	dn6        = mustAddr("2001:db8:ff::7") // routes6 /48 -> nhCoreVLAN
	dn6NoRoute = mustAddr("2001:db8:ee::7")

	fromGNB = l2{dst: mac(0x01), src: mac(0x0a)}
	fromDN  = l2{dst: mac(0x02), src: mac(0x0b)}
)

// Next-hop slots (0 is KernelSlot, never valid).
const (
	nhCore     = 1
	nhCoreVLAN = 2
	nhGNB      = 3
	nhGNBVLAN  = 4
	nhInvalid  = 5 // written with valid = 0
)

var testNexthops = map[uint32]struct {
	l2    l2
	valid bool
}{
	nhCore:     {l2: l2{dst: mac(0x0b), src: mac(0x02)}, valid: true},
	nhCoreVLAN: {l2: l2{dst: mac(0x0c), src: mac(0x02), tci: 3<<13 | 100}, valid: true},
	nhGNB:      {l2: l2{dst: mac(0x0a), src: mac(0x01)}, valid: true},
	nhGNBVLAN:  {l2: l2{dst: mac(0x0d), src: mac(0x01), tci: 200}, valid: true},
	nhInvalid:  {l2: l2{dst: mac(0x0e), src: mac(0x01)}, valid: false},
}

func nhL2(slot uint32) l2 { return testNexthops[slot].l2 }

// TEIDs of the uplink rules.
const (
	teidQoS       = 0x100 // pdrQoS (QFI 9) -> nhCore, then pdrUE4 (UE ue4) -> nhCoreVLAN
	teidV6        = 0x200 // pdrUE6 (UE ue6/64) -> routes6
	teidFARDrop   = 0x300
	teidNoNexthop = 0x400 // FAR -> nhInvalid
	teidRoute     = 0x500 // FAR -> routes4/routes6
	teidEmpty     = 0x600 // a PDR set without PDRs
	teidUnknown   = 0x999
	dlTEID        = 0xa0000001
	dlTEID2       = 0xa0000002
	dlTEID6       = 0xa0000006
)

// PDR slots of the test rules; a PDR's ID is its slot + 1.
const (
	pdrQoS           = iota // uplink of teidQoS, QFI 9
	pdrUE4                  // uplink of teidQoS, UE ue4
	pdrUE6                  // uplink of teidV6, UE ue6/64
	pdrFARDrop              // uplink of teidFARDrop: a FAR that does nothing
	pdrNoNexthop            // uplink of teidNoNexthop
	pdrRoute                // uplink of teidRoute
	pdrDown                 // downlink of ue4, QFI 9 marked
	pdrDownVLAN             // downlink of ue4b, to the second gNB through nhGNBVLAN
	pdrDown6                // downlink of ue6/64, QFI 5 and RQI marked
	pdrDownFARDrop          // downlink of ue4FARDrop: a tunnel but no action
	pdrDownNoGTP            // downlink of ue4NoGTP: forwarded without a tunnel
	pdrDownNoNexthop        // downlink of ue4NoNexthop
	testPDRs                // the first slot a test fills for itself
)

func pdrSet(slots ...uint32) PDRSet {
	s := PDRSet{Count: uint16(len(slots))}
	copy(s.Pdr[:], slots)
	return s
}

// changePDR changes the PDR in slot, its FAR included.
func changePDR(t *testing.T, d *Datapath, slot uint32, change func(*PDR)) {
	t.Helper()
	p, err := d.PDR(slot)
	check(t, err)
	change(&p)
	check(t, d.PutPDR(slot, p))
}

func forward(nh uint32) FAR { return FAR{Action: FARForward, Nexthop: nh} }

func encap(teid uint32, local, peer netip.Addr, nh uint32) FAR {
	return FAR{Action: FARForward, Flags: FARGTPUv4, Teid: NetworkOrder32(teid), Local: AddrKey(local), Peer: AddrKey(peer), Nexthop: nh}
}

// buffered is FAR f buffering in buffer slot buf.
func buffered(f FAR, buf uint32) FAR {
	f.Action, f.Buffer = FARBuffer, buf
	return f
}

// toCPFunction is FAR f tunnelling to the CP function (N4-u).
func toCPFunction(f FAR) FAR {
	f.Flags |= FARToCPFunction
	return f
}

// pdrUE is pdr.ue for an address: network order, IPv4 in ue[0].
func pdrUE(a netip.Addr) [4]uint32 {
	ue, _ := PDRUE(netip.PrefixFrom(a, a.BitLen()))
	return ue
}

func installRules(t *testing.T, d *Datapath) {
	t.Helper()
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for slot, nh := range testNexthops {
		var v uint8
		if nh.valid {
			v = 1
		}
		check(d.PutNexthop(slot, Nexthop{Ifindex: 10 + slot, VlanTci: be16(nh.l2.tci),
			Dmac: [6]uint8(nh.l2.dst), Smac: [6]uint8(nh.l2.src), Valid: v}))
	}
	for slot, r := range []struct {
		pdr PDR
		far FAR
	}{
		pdrQoS:           {pdr: PDR{Flags: MatchQFI, Qfi: 9}, far: forward(nhCore)},
		pdrUE4:           {pdr: PDR{Flags: MatchUEv4, Ue: pdrUE(ue4)}, far: forward(nhCoreVLAN)},
		pdrUE6:           {pdr: PDR{Flags: MatchUEv6, Ue: pdrUE(ue6)}, far: forward(NexthopRoute)},
		pdrFARDrop:       {pdr: PDR{}, far: FAR{}},
		pdrNoNexthop:     {pdr: PDR{}, far: forward(nhInvalid)},
		pdrRoute:         {pdr: PDR{}, far: forward(NexthopRoute)},
		pdrDown:          {pdr: PDR{Flags: MarkQFI, Qfi: 9}, far: encap(dlTEID, n3Addr, gnb, nhGNB)},
		pdrDownVLAN:      {pdr: PDR{}, far: encap(dlTEID2, n3Addr2, gnb2, nhGNBVLAN)},
		pdrDown6:         {pdr: PDR{Flags: MarkQFI | MarkRQI, Qfi: 5}, far: encap(dlTEID6, n3Addr, gnb, nhGNB)},
		pdrDownFARDrop:   {pdr: PDR{}, far: FAR{Flags: FARGTPUv4, Teid: 1, Nexthop: nhGNB}},
		pdrDownNoGTP:     {pdr: PDR{}, far: forward(nhGNB)},
		pdrDownNoNexthop: {pdr: PDR{}, far: encap(dlTEID, n3Addr, gnb, nhInvalid)},
	} {
		r.pdr.Far, r.pdr.Id = r.far, uint16(slot+1)
		check(d.PutPDR(uint32(slot), r.pdr))
	}
	for teid, set := range map[uint32]PDRSet{
		teidQoS: pdrSet(pdrQoS, pdrUE4), teidV6: pdrSet(pdrUE6), teidFARDrop: pdrSet(pdrFARDrop),
		teidNoNexthop: pdrSet(pdrNoNexthop), teidRoute: pdrSet(pdrRoute), teidEmpty: pdrSet(),
	} {
		check(d.PutUplink(onN3(teid), set))
	}
	// The second N3 address has an F-TEID of its own: a TEID names a set
	// at one address only.
	check(d.PutUplink(FTEID{n3Addr2, teidQoS}, pdrSet(pdrQoS, pdrUE4)))
	for ue, set := range map[netip.Addr]PDRSet{
		ue4: pdrSet(pdrDown), ue4b: pdrSet(pdrDownVLAN), ue6: pdrSet(pdrDown6), ue4FARDrop: pdrSet(pdrDownFARDrop),
		ue4NoGTP: pdrSet(pdrDownNoGTP), ue4NoNexthop: pdrSet(pdrDownNoNexthop), ue4Empty: pdrSet(),
	} {
		check(d.PutDownlink(ue, set))
	}
	for p, nh := range map[string]uint32{
		"203.0.113.0/24": nhCore, "203.0.113.128/25": nhCoreVLAN, "198.18.0.0/15": 5000,
		"2001:db8:ff::/48": nhCoreVLAN,
	} {
		check(d.PutRoute(netip.MustParsePrefix(p), nh))
	}
}

func TestUplinkForward(t *testing.T) {
	u := newUPF(t, RoleAccess|RoleCore)
	v4 := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 100, id: 7}
	v6 := ipPacket{src: ue6, dst: dn6, ttl: 64, size: 100}
	small := ipPacket{src: ue4, dst: dn4, ttl: 2}
	opts := v4
	opts.options = true
	seq := gpdu(teidQoS)
	seq.SequenceNumberFlag, seq.SequenceNumber = true, 0x1234
	all := gpdu(teidQoS, ulPSC(9))
	all.SequenceNumberFlag, all.NPDUFlag, all.SequenceNumber, all.NPDU = true, true, 0x1234, 0x56
	pn := gpdu(teidQoS)
	pn.NPDUFlag = true
	eOnly := gpdu(teidQoS)
	eOnly.ExtensionHeaderFlag = true
	var seven []layers.GTPExtensionHeader
	for range 7 {
		seven = append(seven, ext(extRAN, 1))
	}
	tagged := fromGNB
	tagged.tci = 42
	outerOpts := gnbHdr(n3Addr) // a Router Alert option: IHL 6
	outerOpts.Options = []layers.IPv4Option{{OptionType: 0x94, OptionLength: 4, OptionData: []byte{0, 0}}}
	twoWordPSC := layers.GTPExtensionHeader{Type: extPSC, Content: []byte{0x10, 9, 0, 0, 0, 0}}

	fwd := func(name string, l l2, dst netip.Addr, g *layers.GTPv1U, p ipPacket, nh uint32) pktCase {
		return pktCase{name: name, in: gtpFrame(t, l, dst, g, p.bytes(t)), act: xdplink.Redirect,
			reason: "uplink_forward", out: p.hop().frame(t, nhL2(nh))}
	}
	cases := []pktCase{
		fwd("flags 0x30, second PDR, tagged next hop", fromGNB, n3Addr, gpdu(teidQoS), v4, nhCoreVLAN),
		fwd("PSC QFI 9, first PDR, untagged next hop", fromGNB, n3Addr, gpdu(teidQoS, ulPSC(9)), v4, nhCore),
		fwd("PSC QFI 5, second PDR", fromGNB, n3Addr, gpdu(teidQoS, ulPSC(5)), v4, nhCoreVLAN),
		fwd("S flag", fromGNB, n3Addr, seq, v4, nhCoreVLAN),
		fwd("PN flag", fromGNB, n3Addr, pn, v4, nhCoreVLAN),
		fwd("E flag, empty chain", fromGNB, n3Addr, eOnly, v4, nhCoreVLAN),
		fwd("E, S and PN flags", fromGNB, n3Addr, all, v4, nhCore),
		fwd("two-word extension before the PSC", fromGNB, n3Addr, gpdu(teidQoS, ext(extRAN, 2), ulPSC(9)), v4, nhCore),
		fwd("PSC before a two-word extension", fromGNB, n3Addr, gpdu(teidQoS, ulPSC(9), ext(extRAN, 2)), v4, nhCore),
		fwd("eight extensions", fromGNB, n3Addr, gpdu(teidQoS, append(seven, ulPSC(9))...), v4, nhCore),
		fwd("PSC of two words", fromGNB, n3Addr, gpdu(teidQoS, twoWordPSC), v4, nhCore),
		{name: "outer IPv4 options", in: fromGNB.frame(t, layers.EthernetTypeIPv4, udp4(t, outerOpts, gtpuPort, gtpuPort,
			serialize(t, false, gpdu(teidQoS, ulPSC(9)), gopacket.Payload(v4.bytes(t))))),
			act: xdplink.Redirect, reason: "uplink_forward", out: v4.hop().frame(t, nhL2(nhCore))},
		fwd("second N3 address, its own F-TEID", fromGNB, n3Addr2, gpdu(teidQoS, ulPSC(9)), v4, nhCore),
		fwd("tagged frame in", tagged, n3Addr, gpdu(teidQoS, ulPSC(9)), v4, nhCore),
		fwd("tagged in and out", tagged, n3Addr, gpdu(teidQoS), v4, nhCoreVLAN),
		fwd("inner IPv4 options", fromGNB, n3Addr, gpdu(teidQoS), opts, nhCoreVLAN),
		fwd("inner IPv4 TTL 2", fromGNB, n3Addr, gpdu(teidQoS, ulPSC(9)), small, nhCore),
		fwd("inner IPv6, route /48", fromGNB, n3Addr, gpdu(teidV6), v6, nhCoreVLAN),
		fwd("inner IPv6, other host of the /64", fromGNB, n3Addr, gpdu(teidV6, ulPSC(1)), ipPacket{src: ue6b, dst: dn6, ttl: 2, size: 1}, nhCoreVLAN),
		fwd("route /24", fromGNB, n3Addr, gpdu(teidRoute), v4, nhCore),
		fwd("route /25 beats /24", fromGNB, n3Addr, gpdu(teidRoute), ipPacket{src: ue4, dst: dn4b, ttl: 9, size: 3}, nhCoreVLAN),
		{name: "802.1ad tag in", in: withBytes(gtpFrame(t, tagged, n3Addr, gpdu(teidQoS), v4.bytes(t)), 12, 0x88, 0xa8),
			act: xdplink.Redirect, reason: "uplink_forward", out: v4.hop().frame(t, nhL2(nhCoreVLAN))},
		{name: "Ethernet padding trimmed", in: pad(gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS, ulPSC(9)), small.bytes(t)), 18),
			act: xdplink.Redirect, reason: "uplink_forward", out: small.hop().frame(t, nhL2(nhCore))},
		{name: "GTP payload after the inner packet trimmed",
			in:  gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS, ulPSC(9)), append(v4.bytes(t), 0xde, 0xad, 0xbe, 0xef)),
			act: xdplink.Redirect, reason: "uplink_forward", out: v4.hop().frame(t, nhL2(nhCore))},
	}
	u.runCases(t, cases)
}

// The TTL decrement adjusts the header checksum incrementally: every value
// of the identification gives every value of the checksum word, carries
// and the one's-complement wrap included, and each must come out as an
// independent encoder computes it from scratch.
func TestTTLChecksumEveryValue(t *testing.T) {
	u := newUPF(t, RoleAccess)
	for id := range 1 << 16 {
		p := ipPacket{src: ue4, dst: dn4, ttl: 64, id: uint16(id)}
		act, out := u.run(t, gtpFrame(t, fromGNB, n3Addr, gpdu(teidRoute), p.bytes(t)))
		want := p.hop().frame(t, nhL2(nhCore))
		if diff := testsupport.FrameDiff(out, want); act != xdplink.Redirect || diff != "" {
			t.Fatalf("ID %#04x: %v %s", id, act, diff)
		}
	}
}

// A PDR's QFI and UE conditions, and the order of the set: pdrQoS (QFI 9,
// any source) comes before pdrUE4 (source ue4, any QFI).
func TestUplinkPrecedence(t *testing.T) {
	u := newUPF(t, RoleAccess)
	other := mustAddr("10.45.0.200")
	for _, c := range []struct {
		name string
		src  netip.Addr
		exts []layers.GTPExtensionHeader
		nh   int // -1: no PDR matches
	}{
		{name: "UE, QFI 9", src: ue4, exts: []layers.GTPExtensionHeader{ulPSC(9)}, nh: nhCore},
		{name: "UE, QFI 9 with PPP/RQI bits", src: ue4, exts: []layers.GTPExtensionHeader{{Type: extPSC, Content: []byte{0x10, 0xc9}}}, nh: nhCore},
		{name: "UE, QFI 8", src: ue4, exts: []layers.GTPExtensionHeader{ulPSC(8)}, nh: nhCoreVLAN},
		{name: "UE, no PSC", src: ue4, exts: nil, nh: nhCoreVLAN},
		{name: "UE, QFI 9 in a container of another type", src: ue4, exts: []layers.GTPExtensionHeader{{Type: extRAN, Content: []byte{0x10, 9}}}, nh: nhCoreVLAN},
		{name: "other UE, QFI 9", src: other, exts: []layers.GTPExtensionHeader{ulPSC(9)}, nh: nhCore},
		{name: "other UE, QFI 8", src: other, exts: []layers.GTPExtensionHeader{ulPSC(8)}, nh: -1},
		{name: "other UE, no PSC", src: other, exts: nil, nh: -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := ipPacket{src: c.src, dst: dn4, ttl: 30, size: 10}
			in := gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS, c.exts...), p.bytes(t))
			if c.nh < 0 {
				u.expect(t, in, xdplink.Drop, "drop_no_pdr")
				return
			}
			testsupport.EqualFrames(t, u.expect(t, in, xdplink.Redirect, "uplink_forward"), p.hop().frame(t, nhL2(uint32(c.nh))))
		})
	}
}

func TestUplinkOutcomes(t *testing.T) {
	u := newUPF(t, RoleAccess|RoleCore)
	v4 := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 20}
	up := func(g *layers.GTPv1U, p ipPacket) []byte { return gtpFrame(t, fromGNB, n3Addr, g, p.bytes(t)) }
	// The kernel gets the decapsulated packet with the MACs it came with,
	// untagged, and routes it: the hop's TTL decrement is the kernel's.
	noRoute := func(name string, l l2, g *layers.GTPv1U, p ipPacket) pktCase {
		return pktCase{name: "no next hop: " + name, in: gtpFrame(t, l, n3Addr, g, p.bytes(t)), act: xdplink.Pass,
			reason: "pass_no_route", out: p.frame(t, l2{dst: l.dst, src: l.src})}
	}
	tagged := fromGNB
	tagged.tci = 7
	u.runCases(t, []pktCase{
		{name: "unknown TEID", in: up(gpdu(teidUnknown), v4), act: xdplink.Drop, reason: "drop_unknown_teid", out: nil},
		{name: "TEID of the first N3 address at the second", in: gtpFrame(t, fromGNB, n3Addr2, gpdu(teidV6), v4.bytes(t)),
			act: xdplink.Drop, reason: "drop_unknown_teid", out: nil},
		{name: "empty PDR set", in: up(gpdu(teidEmpty, ulPSC(9)), v4), act: xdplink.Drop, reason: "drop_no_pdr", out: nil},
		{name: "UE mismatch", in: up(gpdu(teidQoS), ipPacket{src: ue4b, dst: dn4, ttl: 64}), act: xdplink.Drop, reason: "drop_no_pdr", out: nil},
		{name: "QFI and UE mismatch", in: up(gpdu(teidQoS, ulPSC(1)), ipPacket{src: ue4b, dst: dn4, ttl: 64}), act: xdplink.Drop, reason: "drop_no_pdr", out: nil},
		{name: "IPv6 UE mismatch", in: up(gpdu(teidV6, ulPSC(9)), ipPacket{src: ue6Other, dst: dn6, ttl: 64}), act: xdplink.Drop, reason: "drop_no_pdr", out: nil},
		{name: "IPv4 inner, IPv6 PDR", in: up(gpdu(teidV6, ulPSC(9)), v4), act: xdplink.Drop, reason: "drop_no_pdr", out: nil},
		{name: "IPv6 inner, IPv4 PDR", in: up(gpdu(teidQoS), ipPacket{src: ue6, dst: dn6, ttl: 64}), act: xdplink.Drop, reason: "drop_no_pdr", out: nil},
		{name: "FAR drop", in: up(gpdu(teidFARDrop), v4), act: xdplink.Drop, reason: "drop_far", out: nil},
		{name: "inner TTL 1", in: up(gpdu(teidQoS), ipPacket{src: ue4, dst: dn4, ttl: 1}), act: xdplink.Drop, reason: "drop_ttl", out: nil},
		{name: "inner TTL 0", in: up(gpdu(teidQoS), ipPacket{src: ue4, dst: dn4}), act: xdplink.Drop, reason: "drop_ttl", out: nil},
		{name: "inner hop limit 1", in: up(gpdu(teidV6), ipPacket{src: ue6, dst: dn6, ttl: 1}), act: xdplink.Drop, reason: "drop_ttl", out: nil},
		noRoute("invalid next hop", fromGNB, gpdu(teidNoNexthop), v4),
		noRoute("no route", fromGNB, gpdu(teidRoute), ipPacket{src: ue4, dst: dn4NoRoute, ttl: 64, size: 20}),
		noRoute("route to a slot outside nexthops", fromGNB, gpdu(teidRoute), ipPacket{src: ue4, dst: dn4BadSlot, ttl: 64}),
		noRoute("no IPv6 route", fromGNB, gpdu(teidRoute), ipPacket{src: ue6, dst: dn6NoRoute, ttl: 64}),
		noRoute("tagged frame in", tagged, gpdu(teidNoNexthop), v4),
		{name: "End Marker", in: gtpFrame(t, fromGNB, n3Addr, gtpMsg(254, teidQoS), nil), act: xdplink.Pass, reason: "pass_gtp_signalling", out: nil},
		{name: "Error Indication", in: gtpFrame(t, fromGNB, n3Addr, gtpMsg(26, 0), []byte{16, 0, 0, 1, 0, 133, 0, 4, 192, 0, 2, 1}), act: xdplink.Pass, reason: "pass_gtp_signalling", out: nil},
		{name: "Echo Response", in: gtpFrame(t, fromGNB, n3Addr, gtpMsg(2, 0), []byte{14, 0}), act: xdplink.Pass, reason: "pass_gtp_signalling", out: nil},
	})
}

// Echo Requests get an Echo Response with a Recovery IE from the address
// they were sent to.
func TestEcho(t *testing.T) {
	u := newUPF(t, RoleAccess|RoleCore)
	echo := func(typ uint8, seq uint16, ies []byte) []byte {
		g := gtpMsg(typ, 0)
		g.SequenceNumberFlag, g.SequenceNumber = true, seq
		return serialize(t, false, g, gopacket.Payload(ies))
	}
	req := func(l l2, dst netip.Addr, sport uint16, seq uint16, ies []byte) []byte {
		return l.frame(t, layers.EthernetTypeIPv4, udp4(t, gnbHdr(dst), sport, gtpuPort, echo(1, seq, ies)))
	}
	resp := func(l l2, src netip.Addr, dport uint16, seq uint16) []byte {
		h := ip4(src, gnb, 64, 0x4d2) // identification and TOS as received
		h.TOS = 0xb8
		return l.swapped().frame(t, layers.EthernetTypeIPv4, udp4(t, h, gtpuPort, dport, echo(2, seq, []byte{14, 0})))
	}
	tagged := fromGNB
	tagged.tci = 3<<13 | 42
	withOptions := func() []byte {
		h := gnbHdr(n3Addr)
		h.Options = []layers.IPv4Option{{OptionType: 0x94, OptionLength: 4, OptionData: []byte{0, 0}}}
		return fromGNB.frame(t, layers.EthernetTypeIPv4, udp4(t, h, gtpuPort, gtpuPort, echo(1, 1, nil)))
	}()
	u.runCases(t, []pktCase{
		{name: "request", in: req(fromGNB, n3Addr, gtpuPort, 0x1234, nil), act: xdplink.TX, reason: "echo_response", out: resp(fromGNB, n3Addr, gtpuPort, 0x1234)},
		{name: "padded request", in: pad(req(fromGNB, n3Addr, gtpuPort, 0xfffe, nil), 6), act: xdplink.TX, reason: "echo_response", out: resp(fromGNB, n3Addr, gtpuPort, 0xfffe)},
		{name: "tagged request", in: req(tagged, n3Addr, gtpuPort, 1, nil), act: xdplink.TX, reason: "echo_response", out: resp(tagged, n3Addr, gtpuPort, 1)},
		{name: "second N3 address, other source port", in: req(fromGNB, n3Addr2, 40000, 9, nil), act: xdplink.TX, reason: "echo_response", out: resp(fromGNB, n3Addr2, 40000, 9)},
		{name: "request with a Private Extension", in: req(fromGNB, n3Addr, gtpuPort, 77, []byte{255, 0, 4, 0x12, 0x34, 0xab, 0xcd}), act: xdplink.TX, reason: "echo_response", out: resp(fromGNB, n3Addr, gtpuPort, 77)},
		{name: "request with IPv4 options", in: withOptions, act: xdplink.Pass, reason: "pass_gtp_signalling", out: nil},
		{name: "request to another address", in: req(fromGNB, notN3, gtpuPort, 1, nil), act: xdplink.Pass, reason: "pass_not_ours", out: nil},
	})
}

// A FAR's Transport Level Marking sets the outer header's DSCP, and the
// outer checksum covers it.
func TestDownlinkTransportLevelMarking(t *testing.T) {
	u := newUPF(t, RoleAccess|RoleCore)
	far := encap(dlTEID, n3Addr, gnb, nhGNB)
	far.Tos = 46 << 2 // EF
	changePDR(t, u.d, pdrDown, func(p *PDR) { p.Far = far })
	p := ipPacket{src: dn4, dst: ue4, ttl: 64, size: 100}
	out := u.expect(t, p.frame(t, fromDN), xdplink.Redirect, "downlink_forward")
	testsupport.EqualFrames(t, out, markedEncapFrame(t, 46<<2, nhL2(nhGNB), n3Addr, gnb, dlTEID, 9, p.hop().bytes(t)))
}

func TestDownlink(t *testing.T) {
	u := newUPF(t, RoleAccess|RoleCore)
	v4 := ipPacket{src: dn4, dst: ue4, ttl: 64, size: 100, id: 99}
	v4b := ipPacket{src: dn4, dst: ue4b, ttl: 2, size: 1}
	opts := v4
	opts.options = true
	small := ipPacket{src: dn4, dst: ue4b, ttl: 64}
	v6 := ipPacket{src: dn6, dst: ue6, ttl: 64, size: 100}
	v6b := ipPacket{src: dn6, dst: ue6b, ttl: 2, size: 1}
	tagged := fromDN
	tagged.tci = 5
	dl := func(name string, l l2, p ipPacket, padding int, local, peer netip.Addr, teid uint32, qfi int, nh uint32) pktCase {
		return pktCase{name: name, in: pad(p.frame(t, l), padding), act: xdplink.Redirect, reason: "downlink_forward",
			out: encapFrame(t, nhL2(nh), local, peer, teid, qfi, p.hop().bytes(t))}
	}
	u.runCases(t, []pktCase{
		dl("IPv4, QFI", fromDN, v4, 0, n3Addr, gnb, dlTEID, 9, nhGNB),
		dl("IPv4, no QFI, tagged next hop", fromDN, v4b, 0, n3Addr2, gnb2, dlTEID2, -1, nhGNBVLAN),
		dl("IPv4 options", fromDN, opts, 0, n3Addr, gnb, dlTEID, 9, nhGNB),
		dl("tagged and padded frame in", tagged, small, 60-18-28, n3Addr2, gnb2, dlTEID2, -1, nhGNBVLAN),
		dl("padded frame in", fromDN, ipPacket{src: dn4, dst: ue4, ttl: 5, size: 2}, 16, n3Addr, gnb, dlTEID, 9, nhGNB),
		dl("IPv6, QFI 5 with RQI", fromDN, v6, 0, n3Addr, gnb, dlTEID6, 0x40|5, nhGNB),
		dl("IPv6, other host of the /64", fromDN, v6b, 0, n3Addr, gnb, dlTEID6, 0x40|5, nhGNB),
		{name: "TTL 1", in: ipPacket{src: dn4, dst: ue4, ttl: 1}.frame(t, fromDN), act: xdplink.Pass, reason: "pass_ttl", out: nil},
		{name: "TTL 0", in: ipPacket{src: dn4, dst: ue4}.frame(t, fromDN), act: xdplink.Pass, reason: "pass_ttl", out: nil},
		{name: "hop limit 1", in: ipPacket{src: dn6, dst: ue6, ttl: 1}.frame(t, fromDN), act: xdplink.Pass, reason: "pass_ttl", out: nil},
		{name: "FAR drop", in: ipPacket{src: dn4, dst: ue4FARDrop, ttl: 64}.frame(t, fromDN), act: xdplink.Drop, reason: "drop_far", out: nil},
		{name: "FAR without outer header creation", in: ipPacket{src: dn4, dst: ue4NoGTP, ttl: 64}.frame(t, fromDN), act: xdplink.Drop, reason: "drop_far", out: nil},
		{name: "invalid next hop", in: ipPacket{src: dn4, dst: ue4NoNexthop, ttl: 64}.frame(t, fromDN), act: xdplink.Drop, reason: "drop_no_nexthop", out: nil},
		{name: "empty PDR set", in: ipPacket{src: dn4, dst: ue4Empty, ttl: 64}.frame(t, fromDN), act: xdplink.Drop, reason: "drop_no_pdr", out: nil},
		{name: "unknown UE", in: ipPacket{src: dn4, dst: ue4Unknown, ttl: 64}.frame(t, fromDN), act: xdplink.Pass, reason: "pass_not_ours", out: nil},
		{name: "unknown IPv6 /64", in: ipPacket{src: dn6, dst: ue6Other, ttl: 64}.frame(t, fromDN), act: xdplink.Pass, reason: "pass_not_ours", out: nil},
		{name: "UE as source", in: ipPacket{src: ue4, dst: dn4, ttl: 64}.frame(t, fromDN), act: xdplink.Pass, reason: "pass_not_ours", out: nil},
		{name: "truncated IPv4", in: v4.frame(t, fromDN)[:60], act: xdplink.Pass, reason: "pass_not_ours", out: nil},
		{name: "truncated IPv6", in: v6.frame(t, fromDN)[:80], act: xdplink.Pass, reason: "pass_not_ours", out: nil},
	})
}

// Frames that are neither GTP-U for us nor for a UE.
func TestOtherTraffic(t *testing.T) {
	u := newUPF(t, RoleAccess|RoleCore)
	arp := serialize(t, false, &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4,
		HwAddressSize: 6, ProtAddressSize: 4, Operation: layers.ARPRequest, SourceHwAddress: mac(0x0a),
		SourceProtAddress: ipOf(gnb), DstHwAddress: make([]byte, 6), DstProtAddress: ipOf(n3Addr)})
	inner := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 20}.bytes(t)
	gtp := serialize(t, false, gpdu(teidQoS), gopacket.Payload(inner))
	udpTo := func(dst netip.Addr, dport uint16) []byte {
		return fromGNB.frame(t, layers.EthernetTypeIPv4, udp4(t, gnbHdr(dst), gtpuPort, dport, gtp))
	}
	proto := func(p layers.IPProtocol) []byte {
		h := gnbHdr(n3Addr)
		h.Protocol = p
		udp := serialize(t, false, &layers.UDP{SrcPort: gtpuPort, DstPort: gtpuPort}, gopacket.Payload(gtp))
		return fromGNB.frame(t, layers.EthernetTypeIPv4, serialize(t, true, h, gopacket.Payload(udp)))
	}
	frag := func(flags layers.IPv4Flag, offset uint16) []byte {
		h := gnbHdr(n3Addr)
		h.Flags, h.FragOffset = flags, offset
		return fromGNB.frame(t, layers.EthernetTypeIPv4, udp4(t, h, gtpuPort, gtpuPort, gtp))
	}
	qinq := fromGNB.frame(t, layers.EthernetTypeDot1Q, append([]byte{0, 5, 0x81, 0x00, 0, 6, 0x08, 0x00}, inner...))
	qinq[12], qinq[13] = 0x88, 0xa8
	u.runCases(t, []pktCase{
		{name: "ARP", in: fromGNB.frame(t, layers.EthernetTypeARP, arp), act: xdplink.Pass, reason: "pass_not_ip", out: nil},
		{name: "802.1ad and 802.1Q", in: qinq, act: xdplink.Pass, reason: "pass_not_ip", out: nil},
		{name: "GTP-U to another address", in: udpTo(notN3, gtpuPort), act: xdplink.Pass, reason: "pass_not_ours", out: nil},
		{name: "UDP to N3 port 2153", in: udpTo(n3Addr, gtpuPort+1), act: xdplink.Pass, reason: "pass_not_ours", out: nil},
		{name: "TCP to N3 port 2152", in: proto(layers.IPProtocolTCP), act: xdplink.Pass, reason: "pass_not_ours", out: nil},
		{name: "first fragment", in: frag(layers.IPv4MoreFragments, 0), act: xdplink.Pass, reason: "pass_fragment", out: nil},
		{name: "last fragment", in: frag(0, 100), act: xdplink.Pass, reason: "pass_fragment", out: nil},
		{name: "IPv6 not to a UE", in: fromGNB.frame(t, layers.EthernetTypeIPv6, ipPacket{src: ue6, dst: dn6, ttl: 9}.bytes(t)), act: xdplink.Pass, reason: "pass_not_ours", out: nil},
		{name: "IPv4 version 6 header", in: fromGNB.frame(t, layers.EthernetTypeIPv4, ipPacket{src: ue6, dst: ue6b, ttl: 9}.bytes(t)), act: xdplink.Pass, reason: "pass_not_ours", out: nil},
		{name: "IPv4 IHL 4", in: withBytes(udpTo(n3Addr, gtpuPort), ethLen, 0x44), act: xdplink.Pass, reason: "pass_not_ours", out: nil},
		{name: "IPv4 Ethernet header alone", in: udpTo(n3Addr, gtpuPort)[:ethLen], act: xdplink.Pass, reason: "pass_not_ours", out: nil},
		{name: "802.1Q Ethernet header alone", in: fromGNB.frame(t, layers.EthernetTypeDot1Q, nil), act: xdplink.Drop, reason: "drop_malformed", out: nil},
		{name: "802.1Q tag cut", in: fromGNB.frame(t, layers.EthernetTypeDot1Q, []byte{0, 1, 8}), act: xdplink.Drop, reason: "drop_malformed", out: nil},
		// 0 is the value parse_eth returns for a short frame.
		{name: "EtherType 0", in: withBytes(fromGNB.frame(t, layers.EthernetTypeIPv4, make([]byte, 46)), 12, 0, 0), act: xdplink.Pass, reason: "pass_not_ip", out: nil},
		{name: "802.1Q, EtherType 0", in: fromGNB.frame(t, layers.EthernetTypeDot1Q, make([]byte, 46)), act: xdplink.Pass, reason: "pass_not_ip", out: nil},
	})
}

// Uplink frames whose GTP-U header or extension chain is inconsistent.
func TestUplinkMalformed(t *testing.T) {
	u := newUPF(t, RoleAccess|RoleCore)
	inner := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 20}.bytes(t)
	chain := gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS, ext(extRAN, 2), ulPSC(9)), inner)
	gtpLen := binary.BigEndian.Uint16(chain[gtpOffset+2:])
	const ext1 = gtpOffset + 12 // first extension's length octet
	var nine []layers.GTPExtensionHeader
	for range 8 {
		nine = append(nine, ext(extRAN, 1))
	}
	nine = append(nine, ulPSC(9))
	seq := gpdu(teidQoS)
	seq.SequenceNumberFlag = true
	seqOnly := gtpFrame(t, fromGNB, n3Addr, seq, nil)
	malformed := func(name string, in []byte) pktCase {
		return pktCase{name: name, in: in, act: xdplink.Drop, reason: "drop_malformed"}
	}
	u.runCases(t, []pktCase{
		malformed("zero-length first extension", withBytes(chain, ext1, 0)),
		malformed("zero-length PSC", withBytes(chain, ext1+8, 0)),
		malformed("extension past the frame", withBytes(chain, ext1, 200)),
		malformed("last extension past the frame", withBytes(chain, ext1+8, byte(len(chain)-ext1-8)/4+1)),
		malformed("nine extensions", gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS, nine...), inner)),
		malformed("GTP length past the frame", with16(chain, gtpOffset+2, gtpLen+1)),
		malformed("GTP length ends inside the inner packet", with16(chain, gtpOffset+2, gtpLen-1)),
		malformed("GTP length ends inside the chain", with16(chain, gtpOffset+2, 4+8)),
		malformed("GTP length shorter than the optional fields", with16(seqOnly, gtpOffset+2, 3)),
		malformed("GTP version 2", withBytes(chain, gtpOffset, 0x4c)),
		malformed("GTP' (PT 0)", withBytes(chain, gtpOffset, 0x24)),
		malformed("no inner packet", gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS), nil)),
		malformed("inner version 5", gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS), withBytes(inner, 0, 0x55))),
		malformed("inner IHL 4", gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS), withBytes(inner, 0, 0x44))),
		malformed("inner IPv4 header cut", gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS), inner[:19])),
		malformed("inner IPv6 header cut", gtpFrame(t, fromGNB, n3Addr, gpdu(teidV6), ipPacket{src: ue6, dst: dn6, ttl: 9}.bytes(t)[:39])),
	})
}

// The GTP-U message must end where the outer UDP datagram does: bytes after
// the IPv4 total length (Ethernet padding) are not part of it.
func TestUplinkGTPBeyondOuterIPv4(t *testing.T) {
	u := newUPF(t, RoleAccess|RoleCore)
	in := gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS), ipPacket{src: ue4, dst: dn4, ttl: 64}.bytes(t))
	fixIPv4(in, ethLen, len(in)-ethLen-8) // the last 8 bytes of the inner packet now look like padding
	in = with16(in, ethLen+24, uint16(len(in)-ethLen-20-8))
	u.expect(t, in, xdplink.Drop, "drop_malformed")
}

// Every prefix of an uplink frame with an extension chain, from the bare
// Ethernet header on (the kernel runs nothing shorter): as cut (the outer
// IPv4 total length no longer fits: not ours), with the outer lengths fixed
// (malformed GTP-U once the UDP header is complete), and with the GTP length
// fixed too (cut in the header, the chain or the inner packet: malformed).
func TestUplinkTruncated(t *testing.T) {
	u := newUPF(t, RoleAccess|RoleCore)
	p := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 20}
	full := gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS, ext(extRAN, 2), ulPSC(9)), p.bytes(t))
	testsupport.EqualFrames(t, u.expect(t, full, xdplink.Redirect, "uplink_forward"), p.hop().frame(t, nhL2(nhCore)))
	const udpOff = ethLen + 20
	for _, mode := range []struct {
		name     string
		from     int
		fix      func(b []byte)
		outcomes func(n int) (xdplink.Action, string)
	}{
		{name: "as cut", from: ethLen, fix: func([]byte) {}, outcomes: func(int) (xdplink.Action, string) { return xdplink.Pass, "pass_not_ours" }},
		{name: "outer lengths fixed", from: udpOff, fix: func(b []byte) {
			fixIPv4(b, ethLen, len(b)-ethLen)
			if len(b) >= gtpOffset {
				binary.BigEndian.PutUint16(b[udpOff+4:], uint16(len(b)-udpOff))
			}
		}, outcomes: func(n int) (xdplink.Action, string) {
			if n < gtpOffset {
				return xdplink.Pass, "pass_not_ours"
			}
			return xdplink.Drop, "drop_malformed"
		}},
		{name: "GTP length fixed", from: gtpOffset + 8, fix: func(b []byte) {
			fixIPv4(b, ethLen, len(b)-ethLen)
			binary.BigEndian.PutUint16(b[udpOff+4:], uint16(len(b)-udpOff))
			binary.BigEndian.PutUint16(b[gtpOffset+2:], uint16(len(b)-gtpOffset-8))
		}, outcomes: func(int) (xdplink.Action, string) { return xdplink.Drop, "drop_malformed" }},
	} {
		t.Run(mode.name, func(t *testing.T) {
			for n := mode.from; n < len(full); n++ {
				in := bytes.Clone(full[:n])
				mode.fix(in)
				act, reason := mode.outcomes(n)
				u.expect(t, in, act, reason)
			}
		})
	}
}

// Each interface's program counts in its own slot; PDR counters count the
// user-plane bytes of the PDR that matched.
func TestCounters(t *testing.T) {
	u := newUPF(t, RoleAccess|RoleCore)
	core := attachTest(t, u.d, 7, "core0", RoleCore)
	up := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 100}
	down := ipPacket{src: dn4, dst: ue4, ttl: 64, size: 50}
	up6 := ipPacket{src: ue6, dst: dn6, ttl: 64, size: 10}
	for range 3 {
		u.expect(t, gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS), up.bytes(t)), xdplink.Redirect, "uplink_forward")
	}
	u.expect(t, gtpFrame(t, fromGNB, n3Addr, gpdu(teidV6), up6.bytes(t)), xdplink.Redirect, "uplink_forward")
	core.expect(t, down.frame(t, fromDN), xdplink.Redirect, "downlink_forward")
	core.expect(t, gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS), up.bytes(t)), xdplink.Pass, "pass_not_ours")

	all, err := u.d.Counters()
	if err != nil {
		t.Fatal(err)
	}
	names := map[uint32]string{}
	for _, c := range all {
		names[c.Ifindex] = c.Name
	}
	if len(all) != 2 || names[fakeIfindex] != "lo" || names[7] != "core0" {
		t.Errorf("Counters() lists %v, want lo (1) and core0 (7)", names)
	}
	if c := u.counters(t)["uplink_forward"]; c.Packets != 4 {
		t.Errorf("lo: uplink_forward %+v, want 4 packets", c)
	}
	if c := core.counters(t)["uplink_forward"]; c.Packets != 0 {
		t.Errorf("core0: uplink_forward %+v, want none", c)
	}
	for slot, want := range map[uint32]Counter{
		pdrQoS:      {},
		pdrUE4:      {Packets: 3, Bytes: 3 * 128},
		pdrUE6:      {Packets: 1, Bytes: 40 + 8 + 10},
		pdrDown:     {Packets: 1, Bytes: 20 + 8 + 50},
		pdrDownVLAN: {},
	} {
		got, err := u.d.PDRCounter(slot)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("PDR slot %d: %+v, want %+v", slot, got, want)
		}
	}
}

// A program without a role leaves that role's traffic to the kernel.
func TestRoles(t *testing.T) {
	d := openTest(t, Options{MaxSessions: 64, N3Addresses: []netip.Addr{n3Addr, n3Addr2}})
	installRules(t, d)
	access := attachTest(t, d, 2, "n3", RoleAccess)
	core := attachTest(t, d, 3, "n6", RoleCore)
	up := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 10}
	down := ipPacket{src: dn4, dst: ue4, ttl: 64, size: 10}
	upIn := gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS), up.bytes(t))
	echo := gtpMsg(1, 0)
	echo.SequenceNumberFlag = true
	echoIn := gtpFrame(t, fromGNB, n3Addr, echo, nil)
	testsupport.EqualFrames(t, access.expect(t, upIn, xdplink.Redirect, "uplink_forward"), up.hop().frame(t, nhL2(nhCoreVLAN)))
	testsupport.EqualFrames(t, access.expect(t, down.frame(t, fromDN), xdplink.Pass, "pass_not_ours"), down.frame(t, fromDN))
	testsupport.EqualFrames(t, core.expect(t, upIn, xdplink.Pass, "pass_not_ours"), upIn)
	testsupport.EqualFrames(t, core.expect(t, echoIn, xdplink.Pass, "pass_not_ours"), echoIn)
	testsupport.EqualFrames(t, core.expect(t, down.frame(t, fromDN), xdplink.Redirect, "downlink_forward"),
		encapFrame(t, nhL2(nhGNB), n3Addr, gnb, dlTEID, 9, down.hop().bytes(t)))
}

// The TTL decrement updates the IPv4 checksum incrementally; the result must
// be the one a full computation gives. RFC 1624 section 3: the RFC 1141 form
// HC' = HC + m + ~m' (what HC + 0x0100 is) yields 0xffff where the full
// computation yields 0x0000, which eqn. 3, HC' = ~(~HC + ~m + m'), does not.
func TestTTLDecrementChecksum(t *testing.T) {
	u := newUPF(t, RoleAccess|RoleCore)
	// idFor returns an identification giving the header checksum sum.
	idFor := func(p ipPacket, sum uint16) uint16 {
		for id := range 1 << 16 {
			p.id = uint16(id)
			if b := p.bytes(t); binary.BigEndian.Uint16(b[10:]) == sum {
				return p.id
			}
		}
		t.Fatalf("no identification gives checksum %#04x", sum)
		return 0
	}
	for _, sum := range []uint16{0x1234, 0x0000, 0x00ff, 0xff00, 0xfe00, 0xfeff} {
		up := ipPacket{src: ue4, dst: dn4, ttl: 64}
		up.id = idFor(up, sum)
		down := ipPacket{src: dn4, dst: ue4, ttl: 64}
		down.id = idFor(down, sum)
		t.Run(fmt.Sprintf("checksum %#04x", sum), func(t *testing.T) {
			testsupport.EqualFrames(t, u.expect(t, gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS), up.bytes(t)), xdplink.Redirect, "uplink_forward"),
				up.hop().frame(t, nhL2(nhCoreVLAN)))
			testsupport.EqualFrames(t, u.expect(t, down.frame(t, fromDN), xdplink.Redirect, "downlink_forward"),
				encapFrame(t, nhL2(nhGNB), n3Addr, gnb, dlTEID, 9, down.hop().bytes(t)))
		})
	}
}

// GTP-U relayed between the gNB and the CP function (N4-u), and from the
// source gNB to the target one (indirect data forwarding): the inner
// packet is untouched (neighbour discovery needs hop limit 255) and goes
// into the FAR's tunnel; a PDR of packets to the UE marks its QFI, and its
// QERs see downlink traffic.
func TestRelay(t *testing.T) {
	u := newUPF(t, RoleAccess)
	smf := mustAddr("192.0.2.50")
	const teidFromCP, teidToCP, smfTEID, teidForwarded, fwdTEID = 0x700, 0x800, 0x5f000001, 0xc00, 0x4f01
	const (
		pdrFromCP = testPDRs + iota
		pdrToCP
		pdrRelayNoNexthop
		pdrGateClosed
		pdrBuffering
		pdrForwarded
		pdrReleased
	)
	const releasedBuffer = 1
	const qerDownClosed = 1
	for slot, r := range map[uint32]struct {
		pdr PDR
		far FAR
	}{
		pdrFromCP:         {pdr: PDR{Flags: ToUE | MarkQFI, Qfi: 9}, far: encap(dlTEID, n3Addr, gnb, nhGNB)},
		pdrToCP:           {pdr: PDR{Flags: MatchUEv6, Ue: pdrUE(ue6)}, far: toCPFunction(encap(smfTEID, n3Addr, smf, nhCoreVLAN))},
		pdrRelayNoNexthop: {pdr: PDR{Flags: ToUE}, far: encap(dlTEID, n3Addr, gnb, nhInvalid)},
		pdrGateClosed:     {pdr: PDR{Flags: ToUE, Qer: [QERsPerPDR]uint32{qerDownClosed}}, far: encap(dlTEID, n3Addr, gnb, nhGNB)},
		pdrBuffering:      {pdr: PDR{Flags: ToUE}, far: FAR{Action: FARBuffer, Nexthop: NexthopRoute}},
		pdrForwarded:      {pdr: PDR{Flags: ToUE | MatchQFI | MarkQFI, Qfi: 1}, far: encap(fwdTEID, n3Addr, gnb, nhGNB)},
		pdrReleased:       {pdr: PDR{Flags: ToUE}, far: buffered(encap(dlTEID, n3Addr, gnb, nhGNB), releasedBuffer)},
	} {
		r.pdr.Far, r.pdr.Id = r.far, uint16(slot+1)
		check(t, u.d.PutPDR(slot, r.pdr))
	}
	check(t, u.d.PutQER(qerDownClosed, QER{GateClosed: 1 << QERDownlink}))
	check(t, u.d.ResetBuffer(releasedBuffer))
	if ok, err := u.d.ReleaseBuffer(releasedBuffer, 0); !ok || err != nil {
		t.Fatalf("releasing the empty buffer: %v, %v", ok, err)
	}
	const teidNoNexthop, teidGateClosed, teidBuffering, teidReleased = 0x900, 0xa00, 0xb00, 0xd00
	for teid, set := range map[uint32]PDRSet{teidFromCP: pdrSet(pdrFromCP), teidToCP: pdrSet(pdrToCP),
		teidNoNexthop: pdrSet(pdrRelayNoNexthop), teidGateClosed: pdrSet(pdrGateClosed), teidBuffering: pdrSet(pdrBuffering),
		teidForwarded: pdrSet(pdrForwarded), teidReleased: pdrSet(pdrReleased)} {
		check(t, u.d.PutUplink(onN3(teid), set))
	}
	ra := ipPacket{src: mustAddr("fe80::1"), dst: ue6, ttl: 255, size: 40}
	rs := ipPacket{src: ue6, dst: mustAddr("ff02::2"), ttl: 255, size: 8}
	u.runCases(t, []pktCase{
		{name: "from the CP function to the gNB", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidFromCP), ra.bytes(t)), act: xdplink.Redirect, reason: "relay_forward",
			out: encapFrame(t, nhL2(nhGNB), n3Addr, gnb, dlTEID, 9, ra.bytes(t))},
		{name: "from the gNB to the CP function", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidToCP, ulPSC(9)), rs.bytes(t)), act: xdplink.Redirect, reason: "relay_forward",
			out: encapFrame(t, nhL2(nhCoreVLAN), n3Addr, smf, smfTEID, -1, rs.bytes(t))},
		{name: "padding trimmed", in: pad(gtpFrame(t, fromGNB, n3Addr, gpdu(teidFromCP), ra.bytes(t)), 20), act: xdplink.Redirect, reason: "relay_forward",
			out: encapFrame(t, nhL2(nhGNB), n3Addr, gnb, dlTEID, 9, ra.bytes(t))},
		{name: "no next hop", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidNoNexthop), ra.bytes(t)), act: xdplink.Drop, reason: "drop_no_nexthop", out: nil},
		{name: "downlink gate closed", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidGateClosed), ra.bytes(t)), act: xdplink.Drop, reason: "drop_qer_gate", out: nil},
		// The source gNB's downlink container (QFI 1) comes off; the target
		// gNB gets the PDR's.
		{name: "from the source gNB to the target gNB", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidForwarded, dlPSC(1)), ra.bytes(t)),
			act: xdplink.Redirect, reason: "relay_forward", out: encapFrame(t, nhL2(nhGNB), n3Addr, gnb, fwdTEID, 1, ra.bytes(t))},
		{name: "forwarded, another QFI", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidForwarded, dlPSC(2)), ra.bytes(t)), act: xdplink.Drop, reason: "drop_no_pdr", out: nil},
		// The UE is idle: not routed to the core as an uplink packet would be.
		{name: "FAR buffering", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidBuffering), ra.bytes(t)), act: xdplink.Drop, reason: "drop_far", out: nil},
		// Its buffer released, the FAR forwards: relayed packets pass.
		{name: "FAR buffered, its buffer released", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidReleased), ra.bytes(t)), act: xdplink.Redirect,
			reason: "relay_forward", out: encapFrame(t, nhL2(nhGNB), n3Addr, gnb, dlTEID, -1, ra.bytes(t))},
	})
	// The relayed packet from the CP function went the downlink way.
	if c, err := u.d.PDRCounter(pdrFromCP); err != nil || c.Packets != 2 {
		t.Errorf("pdrFromCP counted %+v, %v", c, err)
	}
}
