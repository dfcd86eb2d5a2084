package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/lab/pfcptest"
	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
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
	ulclPSAN3    = netip.MustParseAddr("10.210.99.1") // each PSA's, on its loopback
)

// ulclNet is the namespaces of the ULCL network and its links.
type ulclNet struct {
	*upfNet
	gnb, iupf, central, local, centralDN, localDN *namespace.Netns
}

func newULCLNet(t *testing.T) *ulclNet {
	t.Helper()
	n := &ulclNet{upfNet: newUPFNet(t)}
	n.gnb, n.iupf, n.central, n.centralDN = n.path(t, upfPath{gnb: pathNode{"ulcl-gnb", "gnb"}, first: pathNode{"ulcl-iupf", "iupf"},
		second: pathNode{"ulcl-psa1", "central"}, dn: pathNode{"ulcl-dn1", "centralDN"}, firstN9Link: "n9a",
		gnbAddr: ulclGNB, firstN3: ulclIUPFN3, firstN9: ulclIUPFN9, secondN9: ulclCentral, secondN3: ulclPSAN3,
		secondN6: []netip.Addr{ulclCentralN}, dnAddrs: []netip.Addr{ulclCentralD}})
	n.local, n.localDN = n.netns(t, "ulcl-psa2"), n.netns(t, "ulcl-dn2")
	n.link(t, netEnd{n.iupf, "iupf/n9b", "n9b", []netip.Addr{ulclIUPFN9b}}, netEnd{n.local, "local/n9", "n9", []netip.Addr{ulclLocal}})
	n.link(t, netEnd{n.local, "local/n6", "n6", []netip.Addr{ulclLocalN}}, netEnd{n.localDN, "localDN", "n6", []netip.Addr{ulclLocalD}})
	check(t, n.local.AddAddr("lo", netip.PrefixFrom(ulclPSAN3, 32).String()))
	// The local PSA reaches the I-UPF's N9 address over n9b.
	check(t, n.local.AddRoute(netip.PrefixFrom(ulclIUPFN9, 32).String(), ulclIUPFN9b.String(), "n9"))
	return n
}

