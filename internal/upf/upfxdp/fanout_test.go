package upfxdp

import (
	"net"
	"slices"
	"testing"

	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// Copies leave only by interfaces of the copies role: the kernel sends
// the frames a NAPI poll redirected to one interface through the devmap
// program of the first of them, so a copy out of an interface that
// forwards too would leave unmade, as a second forwarded packet. Each
// attachment writes the fanouts from the other interfaces to it when it
// takes copies, from it to the others that do, and removes every other
// pair of it, those a build before left included.
func TestFanoutsLeadOnlyToCopiesInterfaces(t *testing.T) {
	d := openTest(t, Options{MaxSessions: 1024})
	ns, err := namespace.New("userview-fan")
	check(t, err)
	testsupport.Cleanup(t, ns.Delete)
	roles := map[string]Role{"n3": RoleAccess, "n6": RoleCore, "li": RoleCopies}
	for name := range roles {
		check(t, namespace.Veth(ns, name, ns, name+"-peer"))
	}
	ifindex := map[string]uint32{}
	attach := func(name string) {
		t.Helper()
		check(t, ns.Do(func() error {
			iface, err := net.InterfaceByName(name)
			if err != nil {
				return err
			}
			ifindex[name] = uint32(iface.Index)
			return d.Attach(name, roles[name], xdplink.ModeGeneric)
		}))
	}
	pairs := func() []string {
		t.Helper()
		names := map[uint32]string{}
		for name, i := range ifindex {
			names[i] = name
		}
		var out []string
		var key uint64
		var id uint32
		it := d.maps.DuplFanouts.Iterate()
		for it.Next(&key, &id) {
			out = append(out, names[uint32(key)]+">"+names[uint32(key>>32)])
		}
		check(t, it.Err())
		slices.Sort(out)
		return out
	}
	want := []string{"n3>li", "n6>li"}
	for _, order := range [][]string{{"n3", "n6", "li"}, {"li", "n3", "n6"}} {
		for _, name := range order {
			attach(name)
		}
		if got := pairs(); !slices.Equal(got, want) {
			t.Errorf("attached in the order %v: fanouts %v, want %v", order, got, want)
		}
	}
	// Those a build that wrote every pair left go with the next attachment.
	copier, err := d.copyProgram()
	testsupport.CheckLoad(t, err)
	check(t, ns.Do(func() error { // devmaps name the interfaces of the caller's namespace
		for _, a := range ifindex {
			for _, b := range ifindex {
				if err := d.putFanout(a, b, copier); err != nil {
					return err
				}
			}
		}
		return nil
	}))
	for _, name := range []string{"n3", "n6", "li"} {
		attach(name)
	}
	if got := pairs(); !slices.Equal(got, want) {
		t.Errorf("after a build that wrote every pair: fanouts %v, want %v", got, want)
	}
}
