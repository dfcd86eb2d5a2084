package e2e

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/lab/pfcptest"
	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// The ULCL network: a gNB, an I-UPF with the branching point, a central
// PSA and a local PSA, each UPF a daemon of its own in its namespace, and
// a data network behind each PSA.
//
//	gNB ─n3─ I-UPF ─n9a─ central PSA ─n6─ central DN
//	           └───n9b─ local PSA ───n6─ local DN
var (
	ulclGNB      = netip.MustParseAddr("10.210.3.1")
	ulclIUPFN3   = netip.MustParseAddr("10.210.3.2")
	ulclIUPFN9   = netip.MustParseAddr("10.210.9.1") // on n9a; the local PSA reaches it through n9b
	ulclIUPFN9b  = netip.MustParseAddr("10.210.19.1")
	ulclCentral  = netip.MustParseAddr("10.210.9.2")  // the central PSA's N9 address
	ulclLocal    = netip.MustParseAddr("10.210.19.2") // the local PSA's
	ulclCentralN = netip.MustParseAddr("10.210.6.1")
	ulclCentralD = netip.MustParseAddr("10.210.6.2") // a host of the central DN
	ulclLocalN   = netip.MustParseAddr("10.210.16.1")
	ulclLocalD   = netip.MustParseAddr("10.210.16.2") // the local destination
	ulclUE       = netip.MustParseAddr("10.60.0.1")
)

// ulclNet is the namespaces and their links' indexes and MAC addresses,
// by the end's key ("iupf/n3": the I-UPF's n3).
type ulclNet struct {
	gnb, iupf, central, local, centralDN, localDN *namespace.Netns
	mac                                           map[string]net.HardwareAddr
	index                                         map[string]int
}

func newULCLNet(t *testing.T) *ulclNet {
	t.Helper()
	testsupport.NeedRoot(t, "namespaces, XDP")
	n := &ulclNet{mac: map[string]net.HardwareAddr{}, index: map[string]int{}}
	for _, ns := range []struct {
		p    **namespace.Netns
		name string
	}{{&n.gnb, "ulcl-gnb"}, {&n.iupf, "ulcl-iupf"}, {&n.central, "ulcl-psa1"}, {&n.local, "ulcl-psa2"},
		{&n.centralDN, "ulcl-dn1"}, {&n.localDN, "ulcl-dn2"}} {
		*ns.p = testsupport.Netns(t, ns.name)
		check(t, (*ns.p).Sysctl("net.ipv6.conf.default.disable_ipv6", "1"))
	}
	type end struct {
		ns   *namespace.Netns
		key  string
		link string
		addr netip.Addr
	}
	for _, l := range [][2]end{
		{{n.gnb, "gnb", "n3", ulclGNB}, {n.iupf, "iupf/n3", "n3", ulclIUPFN3}},
		{{n.iupf, "iupf/n9a", "n9a", ulclIUPFN9}, {n.central, "central/n9", "n9", ulclCentral}},
		{{n.iupf, "iupf/n9b", "n9b", ulclIUPFN9b}, {n.local, "local/n9", "n9", ulclLocal}},
		{{n.central, "central/n6", "n6", ulclCentralN}, {n.centralDN, "centralDN", "n6", ulclCentralD}},
		{{n.local, "local/n6", "n6", ulclLocalN}, {n.localDN, "localDN", "n6", ulclLocalD}},
	} {
		check(t, namespace.Veth(l[0].ns, l[0].link, l[1].ns, l[1].link))
		for _, e := range l {
			i, mac, err := e.ns.Link(e.link)
			check(t, err)
			n.mac[e.key], n.index[e.key] = mac, i
			check(t, e.ns.AddAddr(e.link, netip.PrefixFrom(e.addr, 24).String()))
		}
		// Each UPF knows its neighbours: next hops resolve without ARP.
		for i, e := range l {
			if other := l[1-i]; e.ns != n.gnb && e.ns != n.centralDN && e.ns != n.localDN {
				check(t, e.ns.SetNeigh(e.link, other.addr.String(), n.mac[other.key]))
			}
		}
	}
	// The local PSA reaches the I-UPF's N9 address over n9b.
	check(t, n.local.AddRoute(netip.PrefixFrom(ulclIUPFN9, 32).String(), ulclIUPFN9b.String(), "n9"))
	return n
}

// ulclDaemon starts a UPF daemon in ns serving PFCP on a loopback port of
// its own, and returns its configuration.
func ulclDaemon(t *testing.T, ns *namespace.Netns, interfaces []string, n3, n9 netip.Addr) *config.Config {
	t.Helper()
	cfg := writeConfig(t, ns.Name, interfaces, []netip.Addr{n3}, []netip.Addr{n9}, pfcpSection(freeLoopbackUDP(t), "heartbeat_interval: 1h"))
	startDaemon(t, cfg)
	return cfg
}