// The free5GC ULCL message sequence, byte for byte as its SMF builds it,
// over each daemon's PFCP server; then traffic. The uplink to the local
// destination branches at the I-UPF to the local PSA, the rest goes to
// the central PSA, each out of its N6; the downlink from both reaches the
// gNB in its tunnel with the QoS flow's QFI; each UPF reports exactly what
// it carried. The I-UPF then restarts, and the traffic again: its
// session, its PDRs' counters and its URRs' usage go on where they were.
func TestULCLFree5GC(t *testing.T) {
	n := newULCLNet(t)
	iupf := []string{"{name: n3, roles: [access]}", "{name: n9a, roles: [access, core]}", "{name: n9b, roles: [access]}"}
	iupfCfg, stopIUPF := stoppableUPFDaemon(t, n.iupf, iupf, ulclIUPFN3, ulclIUPFN9)
	cfgs := []*config.Config{
		pfcptest.IUPF: iupfCfg,
		pfcptest.CentralPSA: upfDaemon(t, n.central, []string{"{name: n9, roles: [access]}", "{name: n6, roles: [core]}"},
			ulclPSAN3, ulclCentral),
		pfcptest.LocalPSA: upfDaemon(t, n.local, []string{"{name: n9, roles: [access]}", "{name: n6, roles: [core]}"},
			ulclPSAN3, ulclLocal),
	}
	const qfi, ulTEID, dlTEID, gnbTEID = 9, 0x5a01, 0x5a02, 0x9001
	ulcl := pfcptest.ULCL{SMF: netip.MustParseAddr("127.0.0.1"), CPSEID: 0x1001, IUPFN3: ulclIUPFN3, IUPFN9: ulclIUPFN9,
		PSAN9: [2]netip.Addr{ulclCentral, ulclLocal}, GNB: ulclGNB, GNBTEID: gnbTEID, UE: ulclUE,
		Local: netip.PrefixFrom(ulclLocalD, 32), ULTEID: ulTEID, DLTEID: dlTEID, QFI: qfi,
		AMBRKbps: [2]uint64{1_000_000, 1_000_000}, URRPeriod: 3600, URRThreshold: 1 << 40}
	smfs := associatedSMFs(t, ulcl.SMF, cfgs)
	seids := make([]uint64, len(smfs))
	establish(t, smfs, seids, ulcl.Steps())

	const ttl = demo.UETTL
	upCentral, upLocal := demo.UEPacket(ulclUE, ulclCentralD, true, ttl), demo.UEPacket(ulclUE, ulclLocalD, true, ttl)
	downCentral, downLocal := demo.UEPacket(ulclUE, ulclCentralD, false, ttl), demo.UEPacket(ulclUE, ulclLocalD, false, ttl)
	gtpu := trafficgen.Filter{EtherType: uint16(layers.EthernetTypeIPv4), IPProto: uint8(layers.IPProtocolUDP), DstPort: 2152}
	flows := []netFlow{
		{name: "uplink to the central DN", from: n.gnb, fromKey: "gnb", in: n.uplinkFrame(ulTEID, upCentral),
			to: n.centralDN, toLink: "n6", filter: appFilter,
			want: demo.Ethernet(n.mac["centralDN"], n.mac["central/n6"], demo.UEPacket(ulclUE, ulclCentralD, true, ttl-1))},
		{name: "uplink to the local destination", from: n.gnb, fromKey: "gnb", in: n.uplinkFrame(ulTEID, upLocal),
			to: n.localDN, toLink: "n6", filter: appFilter,
			want: demo.Ethernet(n.mac["localDN"], n.mac["local/n6"], demo.UEPacket(ulclUE, ulclLocalD, true, ttl-1))},
		{name: "downlink from the central DN", from: n.centralDN, fromKey: "centralDN",
			in: demo.Ethernet(n.mac["central/n6"], n.mac["centralDN"], downCentral), to: n.gnb, toLink: "n3", filter: gtpu,
			want: n.downlinkFrame(gnbTEID, qfi, demo.UEPacket(ulclUE, ulclCentralD, false, ttl-1))},
		{name: "downlink from the local DN", from: n.localDN, fromKey: "localDN",
			in: demo.Ethernet(n.mac["local/n6"], n.mac["localDN"], downLocal), to: n.gnb, toLink: "n3", filter: gtpu,
			want: n.downlinkFrame(gnbTEID, qfi, demo.UEPacket(ulclUE, ulclLocalD, false, ttl-1))},
	}
	n.carries(t, flows)

	// Each PDR counted its flows (`xdp5g sessions get`): at the I-UPF the
	// uplink to the central PSA (1) and the branch's (3), the downlink from
	// both PSAs (2: the branch's PDR 4 has the same PDI and precedence, and
	// the lower ID wins); at each PSA its uplink (1) and downlink (2).
	wantPDRs := [3]map[uint16]uint64{pfcptest.IUPF: {1: pfcpPackets, 2: 2 * pfcpPackets, 3: pfcpPackets, 4: 0},
		pfcptest.CentralPSA: {1: pfcpPackets, 2: pfcpPackets}, pfcptest.LocalPSA: {1: pfcpPackets, 2: pfcpPackets}}
	for upf, cfg := range cfgs {
		if got := pdrPackets(t, cfg, seids[upf]); !maps.Equal(got, wantPDRs[upf]) {
			t.Errorf("UPF %d: the PDRs counted %v packets, want %v", upf, got, wantPDRs[upf])
		}
	}
	// The gNB's tunnel again, as free5GC sends it on every N2 PDU Session
	// Resource Setup (a UE back from idle): the I-UPF's PDRs count on.
	establish(t, smfs, seids, ulcl.Steps()[2:3])
	if got := pdrPackets(t, cfgs[pfcptest.IUPF], seids[pfcptest.IUPF]); !maps.Equal(got, wantPDRs[pfcptest.IUPF]) {
		t.Errorf("the I-UPF's PDRs counted %v packets after the gNB's tunnel was given again, want %v", got, wantPDRs[pfcptest.IUPF])
	}

	check(t, stopIUPF())
	startDaemon(t, iupfCfg)
	if got := pdrPackets(t, iupfCfg, seids[pfcptest.IUPF]); !maps.Equal(got, wantPDRs[pfcptest.IUPF]) {
		t.Errorf("the I-UPF's PDRs counted %v packets after its restart, want %v", got, wantPDRs[pfcptest.IUPF])
	}
	n.carries(t, flows)
	for upf, cfg := range cfgs {
		for id := range wantPDRs[upf] {
			wantPDRs[upf][id] *= 2
		}
		if got := pdrPackets(t, cfg, seids[upf]); !maps.Equal(got, wantPDRs[upf]) {
			t.Errorf("UPF %d: the PDRs counted %v packets after the I-UPF's restart and the traffic again, want %v", upf, got, wantPDRs[upf])
		}
	}

	// Every packet of 59 octets (UEPacket's), each flow sent twice: the
	// I-UPF carried all four flows, each PSA two.
	size := uint64(len(upCentral))
	want := [3]volumes{pfcptest.IUPF: packetVolumes(size, 4*pfcpPackets, 4*pfcpPackets),
		pfcptest.CentralPSA: packetVolumes(size, 2*pfcpPackets, 2*pfcpPackets), pfcptest.LocalPSA: packetVolumes(size, 2*pfcpPackets, 2*pfcpPackets)}
	for upf, smf := range smfs {
		usedExactly(t, fmt.Sprintf("UPF %d", upf), smf, seids[upf], 2, allVolumes, want[upf])
	}
}

// uplinkFrame is the gNB's G-PDU of inner to the I-UPF.
func (n *ulclNet) uplinkFrame(teid uint32, inner []byte) []byte {
	return demo.GTPUFrame(n.mac["iupf/n3"], n.mac["gnb"], ulclGNB, ulclIUPFN3, teid, []byte{demo.ULPDUSession, 9}, inner)
}

// downlinkFrame is the I-UPF's G-PDU of inner to the gNB, carrying qfi.
func (n *ulclNet) downlinkFrame(teid uint32, qfi uint8, inner []byte) []byte {
	return demo.GTPUFrame(n.mac["gnb"], n.mac["iupf/n3"], ulclIUPFN3, ulclGNB, teid, []byte{demo.DLPDUSession, qfi}, inner)
}

// pdrPackets are the packets each PDR of a session counted, as the REST
// API of the daemon running cfg shows them.
func pdrPackets(t *testing.T, cfg *config.Config, seid uint64) map[uint16]uint64 {
	t.Helper()
	client := &api.Client{URL: "http://" + cfg.API.Listen, HTTP: &http.Client{Timeout: 5 * time.Second}}
	raw, err := client.Session(t.Context(), seid)
	check(t, err)
	var doc struct {
		PDRs []struct {
			ID       uint16 `json:"pdrId"`
			Counters api.Counter
		}
	}
	check(t, json.Unmarshal(raw, &doc))
	packets := map[uint16]uint64{}
	for _, p := range doc.PDRs {
		packets[p.ID] = p.Counters.Packets
	}
	return packets
}
