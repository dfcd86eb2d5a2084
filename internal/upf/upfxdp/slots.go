package upfxdp

import (
	"fmt"

	"github.com/cilium/ebpf"
)

// claimSlot returns the counter slot of an interface, reusing the one a
// previous run gave it, or the first free one (with its counters zeroed).
func (d *Datapath) claimSlot(ifindex uint32, name string) (uint32, error) {
	free := uint32(maxIfaces)
	for slot := uint32(0); slot < maxIfaces; slot++ {
		var info upfIface
		if err := d.maps.Ifaces.Lookup(slot, &info); err != nil {
			return 0, err
		}
		if info.Ifindex != 0 && ifaceName(info) == name {
			if info.Ifindex != ifindex {
				info.Ifindex = ifindex
				return slot, d.maps.Ifaces.Put(slot, info)
			}
			return slot, nil
		}
		if info.Ifindex == 0 && free == maxIfaces {
			free = slot
		}
	}
	if free == maxIfaces {
		return 0, fmt.Errorf("all %d interface slots are in use", maxIfaces)
	}
	if err := d.zeroCounters(free); err != nil {
		return 0, err
	}
	info := upfIface{Ifindex: ifindex}
	for i := 0; i < len(name) && i < ifaceNameSize-1; i++ {
		info.Name[i] = int8(name[i])
	}
	return free, d.maps.Ifaces.Put(free, info)
}

func (d *Datapath) releaseSlot(name string) error {
	for slot := uint32(0); slot < maxIfaces; slot++ {
		var info upfIface
		if err := d.maps.Ifaces.Lookup(slot, &info); err != nil {
			return err
		}
		if info.Ifindex != 0 && ifaceName(info) == name {
			d.release.set(slot, nil)
			return d.maps.Ifaces.Put(slot, upfIface{})
		}
	}
	return nil
}

func (d *Datapath) zeroCounters(slot uint32) error {
	zero := make([]Counter, ebpf.MustPossibleCPU())
	for r := 0; r < reasonCount; r++ {
		if err := d.maps.IfaceCounters.Put(slot*uint32(reasonCount)+uint32(r), zero); err != nil {
			return err
		}
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
