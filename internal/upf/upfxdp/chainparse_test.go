package upfxdp

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
)

// Offsets of the GTP-U header behind an option-less outer IP header.
const (
	gtpOffset6 = ethLen + 40 + 8
	vlanLen    = 4
)

// parseCPU is the CPU the tests of the handed-on parse run on: the parse
// is per CPU.
const parseCPU = 0

// fixedShape tells a frame the UPF stage reads at fixed offsets before it
// looks for a handed-on parse, for which the classify stage hands none
// on: untagged Ethernet, IPv4 without options or fragmentation or IPv6
// with UDP as its next header, UDP to port 2152.
func fixedShape(b []byte) bool {
	switch {
	case len(b) >= ethLen+28 && binary.BigEndian.Uint16(b[12:]) == 0x0800:
		return b[ethLen] == 0x45 && binary.BigEndian.Uint16(b[ethLen+6:])&0x3fff == 0 && b[ethLen+9] == 17 &&
			binary.BigEndian.Uint16(b[ethLen+22:]) == gtpuPort
	case len(b) >= ethLen+48 && binary.BigEndian.Uint16(b[12:]) == 0x86dd:
		return b[ethLen]>>4 == 6 && b[ethLen+6] == 17 && binary.BigEndian.Uint16(b[ethLen+42:]) == gtpuPort
	}
	return false
}

// withTag is the frame b with a VLAN tag (TCI 42) after its addresses.
func withTag(b []byte) []byte {
	return slices.Concat(b[:12], []byte{0x81, 0x00, 0, 42}, b[12:])
}

// handedParse is what the classify stage left for the UPF stage on
// parseCPU.
func handedParse(t *testing.T, d *Datapath) upfChainHandoff {
	t.Helper()
	var all []upfChainHandoff
	check(t, d.maps.ChainHandoffs.Lookup(uint32(0), &all))
	return all[parseCPU]
}

// clearParses empties what the classify stage left on every CPU.
func clearParses(t *testing.T, d *Datapath) {
	t.Helper()
	check(t, d.maps.ChainHandoffs.Put(uint32(0), make([]upfChainHandoff, ebpf.MustPossibleCPU())))
}

