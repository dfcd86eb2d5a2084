package upfxdp

import (
	"testing"
	"time"

	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
)

// The coarse clock lags by up to a tick.
const tick = 20 * time.Millisecond

// apart sends an uplink packet on CPU 0, then, 100 ms later, frame on
// cpu, which the program forwards for reason; it returns when it started,
// when it sent frame and when it was done.
func (u *urrTest) apart(t *testing.T, cpu int, frame []byte, reason string) (first, last, end time.Time) {
	t.Helper()
	first = time.Now()
	onCPU(t, 0, func() { u.expect(t, u.up, xdplink.Redirect, "uplink_forward") })
	time.Sleep(100 * time.Millisecond)
	last = time.Now()
	onCPU(t, cpu, func() { u.expect(t, frame, xdplink.Redirect, reason) })
	return first, last, time.Now()
}

// A URR's times are the CPUs' together: the first packet's of any CPU,
// the last packet's of any; a reopened data path reads the same.
func TestURRTimesOnEveryCPU(t *testing.T) {
	testCPUs(t)
	u := newURRTest(t, URRLimits{})
	first, last, end := u.apart(t, 1, u.down, "downlink_forward")
	got := u.usage(t, testURR)
	if got.FirstPacket.Before(first.Add(-tick)) || got.FirstPacket.After(last) ||
		got.LastPacket.Before(last.Add(-tick)) || got.LastPacket.After(end.Add(tick)) {
		t.Errorf("first packet %v, last %v: want CPU 0's at %v, CPU 1's at %v", got.FirstPacket, got.LastPacket, first, last)
	}
	if u.d.usageLine(0, testURR).LastPacket >= u.d.usageLine(1, testURR).LastPacket {
		t.Errorf("usage lines' last packets %d (CPU 0) and %d (CPU 1): each not its own",
			u.d.usageLine(0, testURR).LastPacket, u.d.usageLine(1, testURR).LastPacket)
	}

	again, err := Open(u.d.opts)
	check(t, err)
	defer again.Close()
	reread, err := again.URRUsage(testURR)
	check(t, err)
	if d := reread.LastPacket.Sub(got.LastPacket); reread.Bytes != got.Bytes || d < -tick || d > tick ||
		reread.FirstPacket.Sub(got.FirstPacket) > tick {
		t.Errorf("reopened: %+v, want %+v", reread, got)
	}

	check(t, u.d.ResetURR(testURR, URRLimits{}))
	onCPU(t, 1, func() { u.expect(t, u.up, xdplink.Redirect, "uplink_forward") })
	if got := u.usage(t, testURR); got.FirstPacket.Before(end.Add(-tick)) {
		t.Errorf("after ResetURR, first packet %v: before the reset at %v", got.FirstPacket, end)
	}
}

// One program's packets on one CPU a while apart: the last packet's time
// moves with the clock, which the program reads once a tick.
func TestURRLastPacketFollowsTheClock(t *testing.T) {
	u := newURRTest(t, URRLimits{})
	_, last, end := u.apart(t, 0, u.up, "uplink_forward")
	got := u.usage(t, testURR)
	if got.LastPacket.Before(last.Add(-tick)) || got.LastPacket.After(end.Add(tick)) {
		t.Errorf("last packet %v, want between %v and %v (first packet %v)", got.LastPacket, last, end, got.FirstPacket)
	}
}

// NotifyStart sends one event, from the first packet of whichever CPU,
// though every CPU's usage line says to look.
func TestURRNotifyStartOnEveryCPU(t *testing.T) {
	testCPUs(t)
	u := newURRTest(t, URRLimits{NotifyStart: true})
	onCPU(t, 1, func() { u.expect(t, u.up, xdplink.Redirect, "uplink_forward") })
	u.wantSent(t, "of the first packet", URREvent{Slot: testURR, Kind: URREventStart})
	onCPU(t, 0, func() { u.expect(t, u.up, xdplink.Redirect, "uplink_forward") })
	onCPU(t, 1, func() { u.expect(t, u.up, xdplink.Redirect, "uplink_forward") })
	u.wantSent(t, "of the packets after it, on both CPUs")
	for cpu := range uint32(2) {
		if f := u.d.usageLine(cpu, testURR).Flags; f&lineURRNotifyStart != 0 || f&lineURRKnown == 0 {
			t.Errorf("CPU %d's usage line: flags %#x, want the URR known and its notification gone", cpu, f)
		}
	}
}

// What a build before the usage lines counted in urr_counts is part of a
// URR's usage, until a reset; limits move it into the shared counters
// with the lines'.
func TestURRCountsOfAPreviousBuild(t *testing.T) {
	u := newURRTest(t, URRLimits{})
	before := u.d.urrCountRows.at(1*u.d.pdrs.len() + testURR)
	before.Dir[URRDownlink-URRUplink] = upfCounter{Packets: 2, Bytes: 2 * u.inner}
	u.expect(t, u.up, xdplink.Redirect, "uplink_forward")
	want := URRUsage{Bytes: [3]uint64{3 * u.inner, u.inner, 2 * u.inner}, Packets: [3]uint64{3, 1, 2}}
	equalCounts(t, u.usage(t, testURR), want)

	check(t, u.d.SetURRLimits(testURR, URRLimits{Threshold: [3]uint64{100 * u.inner}}))
	if *before != (upfUrrCount{}) {
		t.Errorf("the previous build's row after limits: %+v, not moved", *before)
	}
	equalCounts(t, u.usage(t, testURR), want)
	check(t, u.d.ResetURR(testURR, URRLimits{}))
	equalCounts(t, u.usage(t, testURR), URRUsage{})
}

