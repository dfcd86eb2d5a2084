package upfxdp

import (
	"errors"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// The program sends through egress_ports: the frames for an interface
// with an entry leave by the entry's interface, the frames for one without
// by bpf_redirect all the same. Live test runs send a next hop's frames
// into veths whose peers count them (a veth delivers redirected frames
// only when its peer runs an XDP program); an entry that names another
// interface than its key shows which way they went.
func TestRedirectThroughEgressPorts(t *testing.T) {
	u := newUPF(t, RoleAccess|RoleCore)
	ns := testsupport.Netns(t, "egress")
	testsupport.NoIPv6(t, ns)
	pass, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, int32(xdplink.Pass)), asm.Return()}})
	check(t, err)
	defer pass.Close()
	ifindex := map[string]uint32{}
	for _, pair := range [][2]string{{"nh0", "nh1"}, {"other0", "other1"}} {
		check(t, namespace.Veth(ns, pair[0], ns, pair[1]))
		for _, name := range pair {
			index, _, err := ns.Link(name)
			check(t, err)
			ifindex[name] = uint32(index)
		}
		var l link.Link
		check(t, ns.Do(func() (err error) {
			l, err = link.AttachXDP(link.XDPOptions{Program: pass, Interface: int(ifindex[pair[1]])})
			return err
		}))
		testsupport.Cleanup(t, l.Close)
	}
	nh := testNexthops[nhCore]
	check(t, u.d.PutNexthop(nhCore, Nexthop{Ifindex: ifindex["nh0"], Dmac: [6]uint8(nh.l2.dst),
		Smac: [6]uint8(nh.l2.src), Valid: 1}))
	frame := gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS, ulPSC(9)), ipPacket{src: ue4, dst: dn4, ttl: 64, size: 100}.bytes(t))

	// Attaching the UPF to an interface enters it.
	check(t, ns.Do(func() error { return u.d.Attach("nh0", RoleCore, xdplink.ModeNative) }))
	testsupport.Cleanup(t, func() error { return ns.Do(func() error { return u.d.Detach("nh0") }) })
	var entry uint32
	check(t, u.d.maps.EgressPorts.Lookup(ifindex["nh0"], &entry))
	if entry != ifindex["nh0"] {
		t.Fatalf("egress_ports holds %d for the attached interface %d", entry, ifindex["nh0"])
	}
	const frames = 8
	for _, c := range []struct {
		name     string
		set      func() error // nh0's entry
		arrives  string
		unwanted string
	}{
		{"its own entry", func() error { return u.d.PutEgress(ifindex["nh0"]) }, "nh1", "other1"},
		{"an entry for another interface", func() error {
			return u.d.maps.EgressPorts.Put(ifindex["nh0"], ifindex["other0"])
		}, "other1", "nh1"},
		{"no entry: bpf_redirect", func() error {
			if err := u.d.maps.EgressPorts.Delete(ifindex["nh0"]); !errors.Is(err, ebpf.ErrKeyNotExist) {
				return err
			}
			return nil
		}, "nh1", "other1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			check(t, ns.Do(c.set))
			before := map[string]uint64{c.arrives: rxPackets(t, ns, c.arrives), c.unwanted: rxPackets(t, ns, c.unwanted)}
			if act, _ := u.run(t, frame); act != xdplink.Redirect {
				t.Fatalf("verdict %v, want a redirect", act)
			}
			check(t, ns.Do(func() error {
				_, err := u.prog.Run(&ebpf.RunOptions{Data: frame, Repeat: frames, Flags: unix.BPF_F_TEST_XDP_LIVE_FRAMES})
				return err
			}))
			if got := rxPackets(t, ns, c.arrives) - before[c.arrives]; got != frames {
				t.Errorf("%s received %d of %d frames", c.arrives, got, frames)
			}
			if got := rxPackets(t, ns, c.unwanted) - before[c.unwanted]; got != 0 {
				t.Errorf("%s received %d frames, want none", c.unwanted, got)
			}
		})
	}
}

// rxPackets is how many packets a link of the namespace received.
func rxPackets(t *testing.T, ns *namespace.Netns, name string) (n uint64) {
	t.Helper()
	check(t, ns.Do(func() error {
		l, err := netlink.LinkByName(name)
		if err == nil {
			n = l.Attrs().Statistics.RxPackets
		}
		return err
	}))
	return n
}
