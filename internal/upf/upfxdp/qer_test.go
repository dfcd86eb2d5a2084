package upfxdp

import (
	"testing"

	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
)

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

// The uplink bucket holds ten packets and refills at 100 bytes/s: the
// eleventh packet in a row is dropped, the downlink (no maximum bit rate
// set) is not limited, and a rewritten QER starts with a full bucket.
func TestQERMaximumBitRate(t *testing.T) {
	u := newUPF(t, RoleAccess|RoleCore)
	up := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 20}
	inner := uint64(len(up.bytes(t)))
	limited := QER{Bucket: [2]upfTokenBucket{QERBucket(100, 10*inner)}}
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
