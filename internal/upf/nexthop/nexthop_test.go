package nexthop

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/testsupport"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

const waitFor = 10 * time.Second // for what must happen, on a loaded machine

// env is namespace A (the UPF: core interface va, non-core interface vc)
// wired to namespace B (the router and gNB: vb, vd), a data path and a
// resolver over A.
type env struct {
	a, b        *namespace.Netns
	ha, hb      *netlink.Handle
	r           *Resolver
	dp          *upfxdp.Datapath
	va, vbIndex int
	vaMAC       net.HardwareAddr
	vbMAC       net.HardwareAddr
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func newNetns(t *testing.T, prefix string) (*namespace.Netns, *netlink.Handle) {
	t.Helper()
	n := testsupport.Netns(t, prefix)
	ns, err := netns.GetFromName(n.Name)
	must(t, err)
	h, err := netlink.NewHandleAt(ns)
	ns.Close()
	must(t, err)
	t.Cleanup(h.Close)
	return n, h
}

func setup(t *testing.T) *env {
	t.Helper()
	testsupport.NeedRoot(t, "network namespaces and BPF")
	e := &env{}
	e.a, e.ha = newNetns(t, "nh-a-")
	e.b, e.hb = newNetns(t, "nh-b-")
	for _, n := range []*namespace.Netns{e.a, e.b} {
		// Link-local addresses usable at once: the kernel solicits a
		// neighbour only from a link-local address that passed DAD.
		must(t, n.Sysctl("net.ipv6.conf.default.accept_dad", "0"))
	}
	must(t, namespace.Veth(e.a, "va", e.b, "vb"))
	for _, s := range []struct {
		n     *namespace.Netns
		iface string
		addrs []string
	}{
		{n: e.a, iface: "va", addrs: []string{"10.77.0.1/24", "fd77::1/64"}},
		{n: e.b, iface: "vb", addrs: []string{"10.77.0.2/24", "fd77::2/64"}},
	} {
		for _, a := range s.addrs {
			must(t, s.n.AddAddr(s.iface, a))
		}
	}
	must(t, e.a.AddRoute("0.0.0.0/0", "10.77.0.2", "va"))
	// B announces a new MAC address with a gratuitous ARP, as a router
	// does.
	must(t, e.b.Sysctl("net.ipv4.conf.vb.arp_notify", "1"))
	var err error
	e.va, e.vaMAC, err = e.a.Link("va")
	must(t, err)
	e.vbIndex, e.vbMAC, err = e.b.Link("vb")
	must(t, err)
	// A second link, not a core interface. (This kernel has neither VLAN
	// nor dummy devices; TestVLANNexthop covers VLANs without the kernel.)
	must(t, namespace.Veth(e.a, "vc", e.b, "vd"))
	must(t, e.a.AddAddr("vc", "10.99.0.1/24"))
	must(t, e.b.AddAddr("vd", "10.99.0.2/24"))

	e.dp, err = upfxdp.Open(upfxdp.Options{PinPath: testsupport.PinDir(t), MaxSessions: 1024})
	testsupport.CheckLoad(t, err)
	t.Cleanup(func() { e.dp.Close() })

	ns, err := netns.GetFromName(e.a.Name)
	must(t, err)
	e.r, err = New(e.dp, ns, []string{"va"})
	ns.Close() // New keeps a copy
	must(t, err)
	t.Cleanup(func() { e.r.Close() })
	return e
}

func mac(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

func (e *env) nexthop(t *testing.T, slot uint32) upfxdp.Nexthop {
	t.Helper()
	nh, err := e.dp.Nexthop(slot)
	must(t, err)
	return nh
}

// eventually polls cond until it returns "" or waitFor passes.
func eventually(t *testing.T, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: after %v: %s", what, waitFor, msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// expect describes the next hop a slot should hold.
type expect struct {
	ifindex int
	tci     uint16 // VLAN ID, host order
	smac    net.HardwareAddr
	dmac    net.HardwareAddr
}

func (e *env) check(t *testing.T, slot uint32, want expect) string {
	t.Helper()
	nh := e.nexthop(t, slot)
	switch {
	case nh.Valid != 1:
		return fmt.Sprintf("slot %d not valid: %+v", slot, nh)
	case nh.Ifindex != uint32(want.ifindex):
		return fmt.Sprintf("slot %d ifindex %d, want %d", slot, nh.Ifindex, want.ifindex)
	case nh.VlanTci != vlanTCI(int(want.tci)):
		return fmt.Sprintf("slot %d vlan_tci %#04x, want %#04x", slot, nh.VlanTci, vlanTCI(int(want.tci)))
	case net.HardwareAddr(nh.Smac[:]).String() != want.smac.String():
		return fmt.Sprintf("slot %d smac %s, want %s", slot, net.HardwareAddr(nh.Smac[:]), want.smac)
	case net.HardwareAddr(nh.Dmac[:]).String() != want.dmac.String():
		return fmt.Sprintf("slot %d dmac %s, want %s", slot, net.HardwareAddr(nh.Dmac[:]), want.dmac)
	}
	return ""
}

func (e *env) invalid(t *testing.T, slot uint32) string {
	if nh := e.nexthop(t, slot); nh.Valid != 0 {
		return fmt.Sprintf("slot %d still valid: %+v", slot, nh)
	}
	return ""
}

func (e *env) acquire(t *testing.T, dst string) uint32 {
	t.Helper()
	slot, err := e.r.Acquire(ip(dst))
	must(t, err)
	if slot == KernelSlot {
		t.Fatalf("Acquire(%s) returned the kernel slot", dst)
	}
	return slot
}

// routes reads the uplink route maps.
func (e *env) routes(t *testing.T) map[netip.Prefix]uint32 {
	t.Helper()
	out, err := e.dp.Routes()
	must(t, err)
	return out
}

// lookup is what the XDP program finds for a destination.
func (e *env) lookup(t *testing.T, dst string) uint32 {
	t.Helper()
	slot, err := e.dp.LookupRoute(ip(dst))
	must(t, err)
	return slot
}

func (e *env) routeIs(t *testing.T, prefix string, want func(slot uint32) string) func() string {
	return func() string {
		p := netip.MustParsePrefix(prefix)
		slot, ok := e.routes(t)[p]
		if !ok {
			return fmt.Sprintf("no route %s in %v", p, e.routes(t))
		}
		return want(slot)
	}
}

func TestAcquireResolvesThroughTheKernel(t *testing.T) {
	e := setup(t)
	direct := expect{ifindex: e.va, tci: 0, smac: e.vaMAC, dmac: e.vbMAC}

	s1 := e.acquire(t, "10.77.0.2")
	eventually(t, "connected destination", func() string { return e.check(t, s1, direct) })
	if s := e.acquire(t, "10.77.0.2"); s != s1 {
		t.Fatalf("second Acquire gave slot %d, want %d", s, s1)
	}
	// Through the default route: the gateway's MAC address.
	s2 := e.acquire(t, "198.51.100.7")
	if s2 == s1 {
		t.Fatal("two destinations share a slot")
	}
	eventually(t, "destination behind the gateway", func() string { return e.check(t, s2, direct) })

	s6 := e.acquire(t, "fd77::2")
	eventually(t, "IPv6 destination", func() string { return e.check(t, s6, direct) })
	// An IPv6 gNB behind a gateway (GTP-U over IPv6): the gateway's MAC
	// address, from the kernel's neighbour table (NDP).
	must(t, e.a.AddRoute("2001:db8:5::/48", "fd77::2", "va"))
	s6gw := e.acquire(t, "2001:db8:5::10")
	eventually(t, "IPv6 destination behind a gateway", func() string { return e.check(t, s6gw, direct) })

	if got := e.r.Slots(); len(got) < 5 {
		t.Errorf("Slots() = %+v", got)
	}

	// The slot lives until the last reference goes, then is cleared and
	// quarantined.
	e.r.Release(ip("10.77.0.2"))
	if msg := e.check(t, s1, direct); msg != "" {
		t.Fatalf("after one of two releases: %s", msg)
	}
	e.r.Release(ip("10.77.0.2"))
	if nh := e.nexthop(t, s1); nh != (upfxdp.Nexthop{}) {
		t.Fatalf("released slot holds %+v", nh)
	}
	if s := e.acquire(t, "10.77.0.3"); s == s1 {
		t.Fatalf("slot %d reused at once", s1)
	}
	if nh := e.nexthop(t, KernelSlot); nh != (upfxdp.Nexthop{}) {
		t.Fatalf("kernel slot holds %+v", nh)
	}
}

func TestFollowsNeighbourAndLinkChanges(t *testing.T) {
	e := setup(t)
	slot := e.acquire(t, "10.77.0.2")
	want := expect{ifindex: e.va, tci: 0, smac: e.vaMAC, dmac: e.vbMAC}
	eventually(t, "resolution", func() string { return e.check(t, slot, want) })
	gw := func() uint32 { return e.r.Routes()[netip.MustParsePrefix("0.0.0.0/0")] }

	// The peer's new MAC address (announced by a gratuitous ARP).
	vb, err := e.hb.LinkByName("vb")
	must(t, err)
	want.dmac = mac("02:00:00:00:0b:02")
	must(t, e.hb.LinkSetHardwareAddr(vb, want.dmac))
	eventually(t, "peer MAC change", func() string { return e.check(t, slot, want) })
	eventually(t, "peer MAC change, gateway slot", func() string { return e.check(t, gw(), want) })

	// Our own new MAC address.
	va, err := e.ha.LinkByName("va")
	must(t, err)
	want.smac = mac("02:00:00:00:0a:02")
	must(t, e.ha.LinkSetHardwareAddr(va, want.smac))
	eventually(t, "own MAC change", func() string { return e.check(t, slot, want) })

	// A deleted neighbour is resolved again. The change of our own MAC
	// address flushed the link's neighbours: the entry may be gone already.
	if err := e.ha.NeighDel(&netlink.Neigh{LinkIndex: e.va, IP: net.ParseIP("10.77.0.2")}); err != nil && !errors.Is(err, syscall.ENOENT) {
		t.Fatal(err)
	}
	eventually(t, "re-resolution after neighbour deletion", func() string {
		if msg := e.check(t, slot, want); msg != "" {
			return msg
		}
		ns, err := e.ha.NeighList(e.va, netlink.FAMILY_V4)
		must(t, err)
		for _, n := range ns {
			if n.IP.Equal(net.ParseIP("10.77.0.2")) && n.State&usableStates != 0 {
				return ""
			}
		}
		return fmt.Sprintf("kernel has no entry for 10.77.0.2: %v", ns)
	})

	// The peer goes down: no carrier, nothing to send to.
	must(t, e.hb.LinkSetDown(vb))
	eventually(t, "peer down", func() string { return e.invalid(t, slot) })
	eventually(t, "peer down, gateway slot", func() string { return e.invalid(t, gw()) })
	must(t, e.hb.LinkSetUp(vb))
	eventually(t, "peer up again", func() string { return e.check(t, slot, want) })
	eventually(t, "peer up again, gateway slot", func() string { return e.check(t, gw(), want) })

	// A neighbour that stops answering fails.
	must(t, e.hb.AddrDel(vb, &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP("10.77.0.2"), Mask: net.CIDRMask(24, 32)}}))
	must(t, e.ha.NeighDel(&netlink.Neigh{LinkIndex: e.va, IP: net.ParseIP("10.77.0.2")}))
	eventually(t, "unanswered neighbour", func() string { return e.invalid(t, slot) })
}

func TestStaticNeighbours(t *testing.T) {
	e := setup(t)
	slot := e.acquire(t, "10.77.0.2")
	kernel := expect{ifindex: e.va, tci: 0, smac: e.vaMAC, dmac: e.vbMAC}
	eventually(t, "resolution", func() string { return e.check(t, slot, kernel) })

	static := expect{ifindex: e.va, tci: 0, smac: e.vaMAC, dmac: mac("02:00:00:00:99:01")}
	e.r.SetStatic(ip("10.77.0.2"), static.dmac)
	if msg := e.check(t, slot, static); msg != "" {
		t.Fatalf("static entry: %s", msg)
	}
	e.r.ClearStatic(ip("10.77.0.2"))
	if msg := e.check(t, slot, kernel); msg != "" {
		t.Fatalf("after clearing the static entry: %s", msg)
	}

	// A static neighbour the kernel does not know: valid at once, and
	// with a host route of its own.
	nobody := expect{ifindex: e.va, tci: 0, smac: e.vaMAC, dmac: mac("02:00:00:00:99:02")}
	e.r.SetStatic(ip("10.77.0.50"), nobody.dmac)
	s50 := e.acquire(t, "10.77.0.50")
	if msg := e.check(t, s50, nobody); msg != "" {
		t.Fatalf("static entry of an unknown neighbour: %s", msg)
	}
	eventually(t, "host route of a static neighbour", e.routeIs(t, "10.77.0.50/32", func(s uint32) string {
		return e.check(t, s, nobody)
	}))
	e.r.ClearStatic(ip("10.77.0.50"))
	if msg := e.invalid(t, s50); msg != "" {
		t.Fatalf("after clearing the only entry of 10.77.0.50: %s", msg)
	}
	if _, ok := e.routes(t)[netip.MustParsePrefix("10.77.0.50/32")]; ok {
		t.Fatal("host route of a cleared static neighbour remains")
	}
}

func TestMirrorsRoutes(t *testing.T) {
	e := setup(t)
	gw := expect{ifindex: e.va, tci: 0, smac: e.vaMAC, dmac: e.vbMAC}
	toKernel := func(s uint32) string {
		if s != KernelSlot {
			return fmt.Sprintf("slot %d, want the kernel slot", s)
		}
		return ""
	}
	// The gateway is resolved without any traffic.
	eventually(t, "default route", e.routeIs(t, "0.0.0.0/0", func(s uint32) string { return e.check(t, s, gw) }))
	for _, p := range []string{"10.77.0.0/24", "fd77::/64", "10.99.0.0/24", "10.77.0.1/32"} {
		eventually(t, p, e.routeIs(t, p, toKernel))
	}
	// Host routes for the neighbours on the core interface.
	gwSlot := e.routes(t)[netip.MustParsePrefix("0.0.0.0/0")]
	eventually(t, "gateway host route", e.routeIs(t, "10.77.0.2/32", func(s uint32) string {
		if s != gwSlot {
			return fmt.Sprintf("slot %d, want the gateway's %d", s, gwSlot)
		}
		return ""
	}))
	e.acquire(t, "fd77::2") // makes the kernel learn it
	eventually(t, "IPv6 neighbour host route", e.routeIs(t, "fd77::2/128", func(s uint32) string { return e.check(t, s, gw) }))

	// What the XDP program's longest-prefix lookup finds.
	for dst, want := range map[string]uint32{"8.8.8.8": gwSlot, "10.77.0.2": gwSlot, "10.77.0.99": KernelSlot, "10.99.0.5": KernelSlot} {
		if got := e.lookup(t, dst); got != want {
			t.Errorf("lookup %s: slot %d, want %d", dst, got, want)
		}
	}
	if got := e.lookup(t, "2001:db8::1"); got != KernelSlot {
		t.Errorf("an IPv6 destination without a route matched slot %d", got)
	}

	// Route changes are followed.
	must(t, e.a.AddRoute("198.51.100.0/24", "10.77.0.2", "va"))
	eventually(t, "added route", e.routeIs(t, "198.51.100.0/24", func(s uint32) string { return e.check(t, s, gw) }))
	must(t, e.ha.RouteDel(&netlink.Route{LinkIndex: e.va, Dst: nil, Gw: net.ParseIP("10.77.0.2")}))
	eventually(t, "deleted default route", func() string {
		if _, ok := e.routes(t)[netip.MustParsePrefix("0.0.0.0/0")]; ok {
			return "default route still mirrored"
		}
		return ""
	})
	// A route through a non-core interface goes to the kernel.
	must(t, e.a.AddRoute("203.0.113.0/24", "10.99.0.2", "vc"))
	eventually(t, "route through a non-core interface", e.routeIs(t, "203.0.113.0/24", toKernel))

	// The neighbour's host route goes with the neighbour. It goes for
	// good: released first (the resolver resolves again a neighbour it
	// holds when the kernel deletes it), and without its address (its own
	// probes would teach the kernel the neighbour again).
	e.r.Release(ip("fd77::2"))
	e.r.Release(ip("fd77::2"))
	vb, err := e.hb.LinkByIndex(e.vbIndex)
	must(t, err)
	addr, err := netlink.ParseAddr("fd77::2/64")
	must(t, err)
	must(t, e.hb.AddrDel(vb, addr))
	must(t, e.ha.NeighDel(&netlink.Neigh{LinkIndex: e.va, IP: net.ParseIP("fd77::2")}))
	eventually(t, "host route of a deleted neighbour", func() string {
		if s, ok := e.routes(t)[netip.MustParsePrefix("fd77::2/128")]; ok {
			return fmt.Sprintf("still routed to slot %d", s)
		}
		return ""
	})
}

// A restart removes stale routes but keeps the previous run's next hops in
// quarantine: its FARs use them until the sessions are restored.
func TestRestartTakesOverState(t *testing.T) {
	e := setup(t)
	eventually(t, "default route", e.routeIs(t, "0.0.0.0/0", func(s uint32) string {
		return e.check(t, s, expect{ifindex: e.va, tci: 0, smac: e.vaMAC, dmac: e.vbMAC})
	}))
	must(t, e.r.Close())
	// What a previous run could have left: a route through its next hop.
	const previous = 7
	stale := netip.MustParsePrefix("192.0.2.0/24")
	must(t, e.dp.PutRoute(stale, previous))
	must(t, e.dp.PutNexthop(previous, upfxdp.Nexthop{Ifindex: 99, Valid: 1}))
	ns, err := netns.GetFromName(e.a.Name)
	must(t, err)
	defer ns.Close()
	r, err := New(e.dp, ns, []string{"va"})
	must(t, err)
	defer r.Close()
	if _, ok := e.routes(t)[stale]; ok {
		t.Error("stale route kept")
	}
	if nh := e.nexthop(t, previous); nh.Ifindex != 99 {
		t.Error("a previous run's next hop was overwritten before its quarantine ended")
	}
	for _, dst := range []string{"10.77.0.2", "10.99.0.2"} {
		if slot, err := r.Acquire(ip(dst)); err != nil || slot == previous {
			t.Errorf("Acquire(%s) = %d, %v: must not take a quarantined slot", dst, slot, err)
		}
	}
	if _, ok := e.routes(t)[netip.MustParsePrefix("10.77.0.0/24")]; !ok {
		t.Error("routes not mirrored again")
	}
}

// TestVLANNexthop checks a next hop through a VLAN device on the caches
// alone: its parent's ifindex, the tag in network order, its own MAC.
func TestVLANNexthop(t *testing.T) {
	r := &Resolver{
		links: map[int]linkInfo{
			2: {name: "eth0", mac: mac("02:00:00:00:00:02"), ether: true, up: true},
			3: {name: "eth0.100", mac: mac("02:00:00:00:01:00"), ether: true, up: true, vlanID: 100, parent: 2},
			4: {name: "eth0.100.7", mac: mac("02:00:00:00:01:07"), ether: true, up: true, vlanID: 7, parent: 3},
			5: {name: "eth0.200", mac: mac("02:00:00:00:02:00"), ether: true, up: true, vlanID: 200, parent: 2, qinq: true},
		},
		neighs: map[nbrKey]neighInfo{
			{ip: ip("10.78.0.2"), ifindex: 3}: {state: netlink.NUD_REACHABLE, mac: mac("02:00:00:00:0b:00")},
			{ip: ip("10.79.0.2"), ifindex: 4}: {state: netlink.NUD_REACHABLE, mac: mac("02:00:00:00:0b:07")},
			{ip: ip("10.80.0.2"), ifindex: 5}: {state: netlink.NUD_REACHABLE, mac: mac("02:00:00:00:0b:08")},
		},
		statics: map[netip.Addr]net.HardwareAddr{},
	}
	nh, poke := r.compute(nbrKey{ip: ip("10.78.0.2"), ifindex: 3})
	want := upfxdp.Nexthop{Ifindex: 2, VlanTci: vlanTCI(100), Valid: 1}
	copy(want.Smac[:], mac("02:00:00:00:01:00"))
	copy(want.Dmac[:], mac("02:00:00:00:0b:00"))
	if nh != want || poke {
		t.Fatalf("got %+v (poke %v), want %+v", nh, poke, want)
	}
	for _, k := range []nbrKey{{ip: ip("10.79.0.2"), ifindex: 4}, {ip: ip("10.80.0.2"), ifindex: 5}} {
		if nh, _ := r.compute(k); nh.Valid != 0 {
			t.Errorf("stacked or 802.1ad VLAN %v: %+v", k, nh)
		}
	}
	// The parent going down takes the VLAN with it.
	l := r.links[2]
	l.up = false
	r.links[2] = l
	if nh, _ := r.compute(nbrKey{ip: ip("10.78.0.2"), ifindex: 3}); nh.Valid != 0 {
		t.Errorf("VLAN over a down parent: %+v", nh)
	}
}

func TestVLANTag(t *testing.T) {
	tci := vlanTCI(100)
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], tci) // the bytes the BPF program sees
	if b[0] != 0 || b[1] != 100 || vlanID(tci) != 100 {
		t.Fatalf("tci %#04x bytes %v", tci, b)
	}
}