// The free5GC ULCL message sequence, byte for byte as its SMF builds it,
// over each daemon's PFCP server; then traffic. The uplink to the local
// destination branches at the I-UPF to the local PSA, the rest goes to
// the central PSA, each out of its N6; the downlink from both reaches the
// gNB in its tunnel with the QoS flow's QFI; each UPF reports exactly what
// it carried.
func TestULCLFree5GC(t *testing.T) {
	n := newULCLNet(t)
	// A PSA serves no gNB; it has an N3 address all the same.
	psaN3 := netip.MustParseAddr("10.210.99.1")
	for _, ns := range []*namespace.Netns{n.central, n.local} {
		check(t, ns.AddAddr("lo", netip.PrefixFrom(psaN3, 32).String()))
	}
	cfgs := [3]*config.Config{
		pfcptest.IUPF: ulclDaemon(t, n.iupf, []string{"{name: n3, roles: [access]}", "{name: n9a, roles: [access, core]}",
			"{name: n9b, roles: [access]}"}, ulclIUPFN3, ulclIUPFN9),
		pfcptest.CentralPSA: ulclDaemon(t, n.central, []string{"{name: n9, roles: [access]}", "{name: n6, roles: [core]}"},
			psaN3, ulclCentral),
		pfcptest.LocalPSA: ulclDaemon(t, n.local, []string{"{name: n9, roles: [access]}", "{name: n6, roles: [core]}"},
			psaN3, ulclLocal),
	}
	const qfi, ulTEID, dlTEID, gnbTEID = 9, 0x5a01, 0x5a02, 0x9001
	ulcl := pfcptest.ULCL{SMF: netip.MustParseAddr("127.0.0.1"), CPSEID: 0x1001, IUPFN3: ulclIUPFN3, IUPFN9: ulclIUPFN9,
		PSAN9: [2]netip.Addr{ulclCentral, ulclLocal}, GNB: ulclGNB, GNBTEID: gnbTEID, UE: ulclUE,
		Local: netip.PrefixFrom(ulclLocalD, 32), ULTEID: ulTEID, DLTEID: dlTEID, QFI: qfi,
		AMBRKbps: [2]uint64{1_000_000, 1_000_000}, URRPeriod: 3600, URRThreshold: 1 << 40}
	var smfs [3]*pfcptest.SMF
	var seids [3]uint64
	for upf, cfg := range cfgs {
		smf, err := pfcptest.NewSMF(ulcl.SMF.String(), netip.MustParseAddrPort(cfg.PFCP.Listen))
		check(t, err)
		t.Cleanup(func() { smf.Close() })
		_, err = smf.Associate()
		check(t, err)
		smfs[upf] = smf
	}
	for _, step := range ulcl.Steps() {
		seid, err := smfs[step.UPF].Step(step, seids[step.UPF])
		if err != nil {
			t.Fatalf("%s: %v", step.Name, err)
		}
		seids[step.UPF] = seid
	}

	const ttl = demo.UETTL
	upCentral, upLocal := demo.UEPacket(ulclUE, ulclCentralD, true, ttl), demo.UEPacket(ulclUE, ulclLocalD, true, ttl)
	downCentral, downLocal := demo.UEPacket(ulclUE, ulclCentralD, false, ttl), demo.UEPacket(ulclUE, ulclLocalD, false, ttl)
	gtpu := trafficgen.Filter{EtherType: uint16(layers.EthernetTypeIPv4), IPProto: uint8(layers.IPProtocolUDP), DstPort: 2152}
	app := trafficgen.Filter{IPProto: uint8(layers.IPProtocolUDP), DstPort: demo.AppPort}
	for _, c := range []struct {
		name    string
		from    *namespace.Netns
		fromKey string
		in      []byte
		to      *namespace.Netns
		toLink  string
		filter  trafficgen.Filter
		want    []byte
	}{
		{name: "uplink to the central DN", from: n.gnb, fromKey: "gnb", in: n.uplinkFrame(ulTEID, upCentral),
			to: n.centralDN, toLink: "n6", filter: app,
			want: demo.Ethernet(n.mac["centralDN"], n.mac["central/n6"], demo.UEPacket(ulclUE, ulclCentralD, true, ttl-1))},
		{name: "uplink to the local destination", from: n.gnb, fromKey: "gnb", in: n.uplinkFrame(ulTEID, upLocal),
			to: n.localDN, toLink: "n6", filter: app,
			want: demo.Ethernet(n.mac["localDN"], n.mac["local/n6"], demo.UEPacket(ulclUE, ulclLocalD, true, ttl-1))},
		{name: "downlink from the central DN", from: n.centralDN, fromKey: "centralDN",
			in: demo.Ethernet(n.mac["central/n6"], n.mac["centralDN"], downCentral), to: n.gnb, toLink: "n3", filter: gtpu,
			want: n.downlinkFrame(gnbTEID, qfi, demo.UEPacket(ulclUE, ulclCentralD, false, ttl-1))},
		{name: "downlink from the local DN", from: n.localDN, fromKey: "localDN",
			in: demo.Ethernet(n.mac["local/n6"], n.mac["localDN"], downLocal), to: n.gnb, toLink: "n3", filter: gtpu,
			want: n.downlinkFrame(gnbTEID, qfi, demo.UEPacket(ulclUE, ulclLocalD, false, ttl-1))},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A sink of its own: its sample is this flow's first frame.
			sink, err := trafficgen.NewSink(c.to, c.toLink, c.filter, false)
			testsupport.CheckLoad(t, err)
			defer sink.Close()
			if got := send(t, demo.NewDirection(c.name, c.toLink, c.from, n.index[c.fromKey], sink), c.in); got != pfcpPackets {
				t.Errorf("%d of %d packets delivered", got, pfcpPackets)
			}
			if err := sampled(sink, c.want); err != nil {
				t.Error(err)
			}
		})
	}

	// Every packet of 59 octets (UEPacket's): the I-UPF carried all four
	// flows, each PSA two.
	size := uint64(len(upCentral))
	per := func(up, down uint64) volumes {
		return volumes{(up + down) * size, up * size, down * size, up + down, up, down}
	}
	want := [3]volumes{pfcptest.IUPF: per(2*pfcpPackets, 2*pfcpPackets), pfcptest.CentralPSA: per(pfcpPackets, pfcpPackets),
		pfcptest.LocalPSA: per(pfcpPackets, pfcpPackets)}
	for upf, smf := range smfs {
		reports, err := smf.DeleteUsage(seids[upf])
		check(t, err)
		if len(reports) != 2 {
			t.Errorf("UPF %d: %d usage reports, want 2 (a URR before and one after QoS enforcement)", upf, len(reports))
		}
		for _, r := range reports {
			u, err := pfcptest.ParseUsageReport(r)
			check(t, err)
			if got := volumesOf(u.Volume); u.Volume.Flags&allVolumes != allVolumes || got != want[upf] {
				t.Errorf("UPF %d, URR %d: measured %v (flags %#x), want %v", upf, u.URRID, got, u.Volume.Flags, want[upf])
			}
		}
	}
}

