package datapath

import (
	"errors"
	"net/netip"

	"github.com/cilium/ebpf"
)

// The session layer writes rules through these. Array slots are written
// before the keys that reference them and keys are removed before their
// slots are reused, so a packet never sees a half-written rule.

// PutPDR writes a PDR slot and zeroes its counters.
func (d *Datapath) PutPDR(slot uint32, p PDR) error {
	if err := d.maps.PdrCounters.Put(slot, make([]Counter, ebpf.MustPossibleCPU())); err != nil {
		return err
	}
	return d.maps.Pdrs.Put(slot, p)
}

// PutFAR writes a FAR slot.
func (d *Datapath) PutFAR(slot uint32, f FAR) error { return d.maps.Fars.Put(slot, f) }

// PutUplink points a TEID at its PDRs.
func (d *Datapath) PutUplink(teid uint32, set PDRSet) error {
	return d.maps.UplinkTeids.Put(NetworkOrder32(teid), set)
}

// DeleteUplink removes a TEID; a missing one is not an error.
func (d *Datapath) DeleteUplink(teid uint32) error {
	return ignoreMissing(d.maps.UplinkTeids.Delete(NetworkOrder32(teid)))
}

// PutDownlink points a UE address (IPv4) or /64 prefix (IPv6) at its PDRs.
func (d *Datapath) PutDownlink(ue netip.Addr, set PDRSet) error {
	if ue.Is4() {
		return d.maps.DownlinkUe4.Put(AddrKey(ue), set)
	}
	return d.maps.DownlinkUe6.Put(Prefix64Key(ue), set)
}

// DeleteDownlink removes a UE address; a missing one is not an error.
func (d *Datapath) DeleteDownlink(ue netip.Addr) error {
	if ue.Is4() {
		return ignoreMissing(d.maps.DownlinkUe4.Delete(AddrKey(ue)))
	}
	return ignoreMissing(d.maps.DownlinkUe6.Delete(Prefix64Key(ue)))
}

// Uplink and Downlink read back what a key points at (for reconciliation
// and tests).
func (d *Datapath) Uplink(teid uint32) (PDRSet, error) {
	var set PDRSet
	return set, d.maps.UplinkTeids.Lookup(NetworkOrder32(teid), &set)
}

func (d *Datapath) Downlink(ue netip.Addr) (PDRSet, error) {
	var set PDRSet
	if ue.Is4() {
		return set, d.maps.DownlinkUe4.Lookup(AddrKey(ue), &set)
	}
	return set, d.maps.DownlinkUe6.Lookup(Prefix64Key(ue), &set)
}

// UplinkTEIDs and DownlinkUEs list every installed key.
func (d *Datapath) UplinkTEIDs() ([]uint32, error) {
	var teids []uint32
	var key uint32
	it := d.maps.UplinkTeids.Iterate()
	for it.Next(&key, new(PDRSet)) {
		teids = append(teids, NetworkOrder32(key)) // the swap is its own inverse
	}
	return teids, it.Err()
}

func (d *Datapath) DownlinkUEs() ([]netip.Addr, error) {
	var ues []netip.Addr
	var k4 uint32
	it := d.maps.DownlinkUe4.Iterate()
	for it.Next(&k4, new(PDRSet)) {
		var b [4]byte
		nativeEndianPut32(b[:], k4)
		ues = append(ues, netip.AddrFrom4(b))
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	var k6 uint64
	it = d.maps.DownlinkUe6.Iterate()
	for it.Next(&k6, new(PDRSet)) {
		var b [16]byte
		nativeEndianPut64(b[:8], k6)
		ues = append(ues, netip.AddrFrom16(b))
	}
	return ues, it.Err()
}

// PutNexthop writes a next-hop slot.
func (d *Datapath) PutNexthop(slot uint32, nh Nexthop) error { return d.maps.Nexthops.Put(slot, nh) }

func ignoreMissing(err error) error {
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil
	}
	return err
}

// NexthopCapacity is the number of next-hop slots.
func (d *Datapath) NexthopCapacity() uint32 { return d.maps.Nexthops.MaxEntries() }

// Nexthop reads a next-hop slot.
func (d *Datapath) Nexthop(slot uint32) (Nexthop, error) {
	var nh Nexthop
	return nh, d.maps.Nexthops.Lookup(slot, &nh)
}
