package n4

import (
	"bytes"
	"context"
	"math"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/demo/demotest"
	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
	"github.com/xdp5g/xdp5g/internal/testsupport"
	"github.com/xdp5g/xdp5g/internal/upf/buffer"
	"github.com/xdp5g/xdp5g/internal/upf/nexthop"
	"github.com/xdp5g/xdp5g/internal/upf/pfcp"
)

// trafficEnv is a handler over the demo testbed's UPF as the daemon runs
// it, URR events and buffers included; sent gets the Session Report
// Requests it sends, encoded. The SMF accepts them, with the IEs of
// answerIEs in its responses.
type trafficEnv struct {
	requests
	tb        *demo.Testbed
	upf       *demo.UPF
	buffers   *buffer.Manager
	sent      chan []byte
	answerIEs atomic.Pointer[[][]byte]
}

func newTrafficEnv(t *testing.T) *trafficEnv {
	t.Helper()
	e := &trafficEnv{requests: requests{t: t}, sent: make(chan []byte, 256)}
	e.tb, e.upf, e.buffers = demotest.WithBuffers(t, buffer.Config{})
	e.h = New(Config{Store: e.upf.Store, N3: []netip.Addr{demo.N3Addr}, Buffers: e.buffers,
		ForwardingPolicies: map[string]netip.Addr{"to-firewall": firewall},
		SendReport: func(_ context.Context, _ pfcp.Peer, req *message.SessionReportRequest) (*message.SessionReportResponse, error) {
			b, err := req.Marshal()
			fatalIf(t, err)
			e.sent <- b
			ies := [][]byte{tlv(tCause, []byte{ie.CauseRequestAccepted})}
			if extra := e.answerIEs.Load(); extra != nil {
				ies = append(ies, *extra...)
			}
			return parse[*message.SessionReportResponse](t, sessionMsg(mSessionReportResponse, 0, req.Sequence(), ies...)), nil
		}})
	e.buffers.SetNotify(e.h.Buffered)
	events, err := e.upf.Datapath.URREvents()
	fatalIf(t, err)
	testsupport.Cleanup(t, e.buffers.Close)
	testsupport.Go(t, e.buffers.Run)
	testsupport.Go(t, func(ctx context.Context) error { e.h.Run(ctx, events); return nil })
	return e
}

// firewall is the next hop of the forwarding policy "to-firewall": an
// address on N6 that is not the route's.
var firewall = netip.MustParseAddr("10.100.6.9")

// A FAR's Forwarding Policy (traffic steering, TRST) sends the uplink to
// the policy's next hop instead of the route's, and a FAR naming a policy
// that is not configured is refused with its ID, changing nothing.
func TestForwardingPolicySteersTheUplink(t *testing.T) {
	e := newTrafficEnv(t)
	firewallMAC := net.HardwareAddr{2, 0, 0, 0, 6, 9}
	fatalIf(t, e.tb.UPF.SetNeigh(demo.N6, firewall.String(), firewallMAC))
	establish := func(policy string) reply {
		return e.establish("smf", nodeIDv4("127.0.0.4"), cpFSEID(0x78, "127.0.0.4"),
			createPDR(pdrID(1), precedence(255), pdi(sourceInterface(ifAccess), fteid(demo.UplinkTEID, demo.N3Addr.String()),
				ueIPv4(demo.UEAddr.String(), false)), outerHeaderRemoval(0), farID(1)),
			createFAR(farID(1), applyAction(aaFORW), fwdParams(destinationInterface(ifCore), forwardingPolicy(policy))))
	}
	establish("to-nowhere").expect(t, causeRuleFailure, failedFAR(1), nil)
	if n := e.upf.Store.Len(); n != 0 {
		t.Fatalf("a refused establishment left %d sessions", n)
	}
	establish("to-firewall").expect(t, causeAccepted, nil, nil)
	// The resolver learns the neighbour from netlink, maybe after the
	// session took its next hop: until then the uplink goes the route's way.
	for deadline := time.Now().Add(10 * time.Second); !resolved(e.upf.Resolver.Slots(), firewall); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the policy's next hop did not resolve")
		}
	}

	gen, err := trafficgen.NewGenerator()
	fatalIf(t, err)
	t.Cleanup(func() { gen.Close() })
	const packets = 2000
	frame := e.tb.UplinkFrame(demo.UplinkTEID, demo.QFI, demo.UEPacket(demo.UEAddr, demo.DNAddr, true, demo.UETTL))
	sent, _, err := e.tb.Uplink().Send(gen, frame, packets, trafficgen.Options{Rate: 50_000})
	fatalIf(t, err)
	delivered, err := e.tb.Uplink().Delivered(sent)
	fatalIf(t, err)
	sample, err := e.tb.DNSink.Sample()
	fatalIf(t, err)
	if delivered != packets || len(sample) < 6 || !bytes.Equal(sample[:6], firewallMAC) {
		t.Errorf("%d of %d packets arrived, the last one to %x; want all, to the policy's next hop %s", delivered, packets, sample[:min(6, len(sample))], firewallMAC)
	}
}

