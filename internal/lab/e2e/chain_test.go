package e2e

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/lab/pfcptest"
	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// The I-UPF chain over IPv6: a gNB, an I-UPF and a PSA, each UPF a daemon
// of its own in its namespace, every link between them IPv6 only; the data
// network behind the PSA has both families, for UEs of either.
//
//	gNB ─n3─ I-UPF ─n9─ PSA ─n6─ DN
var (
	chainGNB    = netip.MustParseAddr("2001:db8:c3::1")
	chainIUPFN3 = netip.MustParseAddr("2001:db8:c3::2")
	chainIUPFN9 = netip.MustParseAddr("2001:db8:c9::1")
	chainPSAN9  = netip.MustParseAddr("2001:db8:c9::2")
	chainPSAN3  = netip.MustParseAddr("2001:db8:c99::1") // a PSA serves no gNB; it has an N3 address all the same
	chainPSAN6  = []netip.Addr{netip.MustParseAddr("10.220.6.1"), netip.MustParseAddr("2001:db8:c6::1")}
	chainDN     = []netip.Addr{netip.MustParseAddr("10.220.6.2"), netip.MustParseAddr("2001:db8:c6::2")}
)

// The default path of free5GC's SMF, gNB to I-UPF to PSA, over IPv6
// transport: its message sequence as in TestULCLFree5GC but with IPv6
// F-TEIDs and Outer Header Creation GTP-U/UDP/IPv6, for an IPv4 UE and an
// IPv6 UE. Before the PSA starts, the I-UPF's uplink relay is caught on
// N9: the gNB's G-PDU in a tunnel from the I-UPF's N9 address to the
// PSA's, the inner packet untouched, its QFI kept. Then the gNB's uplink
// over IPv6 leaves the PSA's N6 as the UE sent it, the hop limit (TTL)
// one less; the downlink from the DN reaches the gNB in GTP-U/UDP/IPv6
// with its session's QFI. Tunnels are compared byte for byte with what
// gopacket builds, the UDP checksum also verified on its own; each UPF
// reports exactly what it carried of each session.
func TestChainOverIPv6(t *testing.T) {
	n := newUPFNet(t)
	gnb, iupf, psa, dn := n.path(t, upfPath{gnb: pathNode{"chain-gnb", "gnb"}, first: pathNode{"chain-iupf", "iupf"},
		second: pathNode{"chain-psa", "psa"}, dn: pathNode{"chain-dn", "dn"}, gnbAddr: chainGNB, firstN3: chainIUPFN3,
		firstN9: chainIUPFN9, secondN9: chainPSAN9, secondN3: chainPSAN3, secondN6: chainPSAN6, dnAddrs: chainDN})

	// free5GC's TEIDs, the same at every UPF of a path; two sessions, each
	// of its own QoS flow.
	sessions := []struct {
		pfcptest.ULCL
		dn     netip.Addr
		family string
	}{
		{ULCL: pfcptest.ULCL{CPSEID: 0x2001, UE: netip.MustParseAddr("10.61.0.1"), ULTEID: 0x6a01, DLTEID: 0x6a02, GNBTEID: 0xa001, QFI: 5},
			dn: chainDN[0], family: "IPv4 UE"},
		{ULCL: pfcptest.ULCL{CPSEID: 0x2011, UE: netip.MustParseAddr("2001:db8:61::1"), ULTEID: 0x6b01, DLTEID: 0x6b02, GNBTEID: 0xa002, QFI: 9},
			dn: chainDN[1], family: "IPv6 UE"},
	}
	smfNode := netip.MustParseAddr("127.0.0.1")
	for i := range sessions {
		s := &sessions[i]
		s.SMF, s.IUPFN3, s.IUPFN9, s.PSAN9[0], s.GNB = smfNode, chainIUPFN3, chainIUPFN9, chainPSAN9, chainGNB
		s.AMBRKbps, s.URRPeriod, s.URRThreshold = [2]uint64{1_000_000, 1_000_000}, 3600, 1<<40
	}
	const ttl = demo.UETTL
	uplink := func(ue, dn netip.Addr, teid uint32, qfi uint8) []byte {
		return demo.GTPUFrame(n.mac["iupf/n3"], n.mac["gnb"], chainGNB, chainIUPFN3, teid, []byte{demo.ULPDUSession, qfi}, demo.UEPacket(ue, dn, true, ttl))
	}
	gtpu := trafficgen.Filter{EtherType: uint16(layers.EthernetTypeIPv6), IPProto: uint8(layers.IPProtocolUDP), DstPort: gtpuPort}

	// The I-UPF alone, with each session's first step: the PSA's end of N9
	// is free for a sink.
	smfs := make([]*pfcptest.SMF, 2)
	seids := make([][]uint64, len(sessions))
	iupfCfg, stopIUPF := stoppableUPFDaemon(t, iupf, []string{"{name: n3, roles: [access]}", "{name: n9, roles: [access, core]}"},
		chainIUPFN3, chainIUPFN9)
	smfs[pfcptest.IUPF] = associatedSMFs(t, smfNode, []*config.Config{iupfCfg})[0]
	steps := make([][]pfcptest.Step, len(sessions))
	var relays []netFlow
	for i, s := range sessions {
		steps[i], seids[i] = s.DefaultPath(), make([]uint64, len(smfs))
		establish(t, smfs, seids[i], steps[i][:1])
		relays = append(relays, netFlow{name: s.family + " uplink relay", from: gnb, fromKey: "gnb", to: psa, toLink: "n9", filter: gtpu,
			in: uplink(s.UE, s.dn, s.ULTEID, s.QFI),
			want: demo.GTPUFrame(n.mac["psa/n9"], n.mac["iupf/n9"], chainIUPFN9, chainPSAN9, s.ULTEID, []byte{demo.ULPDUSession, s.QFI},
				demo.UEPacket(s.UE, s.dn, true, ttl)),
			check: testsupport.UDP6Checksum})
	}
	n.carries(t, relays)

	smfs[pfcptest.CentralPSA] = associatedSMFs(t, smfNode, []*config.Config{upfDaemon(t, psa,
		[]string{"{name: n9, roles: [access]}", "{name: n6, roles: [core]}"}, chainPSAN3, chainPSAN9)})[0]
	var flows []netFlow
	for i, s := range sessions {
		establish(t, smfs, seids[i], steps[i][1:])
		flows = append(flows,
			netFlow{name: s.family + " uplink", from: gnb, fromKey: "gnb", to: dn, toLink: "n6", filter: appFilter,
				in:   uplink(s.UE, s.dn, s.ULTEID, s.QFI),
				want: demo.Ethernet(n.mac["dn"], n.mac["psa/n6"], demo.UEPacket(s.UE, s.dn, true, ttl-1))},
			netFlow{name: s.family + " downlink", from: dn, fromKey: "dn", to: gnb, toLink: "n3", filter: gtpu,
				in: demo.Ethernet(n.mac["psa/n6"], n.mac["dn"], demo.UEPacket(s.UE, s.dn, false, ttl)),
				want: demo.GTPUFrame(n.mac["gnb"], n.mac["iupf/n3"], chainIUPFN3, chainGNB, s.GNBTEID, []byte{demo.DLPDUSession, s.QFI},
					demo.UEPacket(s.UE, s.dn, false, ttl-1)),
				check: testsupport.UDP6Checksum})
	}
	n.carries(t, flows)

	// A handover of the IPv6 UE's session to another tunnel at the gNB, as
	// the SMF moves it after an Xn handover (SNDEM): the old tunnel gets an
	// End Marker over IPv6 from the I-UPF's N3 address, then the downlink
	// takes the new one.
	moved := &sessions[1]
	endMarkerAtGNB(t, n.handover(t, gnb, smfs[pfcptest.IUPF], seids[1][pfcptest.IUPF], chainGNB, moved.GNBTEID+0x100), moved.GNBTEID)
	moved.GNBTEID += 0x100
	afterHandover := []netFlow{flows[0], flows[2], {name: "IPv6 UE downlink after the handover", from: dn, fromKey: "dn", to: gnb, toLink: "n3",
		filter: gtpu, in: demo.Ethernet(n.mac["psa/n6"], n.mac["dn"], demo.UEPacket(moved.UE, moved.dn, false, ttl)),
		want: demo.GTPUFrame(n.mac["gnb"], n.mac["iupf/n3"], chainIUPFN3, chainGNB, moved.GNBTEID, []byte{demo.DLPDUSession, moved.QFI},
			demo.UEPacket(moved.UE, moved.dn, false, ttl-1)),
		check: testsupport.UDP6Checksum}}
	n.carries(t, afterHandover)
	// The I-UPF restarts: the same again, through the same tunnels.
	check(t, stopIUPF())
	startDaemon(t, iupfCfg)
	n.carries(t, afterHandover)

	// The PSA moves the session's downlink to another tunnel at the I-UPF
	// (SNDEM, as when the SMF relocates the I-UPF): the I-UPF passes the
	// End Marker of the old one on to the gNB, into the session's tunnel
	// from its N3 address.
	endMarkerAtGNB(t, n.handover(t, gnb, smfs[pfcptest.CentralPSA], seids[1][pfcptest.CentralPSA], chainIUPFN9, moved.DLTEID+0x100),
		moved.GNBTEID)

	// The I-UPF carried the uplink four times: relayed alone, end to end,
	// after the handover and after its restart; the moved session's
	// downlink three times, before and after the handover and after the
	// restart.
	for i, s := range sessions {
		size := uint64(len(demo.UEPacket(s.UE, s.dn, true, ttl)))
		down := uint64(pfcpPackets)
		if i == 1 {
			down *= 3
		}
		want := []volumes{pfcptest.IUPF: packetVolumes(size, 4*pfcpPackets, down),
			pfcptest.CentralPSA: packetVolumes(size, 3*pfcpPackets, down)}
		for upf, smf := range smfs {
			usedExactly(t, fmt.Sprintf("%s, UPF %d", s.family, upf), smf, seids[i][upf], 2, allVolumes, want[upf])
		}
	}
}

