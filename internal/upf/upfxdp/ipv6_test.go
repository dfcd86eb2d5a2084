package upfxdp

// GTP-U over IPv6 transport: G-PDUs to an IPv6 N3 address decapsulated,
// and tunnels to IPv6 peers (FARGTPUv6) with the UDP checksum IPv6 makes
// mandatory, each frame compared byte for byte with gopacket's, the
// checksum included.

import (
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

var (
	n3Addr6  = mustAddr("2001:db8:3::1")
	n3Addr6b = mustAddr("2001:db8:3::2")
	notN3v6  = mustAddr("2001:db8:3::9")
	gnb6     = mustAddr("2001:db8:5::10")
	gnb6b    = mustAddr("2001:db8:5::20")
	smf6     = mustAddr("2001:db8:6::50")
	n9Addr6  = mustAddr("2001:db8:9::1")
	psa6     = mustAddr("2001:db8:9::60") // the next UPF's N9 address
)

// Next-hop slots of the IPv6 peers, after testNexthops'.
const (
	nhGNB6     = 6
	nhGNB6VLAN = 7
	nhSMF6     = 8
	nhPSA6     = 9
)

var testNexthops6 = map[uint32]struct {
	l2          l2
	peer, local netip.Addr
}{
	nhGNB6:     {l2: l2{dst: mac(0x1a), src: mac(0x01)}, peer: gnb6, local: n3Addr6},
	nhGNB6VLAN: {l2: l2{dst: mac(0x1b), src: mac(0x01), tci: 300}, peer: gnb6b, local: n3Addr6b},
	nhSMF6:     {l2: l2{dst: mac(0x1c), src: mac(0x02)}, peer: smf6, local: n3Addr6},
	nhPSA6:     {l2: l2{dst: mac(0x1d), src: mac(0x02)}, peer: psa6, local: n9Addr6},
}

// newUPF6 is newUPF with IPv6 N3 addresses besides the IPv4 ones and an
// IPv6 N9 address, the uplink F-TEIDs of the first IPv4 N3 address at both
// IPv6 N3 ones too, and the tunnel endpoints of the IPv6 peers.
func newUPF6(t *testing.T, roles Role) *upf {
	t.Helper()
	d := openTest(t, Options{MaxSessions: 64, N3Addresses: []netip.Addr{n3Addr, n3Addr6, n3Addr2, n3Addr6b},
		N9Addresses: []netip.Addr{n9Addr6}})
	installRules(t, d)
	for _, f := range d.UplinkFTEIDs() {
		if f.Addr != n3Addr {
			continue
		}
		set, err := d.Uplink(f)
		check(t, err)
		check(t, d.PutUplink(FTEID{n3Addr6, f.TEID}, set))
		check(t, d.PutUplink(FTEID{n3Addr6b, f.TEID}, set))
	}
	for slot, nh := range testNexthops6 {
		check(t, d.PutNexthop(slot, Nexthop{Ifindex: 10 + slot, VlanTci: be16(nh.l2.tci), Dmac: [6]uint8(nh.l2.dst),
			Smac: [6]uint8(nh.l2.src), Valid: 1}))
		check(t, d.PutTunnel6(slot, nh.peer, nh.local))
	}
	return attachTest(t, d, fakeIfindex, "lo", roles)
}

func encap6(teid uint32, nh uint32) FAR {
	return FAR{Action: FARForward, Flags: FARGTPUv6, Teid: NetworkOrder32(teid), Nexthop: nh}
}

// udp6 is IPv6/UDP from src to dst around payload, with the checksum.
func udp6(t testing.TB, tclass uint8, flow uint32, hops uint8, src, dst netip.Addr, payload []byte) []byte {
	t.Helper()
	ip := &layers.IPv6{Version: 6, TrafficClass: tclass, FlowLabel: flow, NextHeader: layers.IPProtocolUDP, HopLimit: hops,
		SrcIP: ipOf(src), DstIP: ipOf(dst)}
	u := &layers.UDP{SrcPort: gtpuPort, DstPort: gtpuPort}
	if err := u.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	return serialize(t, true, ip, u, gopacket.Payload(payload))
}

// gtp6Frame is a GTP-U message from an IPv6 gNB to dst.
func gtp6Frame(t testing.TB, l l2, dst netip.Addr, g *layers.GTPv1U, payload []byte) []byte {
	t.Helper()
	gtp := serialize(t, false, g, gopacket.Payload(payload))
	return l.frame(t, layers.EthernetTypeIPv6, udp6(t, 0xb8, 0xabcde, 62, gnb6, dst, gtp))
}

// encap6Frame is what the UPF sends into the IPv6 tunnel of next-hop slot
// nh: inner in GTP-U (with a DL PDU Session Container when qfi >= 0),
// traffic class tos, hop limit 64, flow label 0.
func encap6Frame(t testing.TB, tos uint8, nh uint32, teid uint32, qfi int, inner []byte) []byte {
	t.Helper()
	g := gpdu(teid)
	if qfi >= 0 {
		g.GTPExtensionHeaders = []layers.GTPExtensionHeader{dlPSC(uint8(qfi))}
	}
	return gpdu6Frame(t, tos, nh, g, inner)
}

// gpdu6Frame is the G-PDU g around inner in the IPv6 tunnel of next-hop
// slot nh.
func gpdu6Frame(t testing.TB, tos uint8, nh uint32, g *layers.GTPv1U, inner []byte) []byte {
	t.Helper()
	gtp := serialize(t, false, g, gopacket.Payload(inner))
	e := testNexthops6[nh]
	return e.l2.frame(t, layers.EthernetTypeIPv6, udp6(t, tos, 0, 64, e.local, e.peer, gtp))
}

func TestIPv6TransportUplink(t *testing.T) {
	u := newUPF6(t, RoleAccess|RoleCore)
	v4 := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 100, id: 7}
	v6 := ipPacket{src: ue6, dst: dn6, ttl: 64, size: 100}
	tagged := fromGNB
	tagged.tci = 42
	fwd := func(name string, l l2, dst netip.Addr, g *layers.GTPv1U, p ipPacket, padding int, nh uint32) pktCase {
		return pktCase{name: name, in: pad(gtp6Frame(t, l, dst, g, p.bytes(t)), padding), act: xdplink.Redirect,
			reason: "uplink_forward", out: p.hop().frame(t, nhL2(nh))}
	}
	echo := gtpMsg(1, 0)
	echo.SequenceNumberFlag, echo.SequenceNumber = true, 7
	fragment := withBytes(gtp6Frame(t, fromGNB, n3Addr6, gpdu(teidQoS), v4.bytes(t)), ethLen+6, 44)
	badLength := gtp6Frame(t, fromGNB, n3Addr6, gpdu(teidQoS), v4.bytes(t))
	badLength = with16(badLength, ethLen+40+4, uint16(len(badLength)-ethLen-40-1))
	// The shapes the fixed-offset read leaves to the general parser.
	seq := gpdu(teidQoS)
	seq.SequenceNumberFlag, seq.SequenceNumber = true, 0x1234
	eOnly := gpdu(teidQoS)
	eOnly.ExtensionHeaderFlag = true
	twoWordPSC := layers.GTPExtensionHeader{Type: extPSC, Content: []byte{0x10, 9, 0, 0, 0, 0}}
	gtpTooLong := gtp6Frame(t, fromGNB, n3Addr6, gpdu(teidQoS, ulPSC(9)), v4.bytes(t))
	gtpTooLong = with16(gtpTooLong, ethLen+40+8+2, uint16(len(gtpTooLong)-ethLen-40-8-8+1))
	// A TEID is found at the address it was installed at only.
	check(t, u.d.DeleteUplink(FTEID{n3Addr6b, teidQoS}))
	u.runCases(t, []pktCase{
		fwd("IPv4 UE, QFI 9", fromGNB, n3Addr6, gpdu(teidQoS, ulPSC(9)), v4, 0, nhCore),
		fwd("IPv4 UE, no QFI, tagged next hop", fromGNB, n3Addr6, gpdu(teidQoS), v4, 0, nhCoreVLAN),
		fwd("IPv6 UE", fromGNB, n3Addr6, gpdu(teidV6), v6, 0, nhCoreVLAN),
		fwd("second IPv6 N3 address", fromGNB, n3Addr6b, gpdu(teidV6, ulPSC(1)), v6, 0, nhCoreVLAN),
		fwd("tagged frame in", tagged, n3Addr6, gpdu(teidQoS, ulPSC(9)), v4, 0, nhCore),
		fwd("Ethernet padding trimmed", fromGNB, n3Addr6, gpdu(teidQoS, ulPSC(9)), ipPacket{src: ue4, dst: dn4, ttl: 3}, 12, nhCore),
		fwd("S flag", fromGNB, n3Addr6, seq, v4, 0, nhCoreVLAN),
		fwd("E flag, empty chain", fromGNB, n3Addr6, eOnly, v4, 0, nhCoreVLAN),
		fwd("PSC before a two-word extension", fromGNB, n3Addr6, gpdu(teidQoS, ulPSC(9), ext(extRAN, 2)), v4, 0, nhCore),
		fwd("PSC of two words", fromGNB, n3Addr6, gpdu(teidQoS, twoWordPSC), v4, 0, nhCore),
		fwd("IPv6 UE, QFI 9, padded", fromGNB, n3Addr6, gpdu(teidV6, ulPSC(9)), v6, 7, nhCoreVLAN),
		{name: "GTP payload after the inner packet trimmed",
			in:  gtp6Frame(t, fromGNB, n3Addr6, gpdu(teidQoS, ulPSC(9)), append(v4.bytes(t), 0xde, 0xad, 0xbe, 0xef)),
			act: xdplink.Redirect, reason: "uplink_forward", out: v4.hop().frame(t, nhL2(nhCore))},
		{name: "GTP-U length beyond the UDP datagram", in: gtpTooLong, act: xdplink.Drop, reason: "drop_malformed"},
		{name: "unknown TEID", in: gtp6Frame(t, fromGNB, n3Addr6, gpdu(teidUnknown), v4.bytes(t)), act: xdplink.Drop, reason: "drop_unknown_teid"},
		{name: "TEID of another address", in: gtp6Frame(t, fromGNB, n3Addr6b, gpdu(teidQoS), v4.bytes(t)), act: xdplink.Drop, reason: "drop_unknown_teid"},
		{name: "UDP length beyond the IPv6 payload", in: badLength, act: xdplink.Drop, reason: "drop_malformed"},
		{name: "Echo Request: the endpoint answers", in: gtp6Frame(t, fromGNB, n3Addr6, echo, nil), act: xdplink.Pass, reason: "pass_gtp_signalling"},
		{name: "End Marker", in: gtp6Frame(t, fromGNB, n3Addr6, gtpMsg(254, teidQoS), nil), act: xdplink.Pass, reason: "pass_gtp_signalling"},
		{name: "fragment", in: fragment, act: xdplink.Pass, reason: "pass_fragment"},
		{name: "another IPv6 address", in: gtp6Frame(t, fromGNB, notN3v6, gpdu(teidQoS), v4.bytes(t)), act: xdplink.Pass, reason: "pass_not_ours"},
		{name: "an IPv4 N3 address written as IPv6", in: gtp6Frame(t, fromGNB, netip.AddrFrom16(n3Addr.As16()), gpdu(teidQoS), v4.bytes(t)), act: xdplink.Pass, reason: "pass_not_ours"},
	})
}