// A PFCP session over the demo testbed, with real GTP-U and IP through the
// XDP data path: its QER holds the uplink to its maximum bit rate, and its
// URR counts exactly what was forwarded each way, reporting at its volume
// threshold and when the session goes.
func TestQoSAndUsageUnderTraffic(t *testing.T) {
	e := newTrafficEnv(t)
	tb, sent := e.tb, e.sent

	inner := demo.UEPacket(demo.UEAddr, demo.DNAddr, true, demo.UETTL)
	size := uint64(len(inner))
	const mbrKbps = 8000 // 1 MB/s: about 17,000 of these packets a second
	threshold := 3000 * size
	ue := demo.UEAddr.String()
	seid := e.establish("smf", nodeIDv4("127.0.0.4"), cpFSEID(0x77, "127.0.0.4"),
		createPDR(pdrID(1), precedence(255), pdi(sourceInterface(ifAccess), fteid(demo.UplinkTEID, demo.N3Addr.String()),
			ueIPv4(ue, false)), outerHeaderRemoval(0), farID(1), qerID(1), urrID(1)),
		createPDR(pdrID(2), precedence(255), pdi(sourceInterface(ifCore), ueIPv4(ue, true)), farID(2), qerID(1), urrID(1)),
		coreFAR(), accessFAR(demo.DownlinkTEID, demo.GNBAddr.String()),
		createQER(1, bitRate(tMBR, mbrKbps, 0), qfi(demo.QFI)),
		createURR(1, mmVOLUM|mmDURAT, rtgVOLTH, volumeThreshold(threshold), measurementInformation(0x10))).upSEID(t)

	// Uplink at twice the MBR for a second, downlink unlimited.
	const offered, downlink = 34_000, 5_000
	sentAt := sendSmoothly(t, tb, tb.UplinkFrame(demo.UplinkTEID, demo.QFI, inner), offered)
	up := uint64(len(sentAt))
	gen, err := trafficgen.NewGenerator()
	fatalIf(t, err)
	t.Cleanup(func() { gen.Close() })
	upDelivered, err := tb.Uplink().Delivered(up)
	fatalIf(t, err)
	down, _, err := tb.Downlink().Send(gen, tb.DownlinkFrame(demo.UEPacket(demo.UEAddr, demo.DNAddr, false, demo.UETTL)),
		downlink, trafficgen.Options{Rate: 50_000})
	fatalIf(t, err)
	downDelivered, err := tb.Downlink().Delivered(down)
	fatalIf(t, err)
	if downDelivered != downlink {
		t.Fatalf("downlink: %d of %d delivered", downDelivered, downlink)
	}
	// What a policer of the MBR lets through of the packets as they were
	// sent, late ones (a busy host) included: the sender must have offered
	// more than the MBR for the count to tell a policer from none. The
	// bucket holds 40 ms at the rate.
	const qerBurst = 40 * time.Millisecond
	want := float64(testsupport.Policed(sentAt, mbrKbps*1000/8, size, qerBurst))
	elapsed := sentAt[len(sentAt)-1]
	t.Logf("uplink at the MBR: %d packets in %v, %.4f of the expected %.0f", upDelivered, elapsed, float64(upDelivered)/want, want)
	if want > 0.75*float64(up) {
		t.Fatalf("the sender offered %d packets in %v, of which a policer lets %.0f through: not enough above the MBR to test it", up, elapsed, want)
	}
	if got := float64(upDelivered); math.Abs(got-want) > 0.05*want {
		t.Errorf("uplink at the MBR: %.0f packets in %v, want %.0f ±5%%", got, elapsed, want)
	}

	// Every report together: exactly what was forwarded.
	var total usage
	thresholds := 0
	add := func(u usage) {
		if u.urr != 1 || !u.hasVolume || !u.hasPackets {
			t.Errorf("usage report %+v", u)
		}
		total.uvol += u.uvol
		total.dvol += u.dvol
		total.tvol += u.tvol
		total.upkt += u.upkt
		total.dpkt += u.dpkt
	}
	report := func(b []byte) {
		_, hdrSEID, ies := decodeMsg(t, b)
		if hdrSEID != 0x77 {
			t.Errorf("report for SEID %#x", hdrSEID)
		}
		for _, v := range all(ies, tUsageReportReport) {
			u := decodeUsage(t, v)
			if u.trigger != rtgVOLTH || u.tvol < threshold || u.seqn != uint32(thresholds) {
				t.Errorf("threshold report %d: %+v", thresholds, u)
			}
			thresholds++
			add(u)
		}
	}
	// Every threshold crossed is reported before the deletion: what is
	// left unreported is then less than the threshold.
	forwarded := (upDelivered + downlink) * size
	const reportWait = 30 * time.Second // a generous bound: a busy host handles them late
	for deadline := time.After(reportWait); forwarded-total.tvol >= threshold; {
		select {
		case b := <-sent:
			report(b)
		case <-deadline:
			t.Fatalf("%d octets forwarded, %d reported in %d threshold reports of %d after %v", forwarded, total.tvol, thresholds, threshold, reportWait)
		}
	}
	del := e.delete("smf", seid)
	del.expect(t, causeAccepted, nil, nil)
	final := all(del.ies, tUsageReportDelResp)
	if len(final) != 1 {
		t.Fatalf("%d usage reports in the deletion response", len(final))
	}

	// None comes after the deletion.
	for quiet := false; !quiet; {
		select {
		case b := <-sent:
			report(b)
		case <-time.After(300 * time.Millisecond):
			quiet = true
		}
	}
	last := decodeUsage(t, final[0])
	if last.trigger != 1<<11 || last.seqn != uint32(thresholds) { // TERMR
		t.Errorf("final report %+v after %d others", last, thresholds)
	}
	add(last)
	// A report counts from where the last one ended, a little after its
	// threshold was reached.
	if most := int((upDelivered*size + downlink*size) / threshold); thresholds == 0 || thresholds > most {
		t.Errorf("%d threshold reports, want 1 to %d", thresholds, most)
	}
	if total.upkt != upDelivered || total.uvol != upDelivered*size || total.dpkt != downlink || total.dvol != downlink*size ||
		total.tvol != total.uvol+total.dvol {
		t.Errorf("reported %+v; forwarded %d uplink and %d downlink packets of %d bytes", total, upDelivered, downlink, size)
	}
}

