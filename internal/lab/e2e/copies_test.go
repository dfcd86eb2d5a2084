package e2e

import (
	"slices"
	"testing"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/demo/demotest"
	"github.com/xdp5g/xdp5g/internal/lab/pfcptest"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// DUPL through the daemon, its LI link an interface of the role copies:
// the copies of the uplink leave by it to the collector, in the tunnel the
// Duplicating Parameters ask for, byte for byte the packet the PDR
// matched; the packets themselves go on to the DN. A G-PDU that comes in
// by that link is not the UPF's: passed to the kernel, not forwarded.
func TestDuplicatesLeaveByTheCopiesInterface(t *testing.T) {
	tb := demotest.Testbed(t)
	li, err := tb.NewCollector()
	check(t, err)
	testsupport.Cleanup(t, li.Close)
	cfg := daemonConfig(t, tb, servedPFCP(t, uePool), "{name: "+demo.CollectorLink+", roles: [copies]}")
	client, _ := startDaemon(t, cfg)
	smf := associatedSMF(t, cfg)
	sess, err := smf.EstablishPDUSession(0x5ee1, demo.GNBAddr, demo.DownlinkTEID, demo.QFI)
	check(t, err)
	const liTEID = 0x7e57
	resp, err := smf.Modify(message.NewSessionModificationRequest(0, 0, sess.SEID, 0, 0,
		ie.NewUpdateFAR(ie.NewFARID(1), ie.NewApplyAction(0x02|0x10), // FORW, DUPL
			ie.NewUpdateDuplicatingParameters(ie.NewDestinationInterface(ie.DstInterfaceLIFunction),
				ie.NewOuterHeaderCreation(0x0100, liTEID, demo.CollectorAddr.String(), "", 0, 0, 0)))))
	check(t, err)
	check(t, pfcptest.Accepted("the uplink's duplication", resp.Cause))

	copies, err := li.Copies()
	check(t, err)
	defer copies.Sink.Close()
	up, _ := sessionFrames(tb, sess.TEID, sess.UE)
	if got := send(t, tb.Uplink(), up); got != pfcpPackets {
		t.Errorf("uplink: %d of %d packets delivered", got, pfcpPackets)
	}
	if got, err := copies.Delivered(pfcpPackets); err != nil || got != pfcpPackets {
		t.Errorf("%d copies reached the collector, want %d (%v)", got, pfcpPackets, err)
	}
	sample, err := copies.Sink.Sample()
	check(t, err)
	testsupport.EqualFrames(t, sample, li.Tunnelled(liTEID, demo.UEPacket(sess.UE, demo.DNAddr, true, demo.UETTL)))

	// The uplink's G-PDU, sent to the UPF by the LI link.
	liIndex, _, err := li.NS.Link(demo.CollectorLink)
	check(t, err)
	in := slices.Clone(up) // the same G-PDU, from the collector to the LI link
	copy(in[0:6], li.UPFMAC)
	copy(in[6:12], li.MAC)
	if got := send(t, demo.NewDirection("by the LI link", "the DN", li.NS, liIndex, tb.DNSink), in); got != 0 {
		t.Errorf("%d of the G-PDUs that came in by the LI link reached the DN", got)
	}
	if got := reasonPackets(t, client, demo.CollectorLink, "pass_not_ours"); got < pfcpPackets {
		t.Errorf("the LI link passed %d packets to the kernel, want %d at least", got, pfcpPackets)
	}
}
