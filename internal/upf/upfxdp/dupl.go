package upfxdp

import (
	"errors"
	"fmt"
	"net"

	"github.com/cilium/ebpf"
)

// Dupl is a FAR's Duplicating Parameters as one of its PDRs' slots has
// them (see struct dupl in bpf/upf/structs.h).
type Dupl = upfDupl

// FARDuplicate is the FAR.Flags bit of a FAR that duplicates (DUPL): the
// copies go where the Dupl put for its PDR's slot says.
const FARDuplicate = uint8(upfFarFlagsFAR_DUPLICATE)

// PutDupl writes the Duplicating Parameters of the PDR in slot, before the
// PDR that duplicates.
func (d *Datapath) PutDupl(slot uint32, p Dupl) error {
	if err := d.maps.Dupls.Put(slot, p); err != nil {
		return fmt.Errorf("duplicating parameters of PDR slot %d: %w", slot, err)
	}
	return nil
}

// DeleteDupl removes the Duplicating Parameters of a PDR slot, if it has
// any: its PDR no longer duplicates.
func (d *Datapath) DeleteDupl(slot uint32) error {
	if err := d.maps.Dupls.Delete(slot); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("duplicating parameters of PDR slot %d: %w", slot, err)
	}
	return nil
}

// Dupl reads the Duplicating Parameters of a PDR slot; ok is false when
// it has none.
func (d *Datapath) Dupl(slot uint32) (p Dupl, ok bool, err error) {
	err = d.maps.Dupls.Lookup(slot, &p)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return p, false, nil
	}
	return p, err == nil, err
}

// Dupls are the Duplicating Parameters the data path holds, by PDR slot.
func (d *Datapath) Dupls() (map[uint32]Dupl, error) {
	out := map[uint32]Dupl{}
	var slot uint32
	var p Dupl
	it := d.maps.Dupls.Iterate()
	for it.Next(&slot, &p) {
		out[slot] = p
	}
	return out, it.Err()
}

// devmapEntry is a devmap's value (struct bpf_devmap_val): the interface,
// and the program that runs on each frame before it leaves; -1 for none.
type devmapEntry struct {
	Ifindex uint32
	ProgFD  int32
}

// setFanouts writes the fanouts of the interface ifindex, of roles, with
// every other attached interface, both ways, with copy making the copies:
// XDP copies a frame only by broadcasting it through a devmap, and a packet
// whose copy leaves one interface and itself another needs a devmap of just
// those two. Only an interface of the copies role takes copies: the kernel
// queues the frames a NAPI poll redirects to one interface together and
// runs the devmap program of the first over all of them, so a copy beside
// forwarded frames would leave as one of them, unmade, or have them taken
// for copies. A pair with an interface this process has not attached yet
// stays as it is until it does; the pairs of other interfaces too.
func (d *Datapath) setFanouts(ifindex uint32, roles Role, copy *ebpf.Program) error {
	ifindexes, err := d.attachedIfindexes()
	if err != nil {
		return err
	}
	for _, other := range ifindexes {
		if other == ifindex {
			err = d.deleteFanout(ifindex, ifindex)
		} else if err = d.pairFanout(other, ifindex, roles == RoleCopies, copy); err == nil {
			if otherRoles, ok := d.staged.rolesOf(other); ok {
				err = d.pairFanout(ifindex, other, otherRoles == RoleCopies, copy)
			}
		}
		if err != nil {
			return fmt.Errorf("fanouts of interfaces %d and %d: %w", ifindex, other, err)
		}
	}
	return nil
}

// pairFanout writes the fanout from orig to to when to takes copies, and
// removes it otherwise.
func (d *Datapath) pairFanout(orig, to uint32, takesCopies bool, copy *ebpf.Program) error {
	if takesCopies {
		return d.putFanout(orig, to, copy)
	}
	return d.deleteFanout(orig, to)
}

func fanoutKey(orig, copy uint32) uint64 { return uint64(copy)<<32 | uint64(orig) }

func (d *Datapath) putFanout(orig, to uint32, copy *ebpf.Program) error {
	inner, err := ebpf.NewMap(d.fanoutSpec)
	if err != nil {
		return err
	}
	defer inner.Close() // the outer map holds it
	if err := errors.Join(inner.Put(uint32(upfDuplFanoutKeyFANOUT_ORIGINAL), devmapEntry{orig, -1}),
		inner.Put(uint32(upfDuplFanoutKeyFANOUT_COPY), devmapEntry{to, int32(copy.FD())})); err != nil {
		return err
	}
	return d.maps.DuplFanouts.Put(fanoutKey(orig, to), inner)
}

func (d *Datapath) deleteFanout(orig, to uint32) error {
	return ignoreMissing(d.maps.DuplFanouts.Delete(fanoutKey(orig, to)))
}

// deleteFanouts removes the fanouts of an interface being detached.
func (d *Datapath) deleteFanouts(ifindex uint32) error {
	var key uint64
	var keys []uint64
	var id uint32 // of the inner map
	it := d.maps.DuplFanouts.Iterate()
	for it.Next(&key, &id) {
		if uint32(key) == ifindex || uint32(key>>32) == ifindex {
			keys = append(keys, key)
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	for _, k := range keys {
		if err := d.deleteFanout(uint32(k), uint32(k>>32)); err != nil {
			return err
		}
	}
	return nil
}

// slotOf is the counter slot of the interface named name and the
// interface index it was claimed with; ifindex 0 for none.
func (d *Datapath) slotOf(name string) (slot, ifindex uint32, err error) {
	ifaces, err := d.slotIfaces()
	if err != nil {
		return 0, 0, err
	}
	if slot := slotNamed(ifaces, name); slot >= 0 {
		return uint32(slot), ifaces[slot].Ifindex, nil
	}
	return 0, 0, nil
}

// attachedIfindexes are the interfaces that hold a counter slot and are
// in the calling thread's namespace: a slot may outlive its interface.
func (d *Datapath) attachedIfindexes() ([]uint32, error) {
	ifaces, err := d.slotIfaces()
	if err != nil {
		return nil, err
	}
	var out []uint32
	for _, info := range ifaces {
		if iface, err := net.InterfaceByIndex(int(info.Ifindex)); info.Ifindex != 0 && err == nil && iface.Name == ifaceName(info) {
			out = append(out, info.Ifindex)
		}
	}
	return out, nil
}