// sendSmoothly sends a second's worth of frames from the gNB at rate
// packets per second, each when it is due, through a raw socket: the
// generator's ten bursts a second would each find the policer's bucket,
// which holds 40 ms at the rate, long full. It returns when each frame
// went, after the start: on a busy host some go late.
func sendSmoothly(t *testing.T, tb *demo.Testbed, frame []byte, rate int) (sentAt []time.Duration) {
	t.Helper()
	sentAt = make([]time.Duration, 0, rate)
	sendRaw(t, tb.GNB, demo.N3, func(send func([]byte) error) error {
		start := time.Now()
		for n := range rate {
			if wait := time.Until(start.Add(time.Duration(n) * time.Second / time.Duration(rate))); wait > 0 {
				time.Sleep(wait)
			}
			at := time.Since(start)
			if err := send(frame); err != nil {
				return err
			}
			sentAt = append(sentAt, at)
		}
		return nil
	})
	return sentAt
}

// sendRaw has frames send its frames, as they are, out of an interface of a
// namespace through a packet socket.
func sendRaw(t *testing.T, ns *namespace.Netns, ifname string, frames func(send func([]byte) error) error) {
	t.Helper()
	fatalIf(t, ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0) // protocol 0: sends only
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		to := &unix.SockaddrLinklayer{Ifindex: ifi.Index}
		return frames(func(frame []byte) error { return unix.Sendto(fd, frame, 0, to) })
	}))
}

