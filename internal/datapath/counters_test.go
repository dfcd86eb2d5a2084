package datapath

import "testing"

// ZeroPDRCounters zeroes what packets counted in the slots it names, and
// in no other slot.
func TestZeroPDRCounters(t *testing.T) {
	u := newUPF(t, RoleAccess|RoleCore)
	up := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 20}
	down := ipPacket{src: dn4, dst: ue4b, ttl: 64, size: 20}
	u.expect(t, gtpFrame(t, fromGNB, n3Addr, gpdu(teidRoute), up.bytes(t)), xdpRedirect, "uplink_forward") // PDR slot 5
	u.expect(t, down.frame(t, fromDN), xdpRedirect, "downlink_forward")                                    // PDR slot 7
	for _, slot := range []uint32{5, 7} {
		if c, err := u.d.PDRCounter(slot); err != nil || c.Packets != 1 {
			t.Fatalf("PDR slot %d before zeroing: %+v, %v", slot, c, err)
		}
	}
	check(t, u.d.ZeroPDRCounters([]uint32{4, 5}))
	if c, err := u.d.PDRCounter(5); err != nil || c != (Counter{}) {
		t.Errorf("PDR slot 5 after zeroing: %+v, %v", c, err)
	}
	if c, err := u.d.PDRCounter(7); err != nil || c.Packets != 1 {
		t.Errorf("PDR slot 7, not zeroed: %+v, %v", c, err)
	}
}
