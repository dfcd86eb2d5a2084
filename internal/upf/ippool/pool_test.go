package ippool

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func newPool(t *testing.T, prefix string, exclude ...string) *Pool {
	t.Helper()
	var ex []netip.Addr
	for _, s := range exclude {
		ex = append(ex, addr(s))
	}
	p, err := New(netip.MustParsePrefix(prefix), ex...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func allocate(t *testing.T, p *Pool) netip.Addr {
	t.Helper()
	a, err := p.Allocate()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func wantErr(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error = %v, want one containing %q", err, want)
	}
}

func TestExhaustion(t *testing.T) {
	p := newPool(t, "10.45.0.0/29", "10.45.0.1")
	if p.Size() != 5 || p.UnitBits() != 32 {
		t.Fatalf("Size() = %d, UnitBits() = %d, want 5, 32", p.Size(), p.UnitBits())
	}
	for _, want := range []string{"10.45.0.2", "10.45.0.3", "10.45.0.4", "10.45.0.5", "10.45.0.6"} {
		if got := allocate(t, p); got != addr(want) {
			t.Errorf("Allocate() = %v, want %v", got, want)
		}
	}
	_, err := p.Allocate()
	if !errors.Is(err, ErrExhausted) {
		t.Fatalf("Allocate() on a full pool: %v, want ErrExhausted", err)
	}
	wantErr(t, err, "UE address pool 10.45.0.0/29: no free address")
	if p.Allocated() != 5 {
		t.Errorf("Allocated() = %d, want 5", p.Allocated())
	}
}

func TestSmallIPv4Pools(t *testing.T) {
	// /31 and /32 have no network or broadcast address (RFC 3021).
	p := newPool(t, "192.0.2.4/31")
	if a, b := allocate(t, p), allocate(t, p); a != addr("192.0.2.4") || b != addr("192.0.2.5") {
		t.Errorf("/31 gave %v, %v", a, b)
	}
	p = newPool(t, "192.0.2.7/32")
	if a := allocate(t, p); a != addr("192.0.2.7") {
		t.Errorf("/32 gave %v", a)
	}
	if _, err := p.Allocate(); !errors.Is(err, ErrExhausted) {
		t.Errorf("second allocation of a /32: %v", err)
	}
}

func TestReserveReleaseErrors(t *testing.T) {
	p := newPool(t, "10.45.0.0/24", "10.45.0.1")
	if err := p.Reserve(addr("10.45.0.7")); err != nil {
		t.Fatal(err)
	}
	wantErr(t, p.Reserve(addr("10.45.0.7")), "UE address pool 10.45.0.0/24: 10.45.0.7 is already allocated")
	wantErr(t, p.Reserve(addr("10.45.0.1")), "10.45.0.1 is excluded")
	wantErr(t, p.Reserve(addr("10.45.0.0")), "10.45.0.0 is the network or broadcast address")
	wantErr(t, p.Reserve(addr("10.45.0.255")), "10.45.0.255 is the network or broadcast address")
	wantErr(t, p.Reserve(addr("10.45.1.1")), "10.45.1.1 is outside the pool")
	wantErr(t, p.Reserve(addr("::ffff:10.45.0.9")), "::ffff:10.45.0.9 is outside the pool")
	wantErr(t, p.Reserve(netip.Addr{}), "invalid IP is outside the pool")

	wantErr(t, p.Release(addr("10.45.0.8")), "10.45.0.8 is not allocated")
	wantErr(t, p.Release(addr("10.45.0.1")), "10.45.0.1 is not allocated")
	wantErr(t, p.Release(addr("10.45.0.255")), "is the network or broadcast address")
	wantErr(t, p.Release(addr("10.46.0.7")), "is outside the pool")
	if err := p.Release(addr("10.45.0.7")); err != nil {
		t.Fatal(err)
	}
	wantErr(t, p.Release(addr("10.45.0.7")), "10.45.0.7 is not allocated")
	if p.Allocated() != 0 || p.Size() != 253 {
		t.Errorf("Allocated() = %d, Size() = %d, want 0, 253", p.Allocated(), p.Size())
	}
}

func TestNewErrors(t *testing.T) {
	for _, tt := range []struct{ prefix, exclude, want string }{
		{prefix: "10.0.0.0/7", exclude: "", want: "UE address pool 10.0.0.0/7: holds 2^25 addresses, more than the 2^24 a pool supports"},
		{prefix: "2001:db8::/32", exclude: "", want: "UE address pool 2001:db8::/32: holds 2^32 /64 prefixes, more than the 2^24"},
		{prefix: "2001:db8::/96", exclude: "", want: "UE address pool 2001:db8::/96: an IPv6 pool hands out /64 prefixes, so it must be /64 or shorter"},
		{prefix: "10.45.0.0/16", exclude: "10.46.0.1", want: "UE address pool 10.45.0.0/16: 10.46.0.1 is outside the pool"},
	} {
		var ex []netip.Addr
		if tt.exclude != "" {
			ex = append(ex, addr(tt.exclude))
		}
		_, err := New(netip.MustParsePrefix(tt.prefix), ex...)
		wantErr(t, err, tt.want)
	}
	_, err := New(netip.Prefix{})
	wantErr(t, err, "a UE address pool needs a valid prefix")
}

func TestReuseOrder(t *testing.T) {
	p := newPool(t, "10.45.0.0/29") // .1 to .6
	var a [4]netip.Addr
	for i := range a {
		a[i] = allocate(t, p)
	}
	// Never-used addresses go before released ones.
	if err := p.Release(a[0]); err != nil {
		t.Fatal(err)
	}
	if got := allocate(t, p); got != addr("10.45.0.5") {
		t.Errorf("Allocate() = %v, want the never-used 10.45.0.5", got)
	}
	for _, i := range []int{2, 1, 3} {
		if err := p.Release(a[i]); err != nil {
			t.Fatal(err)
		}
	}
	// .6 is left, then the released ones, least recently released first.
	for _, want := range []netip.Addr{addr("10.45.0.6"), a[0], a[2], a[1], a[3]} {
		if got := allocate(t, p); got != want {
			t.Errorf("Allocate() = %v, want %v", got, want)
		}
	}
}

func TestReserveAhead(t *testing.T) {
	p := newPool(t, "10.45.0.0/29")
	for _, s := range []string{"10.45.0.2", "10.45.0.3"} {
		if err := p.Reserve(addr(s)); err != nil {
			t.Fatal(err)
		}
	}
	// Released before the cursor reached it, .3 is found by the cursor.
	if err := p.Release(addr("10.45.0.3")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"10.45.0.1", "10.45.0.3", "10.45.0.4"} {
		if got := allocate(t, p); got != addr(want) {
			t.Errorf("Allocate() = %v, want %v", got, want)
		}
	}
}

func TestReserveFromQueue(t *testing.T) {
	p := newPool(t, "10.45.0.0/29")
	for range 6 {
		allocate(t, p)
	}
	for _, s := range []string{"10.45.0.1", "10.45.0.2"} {
		if err := p.Release(addr(s)); err != nil {
			t.Fatal(err)
		}
	}
	// .1 is taken out of the queue, then released again: it keeps its
	// place instead of being queued twice.
	for range 3 {
		if err := p.Reserve(addr("10.45.0.1")); err != nil {
			t.Fatal(err)
		}
		if err := p.Release(addr("10.45.0.1")); err != nil {
			t.Fatal(err)
		}
	}
	if len(p.released)-p.head != 2 {
		t.Errorf("%d queued, want 2", len(p.released)-p.head)
	}
	if a, b := allocate(t, p), allocate(t, p); a != addr("10.45.0.1") || b != addr("10.45.0.2") {
		t.Errorf("Allocate() = %v, %v, want 10.45.0.1, 10.45.0.2", a, b)
	}
	if _, err := p.Allocate(); !errors.Is(err, ErrExhausted) {
		t.Errorf("Allocate() = %v, want ErrExhausted", err)
	}
}

// TestRandomOps checks the pool against a plain set under random operations.
func TestRandomOps(t *testing.T) {
	p := newPool(t, "10.45.0.0/26", "10.45.0.1", "10.45.0.62")
	rng := rand.New(rand.NewPCG(1, 2))
	inUse := map[netip.Addr]bool{}
	for range 20000 {
		a := netip.AddrFrom4([4]byte{10, 45, 0, byte(rng.IntN(64))})
		switch rng.IntN(3) {
		case 0:
			got, err := p.Allocate()
			if err != nil {
				if !errors.Is(err, ErrExhausted) || len(inUse) != p.Size() {
					t.Fatalf("Allocate() with %d in use: %v", len(inUse), err)
				}
				continue
			}
			if inUse[got] {
				t.Fatalf("Allocate() = %v, which is in use", got)
			}
			inUse[got] = true
		case 1:
			free := a.As4()[3] >= 2 && a.As4()[3] <= 61 && !inUse[a] // not excluded, network or broadcast
			if err := p.Reserve(a); (err == nil) != free {
				t.Fatalf("Reserve(%v) = %v, free %v", a, err, free)
			} else if err == nil {
				inUse[a] = true
			}
		case 2:
			if err := p.Release(a); (err == nil) != inUse[a] {
				t.Fatalf("Release(%v) = %v, in use %v", a, err, inUse[a])
			}
			delete(inUse, a)
		}
		if p.Allocated() != len(inUse) {
			t.Fatalf("Allocated() = %d, want %d", p.Allocated(), len(inUse))
		}
	}
	if len(p.released)-p.head > p.Size() {
		t.Errorf("%d queued in a pool of %d", len(p.released)-p.head, p.Size())
	}
}

func TestLargePool(t *testing.T) {
	start := time.Now()
	p := newPool(t, "10.0.0.0/8")
	if p.Size() != 1<<24-2 {
		t.Fatalf("Size() = %d", p.Size())
	}
	const n = 1_000_000
	var last netip.Addr
	for range n {
		a, err := p.Allocate()
		if err != nil {
			t.Fatal(err)
		}
		last = a
	}
	if last != addr("10.15.66.64") { // 10.0.0.0 + n
		t.Errorf("allocation %d = %v, want 10.15.66.64", n, last)
	}
	if p.Allocated() != n {
		t.Errorf("Allocated() = %d, want %d", p.Allocated(), n)
	}
	t.Logf("%d allocations from a /8 in %v", n, time.Since(start))
}

func TestIPv6(t *testing.T) {
	p := newPool(t, "2001:db8:cafe::/48", "2001:db8:cafe::1")
	if p.Size() != 1<<16-1 || p.UnitBits() != 64 {
		t.Fatalf("Size() = %d, UnitBits() = %d", p.Size(), p.UnitBits())
	}
	// The excluded gateway address takes its whole /64.
	if a, b := allocate(t, p), allocate(t, p); a != addr("2001:db8:cafe:1::") || b != addr("2001:db8:cafe:2::") {
		t.Errorf("Allocate() = %v, %v", a, b)
	}
	// Any address of a /64 stands for it.
	wantErr(t, p.Reserve(addr("2001:db8:cafe:2::99")), "2001:db8:cafe:2::99 is already allocated")
	if err := p.Reserve(addr("2001:db8:cafe:ffff:1:2:3:4")); err != nil {
		t.Fatal(err)
	}
	if err := p.Release(addr("2001:db8:cafe:ffff::")); err != nil {
		t.Fatal(err)
	}
	wantErr(t, p.Reserve(addr("2001:db8:caff::")), "2001:db8:caff:: is outside the pool")
	wantErr(t, p.Reserve(addr("10.45.0.1")), "10.45.0.1 is outside the pool")

	single := newPool(t, "2001:db8:1:2::/64")
	if a := allocate(t, single); a != addr("2001:db8:1:2::") {
		t.Errorf("Allocate() = %v", a)
	}
	if _, err := single.Allocate(); !errors.Is(err, ErrExhausted) {
		t.Errorf("second allocation of a /64 pool: %v", err)
	}
}

func TestConcurrent(t *testing.T) {
	// The pool outlasts the allocations, so none reuses an address even
	// though half are released.
	p := newPool(t, "10.45.0.0/20")
	const workers, each = 8, 400
	got := make([][]netip.Addr, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				a, err := p.Allocate()
				if err != nil {
					t.Error(err)
					return
				}
				got[w] = append(got[w], a)
				if i%2 == 1 {
					if err := p.Release(a); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	seen := map[netip.Addr]bool{}
	for _, as := range got {
		for _, a := range as {
			if seen[a] {
				t.Fatalf("%v handed out twice", a)
			}
			seen[a] = true
		}
	}
	if p.Allocated() != workers*each/2 {
		t.Errorf("Allocated() = %d, want %d", p.Allocated(), workers*each/2)
	}
}

// UnitBits returns the prefix length of the units: 32 for IPv4, 64 for IPv6.
func (p *Pool) UnitBits() int {
	if p.prefix.Addr().Is4() {
		return 32
	}
	return 64
}
