package upfxdp

import (
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
)

// URR slots of the tests.
const (
	testURR  = 1 // on the PDRs of urrTest
	otherURR = 2
)

// urrPDRs points uplink pdrRoute (teidRoute) and downlink pdrDownVLAN (ue4b)
// of the test rules at the given URR slots.
func urrPDRs(t *testing.T, d *Datapath, urrs ...uint32) {
	t.Helper()
	var u [URRsPerPDR]uint32
	copy(u[:], urrs)
	for _, slot := range []uint32{pdrRoute, pdrDownVLAN} {
		changePDR(t, d, slot, func(p *PDR) { p.Urr = u })
	}
}

// urrTest is the test rules with testURR on urrPDRs, an uplink
// and a downlink frame whose inner packets are inner bytes long, and the
// event ring.
type urrTest struct {
	*upf
	events   *URREventReader
	up, down []byte
	inner    uint64
}

func newURRTest(t *testing.T, l URRLimits) *urrTest {
	t.Helper()
	u := newUPF(t, RoleAccess|RoleCore)
	check(t, u.d.ResetURR(testURR, l))
	urrPDRs(t, u.d, testURR)
	r, err := u.d.URREvents()
	check(t, err)
	t.Cleanup(func() { r.Close() })
	up := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 20}.bytes(t)
	down := ipPacket{src: dn4, dst: ue4b, ttl: 64, size: 20}
	return &urrTest{upf: u, events: r, up: gtpFrame(t, fromGNB, n3Addr, gpdu(teidRoute), up),
		down: down.frame(t, fromDN), inner: uint64(len(up))}
}

// sent returns the events sent since the last call.
func (u *urrTest) sent(t *testing.T) []URREvent {
	t.Helper()
	u.events.rd.SetDeadline(time.Now())
	var evs []URREvent
	for {
		ev, err := u.events.Read()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return evs
		}
		check(t, err)
		evs = append(evs, ev)
	}
}

// wantSent stops a test unless the events sent since the last call are
// want; when says when they were sent.
func (u *urrTest) wantSent(t *testing.T, when string, want ...URREvent) {
	t.Helper()
	if got := u.sent(t); !slices.Equal(got, want) {
		t.Fatalf("events %s: %v, want %v", when, got, want)
	}
}

func (u *urrTest) usage(t *testing.T, slot uint32) URRUsage {
	t.Helper()
	usage, err := u.d.URRUsage(slot)
	check(t, err)
	return usage
}

func equalCounts(t *testing.T, got, want URRUsage) {
	t.Helper()
	if got.Bytes != want.Bytes || got.Packets != want.Packets {
		t.Errorf("usage: bytes %v packets %v, want bytes %v packets %v", got.Bytes, got.Packets, want.Bytes, want.Packets)
	}
}