// A downlink FAR into an IPv6 tunnel, for IPv4 and IPv6 UEs.
func TestIPv6TransportDownlink(t *testing.T) {
	u := newUPF6(t, RoleAccess|RoleCore)
	changePDR(t, u.d, pdrDown, func(p *PDR) { p.Far = encap6(dlTEID, nhGNB6) })
	changePDR(t, u.d, pdrDownVLAN, func(p *PDR) { p.Far = encap6(dlTEID2, nhGNB6VLAN); p.Far.Tos = 46 << 2 })
	changePDR(t, u.d, pdrDown6, func(p *PDR) { p.Far = encap6(dlTEID6, nhGNB6) })
	v4 := ipPacket{src: dn4, dst: ue4, ttl: 64, size: 100, id: 99}
	v4b := ipPacket{src: dn4, dst: ue4b, ttl: 2, size: 1}
	v6 := ipPacket{src: dn6, dst: ue6, ttl: 64, size: 100}
	dl := func(name string, p ipPacket, padding int, tos uint8, nh, teid uint32, qfi int) pktCase {
		return pktCase{name: name, in: pad(p.frame(t, fromDN), padding), act: xdplink.Redirect, reason: "downlink_forward",
			out: encap6Frame(t, tos, nh, teid, qfi, p.hop().bytes(t))}
	}
	u.runCases(t, []pktCase{
		dl("IPv4 UE, QFI", v4, 0, 0, nhGNB6, dlTEID, 9),
		dl("IPv4 UE, no QFI, DSCP EF, tagged next hop, second N3 address", v4b, 0, 46<<2, nhGNB6VLAN, dlTEID2, -1),
		dl("IPv4 UE, padded frame in", ipPacket{src: dn4, dst: ue4, ttl: 5, size: 3}, 13, 0, nhGNB6, dlTEID, 9),
		dl("IPv6 UE, QFI 5 with RQI", v6, 0, 0, nhGNB6, dlTEID6, 0x40|5),
		dl("IPv6 UE, other host of the /64", ipPacket{src: dn6, dst: ue6b, ttl: 2, size: 1}, 0, 0, nhGNB6, dlTEID6, 0x40|5),
	})
}