// A QER's gates hold whether the CPUs' usage lines say them (PutQER writes
// them) or not (as the maps of a build before the lines leave them: the
// packet reads the QER), and so does its rate.
func TestQERWithoutUsageLines(t *testing.T) {
	u := newUPF(t, RoleAccess|RoleCore)
	up := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 20}
	inner := uint64(len(up.bytes(t)))
	upFrame := gtpFrame(t, fromGNB, n3Addr, gpdu(teidRoute), up.bytes(t))
	downFrame := ipPacket{src: dn4, dst: ue4b, ttl: 64, size: 20}.frame(t, fromDN)
	check(t, u.d.PutQER(qerUpClosed, QER{GateClosed: 1 << QERUplink}))
	// Downlink: ten packets' bucket, refilled at a byte a second.
	check(t, u.d.PutQER(qerClosed, QER{Bucket: [2]upfTokenBucket{{}, QERBucket(1, 10*inner)}}))
	qerPDRs(t, u.d, qerUpClosed, qerClosed)
	for cpu := range u.d.counterRows() {
		for _, q := range []struct {
			slot  uint32
			flags uint64
		}{
			{qerUpClosed, lineQERKnown | lineGateClosed<<QERUplink},
			{qerClosed, lineQERKnown | lineMBR<<QERDownlink},
		} {
			if got := u.d.usageLine(cpu, q.slot).Flags; got != q.flags {
				t.Errorf("QER %d, CPU %d: usage line flags %#x, want %#x", q.slot, cpu, got, q.flags)
			}
			setLineFlags(u.d.usageLine(cpu, q.slot), lineQERFlags, 0)
		}
	}
	u.expect(t, upFrame, xdplink.Drop, "drop_qer_gate")
	for range 10 {
		u.expect(t, downFrame, xdplink.Redirect, "downlink_forward")
	}
	u.expect(t, downFrame, xdplink.Drop, "drop_qer_mbr")
}

// A PDR's QER and URR of one slot share a line, which a packet reads in
// one pass: the QER's rate and gates hold, the URR counts what they and
// the FAR let through, and the PDR what they let through.
func TestQERAndURROfOneLine(t *testing.T) {
	u := newURRTest(t, URRLimits{})
	// The bucket holds 100 packets and gives the CPU a chunk of it (6.25
	// packets) to start with; a CPU takes a chunk more than it needs each
	// time it runs short, and its packets spend that credit in the pass.
	const packets = 100
	limited := QER{Bucket: [2]upfTokenBucket{QERBucket(1, packets*u.inner)}}
	check(t, u.d.PutQER(testURR, limited))
	qerPDRs(t, u.d, testURR)
	var passed uint64
	onCPU(t, 0, func() {
		for range 120 {
			if act, _ := u.run(t, u.up); act == xdplink.Redirect {
				passed++
			}
		}
	})
	if want := uint64(packets + packets>>qerChunkShift); passed != want {
		t.Errorf("%d of 120 uplink packets through a bucket of %d and its chunk, want %d", passed, packets, want)
	}
	for range 3 {
		u.expect(t, u.down, xdplink.Redirect, "downlink_forward")
	}
	var want URRUsage
	count := func(dir int, n uint64) {
		for _, i := range []int{URRTotal, dir} {
			want.Packets[i] += n
			want.Bytes[i] += n * u.inner
		}
	}
	count(URRUplink, passed)
	count(URRDownlink, 3)
	equalCounts(t, u.usage(t, testURR), want)
	if c, err := u.d.PDRCounter(pdrRoute); err != nil || c.Packets != passed {
		t.Errorf("PDR counter %+v, %v: want the %d packets the rate let through", c, err, passed)
	}

	check(t, u.d.PutQER(testURR, QER{GateClosed: 1 << QERDownlink}))
	u.expect(t, u.down, xdplink.Drop, "drop_qer_gate")
	u.expect(t, u.up, xdplink.Redirect, "uplink_forward")
	count(URRUplink, 1)
	equalCounts(t, u.usage(t, testURR), want)

	changePDR(t, u.d, pdrFARDrop, func(p *PDR) {
		p.Qer = [QERsPerPDR]uint32{testURR}
		p.Urr = [URRsPerPDR]uint32{testURR}
	})
	p := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 20}
	u.expect(t, gtpFrame(t, fromGNB, n3Addr, gpdu(teidFARDrop), p.bytes(t)), xdplink.Drop, "drop_far")
	equalCounts(t, u.usage(t, testURR), want)
	if c, err := u.d.PDRCounter(pdrFARDrop); err != nil || c.Packets != 1 {
		t.Errorf("PDR counter %+v, %v: a FAR's drop still counts as matched", c, err)
	}
}
