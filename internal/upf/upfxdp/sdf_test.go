package upfxdp

import (
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
)

// sdfFilter matches protocol proto (0: any) from src to dst (prefixes, ""
// for any) and, given four ports, source ports ports[0]-ports[1] and
// destination ports ports[2]-ports[3].
func sdfFilter(proto uint8, src, dst string, ports ...uint16) SDFFilter {
	f := SDFFilter{Proto: proto}
	var srcFamily, dstFamily uint8
	if src != "" {
		f.Src, f.SrcMask, srcFamily = SDFPrefix(netip.MustParsePrefix(src))
	}
	if dst != "" {
		f.Dst, f.DstMask, dstFamily = SDFPrefix(netip.MustParsePrefix(dst))
	}
	f.Flags = srcFamily | dstFamily
	if len(ports) == 4 {
		f.Flags |= SDFPorts
		f.SportLo, f.SportHi, f.DportLo, f.DportHi = ports[0], ports[1], ports[2], ports[3]
	}
	return f
}

func sdfSet(filters ...SDFFilter) SDFSet {
	s := SDFSet{Count: uint32(len(filters))}
	copy(s.Filter[:], filters)
	return s
}

// flowPacket is an IP packet as SDF filters see it: a protocol with or
// without ports, IPv4 fragments, IPv6 extension headers.
type flowPacket struct {
	src, dst     netip.Addr
	proto        layers.IPProtocol
	sport, dport uint16
	ttl          uint8
	fragOffset   uint16 // in 8-octet units; IPv6: in a Fragment header
	fragment     bool   // IPv6: with a Fragment header
	hopByHop     bool   // IPv6: with a Hop-by-Hop Options header first
}

func (p flowPacket) hop() flowPacket { p.ttl--; return p }

func (p flowPacket) bytes(t testing.TB) []byte {
	t.Helper()
	payload := gopacket.Payload("sdf filter test")
	var ip gopacket.NetworkLayer
	if p.src.Is4() {
		ip = &layers.IPv4{Version: 4, TTL: p.ttl, Protocol: p.proto, FragOffset: p.fragOffset,
			SrcIP: ipOf(p.src), DstIP: ipOf(p.dst)}
	} else {
		ip = &layers.IPv6{Version: 6, HopLimit: p.ttl, NextHeader: p.proto, SrcIP: ipOf(p.src), DstIP: ipOf(p.dst)}
	}
	var upper gopacket.SerializableLayer
	switch p.proto {
	case layers.IPProtocolUDP:
		u := &layers.UDP{SrcPort: layers.UDPPort(p.sport), DstPort: layers.UDPPort(p.dport)}
		u.SetNetworkLayerForChecksum(ip)
		upper = u
	case layers.IPProtocolTCP:
		tcp := &layers.TCP{SrcPort: layers.TCPPort(p.sport), DstPort: layers.TCPPort(p.dport), SYN: true, Window: 1024}
		tcp.SetNetworkLayerForChecksum(ip)
		upper = tcp
	case layers.IPProtocolICMPv4:
		upper = &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: 1, Seq: 1}
	}
	l4 := serialize(t, true, upper, payload)
	ls := []gopacket.SerializableLayer{ip.(gopacket.SerializableLayer)}
	if ip6, ok := ip.(*layers.IPv6); ok {
		next := &ip6.NextHeader
		if p.hopByHop {
			h := &layers.IPv6HopByHop{Options: []*layers.IPv6HopByHopOption{{OptionType: 1, OptionLength: 4, OptionData: make([]byte, 4)}}}
			h.NextHeader, *next, next = *next, layers.IPProtocolIPv6HopByHop, &h.NextHeader
			ls = append(ls, h)
		}
		if p.fragment {
			f := &layers.IPv6Fragment{FragmentOffset: p.fragOffset, MoreFragments: true, Identification: 7}
			f.NextHeader, *next = *next, layers.IPProtocolIPv6Fragment
			ls = append(ls, f)
		}
	}
	return serialize(t, true, append(ls, gopacket.Payload(l4))...)
}

const (
	teidSDF  = 0x700 // uplink: pdrSDFPorts -> nhCore, then pdrSDFFromUE -> nhCoreVLAN
	teidSDF6 = 0x800 // uplink: pdrSDF6 -> routes6
)