// Where the packet inside cannot vouch for its bytes (here: UDP over IPv4
// without a checksum), the checksum sums every length a frame can have:
// the chunks of 256, 64, 16 and 4 bytes and the odd bytes after them, up to
// the largest frame a test run takes.
func TestIPv6TransportChecksumEverySize(t *testing.T) {
	u := newUPF6(t, RoleCore)
	changePDR(t, u.d, pdrDown, func(p *PDR) { p.Far = encap6(dlTEID, nhGNB6) })
	const udpCheck = 20 + 6
	for size := range 3400 {
		if size > 600 && size%7 != 0 {
			continue
		}
		p := ipPacket{src: dn4, dst: ue4, ttl: 64, size: size, id: uint16(size)}
		act, out := u.run(t, fromDN.ipFrame(t, with16(p.bytes(t), udpCheck, 0)))
		want := encap6Frame(t, 0, nhGNB6, dlTEID, 9, with16(p.hop().bytes(t), udpCheck, 0))
		if diff, sum := testsupport.FrameDiff(out, want), testsupport.UDP6Checksum(out); act != xdplink.Redirect || diff != "" || sum != nil {
			t.Fatalf("UDP payload of %d bytes: %v, checksum: %v %s", size, act, sum, diff)
		}
	}
}

// A packet whose own checksums cover it (TCP, UDP, ICMP, ICMPv6) gets the
// tunnel's checksum from them rather than from its bytes; the others are
// summed. Either way the checksum is gopacket's, over the bytes.
func TestIPv6TransportChecksumOfEachProtocol(t *testing.T) {
	u := newUPF6(t, RoleCore)
	changePDR(t, u.d, pdrDown, func(p *PDR) { p.Far = encap6(dlTEID, nhGNB6) })
	changePDR(t, u.d, pdrDown6, func(p *PDR) { p.Far = encap6(dlTEID6, nhGNB6) })
	// packet is IPv4 or IPv6 from the DN to the UE with TTL ttl around
	// transport, the payload of size bytes behind it.
	packet := func(v6 bool, ttl uint8, transport func(gopacket.NetworkLayer) gopacket.SerializableLayer, size int, options ...layers.IPv4Option) []byte {
		payload := make(gopacket.Payload, size)
		for i := range payload {
			payload[i] = byte(3*i + 1)
		}
		var ip interface {
			gopacket.NetworkLayer
			gopacket.SerializableLayer
		}
		if v6 {
			ip = &layers.IPv6{Version: 6, HopLimit: ttl, SrcIP: ipOf(dn6), DstIP: ipOf(ue6)}
		} else {
			ip = &layers.IPv4{Version: 4, TTL: ttl, Id: uint16(size), SrcIP: ipOf(dn4), DstIP: ipOf(ue4), Options: options}
		}
		l4 := transport(ip)
		switch l := l4.(type) {
		case *layers.UDP:
			setProto(ip, layers.IPProtocolUDP)
			check(t, l.SetNetworkLayerForChecksum(ip))
		case *layers.TCP:
			setProto(ip, layers.IPProtocolTCP)
			check(t, l.SetNetworkLayerForChecksum(ip))
		case *layers.ICMPv4:
			setProto(ip, layers.IPProtocolICMPv4)
		case *layers.ICMPv6:
			setProto(ip, layers.IPProtocolICMPv6)
			check(t, l.SetNetworkLayerForChecksum(ip))
		case *layers.IPv6HopByHop:
			setProto(ip, layers.IPProtocolIPv6HopByHop)
			after := &layers.UDP{SrcPort: 9, DstPort: 9}
			check(t, after.SetNetworkLayerForChecksum(ip))
			return serialize(t, true, ip, l, after, payload)
		}
		return serialize(t, true, ip, l4, payload)
	}
	udp := func(gopacket.NetworkLayer) gopacket.SerializableLayer {
		return &layers.UDP{SrcPort: 40000, DstPort: 53}
	}
	tcp := func(gopacket.NetworkLayer) gopacket.SerializableLayer {
		return &layers.TCP{SrcPort: 443, DstPort: 50000, Seq: 0x01020304, Ack: 7, DataOffset: 5, ACK: true, PSH: true, Window: 512}
	}
	icmp := func(gopacket.NetworkLayer) gopacket.SerializableLayer {
		return &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoReply, 0), Id: 1, Seq: 2}
	}
	icmp6 := func(gopacket.NetworkLayer) gopacket.SerializableLayer {
		return &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeEchoReply, 0)}
	}
	hopByHop := func(gopacket.NetworkLayer) gopacket.SerializableLayer {
		h := &layers.IPv6HopByHop{}
		h.NextHeader = layers.IPProtocolUDP
		h.Options = []*layers.IPv6HopByHopOption{{OptionType: 1, OptionLength: 4, OptionData: []byte{0, 0, 0, 0}}}
		return h
	}
	routerAlert := layers.IPv4Option{OptionType: 0x94, OptionLength: 4, OptionData: []byte{0, 0}}
	// With a PDU Session Container, then without: the GTP-U header's words
	// differ in number and length.
	for _, withQFI := range []bool{true, false} {
		if !withQFI {
			for _, slot := range []uint32{pdrDown, pdrDown6} {
				changePDR(t, u.d, slot, func(p *PDR) { p.Flags &^= MarkQFI })
			}
		}
		for _, size := range []int{0, 1, 57, 1000, 1400} {
			for name, p := range map[string]func(ttl uint8) []byte{
				"UDP over IPv4":                 func(ttl uint8) []byte { return packet(false, ttl, udp, size) },
				"UDP over IPv4, no checksum":    func(ttl uint8) []byte { return with16(packet(false, ttl, udp, size), 20+6, 0) },
				"UDP over IPv4, first fragment": func(ttl uint8) []byte { return withBytes(packet(false, ttl, udp, size), 6, 0x20) },
				"TCP over IPv4":                 func(ttl uint8) []byte { return packet(false, ttl, tcp, size) },
				"TCP over IPv4 with options":    func(ttl uint8) []byte { return packet(false, ttl, tcp, size, routerAlert) },
				"ICMP":                          func(ttl uint8) []byte { return packet(false, ttl, icmp, size) },
				"UDP over IPv6":                 func(ttl uint8) []byte { return packet(true, ttl, udp, size) },
				"TCP over IPv6":                 func(ttl uint8) []byte { return packet(true, ttl, tcp, size) },
				"ICMPv6":                        func(ttl uint8) []byte { return packet(true, ttl, icmp6, size) },
				"IPv6 hop-by-hop options":       func(ttl uint8) []byte { return packet(true, ttl, hopByHop, size) },
			} {
				teid, qfi := uint32(dlTEID), 9
				if p(64)[0]>>4 == 6 {
					teid, qfi = dlTEID6, 0x40|5
				}
				if !withQFI {
					qfi = -1
				}
				act, out := u.run(t, fromDN.ipFrame(t, p(64)))
				want := encap6Frame(t, 0, nhGNB6, teid, qfi, p(63))
				if diff, sum := testsupport.FrameDiff(out, want), testsupport.UDP6Checksum(out); act != xdplink.Redirect || diff != "" || sum != nil {
					t.Errorf("%s, %d bytes, QFI %v: %v, checksum: %v %s", name, size, withQFI, act, sum, diff)
				}
			}
		}
	}
}

