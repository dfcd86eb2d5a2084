package e2e

import (
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/lab/pfcptest"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
)

// The network of a home-routed roaming session: a gNB, the visited
// network's UPF, the home network's, and its data network, each UPF a
// daemon of its own in its namespace.
//
//	gNB ─n3─ V-UPF ─n9─ H-UPF ─n6─ DN
var (
	hrGNB = netip.MustParseAddr("10.220.3.1")
	hrVN3 = netip.MustParseAddr("10.220.3.2")
	hrVN9 = netip.MustParseAddr("10.220.9.1")
	hrHN9 = netip.MustParseAddr("10.220.9.2")
	hrHN6 = netip.MustParseAddr("10.220.6.1")
	hrDN  = netip.MustParseAddr("10.220.6.2")
	hrUE  = netip.MustParseAddr("10.61.0.1")
)

// Open5GS's home-routed roaming, byte for byte as its V-SMF and H-SMF
// build the requests, over each daemon's PFCP server: the V-UPF chooses
// its N9 F-TEID for the H-UPF's downlink and its N3 one for the gNB's
// uplink (3GPP Interface Types), the H-UPF its N9 one for the V-UPF's
// uplink; neither SMF gives a UE address, QoS rule or URR to the V-UPF,
// which relays with the QFI the packets come with. The uplink reaches the
// data network out of the H-UPF's N6, the downlink the gNB in its tunnel
// with the flow's QFI; the H-UPF reports the downlink it measured
// exactly, the V-UPF nothing.
func TestHomeRoutedRoamingOpen5GS(t *testing.T) {
	n := newUPFNet(t)
	hN3 := netip.MustParseAddr("10.220.99.1")
	gnb, vupf, hupf, dn := n.path(t, upfPath{gnb: pathNode{"hr-gnb", "gnb"}, first: pathNode{"hr-vupf", "vupf"},
		second: pathNode{"hr-hupf", "hupf"}, dn: pathNode{"hr-dn", "dn"}, gnbAddr: hrGNB, firstN3: hrVN3, firstN9: hrVN9,
		secondN9: hrHN9, secondN3: hN3, secondN6: []netip.Addr{hrHN6}, dnAddrs: []netip.Addr{hrDN}})
	cfgs := []*config.Config{
		pfcptest.VUPF: upfDaemon(t, vupf, []string{"{name: n3, roles: [access]}", "{name: n9, roles: [access, core]}"}, hrVN3, hrVN9),
		pfcptest.HUPF: upfDaemon(t, hupf, []string{"{name: n9, roles: [access]}", "{name: n6, roles: [core]}"}, hN3, hrHN9),
	}
	const qfi, gnbTEID = 1, 0x9101
	hr := pfcptest.HomeRouted{SMF: netip.MustParseAddr("127.0.0.1"), VCPSEID: 0x2001, HCPSEID: 0x3001, UE: hrUE, QFI: qfi,
		AMBRKbps: [2]uint64{1_000_000, 1_000_000}, GNB: hrGNB, GNBTEID: gnbTEID}
	smfs := associatedSMFs(t, hr.SMF, cfgs)
	step := func(st pfcptest.Step, seid uint64) (uint64, map[uint16]pfcptest.FTEID) {
		t.Helper()
		seid, created, err := smfs[st.UPF].StepCreated(st, seid)
		if err != nil {
			t.Fatalf("%s: %v", st.Name, err)
		}
		return seid, created
	}
	at := func(what string, f pfcptest.FTEID, addr netip.Addr) pfcptest.FTEID {
		t.Helper()
		if f.TEID == 0 || f.Addr != addr {
			t.Fatalf("%s: F-TEID %#x at %v, want one at %v", what, f.TEID, f.Addr, addr)
		}
		return f
	}
	vSEID, vCreated := step(hr.VEstablishment(), 0)
	vDown, vUp := at("the V-UPF's PDR 1 (N9 for roaming)", vCreated[1], hrVN9), at("the V-UPF's PDR 2 (N3)", vCreated[2], hrVN3)
	hSEID, hCreated := step(hr.HEstablishment(vDown), 0)
	hUp := at("the H-UPF's PDR 2 (N9 for roaming)", hCreated[2], hrHN9)
	if hCreated[4] != hUp {
		t.Errorf("the H-UPF's PDR 4 has F-TEID %+v, want PDR 2's (CHOOSE ID) %+v", hCreated[4], hUp)
	}
	step(hr.VUplink(hUp), vSEID)
	step(hr.VDownlink(), vSEID)

	const ttl = demo.UETTL
	up, down := demo.UEPacket(hrUE, hrDN, true, ttl), demo.UEPacket(hrUE, hrDN, false, ttl)
	gtpu := trafficgen.Filter{EtherType: uint16(layers.EthernetTypeIPv4), IPProto: uint8(layers.IPProtocolUDP), DstPort: 2152}
	n.carries(t, []netFlow{
		{name: "uplink", from: gnb, fromKey: "gnb", in: demo.GTPUFrame(n.mac["vupf/n3"], n.mac["gnb"], hrGNB, hrVN3, vUp.TEID, []byte{demo.ULPDUSession, qfi}, up),
			to: dn, toLink: "n6", filter: appFilter, want: demo.Ethernet(n.mac["dn"], n.mac["hupf/n6"], demo.UEPacket(hrUE, hrDN, true, ttl-1))},
		{name: "downlink", from: dn, fromKey: "dn", in: demo.Ethernet(n.mac["hupf/n6"], n.mac["dn"], down), to: gnb, toLink: "n3", filter: gtpu,
			want: demo.GTPUFrame(n.mac["gnb"], n.mac["vupf/n3"], hrVN3, hrGNB, gnbTEID, []byte{demo.DLPDUSession, qfi}, demo.UEPacket(hrUE, hrDN, false, ttl-1))},
	})

	// The H-UPF's one URR measures the downlink PDR's octets (no packet
	// counts: Open5GS asks for none); the V-UPF has none.
	dl := uint64(len(down)) * pfcpPackets
	usedExactly(t, "the H-UPF", smfs[pfcptest.HUPF], hSEID, 1, 0x07, volumes{dl, 0, dl, 0, 0, 0}) // TOVOL, ULVOL, DLVOL
	usedExactly(t, "the V-UPF", smfs[pfcptest.VUPF], vSEID, 0, 0, volumes{})
}
