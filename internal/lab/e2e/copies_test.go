package e2e

import (
	"slices"
	"sync"
	"testing"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/demo/demotest"
	"github.com/xdp5g/xdp5g/internal/lab/pfcptest"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// DUPL through the daemon, its LI link an interface of the role copies:
// the copies of the uplink leave by it to the collector, in the tunnel the
// Duplicating Parameters ask for, byte for byte the packet the PDR
// matched; the packets themselves go on to the DN. A G-PDU that comes in
// by that link is not the UPF's: passed to the kernel, not forwarded.
func TestDuplicatesLeaveByTheCopiesInterface(t *testing.T) {
	tb, li, client, smf := copiesTestbed(t)
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

// The copies of packets their FAR forwards and of packets their FAR drops
// leave by the same LI link, sent at once from both CPUs: the kernel runs
// one program over the frames a poll redirects to one interface, the
// first frame's, so a copy made in the frame (a dropped packet's) and one
// the copy program makes (a forwarded packet's) must go the same way.
// Every copy the UPF counts sent arrives.
func TestCopiesOfForwardedAndDroppedPacketsTogether(t *testing.T) {
	tb, li, client, smf := copiesTestbed(t)
	var ups [2][]byte
	for i, action := range []uint8{0x02 | 0x10, 0x01 | 0x10} { // FORW, DUPL; DROP, DUPL
		sess, err := smf.EstablishPDUSession(0x5ee1+uint64(i), demo.GNBAddr, demo.DownlinkTEID+uint32(i), demo.QFI)
		check(t, err)
		resp, err := smf.Modify(message.NewSessionModificationRequest(0, 0, sess.SEID, 0, 0,
			ie.NewUpdateFAR(ie.NewFARID(1), ie.NewApplyAction(action),
				ie.NewUpdateDuplicatingParameters(ie.NewDestinationInterface(ie.DstInterfaceLIFunction),
					ie.NewOuterHeaderCreation(0x0100, 0x7e57, demo.CollectorAddr.String(), "", 0, 0, 0)))))
		check(t, err)
		check(t, pfcptest.Accepted("the uplink's duplication", resp.Cause))
		ups[i], _ = sessionFrames(tb, sess.TEID, sess.UE)
	}
	copies, err := li.Copies()
	check(t, err)
	defer copies.Sink.Close()
	const packets = 100_000
	var wg sync.WaitGroup
	for cpu, up := range ups {
		gen := newGenerator(t)
		wg.Go(func() {
			if sent, _, err := tb.Uplink().SendOn(cpu, gen, up, packets, trafficgen.Options{Rate: 250_000}); err != nil || sent != packets {
				t.Errorf("sent %d of %d packets (%v)", sent, packets, err)
			}
		})
	}
	wg.Wait()
	// A busy host may drop frames before the UPF takes them, never after.
	sent := reasonPackets(t, client, demo.N3, "duplicate")
	if lost := reasonPackets(t, client, demo.N3, "drop_duplicate"); sent < packets || lost != 0 {
		t.Fatalf("the UPF sent %d copies and lost %d, want %d at least and none lost", sent, lost, packets)
	}
	if got, err := copies.Delivered(sent); err != nil || got != sent {
		t.Errorf("%d copies reached the collector, want the %d sent (%v)", got, sent, err)
	}
}

// copiesTestbed is the testbed with a collector behind the UPF's LI link,
// an interface of the role copies, its daemon and an SMF associated.
func copiesTestbed(t *testing.T) (*demo.Testbed, *demo.Collector, *api.Client, *pfcptest.SMF) {
	tb := demotest.Testbed(t)
	li, err := tb.NewCollector()
	check(t, err)
	testsupport.Cleanup(t, li.Close)
	cfg := daemonConfig(t, tb, servedPFCP(t, uePool), "{name: "+demo.CollectorLink+", roles: [copies]}")
	client, _ := startDaemon(t, cfg)
	return tb, li, client, associatedSMF(t, cfg)
}