// setProto sets the protocol an IPv4 or IPv6 header says follows it.
func setProto(ip gopacket.NetworkLayer, proto layers.IPProtocol) {
	switch ip := ip.(type) {
	case *layers.IPv4:
		ip.Protocol = proto
	case *layers.IPv6:
		ip.NextHeader = proto
	}
}

// Relays between IPv6 tunnels, and between the two families: the inner
// packet as it came.
func TestIPv6TransportRelay(t *testing.T) {
	u := newUPF6(t, RoleAccess)
	const teidFromCP, teidToCP, teidToV4, smfTEID = 0x700, 0x800, 0x900, 0x5f000001
	const (
		pdrFromCP = testPDRs + iota
		pdrToCP
		pdrToV4
	)
	for slot, p := range map[uint32]PDR{
		pdrFromCP: {Flags: ToUE | MarkQFI, Qfi: 9, Far: encap6(dlTEID, nhGNB6)},
		pdrToCP:   {Flags: MatchUEv6, Ue: pdrUE(ue6), Far: toCPFunction(encap6(smfTEID, nhSMF6))},
		pdrToV4:   {Flags: ToUE, Far: encap(dlTEID2, n3Addr2, gnb2, nhGNBVLAN)},
	} {
		p.Id = uint16(slot + 1)
		check(t, u.d.PutPDR(slot, p))
	}
	for teid, set := range map[uint32]PDRSet{teidFromCP: pdrSet(pdrFromCP), teidToCP: pdrSet(pdrToCP), teidToV4: pdrSet(pdrToV4)} {
		check(t, u.d.PutUplink(FTEID{n3Addr6, teid}, set))
		check(t, u.d.PutUplink(onN3(teid), set))
	}
	ra := ipPacket{src: mustAddr("fe80::1"), dst: ue6, ttl: 255, size: 40}
	rs := ipPacket{src: ue6, dst: mustAddr("ff02::2"), ttl: 255, size: 8}
	u.runCases(t, []pktCase{
		{name: "IPv6 from the CP function to an IPv6 gNB", in: gtp6Frame(t, fromGNB, n3Addr6, gpdu(teidFromCP), ra.bytes(t)),
			act: xdplink.Redirect, reason: "relay_forward", out: encap6Frame(t, 0, nhGNB6, dlTEID, 9, ra.bytes(t))},
		{name: "IPv4 from the CP function to an IPv6 gNB", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidFromCP), ra.bytes(t)),
			act: xdplink.Redirect, reason: "relay_forward", out: encap6Frame(t, 0, nhGNB6, dlTEID, 9, ra.bytes(t))},
		{name: "IPv6 from the gNB to the CP function", in: gtp6Frame(t, fromGNB, n3Addr6, gpdu(teidToCP, ulPSC(9)), rs.bytes(t)),
			act: xdplink.Redirect, reason: "relay_forward", out: encap6Frame(t, 0, nhSMF6, smfTEID, -1, rs.bytes(t))},
		{name: "IPv6 in, IPv4 out", in: gtp6Frame(t, fromGNB, n3Addr6, gpdu(teidToV4), ra.bytes(t)),
			act: xdplink.Redirect, reason: "relay_forward", out: encapFrame(t, nhL2(nhGNBVLAN), n3Addr2, gnb2, dlTEID2, -1, ra.bytes(t))},
	})
}