// Both URRs of a PDR count the inner packets of both directions, IPv4 and
// IPv6, from the first packet's time to the last one's.
func TestURRCounts(t *testing.T) {
	u := newUPF(t, RoleAccess|RoleCore)
	for _, slot := range []uint32{testURR, otherURR} {
		check(t, u.d.ResetURR(slot, URRLimits{}))
		if got, err := u.d.URRUsage(slot); err != nil || got != (URRUsage{}) {
			t.Fatalf("slot %d before any packet: %+v, %v", slot, got, err)
		}
	}
	urrPDRs(t, u.d, testURR, otherURR)
	var want URRUsage
	count := func(dir int, inner []byte) {
		for _, i := range []int{URRTotal, dir} {
			want.Bytes[i] += uint64(len(inner))
			want.Packets[i]++
		}
	}
	start := time.Now()
	for _, p := range []ipPacket{
		{src: ue4, dst: dn4, ttl: 64, size: 20},
		{src: ue4, dst: dn4, ttl: 64, size: 1000},
		{src: ue6, dst: dn6, ttl: 64, size: 3},
	} {
		u.expect(t, gtpFrame(t, fromGNB, n3Addr, gpdu(teidRoute), p.bytes(t)), xdplink.Redirect, "uplink_forward")
		count(URRUplink, p.bytes(t))
	}
	time.Sleep(50 * time.Millisecond)
	for _, size := range []int{50, 7} {
		p := ipPacket{src: dn4, dst: ue4b, ttl: 64, size: size}
		u.expect(t, p.frame(t, fromDN), xdplink.Redirect, "downlink_forward")
		count(URRDownlink, p.bytes(t))
	}
	end := time.Now()
	for _, slot := range []uint32{testURR, otherURR} {
		got, err := u.d.URRUsage(slot)
		check(t, err)
		equalCounts(t, got, want)
		if got.FirstPacket.Before(start.Add(-tick)) || got.LastPacket.After(end.Add(tick)) ||
			got.LastPacket.Sub(got.FirstPacket) < 50*time.Millisecond-tick {
			t.Errorf("slot %d: first packet %v, last %v; sent from %v to %v", slot, got.FirstPacket, got.LastPacket, start, end)
		}
		// Read again, the times stay where they were (but for a read that
		// a busy host stops between its two clocks).
		moved := 0
		for range 20 {
			time.Sleep(1300 * time.Microsecond)
			again, err := u.d.URRUsage(slot)
			check(t, err)
			if again.FirstPacket.Sub(got.FirstPacket).Abs() > 200*time.Microsecond {
				moved++
			}
		}
		if moved > 5 {
			t.Errorf("slot %d: the first packet's time moved in %d of 20 reads", slot, moved)
		}
	}
}

// The packet that reaches or crosses a threshold sends one event; the
// total counts both directions.
func TestURRThreshold(t *testing.T) {
	var l URRLimits
	u := newURRTest(t, l)
	l.Threshold[URRUplink] = u.inner              // reached by the first packet
	l.Threshold[URRTotal] = 2*u.inner + u.inner/2 // crossed by the third
	check(t, u.d.SetURRLimits(testURR, l))
	for i, in := range [][]byte{u.up, u.down, u.up, u.down, u.up} {
		if i%2 == 0 {
			u.expect(t, in, xdplink.Redirect, "uplink_forward")
		} else {
			u.expect(t, in, xdplink.Redirect, "downlink_forward")
		}
		var want []URREvent
		if i == 0 || i == 2 {
			want = []URREvent{{Slot: testURR, Kind: URREventThreshold}}
		}
		if got := u.sent(t); !slices.Equal(got, want) {
			t.Errorf("packet %d: events %v, want %v", i+1, got, want)
		}
	}
}

// A packet that would exceed a quota is dropped and counts nowhere; the
// quota is reported once, by the first packet it drops when none reaches
// it exactly, and again once new limits are written.
func TestURRQuotaDrops(t *testing.T) {
	var l URRLimits
	u := newURRTest(t, l)
	l.Quota[URRUplink] = 2*u.inner + u.inner/2
	check(t, u.d.SetURRLimits(testURR, l))
	u.expect(t, u.up, xdplink.Redirect, "uplink_forward")
	u.expect(t, u.up, xdplink.Redirect, "uplink_forward")
	u.wantSent(t, "before the quota")
	u.expect(t, u.up, xdplink.Drop, "drop_urr_quota")
	u.expect(t, u.up, xdplink.Drop, "drop_urr_quota")
	u.expect(t, u.down, xdplink.Redirect, "downlink_forward") // no downlink quota
	u.wantSent(t, "after the quota", URREvent{Slot: testURR, Kind: URREventQuota})
	equalCounts(t, u.usage(t, testURR), URRUsage{Bytes: [3]uint64{3 * u.inner, 2 * u.inner, u.inner}, Packets: [3]uint64{3, 2, 1}})
	if c, err := u.d.PDRCounter(pdrRoute); err != nil || c.Packets != 2 {
		t.Errorf("PDR counter %+v, %v: want the 2 packets let through", c, err)
	}
	check(t, u.d.SetURRLimits(testURR, l))
	u.expect(t, u.up, xdplink.Drop, "drop_urr_quota")
	u.wantSent(t, "after the limits were written again", URREvent{Slot: testURR, Kind: URREventQuota})
}