// PDR slots of the SDF rules, after the test rules'; a PDR's SDF set has
// its slot.
const (
	pdrSDFPorts      = testPDRs + iota // UDP to 203.0.113.0/25 ports 50-60, or TCP from ports 1000-2000
	pdrSDFFromUE                       // from ue4, any protocol
	pdrSDF6                            // UDP to 2001:db8:ff::/48 port 53
	pdrSDFDownPorts                    // UDP from 203.0.113.0/24 ports 8000-8080
	pdrSDFDown                         // anything from 203.0.113.0/24
	pdrSDFDown6Ports                   // UDP to ports 5000-5001 from 2001:db8:ff::/48
	pdrSDFDown6TCP                     // TCP from 2001:db8:ff::/48
)

var (
	ueSDF  = mustAddr("10.45.0.8")       // downlink: pdrSDFDownPorts -> dlTEID, then pdrSDFDown -> dlTEID2
	ueSDF6 = mustAddr("2001:db8:5:1::1") // downlink: pdrSDFDown6Ports -> dlTEID, then pdrSDFDown6TCP -> dlTEID6
	other4 = mustAddr("198.51.100.99")
	other6 = mustAddr("2001:db8:ee::9")
)

// installSDFRules adds PDRs with SDF filters to the test rules; a PDR and
// its SDF set share a slot number.
func installSDFRules(t *testing.T, d *Datapath) {
	t.Helper()
	for slot, r := range map[uint32]struct {
		pdr PDR
		far FAR
		sdf SDFSet
	}{
		pdrSDFPorts: {pdr: PDR{}, far: forward(nhCore), sdf: sdfSet(
			sdfFilter(17, "", "203.0.113.0/25", 0, 0xffff, 50, 60),
			sdfFilter(6, "", "", 1000, 2000, 0, 0xffff))},
		// An IPv4 filter: no IPv6 packet matches.
		pdrSDFFromUE: {pdr: PDR{Flags: MatchUEv4, Ue: pdrUE(ue4)}, far: forward(nhCoreVLAN), sdf: sdfSet(sdfFilter(0, ue4.String()+"/32", ""))},
		pdrSDF6:      {pdr: PDR{}, far: forward(NexthopRoute), sdf: sdfSet(sdfFilter(17, "", "2001:db8:ff::/48", 0, 0xffff, 53, 53))},
		pdrSDFDownPorts: {pdr: PDR{Flags: MarkQFI, Qfi: 9}, far: encap(dlTEID, n3Addr, gnb, nhGNB), sdf: sdfSet(
			sdfFilter(17, "203.0.113.0/24", "", 8000, 8080, 0, 0xffff))},
		pdrSDFDown: {pdr: PDR{}, far: encap(dlTEID2, n3Addr2, gnb2, nhGNBVLAN), sdf: sdfSet(sdfFilter(0, "203.0.113.0/24", ""))},
		pdrSDFDown6Ports: {pdr: PDR{Flags: MarkQFI, Qfi: 9}, far: encap(dlTEID, n3Addr, gnb, nhGNB), sdf: sdfSet(
			sdfFilter(17, "2001:db8:ff::/48", "", 0, 0xffff, 5000, 5001))},
		pdrSDFDown6TCP: {pdr: PDR{}, far: encap(dlTEID6, n3Addr, gnb, nhGNB), sdf: sdfSet(sdfFilter(6, "2001:db8:ff::/48", ""))},
	} {
		r.pdr.Far, r.pdr.Id, r.pdr.Sdf = r.far, uint16(slot), slot
		check(t, d.PutSDFSet(slot, r.sdf))
		check(t, d.PutPDR(slot, r.pdr))
	}
	check(t, d.PutUplink(onN3(teidSDF), pdrSet(pdrSDFPorts, pdrSDFFromUE)))
	check(t, d.PutUplink(onN3(teidSDF6), pdrSet(pdrSDF6)))
	check(t, d.PutDownlink(ueSDF, pdrSet(pdrSDFDownPorts, pdrSDFDown)))
	check(t, d.PutDownlink(ueSDF6, pdrSet(pdrSDFDown6Ports, pdrSDFDown6TCP)))
}

