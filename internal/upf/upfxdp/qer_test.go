package upfxdp

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
)

// qerBurst is how long a QER's bucket lets a flow send at line rate, as
// the session layer sizes it.
const qerBurst = 40 * time.Millisecond

// QER slots of the tests.
const (
	qerOpen     = iota + 1 // open, no maximum bit rate
	qerUpClosed            // uplink gate closed
	qerClosed              // both gates closed
	qerLimited  = qerOpen  // a maximum bit rate
)

// qerPDRs points uplink pdrRoute (teidRoute) and downlink pdrDownVLAN (ue4b)
// of the test rules at the given QER slots, their counters zeroed.
func qerPDRs(t *testing.T, d *Datapath, qers ...uint32) {
	t.Helper()
	var q [QERsPerPDR]uint32
	copy(q[:], qers)
	check(t, d.ZeroPDRCounters([]uint32{pdrRoute, pdrDownVLAN}))
	for _, slot := range []uint32{pdrRoute, pdrDownVLAN} {
		changePDR(t, d, slot, func(p *PDR) { p.Qer = q })
	}
}

// Every QER of a PDR applies, in the packet's direction: a closed uplink
// gate drops uplink packets and lets downlink ones through.
func TestQERGates(t *testing.T) {
	u := newUPF(t, RoleAccess|RoleCore)
	check(t, u.d.PutQER(qerOpen, QER{}))
	check(t, u.d.PutQER(qerUpClosed, QER{GateClosed: 1 << QERUplink}))
	check(t, u.d.PutQER(qerClosed, QER{GateClosed: 1<<QERUplink | 1<<QERDownlink}))
	up := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 20}
	down := ipPacket{src: dn4, dst: ue4b, ttl: 64, size: 20}
	upFrame := gtpFrame(t, fromGNB, n3Addr, gpdu(teidRoute), up.bytes(t))
	downFrame := down.frame(t, fromDN)

	qerPDRs(t, u.d, qerOpen)
	u.expect(t, upFrame, xdplink.Redirect, "uplink_forward")
	u.expect(t, downFrame, xdplink.Redirect, "downlink_forward")
	qerPDRs(t, u.d, qerOpen, qerUpClosed)
	u.expect(t, upFrame, xdplink.Drop, "drop_qer_gate")
	u.expect(t, downFrame, xdplink.Redirect, "downlink_forward")
	qerPDRs(t, u.d, qerClosed)
	u.expect(t, upFrame, xdplink.Drop, "drop_qer_gate")
	u.expect(t, downFrame, xdplink.Drop, "drop_qer_gate")
	if c, err := u.d.PDRCounter(pdrRoute); err != nil || c.Packets != 0 {
		t.Errorf("PDR counter after gated packets: %+v, %v (the gate comes first)", c, err)
	}
}

