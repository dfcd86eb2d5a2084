package datapath

import "testing"

// A PDR written again into its slot counts from zero, with nothing zeroed:
// before its first packet it reads nothing, and that packet starts the
// slot's counters afresh. Other slots keep their counts.
func TestPDRCountersStartAfreshForANewGeneration(t *testing.T) {
	u := newUPF(t, RoleAccess|RoleCore)
	up := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 20}
	down := ipPacket{src: dn4, dst: ue4b, ttl: 64, size: 20}
	upFrame := gtpFrame(t, fromGNB, n3Addr, gpdu(teidRoute), up.bytes(t))
	for range 2 {
		u.expect(t, upFrame, xdpRedirect, "uplink_forward") // PDR slot 5
	}
	u.expect(t, down.frame(t, fromDN), xdpRedirect, "downlink_forward") // PDR slot 7
	first, err := u.d.PDRCounter(5)
	if err != nil || first.Packets != 2 {
		t.Fatalf("PDR slot 5 before it is written again: %+v, %v; want 2 packets", first, err)
	}
	p, err := u.d.PDR(5)
	check(t, err)
	check(t, u.d.PutPDR(5, p))
	if c, err := u.d.PDRCounter(5); err != nil || c != (Counter{}) {
		t.Errorf("PDR slot 5 written again: %+v, %v; want nothing counted", c, err)
	}
	u.expect(t, upFrame, xdpRedirect, "uplink_forward")
	if c, err := u.d.PDRCounter(5); err != nil || c.Packets != 1 || c.Bytes != first.Bytes/2 {
		t.Errorf("PDR slot 5 after a packet of its new generation: %+v, %v; want 1 packet of %d bytes", c, err, first.Bytes/2)
	}
	if c, err := u.d.PDRCounter(7); err != nil || c.Packets != 1 {
		t.Errorf("PDR slot 7, not written again: %+v, %v; want 1 packet", c, err)
	}
}