// The packet that reaches a quota exactly goes through and reports it; the
// next one is dropped without another report.
func TestURRQuotaReached(t *testing.T) {
	var l URRLimits
	u := newURRTest(t, l)
	l.Quota[URRTotal] = 3 * u.inner
	check(t, u.d.SetURRLimits(testURR, l))
	u.expect(t, u.up, xdplink.Redirect, "uplink_forward")
	u.expect(t, u.down, xdplink.Redirect, "downlink_forward")
	u.wantSent(t, "before the quota")
	u.expect(t, u.down, xdplink.Redirect, "downlink_forward")
	u.wantSent(t, "of the packet reaching the quota", URREvent{Slot: testURR, Kind: URREventQuota})
	u.expect(t, u.up, xdplink.Drop, "drop_urr_quota")
	u.expect(t, u.down, xdplink.Drop, "drop_urr_quota")
	u.wantSent(t, "after the quota was reported")
	equalCounts(t, u.usage(t, testURR), URRUsage{Bytes: [3]uint64{3 * u.inner, u.inner, 2 * u.inner}, Packets: [3]uint64{3, 1, 2}})
}

// NotifyStart sends an event with the next packet only; SetURRLimits keeps
// the counts and ResetURR zeroes them.
func TestURRNotifyStartAndReset(t *testing.T) {
	u := newURRTest(t, URRLimits{NotifyStart: true})
	start := []URREvent{{Slot: testURR, Kind: URREventStart}}
	u.expect(t, u.up, xdplink.Redirect, "uplink_forward")
	u.wantSent(t, "of the first packet", start...)
	u.expect(t, u.down, xdplink.Redirect, "downlink_forward")
	u.wantSent(t, "of the second packet")
	check(t, u.d.SetURRLimits(testURR, URRLimits{NotifyStart: true}))
	u.expect(t, u.up, xdplink.Redirect, "uplink_forward")
	u.wantSent(t, "after NotifyStart was set again", start...)
	equalCounts(t, u.usage(t, testURR), URRUsage{Bytes: [3]uint64{3 * u.inner, 2 * u.inner, u.inner}, Packets: [3]uint64{3, 2, 1}})

	check(t, u.d.ResetURR(testURR, URRLimits{}))
	if got := u.usage(t, testURR); got != (URRUsage{}) {
		t.Fatalf("after ResetURR: %+v", got)
	}
	u.expect(t, u.down, xdplink.Redirect, "downlink_forward")
	equalCounts(t, u.usage(t, testURR), URRUsage{Bytes: [3]uint64{u.inner, 0, u.inner}, Packets: [3]uint64{1, 0, 1}})
	u.wantSent(t, "after ResetURR without NotifyStart")
}

// What a FAR drops is no usage, whatever the URR's limits.
func TestURRFARDrop(t *testing.T) {
	u := newURRTest(t, URRLimits{NotifyStart: true, Quota: [3]uint64{1, 1, 1}, Threshold: [3]uint64{1, 1, 1}})
	for _, slot := range []uint32{pdrFARDrop, pdrDownFARDrop} {
		changePDR(t, u.d, slot, func(p *PDR) { p.Urr = [URRsPerPDR]uint32{testURR} })
	}
	p := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 20}
	u.expect(t, gtpFrame(t, fromGNB, n3Addr, gpdu(teidFARDrop), p.bytes(t)), xdplink.Drop, "drop_far")
	u.expect(t, ipPacket{src: dn4, dst: ue4FARDrop, ttl: 64}.frame(t, fromDN), xdplink.Drop, "drop_far")
	if got := u.usage(t, testURR); got != (URRUsage{}) {
		t.Errorf("usage %+v", got)
	}
	if got := u.sent(t); len(got) != 0 {
		t.Errorf("events %v", got)
	}
	if c, err := u.d.PDRCounter(pdrFARDrop); err != nil || c.Packets != 1 {
		t.Errorf("PDR counter %+v, %v: a FAR's drop still counts as matched", c, err)
	}
}