// DUPL over IPv6 transport: a G-PDU to an IPv6 N3 address whose FAR drops
// it leaves as its copy; a downlink packet into an IPv6 tunnel is sent as
// over IPv4, with its copy (lost here: the test interfaces have no fanout
// to take it).
func TestIPv6TransportDuplicate(t *testing.T) {
	u := newUPF6(t, RoleAccess|RoleCore)
	changePDR(t, u.d, pdrFARDrop, func(p *PDR) { p.Far.Flags |= FARDuplicate })
	changePDR(t, u.d, pdrDown, func(p *PDR) { p.Far = encap6(dlTEID, nhGNB6); p.Far.Flags |= FARDuplicate })
	check(t, u.d.PutDupl(pdrFARDrop, Dupl{Nexthop: nhCore}))
	check(t, u.d.PutDupl(pdrDown, Dupl{Nexthop: nhCore}))
	up := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 100, id: 7}
	down := ipPacket{src: dn4, dst: ue4, ttl: 64, size: 100, id: 99}
	out := u.expect(t, gtp6Frame(t, fromGNB, n3Addr6, gpdu(teidFARDrop, ulPSC(9)), up.bytes(t)), xdplink.Redirect,
		"drop_far", "duplicate")
	testsupport.EqualFrames(t, out, up.frame(t, nhL2(nhCore)))
	out = u.expect(t, down.frame(t, fromDN), xdplink.Redirect, "downlink_forward", "drop_duplicate")
	testsupport.EqualFrames(t, out, encap6Frame(t, 0, nhGNB6, dlTEID, 9, down.hop().bytes(t)))
}