func TestSDFUplink(t *testing.T) {
	u := newUPF(t, RoleAccess|RoleCore)
	installSDFRules(t, u.d)
	udp := func(src, dst netip.Addr, sport, dport uint16) flowPacket {
		return flowPacket{src: src, dst: dst, proto: layers.IPProtocolUDP, sport: sport, dport: dport, ttl: 64}
	}
	tcp := udp(ue4, dn4, 1000, 80)
	tcp.proto = layers.IPProtocolTCP
	icmp := flowPacket{src: ue4, dst: dn4, proto: layers.IPProtocolICMPv4, ttl: 64}
	laterFragment := udp(ue4, dn4, 40000, 53)
	laterFragment.fragOffset = 100
	otherUE := mustAddr("10.45.0.200")
	up := func(name string, teid uint32, p flowPacket, nh int) pktCase {
		in := gtpFrame(t, fromGNB, n3Addr, gpdu(teid), p.bytes(t))
		if nh < 0 {
			return pktCase{name: name, in: in, act: xdplink.Drop, reason: "drop_no_pdr", out: nil}
		}
		return pktCase{name: name, in: in, act: xdplink.Redirect, reason: "uplink_forward", out: nhL2(uint32(nh)).ipFrame(t, p.hop().bytes(t))}
	}
	tcpTo53 := tcp
	tcpTo53.sport, tcpTo53.dport = 40000, 53
	u.runCases(t, []pktCase{
		up("UDP to a port of the range", teidSDF, udp(ue4, dn4, 40000, 53), nhCore),
		up("UDP to the lowest port", teidSDF, udp(ue4, dn4, 40000, 50), nhCore),
		up("UDP to the highest port", teidSDF, udp(ue4, dn4, 40000, 60), nhCore),
		up("UDP past the range: next PDR", teidSDF, udp(ue4, dn4, 40000, 61), nhCoreVLAN),
		up("UDP outside the prefix: next PDR", teidSDF, udp(ue4, dn4b, 40000, 53), nhCoreVLAN),
		up("TCP from a port of the second filter", teidSDF, tcp, nhCore),
		up("TCP to the UDP filter's port: next PDR", teidSDF, tcpTo53, nhCoreVLAN),
		up("ICMP, no ports: next PDR", teidSDF, icmp, nhCoreVLAN),
		up("later fragment, no ports: next PDR", teidSDF, laterFragment, nhCoreVLAN),
		up("another UE, the first PDR", teidSDF, udp(otherUE, dn4, 1, 55), nhCore),
		up("another UE, no filter matches", teidSDF, udp(otherUE, dn4, 1, 99), -1),
		up("IPv6 against IPv4 filters", teidSDF, udp(ue6, dn6, 40000, 53), -1),
		up("IPv6 UDP to port 53", teidSDF6, udp(ue6, dn6, 40000, 53), nhCoreVLAN),
		up("IPv6 UDP to port 54", teidSDF6, udp(ue6, dn6, 40000, 54), -1),
		up("IPv6 UDP outside the prefix", teidSDF6, udp(ue6, other6, 40000, 53), -1),
	})
}