// uplinkFrame is the gNB's G-PDU of inner to the I-UPF, with an UL PDU
// Session Container.
func (n *ulclNet) uplinkFrame(teid uint32, inner []byte) []byte {
	gtp := &layers.GTPv1U{Version: 1, ProtocolType: 1, MessageType: 255, TEID: teid,
		GTPExtensionHeaders: []layers.GTPExtensionHeader{{Type: demo.PDUSessionContainer, Content: []byte{0x10, 9}}}}
	outer := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: ulclGNB.AsSlice(), DstIP: ulclIUPFN3.AsSlice()}
	ip := demo.Serialize(true, outer, gopacket.Payload(demo.Serialize(false, &layers.UDP{SrcPort: 2152, DstPort: 2152}, gtp,
		gopacket.Payload(inner))))
	return demo.Ethernet(n.mac["iupf/n3"], n.mac["gnb"], ip)
}

// downlinkFrame is the I-UPF's G-PDU of inner to the gNB, with a DL PDU
// Session Container carrying qfi, UDP checksum 0.
func (n *ulclNet) downlinkFrame(teid uint32, qfi uint8, inner []byte) []byte {
	gtp := &layers.GTPv1U{Version: 1, ProtocolType: 1, MessageType: 255, TEID: teid,
		GTPExtensionHeaders: []layers.GTPExtensionHeader{{Type: demo.PDUSessionContainer, Content: []byte{0x00, qfi}}}}
	udp := demo.Serialize(false, &layers.UDP{SrcPort: 2152, DstPort: 2152}, gtp, gopacket.Payload(inner))
	outer := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: ulclIUPFN3.AsSlice(), DstIP: ulclGNB.AsSlice()}
	return demo.Ethernet(n.mac["gnb"], n.mac["iupf/n3"], demo.Serialize(true, outer, gopacket.Payload(udp)))
}

// sampled checks a sink's first frame, the first one that reached it.
func sampled(sink *trafficgen.Sink, want []byte) error {
	got, err := sink.Sample()
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("arrived:\n%swant:\n%s", hex.Dump(got), hex.Dump(want))
	}
	return nil
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
