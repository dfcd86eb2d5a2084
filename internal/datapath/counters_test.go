package datapath

import (
	"testing"

	"github.com/cilium/ebpf"
)

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

// ZeroPDRCounters zeroes every CPU's counters of any number of slots, a
// batch of the zeroing program's at a time, and leaves the slots around
// them as they were.
func TestZeroPDRCountersOnEveryCPU(t *testing.T) {
	d := openTest(t, Options{MaxSessions: 64})
	batch := len(upfZeroRequest{}.Slots)
	last := uint32(2*batch + 5) // the slots from 1 to last-1: three batches, the last short
	cpus := ebpf.MustPossibleCPU()
	for slot := uint32(0); slot <= last; slot++ {
		perCPU := make([]Counter, cpus)
		for cpu := range perCPU {
			perCPU[cpu] = Counter{Packets: uint64(cpu) + 1, Bytes: 100 * (uint64(cpu) + 1)}
		}
		check(t, d.maps.PdrCounters.Put(slot, perCPU))
	}
	var slots []uint32
	for slot := uint32(1); slot < last; slot++ {
		slots = append(slots, slot)
	}
	if err := d.ZeroPDRCounters([]uint32{1, d.maps.PdrCounters.MaxEntries()}); err == nil {
		t.Error("zeroed a slot past the map's end")
	}
	if c, err := d.PDRCounter(1); err != nil || c.Packets == 0 {
		t.Errorf("slot 1 after a refused zeroing: %+v, %v; want it untouched", c, err)
	}
	check(t, d.ZeroPDRCounters(slots))
	for slot := uint32(0); slot <= last; slot++ {
		var perCPU []Counter
		check(t, d.maps.PdrCounters.Lookup(slot, &perCPU))
		for cpu, c := range perCPU {
			kept := slot == 0 || slot == last
			if want := (Counter{Packets: uint64(cpu) + 1, Bytes: 100 * (uint64(cpu) + 1)}); kept && c != want || !kept && c != (Counter{}) {
				t.Errorf("slot %d on CPU %d: %+v (kept: %v)", slot, cpu, c, kept)
			}
		}
	}
}
