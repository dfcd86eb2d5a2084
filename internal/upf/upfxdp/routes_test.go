package upfxdp

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// longestMatch is the reference: the slot of the longest prefix holding dst.
func longestMatch(routes map[netip.Prefix]uint32, dst netip.Addr) uint32 {
	best, slot := -1, uint32(KernelSlot)
	for p, s := range routes {
		if p.Contains(dst) && p.Bits() > best {
			best, slot = p.Bits(), s
		}
	}
	return slot
}

func addrOf(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// checkLookups compares the flattened tables with the reference at every
// route's edges and at random addresses of 10.0.0.0/14, where the routes are.
func checkLookups(t *testing.T, d *Datapath, routes map[netip.Prefix]uint32, rng *rand.Rand) {
	t.Helper()
	var dsts []netip.Addr
	for p := range routes {
		first, n := span(p, 0)
		dsts = append(dsts, addrOf(first), addrOf(first+n-1), addrOf(first-1), addrOf(first+n))
	}
	for range 2000 {
		dsts = append(dsts, addrOf(0x0a000000|rng.Uint32N(1<<18)))
	}
	for _, dst := range dsts {
		got, err := d.LookupRoute(dst)
		if err != nil {
			t.Fatal(err)
		}
		if want := longestMatch(routes, dst); got != want {
			t.Fatalf("lookup %s: slot %d, want %d (routes %v)", dst, got, want, routes)
		}
	}
}

func TestRouteTablesFollowRoutes(t *testing.T) {
	d := openTest(t, Options{MaxSessions: 64})
	rng := rand.New(rand.NewPCG(1, 2))
	routes := map[netip.Prefix]uint32{}
	randomPrefix := func() netip.Prefix {
		bits := []int{8, 12, 14, 16, 20, 22, 24, 24, 25, 28, 30, 32, 32}[rng.IntN(13)]
		return netip.PrefixFrom(addrOf(0x0a000000|rng.Uint32N(1<<18)), bits).Masked()
	}
	put := func(p netip.Prefix, slot uint32) {
		if err := d.PutRoute(p, slot); err != nil {
			t.Fatal(err)
		}
		routes[p] = slot
	}
	put(netip.MustParsePrefix("0.0.0.0/0"), 1)
	for i := range 300 {
		put(randomPrefix(), uint32(i%900+2))
	}
	checkLookups(t, d, routes, rng)

	// Changing the default route repaints every /24 but the groups.
	put(netip.MustParsePrefix("0.0.0.0/0"), 999)
	checkLookups(t, d, routes, rng)

	for p := range routes {
		if rng.IntN(2) == 0 {
			if err := d.DeleteRoute(p); err != nil {
				t.Fatal(err)
			}
			delete(routes, p)
		}
	}
	checkLookups(t, d, routes, rng)

	// A restarted daemon rebuilds its mirror from the pinned maps.
	again, err := Open(d.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	for i := range 100 {
		p := randomPrefix()
		if err := again.PutRoute(p, uint32(i+2)); err != nil {
			t.Fatal(err)
		}
		routes[p] = uint32(i + 2)
	}
	checkLookups(t, again, routes, rng)

	for p := range routes {
		if err := again.DeleteRoute(p); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(again.routes.free); n != len(again.routes.by8)/2/groupSize || len(again.routes.groups) != 0 {
		t.Errorf("after deleting every route: %d groups free, %d in use", n, len(again.routes.groups))
	}
	for i := range uint32(len(again.routes.by24) / 2) {
		if v := again.routes.load(again.routes.by24, i); uint32(v) != KernelSlot {
			t.Fatalf("after deleting every route, /24 %s has %#x", addrOf(i<<8), v)
		}
	}
}

func TestRouteSlotRange(t *testing.T) {
	d := openTest(t, Options{MaxSessions: 64})
	p := netip.MustParsePrefix("10.0.0.0/8")
	if err := d.PutRoute(p, uint32(routeGroup)); err == nil {
		t.Fatal("a slot that routes4_tbl24 cannot hold was accepted")
	}
	if routes, err := d.Routes(); err != nil || len(routes) != 0 {
		t.Fatalf("a rejected route changed the tables: %v, %v", routes, err)
	}
}

// When every group is taken, a /24 with longer routes falls back to the
// trie, in the program too.
func TestRouteGroupsExhausted(t *testing.T) {
	u := newUPF(t, RoleAccess)
	groups := uint32(len(u.d.routes.by8) / 2 / groupSize)
	for i := range groups {
		if err := u.d.PutRoute(netip.PrefixFrom(addrOf(0x0b000000|i<<8|1), 32), nhCore); err != nil {
			t.Fatal(err)
		}
	}
	inTrie := mustAddr("203.0.114.77")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(u.d.PutRoute(netip.MustParsePrefix("203.0.114.0/24"), nhCore))
	must(u.d.PutRoute(netip.PrefixFrom(inTrie, 32), nhCoreVLAN))
	if v := u.d.routes.load(u.d.routes.by24, addr32(inTrie)>>8); v != routeLPM {
		t.Fatalf("routes4_tbl24 of %s is %#x, want the trie", inTrie, v)
	}
	for dst, nh := range map[netip.Addr]uint32{inTrie: nhCoreVLAN, mustAddr("203.0.114.78"): nhCore} {
		p := ipPacket{src: ue4, dst: dst, ttl: 9, size: 3}
		in := gtpFrame(t, fromGNB, n3Addr, gpdu(teidRoute), p.bytes(t))
		testsupport.EqualFrames(t, u.expect(t, in, xdplink.Redirect, "uplink_forward"), p.hop().frame(t, nhL2(nh)))
	}
}