// The uplink bucket holds ten packets: the eleventh packet in a row is
// dropped, the downlink (no maximum bit rate set) is not limited, and a
// rewritten QER starts with a full bucket. The bucket refills at a byte a
// second and the packets are large, so that no pause of the test lets
// another through: what is left after the tenth would take minutes to
// grow into one.
func TestQERMaximumBitRate(t *testing.T) {
	u := newUPF(t, RoleAccess|RoleCore)
	up := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 1400}
	inner := uint64(len(up.bytes(t)))
	limited := QER{Bucket: [2]upfTokenBucket{QERBucket(1, 10*inner)}}
	check(t, u.d.PutQER(qerLimited, limited))
	qerPDRs(t, u.d, qerLimited)
	upFrame := gtpFrame(t, fromGNB, n3Addr, gpdu(teidRoute), up.bytes(t))
	for range 10 {
		u.expect(t, upFrame, xdplink.Redirect, "uplink_forward")
	}
	for range 3 {
		u.expect(t, upFrame, xdplink.Drop, "drop_qer_mbr")
	}
	if c, err := u.d.PDRCounter(pdrRoute); err != nil || c.Packets != 10 || c.Bytes != 10*inner {
		t.Errorf("PDR counter: %+v, %v; want the 10 packets let through", c, err)
	}
	down := ipPacket{src: dn4, dst: ue4b, ttl: 64, size: 20}.frame(t, fromDN)
	for range 12 {
		u.expect(t, down, xdplink.Redirect, "downlink_forward")
	}
	check(t, u.d.PutQER(qerLimited, limited))
	u.expect(t, upFrame, xdplink.Redirect, "uplink_forward")
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The CPUs share a QER's bucket: each starts with a sixteenth of it of its
// own, takes that much more than a packet needs when it runs short and
// spends that without the lock, so that the two together let through what
// the bucket holds and a sixteenth each, no more, and what one CPU holds
// only it spends. A rewritten QER leaves the CPUs nothing of the one
// before.
func TestQERBucketSharedByCPUs(t *testing.T) {
	testCPUs(t)
	u := newUPF(t, RoleAccess|RoleCore)
	up := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 20}
	inner := uint64(len(up.bytes(t)))
	// 64 packets, refilled at a byte a second: none more in the test.
	check(t, u.d.PutQER(qerLimited, QER{Bucket: [2]upfTokenBucket{QERBucket(1, 64*inner)}}))
	qerPDRs(t, u.d, qerLimited)
	frame := gtpFrame(t, fromGNB, n3Addr, gpdu(teidRoute), up.bytes(t))
	passed := func(cpu int) (n int) {
		onCPU(t, cpu, func() {
			for {
				if act, _ := u.run(t, frame); act != xdplink.Redirect {
					return
				}
				n++
			}
		})
		return n
	}
	onCPU(t, 0, func() { u.expect(t, frame, xdplink.Redirect, "uplink_forward") }) // spends 1 of its 4 packets' tokens
	if n := passed(1); n != 68 {
		t.Errorf("CPU 1 let %d packets through, want the 4 it held and the bucket's 64", n)
	}
	if n := passed(0); n != 3 {
		t.Errorf("CPU 0 let %d more packets through, want the 3 it held", n)
	}
	if c, err := u.d.PDRCounter(pdrRoute); err != nil || c.Packets != 72 {
		t.Errorf("PDR counter: %+v, %v; want the bucket's 64 packets and 4 each CPU held", c, err)
	}

	check(t, u.d.PutQER(qerLimited, QER{Bucket: [2]upfTokenBucket{QERBucket(1, 64*inner)}}))
	onCPU(t, 0, func() { u.expect(t, frame, xdplink.Redirect, "uplink_forward") })
	check(t, u.d.PutQER(qerLimited, QER{Bucket: [2]upfTokenBucket{QERBucket(1, 0)}}))
	onCPU(t, 0, func() { u.expect(t, frame, xdplink.Drop, "drop_qer_mbr") })
}

// Under packets from both CPUs at once, a QER lets through no more than
// its bucket and its rate over the time, and what the CPUs hold: a
// sixteenth of the bucket each.
func TestQERRateHoldsOnEveryCPU(t *testing.T) {
	testCPUs(t)
	u := newUPF(t, RoleAccess|RoleCore)
	const rate = 4_000_000 // bytes/s: a fraction of what a test run passes
	burst := uint64(rate * qerBurst / time.Second)
	check(t, u.d.PutQER(qerLimited, QER{Bucket: [2]upfTokenBucket{QERBucket(rate, burst)}}))
	qerPDRs(t, u.d, qerLimited)
	frame := gtpFrame(t, fromGNB, n3Addr, gpdu(teidRoute), ipPacket{src: ue4, dst: dn4, ttl: 64, size: 20}.bytes(t))
	const lasting = 200 * time.Millisecond
	start := time.Now()
	errs := make(chan error, 2)
	for cpu := range 2 {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			var one unix.CPUSet
			one.Set(cpu)
			err := unix.SchedSetaffinity(0, &one)
			for err == nil && time.Since(start) < lasting {
				_, err = u.prog.Run(&ebpf.RunOptions{Data: frame})
			}
			errs <- err
		}()
	}
	check(t, errors.Join(<-errs, <-errs))
	// The coarse clock refills by ticks, up to one behind.
	elapsed := time.Since(start) + 10*time.Millisecond
	c, err := u.d.PDRCounter(pdrRoute)
	check(t, err)
	most := burst + uint64(rate*elapsed.Seconds()) + 2*burst/16
	if c.Bytes > most || c.Bytes < burst || u.counters(t)["drop_qer_mbr"].Packets == 0 {
		t.Errorf("%d bytes let through in %v, %d dropped: want at least the bucket's %d, the rate's drops, and at most %d",
			c.Bytes, elapsed, u.counters(t)["drop_qer_mbr"].Packets, burst, most)
	}
}
