package upfxdp

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/platform/freebind"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// A G-PDU to an unknown TEID, over IPv4 or IPv6, goes to the kernel
// unchanged, for the GTP-U endpoint to answer with an Error Indication,
// while its CPU has passed fewer than the rate this second and a socket
// listens on the GTP-U port of the address it was sent to; otherwise it
// is dropped as without a rate: with no socket the kernel would answer the
// gNB with an ICMP Port Unreachable. Either way it counts as
// drop_unknown_teid, the passed ones in UnknownTEIDPassed too. Another CPU
// has a rate of its own, and a G-PDU of a known TEID, or one that found no
// socket, takes none of it.
func TestUnknownTEIDPassedAtRate(t *testing.T) {
	const rate = 3
	d := openTest(t, Options{MaxSessions: 64, N3Addresses: []netip.Addr{n3Addr, n3Addr2, n3Addr6}, ErrorIndicationRate: rate})
	installRules(t, d)
	u := attachTest(t, d, fakeIfindex, "lo", RoleAccess|RoleCore)
	inner := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 20}.bytes(t)
	unknown4 := gtpFrame(t, fromGNB, n3Addr, gpdu(teidUnknown), inner)
	unknown6 := gtp6Frame(t, fromGNB, n3Addr6, gpdu(teidUnknown), inner)
	known := gtpFrame(t, fromGNB, n3Addr, gpdu(teidFARDrop), inner)
	passedUp := func() uint64 {
		t.Helper()
		n, err := d.UnknownTEIDPassed()
		check(t, err)
		return n
	}
	unknownTEID := func(in []byte, act xdplink.Action) {
		t.Helper()
		before := passedUp()
		out := u.expect(t, in, act, "drop_unknown_teid")
		want := uint64(0)
		if act == xdplink.Pass {
			testsupport.EqualFrames(t, out, in)
			want = 1
		}
		if got := passedUp() - before; got != want {
			t.Errorf("%v: UnknownTEIDPassed grew by %d, want %d", act, got, want)
		}
	}
	passed := func(in []byte) { unknownTEID(in, xdplink.Pass) }
	// A test run looks sockets up in its thread's namespace.
	check(t, testsupport.Netns(t, "errind").Do(func() error {
		inOneSecond(t, func() {
			onCPU(t, 0, func() {
				unknownTEID(unknown4, xdplink.Drop) // no socket yet
				listenGTPU(t, n3Addr)
				listenGTPU(t, n3Addr6)
				passed(unknown4)
				u.expect(t, known, xdplink.Drop, "drop_far")
				passed(unknown6)
				passed(unknown4)
				unknownTEID(unknown6, xdplink.Drop)
				unknownTEID(unknown4, xdplink.Drop)
			})
			var set unix.CPUSet
			check(t, unix.SchedGetaffinity(0, &set))
			if set.IsSet(1) {
				onCPU(t, 1, func() { passed(unknown4) })
			}
		})
		return nil
	}))
}

// listenGTPU binds the GTP-U port of addr in the calling thread's
// namespace, whether addr is on an interface or not, until the test ends.
func listenGTPU(t *testing.T, addr netip.Addr) {
	t.Helper()
	network := "udp4"
	if addr.Is6() {
		network = "udp6"
	}
	conn, err := freebind.ListenUDP(network, netip.AddrPortFrom(addr, 2152).String())
	check(t, err)
	t.Cleanup(func() { conn.Close() })
}

// Maps pinned by a build before Error Indications, which had no
// unknown_teid_windows, are taken over with what they hold, the new map
// pinned beside them, and this build's program passes G-PDUs to unknown
// TEIDs up at its rate over them, to a GTP-U socket.
func TestPinsOfABuildBeforeErrorIndications(t *testing.T) {
	d := openTest(t, Options{MaxSessions: 64, N3Addresses: []netip.Addr{n3Addr, n3Addr2, n3Addr6}, ErrorIndicationRate: 1})
	installRules(t, d)
	pin := filepath.Join(d.opts.PinPath, "unknown_teid_windows")
	check(t, os.Remove(pin))
	again, err := Open(d.opts)
	if err != nil {
		t.Fatalf("maps pinned without unknown_teid_windows: %v", err)
	}
	defer again.Close()
	if again.Unused() {
		t.Error("the pinned maps were not taken over")
	}
	if _, err := os.Stat(pin); err != nil {
		t.Errorf("unknown_teid_windows is not pinned after the upgrade: %v", err)
	}
	u := attachTest(t, again, fakeIfindex, "lo", RoleAccess)
	inner := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 20}.bytes(t)
	u.expect(t, gtpFrame(t, fromGNB, n3Addr, gpdu(teidFARDrop), inner), xdplink.Drop, "drop_far")
	check(t, testsupport.Netns(t, "errindpins").Do(func() error {
		listenGTPU(t, n3Addr)
		inOneSecond(t, func() {
			onCPU(t, 0, func() {
				u.expect(t, gtpFrame(t, fromGNB, n3Addr, gpdu(teidUnknown), inner), xdplink.Pass, "drop_unknown_teid")
			})
		})
		return nil
	}))
	if n, err := again.UnknownTEIDPassed(); err != nil || n != 1 {
		t.Errorf("UnknownTEIDPassed %d (%v), want 1", n, err)
	}
}

// inOneSecond runs f, which must take well under a second, at the start
// of a second of the coarse clock the program counts its rate by.
func inOneSecond(t *testing.T, f func()) {
	t.Helper()
	var ts unix.Timespec
	check(t, unix.ClockGettime(unix.CLOCK_MONOTONIC_COARSE, &ts))
	time.Sleep(time.Second - time.Duration(ts.Nsec) + 20*time.Millisecond)
	second := ts.Sec + 1
	f()
	check(t, unix.ClockGettime(unix.CLOCK_MONOTONIC_COARSE, &ts))
	if ts.Sec != second {
		t.Fatalf("the test ran into second %d of the coarse clock, from %d: too slow to tell the rate", ts.Sec, second)
	}
}
