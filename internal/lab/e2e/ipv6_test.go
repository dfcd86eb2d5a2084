package e2e

import (
	"net/netip"
	"testing"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/demo/demotest"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// An IPv6-only transport between the gNB and the UPF: the daemon's only N3
// address is IPv6, an SMF establishes over PFCP the sessions of an IPv4 UE
// and of an IPv6 UE towards the gNB's IPv6 address. Their G-PDUs over IPv6
// reach the DN decapsulated; their downlink reaches the gNB in
// GTP-U/UDP/IPv6, byte for byte as gopacket builds it, UDP checksum
// included, and the checksum verifies on its own.
func TestIPv6Transport(t *testing.T) {
	for _, c := range []struct {
		name   string
		cpSEID uint64
		ue     netip.Addr // invalid: the UPF chooses an IPv4 one
		dn     netip.Addr
	}{
		{name: "IPv4 UE", cpSEID: 0x6004, dn: demo.DNAddr},
		{name: "IPv6 UE", cpSEID: 0x6006, ue: demo.UE6Addr, dn: demo.DN6Addr},
	} {
		// A testbed each: a sink samples the first frame it matches.
		t.Run(c.name, func(t *testing.T) {
			tb := demotest.Testbed(t)
			if err := tb.EnableIPv6(); err != nil {
				t.Fatal(err)
			}
			cfg := pfcpConfig(t, tb, uePool)
			cfg.N3Addresses = []netip.Addr{demo.N3Addr6}
			client, stop := startDaemon(t, cfg)
			smf := associatedSMF(t, cfg)
			gnbTEID := uint32(c.cpSEID)
			req := smf.PDUSessionRequest(c.cpSEID, c.ue, demo.GNB6Addr, gnbTEID, demo.QFI)
			smfOverIPv6(req)
			sess, err := smf.Establish(req)
			if err != nil {
				t.Fatal(err)
			}
			ue := c.ue
			if !ue.IsValid() {
				ue = sess.UE
			}
			if sess.N3 != demo.N3Addr6 || !ue.IsValid() {
				t.Fatalf("F-TEID at %v, UE %v; want %v", sess.N3, ue, demo.N3Addr6)
			}
			up := tb.UplinkFrame6(sess.TEID, demo.QFI, demo.UEPacket(ue, c.dn, true, demo.UETTL))
			down := tb.DownlinkFrame(demo.UEPacket(ue, c.dn, false, demo.UETTL))
			delivered(t, tb, c.name, up, down)
			if got := reasonPackets(t, client, demo.N3, "uplink_forward"); got != pfcpPackets {
				t.Errorf("uplink_forward on %s counted %d packets, want %d", demo.N3, got, pfcpPackets)
			}

			sample, err := tb.DNSink.Sample()
			if err != nil {
				t.Fatal(err)
			}
			testsupport.EqualFrames(t, sample, decapsulated(tb, demo.UEPacket(ue, c.dn, true, demo.UETTL-1)))
			if sample, err = tb.GNBSink.Sample(); err != nil {
				t.Fatal(err)
			}
			testsupport.EqualFrames(t, sample, encapsulated6(tb, gnbTEID, demo.UEPacket(ue, c.dn, false, demo.UETTL-1)))
			if err := testsupport.UDP6Checksum(sample); err != nil {
				t.Errorf("the downlink: %v", err)
			}
			if err := smf.Delete(sess.SEID); err != nil {
				t.Fatal(err)
			}
			if err := stop(); err != nil {
				t.Error(err)
			}
		})
	}
}

// smfOverIPv6 moves the tunnel of a pfcptest.PDUSessionRequest to the
// SMF's GTP-U endpoint (N4-u, FAR 3) to an IPv6 address, as an SMF of an
// IPv6-only transport has it.
func smfOverIPv6(req *message.SessionEstablishmentRequest) {
	for i, far := range req.CreateFAR {
		if id, err := far.FARID(); err != nil || id != 3 {
			continue
		}
		req.CreateFAR[i] = ie.NewCreateFAR(ie.NewFARID(3), ie.NewApplyAction(0x02), ie.NewForwardingParameters(
			ie.NewDestinationInterface(ie.DstInterfaceCPFunction),
			ie.NewOuterHeaderCreation(0x0200, 0x5f01, "", "2001:db8:3::50", 0, 0, 0)))
	}
}

// encapsulated6 is the downlink frame the gNB must receive over IPv6: the
// inner packet in a G-PDU with teid and the QFI, from the UPF's IPv6 N3
// address to the gNB's.
func encapsulated6(tb *demo.Testbed, teid uint32, inner []byte) []byte {
	return demo.GTPUFrame(tb.GNBMAC, tb.N3MAC, demo.N3Addr6, demo.GNB6Addr, teid, []byte{demo.DLPDUSession, demo.QFI}, inner)
}
