// Package e2e tests xdp5g end to end: real frames through veth pairs
// between the demo's gNB, UPF and data-network namespaces.
package e2e

import (
	"net/netip"
	"testing"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/demo/demotest"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
	"github.com/xdp5g/xdp5g/internal/testsupport"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// Paced well below what veth carries: every packet must arrive.
const (
	packets = 100_000
	rate    = 200_000 // packets per second
)

func newGenerator(t *testing.T) *trafficgen.Generator {
	t.Helper()
	gen, err := trafficgen.NewGenerator()
	testsupport.CheckLoad(t, err)
	t.Cleanup(func() { gen.Close() })
	return gen
}

// Each case forwards one kind of packet through a fresh testbed and expects
// every packet at the far end, the sample equal byte for byte to the frame
// built here from the session's rules, and the data path to have counted
// exactly that many for the right interface, reason and PDR.
func TestForwarding(t *testing.T) {
	for _, c := range []struct {
		name    string
		ue, dn  netip.Addr
		uplink  bool
		iface   string
		reason  string
		pdrID   uint16
		outside func(tb *demo.Testbed, inner []byte) []byte // the frame leaving the UPF
	}{
		{name: "uplink IPv4", ue: demo.UEAddr, dn: demo.DNAddr, uplink: true, iface: demo.N3, reason: "uplink_forward", pdrID: 1, outside: decapsulated},
		{name: "downlink IPv4", ue: demo.UEAddr, dn: demo.DNAddr, uplink: false, iface: demo.N6, reason: "downlink_forward", pdrID: 2, outside: encapsulated},
		{name: "downlink IPv6", ue: demo.UE6Addr, dn: demo.DN6Addr, uplink: false, iface: demo.N6, reason: "downlink_forward", pdrID: 3, outside: encapsulated},
	} {
		t.Run(c.name, func(t *testing.T) {
			tb := demotest.Testbed(t)
			upf := demotest.UPF(t, tb)
			if err := upf.Install(); err != nil {
				t.Fatal(err)
			}
			inner := demo.UEPacket(c.ue, c.dn, c.uplink, demo.UETTL)
			dir, frame := flow(tb, c.uplink, inner)
			sent, _, err := dir.Send(newGenerator(t), frame, packets, trafficgen.Options{Rate: rate})
			if err != nil {
				t.Fatal(err)
			}
			delivered, err := dir.Delivered(sent)
			if err != nil {
				t.Fatal(err)
			}
			if sent != packets || delivered != packets {
				t.Errorf("sent %d, delivered %d; want %d both", sent, delivered, packets)
			}
			sample, err := dir.Sink.Sample()
			if err != nil {
				t.Fatal(err)
			}
			forwarded := demo.UEPacket(c.ue, c.dn, c.uplink, demo.UETTL-1)
			if diff := testsupport.FrameDiff(sample, c.outside(tb, forwarded)); diff != "" {
				t.Errorf("arrived: %s", diff)
			}
			if got := reasonCount(t, upf.Datapath, c.iface, c.reason); got != packets {
				t.Errorf("%s on %s counted %d packets, want %d", c.reason, c.iface, got, packets)
			}
			pdrs, err := upf.Store.PDRCounters(demo.SEID)
			if err != nil {
				t.Fatal(err)
			}
			if got := pdrs[c.pdrID]; got.Packets != packets || got.Bytes != packets*uint64(len(inner)) {
				t.Errorf("PDR %d counted %+v, want %d packets of %d bytes", c.pdrID, got, packets, len(inner))
			}
		})
	}
}

// flow is the direction of a UE's packet and the frame that carries it
// into the UPF.
func flow(tb *demo.Testbed, uplink bool, inner []byte) (demo.Direction, []byte) {
	if uplink {
		return tb.Uplink(), tb.UplinkFrame(demo.UplinkTEID, demo.QFI, inner)
	}
	return tb.Downlink(), tb.DownlinkFrame(inner)
}

// decapsulated is the uplink frame the DN must receive: the inner packet
// from the UPF's N6 MAC address to the DN's.
func decapsulated(tb *demo.Testbed, inner []byte) []byte {
	return demo.Ethernet(tb.DNMAC, tb.N6MAC, inner)
}

// encapsulated is the downlink frame the gNB must receive: the inner packet
// in a G-PDU with the session's TEID and a DL PDU Session Container with
// its QFI, from the UPF's N3 address to the gNB's.
func encapsulated(tb *demo.Testbed, inner []byte) []byte {
	return demo.GTPUFrame(tb.GNBMAC, tb.N3MAC, demo.N3Addr, demo.GNBAddr, demo.DownlinkTEID, []byte{demo.DLPDUSession, demo.QFI}, inner)
}

// reasonCount is the number of packets the data path counted for a reason
// on an interface.
func reasonCount(t *testing.T, dp *upfxdp.Datapath, iface, reason string) uint64 {
	t.Helper()
	all, err := dp.Counters()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range all {
		if c.Name == iface {
			return c.Reasons[reason].Packets
		}
	}
	t.Fatalf("no counters for %s", iface)
	return 0
}
