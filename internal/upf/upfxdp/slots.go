package upfxdp

import (
	"fmt"
	"slices"

	"github.com/cilium/ebpf"
)

// slotIfaces are the interfaces of the counter slots, by slot: Ifindex 0
// where the slot is free.
func (d *Datapath) slotIfaces() ([]upfIface, error) {
	ifaces := make([]upfIface, maxIfaces)
	for slot := range ifaces {
		if err := d.maps.Ifaces.Lookup(uint32(slot), &ifaces[slot]); err != nil {
			return nil, err
		}
	}
	return ifaces, nil
}

// slotNamed is the slot of the interface named name among ifaces; -1 for
// none.
func slotNamed(ifaces []upfIface, name string) int {
	return slices.IndexFunc(ifaces, func(info upfIface) bool { return info.Ifindex != 0 && ifaceName(info) == name })
}

// claimSlot returns the counter slot of an interface, reusing the one a
// previous run gave it, or the first free one (with its counters zeroed).
func (d *Datapath) claimSlot(ifindex uint32, name string) (uint32, error) {
	ifaces, err := d.slotIfaces()
	if err != nil {
		return 0, err
	}
	if slot := slotNamed(ifaces, name); slot >= 0 {
		info := ifaces[slot]
		if info.Ifindex != ifindex {
			info.Ifindex = ifindex
			return uint32(slot), d.maps.Ifaces.Put(uint32(slot), info)
		}
		return uint32(slot), nil
	}
	free := slices.IndexFunc(ifaces, func(info upfIface) bool { return info.Ifindex == 0 })
	if free < 0 {
		return 0, fmt.Errorf("all %d interface slots are in use", maxIfaces)
	}
	if err := d.zeroCounters(uint32(free)); err != nil {
		return 0, err
	}
	info := upfIface{Ifindex: ifindex}
	for i := 0; i < len(name) && i < ifaceNameSize-1; i++ {
		info.Name[i] = int8(name[i])
	}
	return uint32(free), d.maps.Ifaces.Put(uint32(free), info)
}

// releaseSlot frees a counter slot.
func (d *Datapath) releaseSlot(slot uint32) error {
	d.release.set(slot, nil)
	return d.maps.Ifaces.Put(slot, upfIface{})
}

func (d *Datapath) zeroCounters(slot uint32) error {
	zero := make([]Counter, ebpf.MustPossibleCPU())
	for r := 0; r < reasonCount; r++ {
		if err := d.maps.IfaceCounters.Put(slot*uint32(reasonCount)+uint32(r), zero); err != nil {
			return err
		}
	}
	if err := d.maps.IfaceCpuLines.Put(slot, make([]upfIfaceCpuLine, len(zero))); err != nil {
		return err
	}
	if err := d.maps.IfaceLines.Put(slot, make([]upfIfaceLine, len(zero))); err != nil {
		return err
	}
	return d.maps.ColdPackets.Put(slot, zero)
}

func ifaceName(info upfIface) string {
	b := make([]byte, 0, ifaceNameSize)
	for _, c := range info.Name {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}