// establishUplink has the SMF set up a session (CP SEID 0x77) whose one
// PDR takes the UE's uplink on demo.UplinkTEID, removes the outer header
// as ohr says and forwards to the DN; with urr (a Create URR), the PDR
// counts into it as URR 1. It returns the UP SEID.
func (e *trafficEnv) establishUplink(t *testing.T, ohr byte, urr ...[]byte) uint64 {
	t.Helper()
	pdr := [][]byte{pdrID(1), precedence(255), pdi(sourceInterface(ifAccess), fteid(demo.UplinkTEID, demo.N3Addr.String()),
		ueIPv4(demo.UEAddr.String(), false)), outerHeaderRemoval(ohr), farID(1)}
	if len(urr) > 0 {
		pdr = append(pdr, urrID(1))
	}
	return e.establish("smf", append([][]byte{nodeIDv4("127.0.0.4"), cpFSEID(0x77, "127.0.0.4"), createPDR(pdr...), coreFAR()},
		urr...)...).upSEID(t)
}

// uplinkPacket is the UE's packet establishUplink's session carries.
var uplinkPacket = demo.UEPacket(demo.UEAddr, demo.DNAddr, true, demo.UETTL)

// sendUplink sends n uplink packets from the gNB and returns how many the
// DN has received in all.
func (e *trafficEnv) sendUplink(t *testing.T, n uint64) uint64 {
	t.Helper()
	before, err := e.tb.DNSink.Counts()
	fatalIf(t, err)
	gen, err := trafficgen.NewGenerator()
	fatalIf(t, err)
	defer gen.Close()
	sent, _, err := e.tb.Uplink().Send(gen, e.tb.UplinkFrame(demo.UplinkTEID, demo.QFI, uplinkPacket), n, trafficgen.Options{Rate: 50_000})
	fatalIf(t, err)
	if sent != n {
		t.Fatalf("sent %d of %d packets", sent, n)
	}
	delivered, err := e.tb.Uplink().Delivered(before.MatchPackets + n)
	fatalIf(t, err)
	return delivered
}

// usageReport waits for the next Session Report Request and returns its
// one Usage Report.
func (e *trafficEnv) usageReport(t *testing.T) usage {
	t.Helper()
	ies := waitReport(t, e.sent)
	if rt := one(t, ies, tReportType); len(rt) != 1 || rt[0] != 0x02 { // USAR
		t.Errorf("report type % x, want USAR", rt)
	}
	u := one(t, ies, tUsageReportReport)
	if u == nil {
		t.Fatal("no Usage Report")
	}
	return decodeUsage(t, u)
}

// noReport checks that no Session Report Request comes for a while.
func (e *trafficEnv) noReport(t *testing.T, wait time.Duration, when string) {
	t.Helper()
	select {
	case b := <-e.sent:
		t.Errorf("a Session Report Request %s: % x", when, b)
	case <-time.After(wait):
	}
}

// checkUplinkVolume checks a usage report of URR 1 counting (with packet
// counts, MNOP) n of the uplink packets.
func checkUplinkVolume(t *testing.T, u usage, n uint64) {
	t.Helper()
	size := uint64(len(uplinkPacket))
	if u.urr != 1 || !u.hasVolume || u.tvol != n*size || u.uvol != n*size || u.dvol != 0 ||
		!u.hasPackets || u.tpkt != n || u.upkt != n || u.dpkt != 0 {
		t.Errorf("usage report %+v, want URR 1 with %d uplink packets of %d bytes", u, n, size)
	}
}