// endMarkerAtGNB checks that frame is an End Marker of teid over IPv6
// from the I-UPF's N3 address to the gNB.
func endMarkerAtGNB(t *testing.T, frame []byte, teid uint32) {
	t.Helper()
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	ip6, _ := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	udp, _ := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
	gtp, _ := p.Layer(layers.LayerTypeGTPv1U).(*layers.GTPv1U)
	if ip6 == nil || udp == nil || gtp == nil || !ip6.SrcIP.Equal(chainIUPFN3.AsSlice()) || !ip6.DstIP.Equal(chainGNB.AsSlice()) ||
		udp.DstPort != gtpuPort || gtp.MessageType != gtpuEndMarker || gtp.TEID != teid || len(gtp.Payload) != 0 {
		t.Errorf("the gNB got % x, want an End Marker of TEID %#x from %v", frame, teid, chainIUPFN3)
	}
}

// gtpuEndMarker is the End Marker's GTP-U message type (TS 29.281 §6.1).
const gtpuEndMarker = 254

// handover moves the downlink tunnel (FAR 2) of a session smf
// established to teid at peer with SNDEM (the Update FAR of free5GC's and
// Open5GS's handovers), and returns the first GTP-U frame the gNB gets
// next: the End Marker of the old tunnel, or of the gNB's one that the
// I-UPF passed it on to.
func (n *upfNet) handover(t *testing.T, gnb *namespace.Netns, smf *pfcptest.SMF, seid uint64, peer netip.Addr, teid uint32) []byte {
	t.Helper()
	sink, err := trafficgen.NewSink(gnb, "n3", trafficgen.Filter{EtherType: uint16(layers.EthernetTypeIPv6),
		IPProto: uint8(layers.IPProtocolUDP), DstPort: gtpuPort}, false)
	testsupport.CheckLoad(t, err)
	defer sink.Close()
	resp, err := smf.Modify(message.NewSessionModificationRequest(0, 0, seid, 0, 0, ie.NewUpdateFAR(ie.NewFARID(2), ie.NewApplyAction(0x02),
		ie.NewUpdateForwardingParameters(ie.NewDestinationInterface(ie.DstInterfaceAccess),
			ie.NewOuterHeaderCreation(0x0200, teid, "", peer.String(), 0, 0, 0), // GTP-U/UDP/IPv6
			ie.NewPFCPSMReqFlags(0x02))))) // SNDEM
	check(t, err)
	check(t, pfcptest.Accepted("the handover", resp.Cause))
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		frame, err := sink.Sample()
		check(t, err)
		if frame != nil {
			return frame
		}
	}
	t.Fatal("no End Marker reached the gNB")
	return nil
}
