// Package testsupport is the harness the tests share: what they need of the
// machine, their network namespaces, where they pin BPF objects, whether an
// interface runs an XDP program, how they compare frames and how they report
// a BPF program the kernel refused. Only tests import it.
package testsupport

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/platform/namespace"
)

// NeedRoot skips a test that is not run as root, saying what it needs root
// for ("BPF", "network namespaces and XDP").
func NeedRoot(t testing.TB, what string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("needs root: %s", what)
	}
}

// Netns is a network namespace of the test's own, named from prefix,
// deleted when the test ends; a test not run as root is skipped.
func Netns(t testing.TB, prefix string) *namespace.Netns {
	t.Helper()
	NeedRoot(t, "network namespaces")
	ns, err := namespace.New(prefix)
	if err != nil {
		t.Fatal(err)
	}
	Cleanup(t, ns.Delete)
	return ns
}

// Cleanup runs f when the test ends, failing the test if f fails.
func Cleanup(t testing.TB, f func() error) {
	t.Cleanup(func() {
		if err := f(); err != nil {
			t.Error(err)
		}
	})
}

// Go runs f in the background until the test ends, then cancels f's
// context and waits for f, failing the test if f failed.
func Go(t testing.TB, f func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	Cleanup(t, func() error {
		cancel()
		return <-done
	})
}

// NoIPv6 turns IPv6 off in a namespace, so that nothing but the test's
// frames crosses its links (no router or neighbour solicitations).
func NoIPv6(t testing.TB, ns *namespace.Netns) {
	t.Helper()
	for _, key := range []string{"net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"} {
		if err := ns.Sysctl(key, "1"); err != nil {
			t.Fatal(err)
		}
	}
}

var pins atomic.Uint64

// PinDir is a bpffs directory of the test's own, which need not exist yet
// (the data path mounts bpffs and creates it), removed with what is pinned
// in it when the test ends.
func PinDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join("/sys/fs/bpf", fmt.Sprintf("xdp5g-test-%d-%d", os.Getpid(), pins.Add(1)))
	Cleanup(t, func() error { return os.RemoveAll(dir) })
	return dir
}

// BPFFS is a bpffs of the test's own, mounted in a new directory and
// unmounted when the test ends.
func BPFFS(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bpf")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("bpf", dir, "bpf", 0, ""); err != nil {
		t.Fatal(err)
	}
	Cleanup(t, func() error { return unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// XDPAttached says whether an interface of a namespace has an XDP program.
func XDPAttached(t testing.TB, in *namespace.Netns, ifname string) bool {
	t.Helper()
	ns, err := netns.GetFromName(in.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l, err := h.LinkByName(ifname)
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().Xdp != nil && l.Attrs().Xdp.Attached
}

// FreeAddr is a loopback address whose port nothing listens on, over
// network "tcp" or "udp": where a test can have a server listen.
func FreeAddr(t testing.TB, network string) string {
	t.Helper()
	var addr net.Addr
	var err error
	if network == "udp" {
		var c net.PacketConn
		if c, err = net.ListenPacket(network, "127.0.0.1:0"); err == nil {
			addr, err = c.LocalAddr(), c.Close()
		}
	} else {
		var l net.Listener
		if l, err = net.Listen(network, "127.0.0.1:0"); err == nil {
			addr, err = l.Addr(), l.Close()
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return addr.String()
}

// CheckLoad fails a test that could not load BPF programs, with the
// verifier's whole log when the verifier refused one.
func CheckLoad(t testing.TB, err error) {
	t.Helper()
	var ve *ebpf.VerifierError
	switch {
	case errors.As(err, &ve):
		t.Fatalf("%+v", ve)
	case err != nil:
		t.Fatal(err)
	}
}

// EqualFrames fails a test, which goes on, when a frame is not the one it
// wants byte for byte; it says where they part and dumps both.
func EqualFrames(t testing.TB, got, want []byte) bool {
	t.Helper()
	if d := FrameDiff(got, want); d != "" {
		t.Error(d)
		return false
	}
	return true
}

// FrameDiff is "" for frames the same byte for byte, else where they part
// and both dumped.
func FrameDiff(got, want []byte) string {
	if bytes.Equal(got, want) {
		return ""
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	return fmt.Sprintf("frames differ from byte %d\ngot %d bytes:\n%swant %d bytes:\n%s", i, len(got), hex.Dump(got), len(want), hex.Dump(want))
}

// UDP6Checksum checks on its own the UDP checksum of an untagged Ethernet
// frame of IPv6: not 0, and the sum over the pseudo-header and the
// datagram all ones.
func UDP6Checksum(frame []byte) error {
	const ethLen, ipv6Len, udpProto = 14, 40, 17
	if len(frame) < ethLen+ipv6Len+8 {
		return fmt.Errorf("a frame of %d bytes holds no UDP/IPv6 header", len(frame))
	}
	ip := frame[ethLen:]
	udp := ip[ipv6Len:]
	pseudo := append(append([]byte{}, ip[8:ipv6Len]...), 0, 0, byte(len(udp)>>8), byte(len(udp)), 0, 0, 0, udpProto)
	sum := gopacket.FoldChecksum(gopacket.ComputeChecksum(udp, gopacket.ComputeChecksum(pseudo, 0)))
	if udp[6] == 0 && udp[7] == 0 || sum != 0 {
		return fmt.Errorf("UDP checksum %#04x does not verify", uint16(udp[6])<<8|uint16(udp[7]))
	}
	return nil
}