// N9 over IPv6: an I-UPF relays the gNB's uplink to its IPv6 N3 address
// over N9 to an IPv6 PSA, in an UL PDU Session Container, from its IPv6 N9
// address; the same TEID value at the N9 address is another F-TEID, whose
// downlink from the PSA goes to the gNB. The inner packets are untouched.
func TestIPv6TransportN9(t *testing.T) {
	u := newUPF6(t, RoleAccess)
	const pdrToPSA6, pdrFromPSA6 = testPDRs, testPDRs + 1
	for slot, p := range map[uint32]PDR{
		pdrToPSA6:   {Flags: MarkQFI, Qfi: 9, Far: encap6(psaTEID, nhPSA6)},
		pdrFromPSA6: {Flags: ToUE | MarkQFI, Qfi: 5, Far: encap6(dlTEID, nhGNB6)},
	} {
		p.Id = uint16(slot + 1)
		check(t, u.d.PutPDR(slot, p))
	}
	check(t, u.d.PutUplink(FTEID{n3Addr6, teidShared}, pdrSet(pdrToPSA6)))
	check(t, u.d.PutUplink(FTEID{n9Addr6, teidShared}, pdrSet(pdrFromPSA6)))
	up := ipPacket{src: ue6, dst: dn6, ttl: 64, size: 40}
	down := ipPacket{src: dn4, dst: ue4, ttl: 63, size: 60}
	u.runCases(t, []pktCase{
		{name: "uplink over N9", in: gtp6Frame(t, fromGNB, n3Addr6, gpdu(teidShared, ulPSC(1)), up.bytes(t)), act: xdplink.Redirect,
			reason: "relay_forward", out: gpdu6Frame(t, 0, nhPSA6, gpdu(psaTEID, ulPSC(9)), up.bytes(t))},
		{name: "downlink from N9, same TEID value", in: gtp6Frame(t, fromGNB, n9Addr6, gpdu(teidShared, dlPSC(9)), down.bytes(t)),
			act: xdplink.Redirect, reason: "relay_forward", out: encap6Frame(t, 0, nhGNB6, dlTEID, 5, down.bytes(t))},
		{name: "the TEID at the second IPv6 N3 address", in: gtp6Frame(t, fromGNB, n3Addr6b, gpdu(teidShared), up.bytes(t)),
			act: xdplink.Drop, reason: "drop_unknown_teid"},
	})
}