// Behind the classify stage, the UPF takes the classify stage's parse of
// the outermost GTP-U message instead of parsing it again: every frame
// comes out as from the UPF alone, byte for byte, counted the same,
// whatever its GTP-U header and extensions, over IPv4 or IPv6, well formed
// or not. The classify stage hands on exactly the messages it parsed whole
// in the outermost UDP datagram to port 2152, except in frames of the
// UPF's fixed-offset shape (each of which runs tagged too, and is handed
// on then), and the UPF claims what it was handed.
func TestChainSharedParseAsTheUPF(t *testing.T) {
	testCPUs(t)
	alone := newUPF6(t, RoleAccess|RoleCore)
	chained, _ := chainOn(t, newUPF6(t, RoleAccess|RoleCore), RoleAccess|RoleCore)
	v4 := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 100, id: 7}
	v6 := ipPacket{src: ue6, dst: dn6, ttl: 64, size: 60}
	inner := v4.bytes(t)
	seq := gpdu(teidQoS, ulPSC(9))
	seq.SequenceNumberFlag, seq.NPDUFlag, seq.SequenceNumber, seq.NPDU = true, true, 0x1234, 0x56
	echo := gtpMsg(1, 0)
	echo.SequenceNumberFlag, echo.SequenceNumber = true, 7
	var eight []layers.GTPExtensionHeader
	for range 7 {
		eight = append(eight, ext(extRAN, 1))
	}
	eight = append(eight, ulPSC(9))
	tagged := fromGNB
	tagged.tci = 42
	up := func(g *layers.GTPv1U, payload []byte) []byte { return gtpFrame(t, fromGNB, n3Addr, g, payload) }
	up6 := func(g *layers.GTPv1U, payload []byte) []byte { return gtp6Frame(t, fromGNB, n3Addr6, g, payload) }
	psc := up(gpdu(teidQoS, ext(extRAN, 2), ulPSC(9)), inner)
	gtpLen := binary.BigEndian.Uint16(psc[gtpOffset+2:])
	frag := func(flags layers.IPv4Flag, offset uint16) []byte {
		h := gnbHdr(n3Addr)
		h.Flags, h.FragOffset = flags, offset
		gtp := serialize(t, false, gpdu(teidQoS, ulPSC(9)), gopacket.Payload(inner))
		return fromGNB.frame(t, layers.EthernetTypeIPv4, udp4(t, h, gtpuPort, gtpuPort, gtp))
	}
	udpLen6 := up6(gpdu(teidQoS, ulPSC(9)), inner)
	udpLen6 = with16(udpLen6, ethLen+40+4, uint16(len(udpLen6)-ethLen-40-1))
	cases := []struct {
		name   string
		in     []byte
		handed int // the GTP-U header's offset the classify stage hands on; 0: none
	}{
		{"G-PDU", up(gpdu(teidQoS), inner), gtpOffset},
		{"PSC QFI 9", up(gpdu(teidQoS, ulPSC(9)), inner), gtpOffset},
		{"PSC QFI 5", up(gpdu(teidQoS, ulPSC(5)), inner), gtpOffset},
		{"DL PSC QFI 9", up(gpdu(teidQoS, dlPSC(9)), inner), gtpOffset},
		{"S and PN flags, PSC", up(seq, inner), gtpOffset},
		{"RAN container, PSC", psc, gtpOffset},
		{"PSC, RAN container", up(gpdu(teidQoS, ulPSC(9), ext(extRAN, 2)), inner), gtpOffset},
		{"eight extensions", up(gpdu(teidQoS, eight...), inner), gtpOffset},
		{"inner IPv6", up(gpdu(teidV6, ulPSC(1)), v6.bytes(t)), gtpOffset},
		{"tagged", gtpFrame(t, tagged, n3Addr, gpdu(teidQoS, ulPSC(9)), inner), gtpOffset + vlanLen},
		{"802.1ad tag", withBytes(gtpFrame(t, tagged, n3Addr, gpdu(teidQoS), inner), 12, 0x88, 0xa8), gtpOffset + vlanLen},
		{"Ethernet padding", pad(up(gpdu(teidQoS, ulPSC(9)), inner), 18), gtpOffset},
		{"GTP payload after the inner packet", up(gpdu(teidQoS, ulPSC(9)), append(bytes.Clone(inner), 1, 2, 3)), gtpOffset},
		{"second N3 address", gtpFrame(t, fromGNB, n3Addr2, gpdu(teidQoS, ulPSC(9)), inner), gtpOffset},
		{"unknown TEID", up(gpdu(teidUnknown, ulPSC(9)), inner), gtpOffset},
		{"FAR drops", up(gpdu(teidFARDrop), inner), gtpOffset},
		{"Echo Request", up(echo, nil), gtpOffset},
		{"End Marker", up(gtpMsg(254, teidQoS), nil), gtpOffset},
		{"G-PDU without payload", up(gpdu(teidQoS, ulPSC(9)), nil), gtpOffset},
		{"GTP length ends inside the inner packet", with16(psc, gtpOffset+2, gtpLen-1), gtpOffset},
		{"UDP length beyond the IPv4 payload", with16(psc, ethLen+20+4, uint16(len(psc)-ethLen-20+1)), gtpOffset},
		{"GTP-U to another address", gtpFrame(t, fromGNB, notN3, gpdu(teidQoS, ulPSC(9)), inner), gtpOffset},
		{"GTP version 2", withBytes(psc, gtpOffset, 0x4c), 0},
		{"zero-length extension", withBytes(psc, gtpOffset+12, 0), 0},
		{"GTP length past the frame", with16(psc, gtpOffset+2, gtpLen+1), 0},
		{"nine extensions", up(gpdu(teidQoS, append(eight, ext(extRAN, 1))...), inner), 0},
		{"first fragment", frag(layers.IPv4MoreFragments, 0), 0},
		{"later fragment", frag(0, 100), 0}, // the first one's verdict, which it has

		{"UDP to port 2153", fromGNB.frame(t, layers.EthernetTypeIPv4, udp4(t, gnbHdr(n3Addr), gtpuPort, gtpuPort+1,
			serialize(t, false, gpdu(teidQoS), gopacket.Payload(inner)))), 0},
		{"downlink", ipPacket{src: dn4, dst: ue4, ttl: 64, size: 100}.frame(t, fromDN), 0},
		{"downlink IPv6", ipPacket{src: dn6, dst: ue6, ttl: 64, size: 30}.frame(t, fromDN), 0},
		{"not ours", ipPacket{src: dn4, dst: ue4Unknown, ttl: 64, size: 10}.frame(t, fromDN), 0},
		{"not IP", fromGNB.frame(t, layers.EthernetTypeARP, make([]byte, 28)), 0},
		{"IPv6: PSC QFI 9", up6(gpdu(teidQoS, ulPSC(9)), inner), gtpOffset6},
		{"IPv6: no PSC", up6(gpdu(teidQoS), inner), gtpOffset6},
		{"IPv6: inner IPv6", up6(gpdu(teidV6, ext(extRAN, 2), ulPSC(1)), v6.bytes(t)), gtpOffset6},
		{"IPv6: tagged", gtp6Frame(t, tagged, n3Addr6, gpdu(teidQoS, ulPSC(9)), inner), gtpOffset6 + vlanLen},
		{"IPv6: Echo Request", up6(echo, nil), gtpOffset6},
		{"IPv6: UDP length beyond the payload", udpLen6, gtpOffset6},
		{"IPv6: GTP-U to another address", gtp6Frame(t, fromGNB, notN3v6, gpdu(teidQoS), inner), gtpOffset6},
	}
	run := func(name string, in []byte, handed int) {
		t.Run(name, func(t *testing.T) {
			clearParses(t, chained.d)
			onCPU(t, parseCPU, func() { sameAsAlone(t, alone, chained, in) })
			got := handedParse(t, chained.d)
			if got.Ifindex != 0 || int(got.Gtpu.Off) != handed {
				t.Errorf("left behind: interface %d, GTP-U header at %d; want none, at %d", got.Ifindex, got.Gtpu.Off, handed)
			}
		})
	}
	for _, c := range cases {
		if !fixedShape(c.in) {
			run(c.name, c.in, c.handed)
			continue
		}
		run(c.name, c.in, 0)
		if c.handed != 0 {
			c.handed += vlanLen
		}
		run(c.name+", tagged", withTag(c.in), c.handed)
	}
	// Every prefix of a G-PDU with an extension chain, with the outer
	// lengths fixed and the GTP length as it was (malformed once the GTP-U
	// header is complete) or fixed (cut in the chain or the inner packet).
	// Untagged, the UPF reads them itself; tagged, it takes them handed on.
	for _, tag := range []int{0, vlanLen} {
		whole := psc
		if tag != 0 {
			whole = withTag(psc)
		}
		for _, fixGTP := range []bool{false, true} {
			for n := gtpOffset + tag; n < len(whole); n++ {
				in := bytes.Clone(whole[:n])
				fixIPv4(in, ethLen+tag, n-ethLen-tag)
				binary.BigEndian.PutUint16(in[ethLen+tag+20+4:], uint16(n-ethLen-tag-20))
				if fixGTP && n >= gtpOffset+tag+8 {
					binary.BigEndian.PutUint16(in[gtpOffset+tag+2:], uint16(n-gtpOffset-tag-8))
				}
				sameAsAlone(t, alone, chained, in)
			}
		}
	}
}