// Downlink PDRs are tried in precedence order: the first whose filters
// match takes the packet.
func TestSDFDownlink(t *testing.T) {
	u := newUPF(t, RoleAccess|RoleCore)
	installSDFRules(t, u.d)
	pkt := func(proto layers.IPProtocol, src, dst netip.Addr, sport, dport uint16) flowPacket {
		return flowPacket{src: src, dst: dst, proto: proto, sport: sport, dport: dport, ttl: 64}
	}
	udp, tcp := layers.IPProtocolUDP, layers.IPProtocolTCP
	with := func(p flowPacket, change func(*flowPacket)) flowPacket { change(&p); return p }
	const noPDR = -1
	dl := func(name string, p flowPacket, pdr int) pktCase {
		in := fromDN.ipFrame(t, p.bytes(t))
		inner := p.hop().bytes(t)
		switch pdr {
		case pdrSDFDownPorts, pdrSDFDown6Ports:
			return pktCase{name: name, in: in, act: xdplink.Redirect, reason: "downlink_forward", out: encapFrame(t, nhL2(nhGNB), n3Addr, gnb, dlTEID, 9, inner)}
		case pdrSDFDown:
			return pktCase{name: name, in: in, act: xdplink.Redirect, reason: "downlink_forward", out: encapFrame(t, nhL2(nhGNBVLAN), n3Addr2, gnb2, dlTEID2, -1, inner)}
		case pdrSDFDown6TCP:
			return pktCase{name: name, in: in, act: xdplink.Redirect, reason: "downlink_forward", out: encapFrame(t, nhL2(nhGNB), n3Addr, gnb, dlTEID6, -1, inner)}
		}
		return pktCase{name: name, in: in, act: xdplink.Drop, reason: "drop_no_pdr", out: nil}
	}
	v6 := pkt(udp, dn6, ueSDF6, 40000, 5000)
	u.runCases(t, []pktCase{
		dl("UDP from a port of the range", pkt(udp, dn4, ueSDF, 8000, 1), pdrSDFDownPorts),
		dl("UDP from the highest port", pkt(udp, dn4b, ueSDF, 8080, 1), pdrSDFDownPorts),
		dl("UDP from past the range: next PDR", pkt(udp, dn4, ueSDF, 8081, 1), pdrSDFDown),
		dl("TCP from a port of the range: next PDR", pkt(tcp, dn4, ueSDF, 8000, 1), pdrSDFDown),
		dl("ICMP: next PDR", pkt(layers.IPProtocolICMPv4, dn4, ueSDF, 0, 0), pdrSDFDown),
		dl("from outside the prefixes", pkt(udp, other4, ueSDF, 8000, 1), noPDR),
		dl("IPv6 UDP to a port of the range", v6, pdrSDFDown6Ports),
		dl("IPv6 UDP to the highest port", with(v6, func(p *flowPacket) { p.dport = 5001 }), pdrSDFDown6Ports),
		dl("IPv6 UDP past the range", with(v6, func(p *flowPacket) { p.dport = 5002 }), noPDR),
		dl("IPv6 TCP: next PDR", with(v6, func(p *flowPacket) { p.proto = tcp }), pdrSDFDown6TCP),
		dl("IPv6 from outside the prefix", with(v6, func(p *flowPacket) { p.src = other6 }), noPDR),
		dl("IPv6 Hop-by-Hop header skipped", with(v6, func(p *flowPacket) { p.hopByHop = true }), pdrSDFDown6Ports),
		dl("IPv6 first fragment", with(v6, func(p *flowPacket) { p.fragment = true }), pdrSDFDown6Ports),
		dl("IPv6 Hop-by-Hop and first fragment", with(v6, func(p *flowPacket) { p.hopByHop, p.fragment = true, true }), pdrSDFDown6Ports),
		dl("IPv6 later fragment, no ports", with(v6, func(p *flowPacket) { p.fragment, p.fragOffset = true, 185 }), noPDR),
		dl("IPv6 later TCP fragment: next PDR", with(v6, func(p *flowPacket) { p.proto, p.fragment, p.fragOffset = tcp, true, 185 }), pdrSDFDown6TCP),
	})
}

// A PDR set says which of its uplink PDRs have SDF filters of one IP family
// only, and packets of the other family pass them by without the PDR or its
// filters being looked at: here the filter would match them, the set wins.
func TestSDFFamilyInTheSet(t *testing.T) {
	u := newUPF(t, RoleAccess)
	const teidFamily = 0x7100
	const (
		pdrV6Only = testPDRs + iota // with an IPv6 filter, the first of the set
		pdrAny
	)
	for slot, pdr := range map[uint32]PDR{pdrV6Only: {Sdf: pdrV6Only}, pdrAny: {}} {
		pdr.Far, pdr.Id = forward(map[uint32]uint32{pdrV6Only: nhCore, pdrAny: nhCoreVLAN}[slot]), uint16(slot)
		check(t, u.d.PutPDR(slot, pdr))
	}
	check(t, u.d.PutSDFSet(pdrV6Only, sdfSet(sdfFilter(17, "", "", 0, 0xffff, 0, 0xffff))))
	set := pdrSet(pdrV6Only, pdrAny)
	set.OnlyV6 = 1 << 0
	check(t, u.d.PutUplink(onN3(teidFamily), set))
	v4 := flowPacket{src: ue4, dst: dn4, proto: layers.IPProtocolUDP, sport: 1, dport: 53, ttl: 64}
	v6 := flowPacket{src: ue6, dst: dn6, proto: layers.IPProtocolUDP, sport: 1, dport: 53, ttl: 64}
	u.runCases(t, []pktCase{
		{name: "IPv4 passes the IPv6 PDR by", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidFamily), v4.bytes(t)), act: xdplink.Redirect, reason: "uplink_forward",
			out: nhL2(nhCoreVLAN).ipFrame(t, v4.hop().bytes(t))},
		{name: "IPv6 takes it", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidFamily), v6.bytes(t)), act: xdplink.Redirect, reason: "uplink_forward",
			out: nhL2(nhCore).ipFrame(t, v6.hop().bytes(t))},
	})
}