// A URR measuring before QoS enforcement (URRBeforeQoS) counts what the
// PDR's QERs and FAR then drop; the PDR's other URR counts only what it
// forwards. Its quota drops before the QERs take any tokens.
func TestURRBeforeQoS(t *testing.T) {
	u := newURRTest(t, URRLimits{})
	check(t, u.d.ResetURR(otherURR, URRLimits{}))
	urrPDRs(t, u.d, otherURR, testURR)
	changePDR(t, u.d, pdrRoute, func(p *PDR) { p.Flags |= URRBeforeQoS }) // uplink: otherURR (index 0) before QoS
	check(t, u.d.PutQER(qerUpClosed, QER{GateClosed: 1 << QERUplink}))
	qerPDRs(t, u.d, qerUpClosed)
	one := func(dir int) URRUsage {
		var c URRUsage
		for _, i := range []int{URRTotal, dir} {
			c.Bytes[i], c.Packets[i] = u.inner, 1
		}
		return c
	}

	u.expect(t, u.up, xdplink.Drop, "drop_qer_gate")
	equalCounts(t, u.usage(t, otherURR), one(URRUplink))
	equalCounts(t, u.usage(t, testURR), URRUsage{})
	// Downlink pdrDownVLAN has no URR before QoS: both count after its QERs.
	u.expect(t, u.down, xdplink.Redirect, "downlink_forward")
	equalCounts(t, u.usage(t, testURR), one(URRDownlink))

	check(t, u.d.ResetURR(otherURR, URRLimits{Quota: [3]uint64{URRUplink: u.inner / 2}}))
	var empty QER // an uplink bucket that holds nothing: the MBR would drop too
	empty.Bucket[QERUplink] = QERBucket(1, 0)
	check(t, u.d.PutQER(qerUpClosed, empty))
	u.expect(t, u.up, xdplink.Drop, "drop_urr_quota")
	if c, err := u.d.PDRCounter(pdrRoute); err != nil || c != (Counter{}) {
		t.Errorf("PDR counter %+v, %v: neither the gate's drop nor the quota's counts", c, err)
	}
}

// Events the ring has no room for are counted, never silently lost.
func TestURREventsLost(t *testing.T) {
	u := newURRTest(t, URRLimits{})
	const sent = 256*1024/16 + 10 // the ring holds 16-byte records
	for range sent {
		check(t, u.d.SetURRLimits(testURR, URRLimits{NotifyStart: true}))
		if act, _ := u.run(t, u.up); act != xdplink.Redirect {
			t.Fatalf("verdict %v", act)
		}
	}
	lost, err := u.d.URREventsLost()
	check(t, err)
	if read := len(u.sent(t)); lost == 0 || uint64(read)+lost != sent {
		t.Fatalf("%d events read and %d lost, %d sent", read, lost, sent)
	}
}