// A volume quota lets through the packets that use it up and drops the
// rest; the packet reaching it has the SMF sent a Usage Report with VOLQU
// (§8.2.41 octet 6 bit 1), once, of exactly what went through.
func TestVolumeQuotaReport(t *testing.T) {
	e := newTrafficEnv(t)
	const quota = 5
	e.establishUplink(t, 0, createURR(1, mmVOLUM, rtgVOLQU, volumeQuota(quota*uint64(len(uplinkPacket))), measurementInformation(0x10)))
	if got := e.sendUplink(t, 8); got != quota {
		t.Errorf("the DN received %d packets, want the quota's %d", got, quota)
	}
	u := e.usageReport(t)
	if u.trigger != rtgVOLQU {
		t.Errorf("usage report trigger %#x, want VOLQU", u.trigger)
	}
	checkUplinkVolume(t, u, quota)
	if u.hasDuration {
		t.Error("a URR measuring volume only reported a duration")
	}
	e.noReport(t, 300*time.Millisecond, "after the quota's")
}

// A time threshold counts from the first packet: a second later the SMF
// gets a Usage Report with TIMTH (§8.2.41 octet 5 bit 3) of the traffic and
// of its duration (§8.2.45), the whole seconds from the first packet to the
// report's end.
func TestTimeThresholdReport(t *testing.T) {
	e := newTrafficEnv(t)
	e.establishUplink(t, 0, createURR(1, mmVOLUM|mmDURAT, rtgTIMTH, timeThreshold(1), measurementInformation(0x10)))
	e.noReport(t, 1500*time.Millisecond, "before any traffic") // time counts from the first packet
	e.timedReport(t, rtgTIMTH, 10)
}

// A time quota used up has the SMF sent a Usage Report with TIMQU
// (§8.2.41 octet 6 bit 2), and the URR lets nothing more through.
func TestTimeQuotaReport(t *testing.T) {
	e := newTrafficEnv(t)
	e.establishUplink(t, 0, createURR(1, mmVOLUM|mmDURAT, rtgTIMQU, timeQuota(1), measurementInformation(0x10)))
	const n = 10
	e.timedReport(t, rtgTIMQU, n)
	if got := e.sendUplink(t, n); got != n {
		t.Errorf("after the time quota the DN received %d more packets, want none", got-n)
	}
}

// timedReport sends n uplink packets to a URR whose time limit is a second
// and checks the Usage Report it then sends: its trigger, the packets'
// volume, and a Duration Measurement of at least the second, at most what
// elapsed, and the whole seconds between its Time of First Packet and its
// End Time (both truncated to the second, so one less at worst).
func (e *trafficEnv) timedReport(t *testing.T, trigger uint32, n uint64) {
	t.Helper()
	start := time.Now()
	if got := e.sendUplink(t, n); got != n {
		t.Fatalf("the DN received %d of %d packets", got, n)
	}
	u := e.usageReport(t)
	elapsed := time.Since(start)
	if u.trigger != trigger {
		t.Errorf("usage report trigger %#x, want %#x", u.trigger, trigger)
	}
	checkUplinkVolume(t, u, n)
	between := u.end - u.firstPacket
	if !u.hasDuration || u.duration < 1 || time.Duration(u.duration)*time.Second > elapsed ||
		u.firstPacket == 0 || u.duration > between || u.duration+1 < between {
		t.Errorf("duration %d s (present: %v), first packet at %d, end at %d; want 1 s or more, within %v",
			u.duration, u.hasDuration, u.firstPacket, u.end, elapsed)
	}
}

// Outer Header Removal 6 (GTP-U/UDP/IP, §8.2.64) leaves the tunnel's IP
// version open: on this IPv4 N3 it decapsulates as 0 does.
func TestOuterHeaderRemovalGTPUUDPIP(t *testing.T) {
	e := newTrafficEnv(t)
	e.establishUplink(t, 6)
	const n = 20
	if got := e.sendUplink(t, n); got != n {
		t.Errorf("the DN received %d of %d packets", got, n)
	}
	// The DN's sink matches UDP to the application's port: inner packets.
	sample, err := e.tb.DNSink.Sample()
	fatalIf(t, err)
	if len(sample) != 14+len(uplinkPacket) {
		t.Errorf("the DN received a %d-byte frame, want Ethernet and the %d-byte inner packet", len(sample), len(uplinkPacket))
	}
}

