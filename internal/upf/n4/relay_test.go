package n4

import (
	"bytes"
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
)

// The CP function's user plane (N4-u) over the testbed, as an Open5GS
// session uses it: the UE's router solicitation goes to the SMF's GTP-U
// endpoint, the SMF's router advertisement to the gNB, each unchanged in its
// new tunnel (hop limit 255 included); and a downlink FAR towards the CP
// function (BUCP) sends the UE's downlink to the SMF.
func TestCPFunctionUserPlane(t *testing.T) {
	e := newTrafficEnv(t)
	tb := e.tb
	smf := netip.MustParseAddr("10.100.3.9") // the SMF's GTP-U endpoint, beside the gNB
	fatalIf(t, tb.GNB.AddAddr(demo.N3, smf.String()+"/24"))
	fatalIf(t, tb.UPF.SetNeigh(demo.N3, smf.String(), tb.GNBMAC))
	const cpTEID, smfTEID, bufferTEID = 0x7001, 0x5f01, 0x5f02
	ue, n3 := demo.UEAddr.String(), demo.N3Addr.String()
	seid := e.establish("smf", nodeIDv4("127.0.0.4"), cpFSEID(0x79, "127.0.0.4"),
		createPDR(pdrID(1), precedence(255), pdi(sourceInterface(ifAccess), fteid(demo.UplinkTEID, n3), ueIPv4(ue, false)),
			outerHeaderRemoval(0), farID(1)),
		createPDR(pdrID(2), precedence(255), pdi(sourceInterface(ifCore), ueIPv4(ue, true)), farID(2)),
		createPDR(pdrID(3), precedence(1000), pdi(sourceInterface(ifCPFunction), fteid(cpTEID, n3)), outerHeaderRemoval(0), farID(2)),
		createPDR(pdrID(10), precedence(254), pdi(sourceInterface(ifAccess), fteid(demo.UplinkTEID, n3),
			sdfFilterFD("permit out 58 from ff02::2/128 to assigned")), outerHeaderRemoval(0), farID(10)),
		coreFAR(), accessFAR(demo.DownlinkTEID, demo.GNBAddr.String()),
		createFAR(farID(10), applyAction(aaFORW), fwdParams(destinationInterface(ifCPFunction), ohcGTPU(smfTEID, smf.String())))).upSEID(t)

	gen, err := trafficgen.NewGenerator()
	fatalIf(t, err)
	t.Cleanup(func() { gen.Close() })
	// tunnelled sends frame from a Direction's end and returns the one
	// GTP-U packet that arrives in the gNB's namespace: its outer
	// destination, TEID and payload.
	tunnelled := func(from demo.Direction, frame []byte) (netip.Addr, uint32, []byte) {
		t.Helper()
		freshGNBSink(t, tb, false)
		from.Sink = tb.GNBSink
		_, _, err := from.Send(gen, frame, 1, trafficgen.Options{})
		fatalIf(t, err)
		if n, err := from.Delivered(1); err != nil || n != 1 {
			t.Fatalf("%d packets reached the gNB's namespace, %v", n, err)
		}
		sample, err := tb.GNBSink.Sample()
		fatalIf(t, err)
		p := gopacket.NewPacket(sample, layers.LayerTypeEthernet, gopacket.Default)
		ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		g, _ := p.Layer(layers.LayerTypeGTPv1U).(*layers.GTPv1U)
		if ip == nil || g == nil {
			t.Fatalf("not GTP-U: % x", sample)
		}
		dst, _ := netip.AddrFromSlice(ip.DstIP.To4())
		return dst, g.TEID, g.Payload
	}
	check := func(what string, dst netip.Addr, teid uint32, payload []byte, wantDst netip.Addr, wantTEID uint32, want []byte) {
		t.Helper()
		if dst != wantDst || teid != wantTEID || !bytes.Equal(payload, want) {
			t.Errorf("%s: to %s, TEID %#x, % x; want %s, %#x, % x", what, dst, teid, payload, wantDst, wantTEID, want)
		}
	}

	rs := icmpv6(t, "fe80::2", "ff02::2", layers.ICMPv6TypeRouterSolicitation, &layers.ICMPv6RouterSolicitation{})
	dst, teid, payload := tunnelled(tb.Uplink(), tb.UplinkFrame(demo.UplinkTEID, demo.QFI, rs))
	check("router solicitation", dst, teid, payload, smf, smfTEID, rs)

	ra := icmpv6(t, "fe80::1", "fe80::2", layers.ICMPv6TypeRouterAdvertisement, &layers.ICMPv6RouterAdvertisement{HopLimit: 64, RouterLifetime: 1800})
	outer := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: smf.AsSlice(), DstIP: demo.N3Addr.AsSlice()}
	udp := &layers.UDP{SrcPort: 2152, DstPort: 2152}
	fatalIf(t, udp.SetNetworkLayerForChecksum(outer))
	fromSMF := demo.Serialize(true, &layers.Ethernet{SrcMAC: tb.GNBMAC, DstMAC: tb.N3MAC, EthernetType: layers.EthernetTypeIPv4},
		outer, udp, &layers.GTPv1U{Version: 1, ProtocolType: 1, MessageType: 255, TEID: cpTEID}, gopacket.Payload(ra))
	dst, teid, payload = tunnelled(tb.Uplink(), fromSMF)
	check("router advertisement", dst, teid, payload, demo.GNBAddr, demo.DownlinkTEID, ra)

	// BUCP: the SMF buffers the UE's downlink itself (its own packets for
	// the UE would loop back to it through FAR 2: PDR 3 goes).
	e.modify("smf", seid, removePDR(3), updateFAR(farID(2), updFwdParams(destinationInterface(ifCPFunction), ohcGTPU(bufferTEID, smf.String())))).
		expect(t, causeAccepted, nil, nil)
	inner := demo.UEPacket(demo.UEAddr, demo.DNAddr, false, demo.UETTL)
	dst, teid, payload = tunnelled(tb.Downlink(), tb.DownlinkFrame(inner))
	if p := gopacket.NewPacket(payload, layers.LayerTypeIPv4, gopacket.Default); dst != smf || teid != bufferTEID ||
		p.NetworkLayer() == nil || p.NetworkLayer().NetworkFlow() != gopacket.NewFlow(layers.EndpointIPv4, net.IP(demo.DNAddr.AsSlice()), net.IP(demo.UEAddr.AsSlice())) {
		t.Errorf("downlink to the CP function: to %s, TEID %#x, % x", dst, teid, payload)
	}
}

// icmpv6 is a neighbour discovery message from src to dst, hop limit 255.
func icmpv6(t *testing.T, src, dst string, typ uint8, msg gopacket.SerializableLayer) []byte {
	t.Helper()
	ip := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolICMPv6, HopLimit: 255,
		SrcIP: net.ParseIP(src), DstIP: net.ParseIP(dst)}
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(typ, 0)}
	fatalIf(t, icmp.SetNetworkLayerForChecksum(ip))
	return demo.Serialize(true, ip, icmp, msg)
}