// Close ends a blocked Read with os.ErrClosed, and every Read after it.
func TestURREventReaderClose(t *testing.T) {
	u := newURRTest(t, URRLimits{})
	done := make(chan error)
	go func() {
		_, err := u.events.Read()
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	check(t, u.events.Close())
	if err := <-done; !errors.Is(err, os.ErrClosed) {
		t.Fatalf("blocked Read: %v", err)
	}
	if _, err := u.events.Read(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
}

func TestURRSlotBounds(t *testing.T) {
	d := openTest(t, Options{MaxSessions: 64})
	for _, slot := range []uint32{0, d.URRCapacity()} {
		if err := d.ResetURR(slot, URRLimits{}); err == nil {
			t.Errorf("ResetURR(%d) accepted", slot)
		}
		if _, err := d.URRUsage(slot); err == nil {
			t.Errorf("URRUsage(%d) accepted", slot)
		}
	}
}

// A URR without limits counts in each CPU's row, and its usage is their
// sum; with limits it counts in its shared counters, where the packet
// that crosses one sees what every CPU counted before, in the rows too;
// without them again, it counts in the rows, and its usage is the sum of
// both. ResetURR zeroes it on every CPU.
func TestURRCountsOnEveryCPU(t *testing.T) {
	testCPUs(t)
	u := newURRTest(t, URRLimits{})
	var want URRUsage
	send := func(cpu int, dir int, act xdplink.Action, reason string) {
		t.Helper()
		in := map[int][]byte{URRUplink: u.up, URRDownlink: u.down}[dir]
		onCPU(t, cpu, func() { u.expect(t, in, act, reason) })
		if act == xdplink.Redirect {
			for _, i := range []int{URRTotal, dir} {
				want.Bytes[i] += u.inner
				want.Packets[i]++
			}
		}
	}
	forward := func(cpu, dir int) {
		t.Helper()
		send(cpu, dir, xdplink.Redirect, map[int]string{URRUplink: "uplink_forward", URRDownlink: "downlink_forward"}[dir])
	}
	// row is what CPU cpu counted of testURR: packets up and down.
	row := func(cpu int) [2]uint64 {
		c := u.d.usageLine(uint32(cpu), testURR).Count.Dir
		if c[0].Bytes != c[0].Packets*u.inner || c[1].Bytes != c[1].Packets*u.inner {
			t.Fatalf("CPU %d counted %v, not packets of %d bytes", cpu, c, u.inner)
		}
		return [2]uint64{c[0].Packets, c[1].Packets}
	}
	forward(0, URRUplink)
	forward(0, URRUplink)
	forward(1, URRDownlink)
	forward(1, URRUplink)
	equalCounts(t, u.usage(t, testURR), want)
	if r0, r1 := row(0), row(1); r0 != [2]uint64{2, 0} || r1 != [2]uint64{1, 1} {
		t.Fatalf("rows of CPU 0 %v and CPU 1 %v: not what each counted", r0, r1)
	}

	// 4 packets so far, 3 of them uplink: the sixth crosses the
	// threshold, the sixth uplink packet reaches the quota.
	var l URRLimits
	l.Threshold[URRTotal] = 5*u.inner + u.inner/2
	l.Quota[URRUplink] = 6 * u.inner
	check(t, u.d.SetURRLimits(testURR, l))
	forward(0, URRDownlink)
	u.wantSent(t, "before the threshold")
	forward(1, URRUplink)
	u.wantSent(t, "of the packet crossing the threshold", URREvent{Slot: testURR, Kind: URREventThreshold})
	forward(0, URRUplink)
	forward(1, URRUplink)
	u.wantSent(t, "of the packet reaching the quota", URREvent{Slot: testURR, Kind: URREventQuota})
	send(0, URRUplink, xdplink.Drop, "drop_urr_quota")
	send(1, URRUplink, xdplink.Drop, "drop_urr_quota")
	u.wantSent(t, "after the quota")
	equalCounts(t, u.usage(t, testURR), want)
	if r0, r1 := row(0), row(1); r0 != [2]uint64{} || r1 != [2]uint64{} {
		t.Fatalf("rows of CPU 0 %v and CPU 1 %v: not moved into the shared counters, or counted with limits", r0, r1)
	}

	check(t, u.d.SetURRLimits(testURR, URRLimits{}))
	forward(0, URRUplink)
	forward(1, URRDownlink)
	equalCounts(t, u.usage(t, testURR), want)
	if r0, r1 := row(0), row(1); r0 != [2]uint64{1, 0} || r1 != [2]uint64{0, 1} {
		t.Fatalf("rows of CPU 0 %v and CPU 1 %v: limits gone, the rows count again", r0, r1)
	}

	// Reopened, as by a restarted daemon: the pinned maps keep the counts.
	again, err := Open(u.d.opts)
	check(t, err)
	defer again.Close()
	got, err := again.URRUsage(testURR)
	check(t, err)
	equalCounts(t, got, want)

	check(t, u.d.ResetURR(testURR, URRLimits{}))
	if got := u.usage(t, testURR); got != (URRUsage{}) || row(0) != [2]uint64{} || row(1) != [2]uint64{} {
		t.Fatalf("after ResetURR: %+v, rows %v %v", got, row(0), row(1))
	}
}