// The parse the classify stage hands on does not outlive its packet's run
// on the CPU: the steer stage that sends the packet to another CPU, and
// the classify stage that finds no later stage, clear it.
func TestChainParseNotLeftBehind(t *testing.T) {
	testCPUs(t)
	u := newUPF(t, RoleAccess|RoleCore)
	chained, rules := chainOn(t, u, RoleAccess|RoleCore)
	const slice = 1
	check(t, rules.SetSlice(classifyxdp.Slice{ID: slice, CPUs: []int{1 - parseCPU}}))
	classify, steer, steerFirst := rules.Stages()
	slot, _, err := u.d.slotOf("lo")
	check(t, err)
	stage := chainStage(t, u.d, slot, RoleAccess|RoleCore)
	// Tagged: not of the UPF's fixed-offset shape, so the parse is handed on.
	vlan := fromGNB
	vlan.tci = 42
	in := gtpFrame(t, vlan, n3Addr, gpdu(teidQoS, ulPSC(9)), ipPacket{src: ue4, dst: dn4, ttl: 64, size: 100}.bytes(t))
	for _, c := range []struct {
		name  string
		chain Chain
		upf   bool // the UPF's place holds its stage
		act   xdplink.Action
	}{
		{name: "steered to another CPU", chain: Chain{Classify: classify, Steer: steer, SteerFirst: steerFirst, Slice: slice},
			upf: true, act: xdplink.Redirect},
		{name: "no stage after the classify stage", chain: Chain{Classify: classify}, act: xdplink.Pass},
	} {
		t.Run(c.name, func(t *testing.T) {
			check(t, u.d.setChain(fakeIfindex, slot, c.chain, stage))
			if !c.upf {
				check(t, u.d.putStage(slot*stageCount+stageUPF, nil))
			}
			clearParses(t, u.d)
			onCPU(t, parseCPU, func() {
				act, _ := chained.run(t, in)
				if act != c.act {
					t.Fatalf("%v, want %v", act, c.act)
				}
			})
			if got := handedParse(t, u.d); got.Ifindex != 0 {
				t.Errorf("the parse of a packet of interface %d, %d bytes, left behind", got.Ifindex, got.Len)
			}
		})
	}
}