// resolved says a next-hop slot for dst is valid.
func resolved(slots []nexthop.Slot, dst netip.Addr) bool {
	return slices.ContainsFunc(slots, func(s nexthop.Slot) bool { return s.Dst == dst && s.Valid })
}

// Real uplink traffic across a Session Modification that writes the
// session's rules again (Update PDR): the PDR's counters in `xdp5g sessions
// get` count on from the packets before it, and the URR reports them all.
func TestPDRCountersAcrossModification(t *testing.T) {
	e := newTrafficEnv(t)
	seid := e.establishUplink(t, 0, createURR(1, mmVOLUM, rtgPERIO, measurementPeriod(3600), measurementInformation(0x10)))
	const n = 20
	counted := func(want uint64, when string) {
		t.Helper()
		c, err := e.upf.Store.PDRCounters(seid)
		fatalIf(t, err)
		if c[1].Packets != want || c[1].Bytes == 0 {
			t.Errorf("%s: PDR 1 counted %+v, want %d packets", when, c[1], want)
		}
	}
	e.sendUplink(t, n)
	counted(n, "before the modification")
	e.modify("smf", seid, updatePDR(pdrID(1), precedence(100))).expect(t, causeAccepted, nil, nil)
	counted(n, "right after the modification")
	e.sendUplink(t, n)
	counted(2*n, "after the modification")
	r := e.modify("smf", seid, queryURR(1))
	r.expect(t, causeAccepted, nil, nil)
	checkUplinkVolume(t, decodeUsage(t, one(t, r.ies, tUsageReportModResp)), 2*n)
}

// A PDR removed and created again with the same ID in one Session
// Modification Request is another PDR: its counters start at zero, while
// the URR it names counts on. A URR removed and created again likewise:
// the response reports what the old one counted since its last report,
// the new one counts only what follows.
func TestRulesCreatedAgainCountFromZero(t *testing.T) {
	e := newTrafficEnv(t)
	volumeURR := createURR(1, mmVOLUM, rtgPERIO, measurementPeriod(3600), measurementInformation(0x10))
	seid := e.establishUplink(t, 0, volumeURR)
	const n = 20
	counted := func(want uint64, when string) {
		t.Helper()
		c, err := e.upf.Store.PDRCounters(seid)
		fatalIf(t, err)
		if c[1].Packets != want || c[1].Bytes != want*uint64(len(uplinkPacket)) {
			t.Errorf("%s: PDR 1 counted %+v, want %d packets", when, c[1], want)
		}
	}
	queried := func(want uint64) {
		t.Helper()
		r := e.modify("smf", seid, queryURR(1))
		r.expect(t, causeAccepted, nil, nil)
		checkUplinkVolume(t, decodeUsage(t, one(t, r.ies, tUsageReportModResp)), want)
	}
	e.sendUplink(t, n)
	e.modify("smf", seid, removePDR(1), createPDR(pdrID(1), precedence(255), pdi(sourceInterface(ifAccess),
		fteid(demo.UplinkTEID, demo.N3Addr.String()), ueIPv4(demo.UEAddr.String(), false)), outerHeaderRemoval(0), farID(1), urrID(1))).
		expect(t, causeAccepted, nil, nil)
	counted(0, "created again")
	e.sendUplink(t, n)
	counted(n, "created again, after traffic")
	queried(2 * n) // and starts over, as every report

	e.sendUplink(t, n)
	r := e.modify("smf", seid, removeURR(1), volumeURR)
	r.expect(t, causeAccepted, nil, nil)
	checkUplinkVolume(t, decodeUsage(t, one(t, r.ies, tUsageReportModResp)), n)
	e.sendUplink(t, n)
	queried(n)
	counted(3*n, "after its URR was created again")
}