// Behind the classify stage, the UPF takes where the outermost IP header
// lies and the GTP-U message in its datagram from the classify stage,
// parsing neither again: every frame comes out as from the UPF alone,
// byte for byte, counted the same, whatever its VLAN tags, outer IP
// version, options and extension headers. The classify stage hands on an
// IP header only where the UPF would parse one: behind Ethernet with one
// VLAN tag at most, of the EtherType's version, whole.
func TestChainHandsTheIPHeader(t *testing.T) {
	testCPUs(t)
	alone := newUPF6(t, RoleAccess|RoleCore)
	chained, _ := chainOn(t, newUPF6(t, RoleAccess|RoleCore), RoleAccess|RoleCore)
	inner := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 100, id: 7}.bytes(t)
	tagged := fromGNB
	tagged.tci = 42
	up := gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS, ulPSC(9)), inner)
	up6 := gtp6Frame(t, fromGNB, n3Addr6, gpdu(teidQoS, ext(extRAN, 2), ulPSC(9)), inner)
	// Outer IPv4 with a router alert: the GTP-U header 4 bytes on.
	opts := gnbHdr(n3Addr)
	opts.Options = []layers.IPv4Option{{OptionType: 148, OptionLength: 4, OptionData: []byte{0, 0}}}
	withOpts := fromGNB.frame(t, layers.EthernetTypeIPv4, udp4(t, opts, gtpuPort, gtpuPort,
		serialize(t, false, gpdu(teidQoS, ulPSC(9)), gopacket.Payload(inner))))
	// Two tags, 802.1ad then 802.1Q: the UPF takes one.
	qinq := slices.Concat(gtpFrame(t, tagged, n3Addr, gpdu(teidQoS), inner)[:16], []byte{0x81, 0x00, 0, 7},
		gtpFrame(t, tagged, n3Addr, gpdu(teidQoS), inner)[16:])
	qinq = withBytes(qinq, 12, 0x88, 0xa8)
	// A hop-by-hop header (PadN) before the UDP header: not GTP-U to the UPF.
	hopByHop := slices.Concat(up6[:ethLen+40], []byte{17, 0, 1, 4, 0, 0, 0, 0}, up6[ethLen+40:])
	hopByHop[ethLen+6] = 0
	hopByHop = with16(hopByHop, ethLen+4, uint16(len(hopByHop)-ethLen-40))
	cases := []struct {
		name     string
		in       []byte
		l3, gtpu int // the offsets of the IP and GTP-U headers handed on; 0: none
	}{
		{"IPv4", up, 0, 0}, // the UPF's fixed-offset shape: nothing handed on
		{"IPv4, tagged", gtpFrame(t, tagged, n3Addr, gpdu(teidQoS, ulPSC(9)), inner), ethLen + vlanLen, gtpOffset + vlanLen},
		{"IPv4, 802.1ad tag", withBytes(gtpFrame(t, tagged, n3Addr, gpdu(teidQoS), inner), 12, 0x88, 0xa8),
			ethLen + vlanLen, gtpOffset + vlanLen},
		{"IPv4 with options", withOpts, ethLen, gtpOffset + 4},
		{"IPv4, two tags", qinq, 0, 0},
		{"IPv4 longer than the frame", with16(up, ethLen+2, uint16(len(up)-ethLen+1)), 0, 0},
		{"IPv6 as EtherType IPv4", withBytes(up6, 12, 0x08, 0x00), 0, 0},
		{"IPv4 as EtherType IPv6", withBytes(up, 12, 0x86, 0xdd), 0, 0},
		{"IPv6", up6, 0, 0}, // the UPF's fixed-offset shape: nothing handed on
		{"IPv6, tagged", gtp6Frame(t, tagged, n3Addr6, gpdu(teidQoS, ulPSC(9)), inner), ethLen + vlanLen, gtpOffset6 + vlanLen},
		{"IPv6, hop-by-hop header", hopByHop, ethLen, gtpOffset6 + 8},
		{"downlink", ipPacket{src: dn4, dst: ue4, ttl: 64, size: 100}.frame(t, fromDN), ethLen, 0},
		{"downlink IPv6, tagged", ipPacket{src: dn6, dst: ue6, ttl: 64, size: 30}.frame(t, l2{dst: fromDN.dst, src: fromDN.src, tci: 9}),
			ethLen + vlanLen, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clearParses(t, chained.d)
			onCPU(t, parseCPU, func() { sameAsAlone(t, alone, chained, c.in) })
			got := handedParse(t, chained.d)
			if got.Ifindex != 0 || int(got.L3Off) != c.l3 || int(got.Gtpu.Off) != c.gtpu {
				t.Errorf("left behind: interface %d, IP header at %d, GTP-U header at %d; want none, at %d and %d",
					got.Ifindex, got.L3Off, got.Gtpu.Off, c.l3, c.gtpu)
			}
		})
	}
}
