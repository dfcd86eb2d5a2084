package namespace

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/xdp5g/xdp5g/internal/lab/baseline"
)

// newNetns is testsupport.Netns, which this package's tests cannot import
// (it builds on the package), for a namespace a test may delete itself.
func newNetns(t *testing.T, prefix string) *Netns {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces")
	}
	n, err := New(prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if n.handle.IsOpen() {
			if err := n.Delete(); err != nil {
				t.Error(err)
			}
		}
	})
	return n
}

func TestUniqueName(t *testing.T) {
	a, b := UniqueName("a-rather-long-prefix"), UniqueName("a-rather-long-prefix")
	if len(a) > 15 || !strings.HasPrefix(a, "a-rather-") || a == b {
		t.Errorf("UniqueName gave %q and %q", a, b)
	}
}

// A namespace outlives iproute2 adding and deleting one of its own beside
// it, and is deleted as before: iproute2 finds the directory a mount point
// and does not mount it over the namespace.
func TestDeleteAfterIPNetnsAdd(t *testing.T) {
	a := newNetns(t, "tb-ip-")
	other := UniqueName("tb-ipr-")
	for _, args := range [][]string{{"add", other}, {"delete", other}} {
		if out, err := exec.Command("ip", append([]string{"netns"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip netns %s: %v: %s", args[0], err, out)
		}
	}
	if err := a.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(runDir, a.Name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is still in %s after Delete: %v", a.Name, runDir, err)
	}
}

func TestDeleteRemovesNamespaceAndLinks(t *testing.T) {
	a, b := newNetns(t, "tb-a-"), newNetns(t, "tb-b-")
	if _, err := os.Stat(filepath.Join("/run/netns", a.Name)); err != nil {
		t.Fatalf("not listed by ip netns: %v", err)
	}
	if err := Veth(a, "va", b, "vb"); err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := netns.GetFromName(a.Name); err == nil {
		t.Errorf("netns %s still exists after Delete", a.Name)
	}
	// The kernel destroys a namespace asynchronously; its veth ends, and
	// with them their peers, go with it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, err := b.Link("vb")
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("veth peer outlived the deleted namespace")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestDoSwitchesAndRestores(t *testing.T) {
	n := newNetns(t, "tb-do-")
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	err = n.Do(func() error {
		cur, err := netns.Get()
		if err != nil {
			return err
		}
		defer cur.Close()
		if !cur.Equal(n.handle) {
			t.Error("Do ran f outside the namespace")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	after, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if !after.Equal(orig) {
		t.Error("Do left the thread in the namespace")
	}
}

// Two namespaces, a veth between them, and a route in b to an address on a's
// loopback: a UDP datagram sent from b arrives at a socket in a.
func TestRoutedUDP(t *testing.T) {
	a, b := newNetns(t, "tb-a-"), newNetns(t, "tb-b-")
	if err := Veth(a, "va", b, "vb"); err != nil {
		t.Fatal(err)
	}
	_, macA, err := a.Link("va")
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []error{
		a.AddAddr("va", "10.0.0.1/24"),
		a.AddAddr("lo", "10.9.0.1/32"),
		b.AddAddr("vb", "10.0.0.2/24"),
		b.AddRoute("10.9.0.0/24", "10.0.0.1", "vb"),
		b.SetNeigh("vb", "10.0.0.1", macA),
		a.Sysctl("net.ipv4.ip_forward", "1"),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}

	var got []byte
	err = a.Do(func() error {
		got, err = os.ReadFile("/proc/sys/net/ipv4/ip_forward")
		return err
	})
	if err != nil || string(got) != "1\n" {
		t.Errorf("ip_forward in %s = %q, %v", a.Name, got, err)
	}
	index, _, err := b.Link("vb")
	if err != nil {
		t.Fatal(err)
	}
	neighs, err := b.nl.NeighList(index, netlink.FAMILY_V4)
	if err != nil || len(neighs) != 1 || neighs[0].State != netlink.NUD_PERMANENT ||
		!bytes.Equal(neighs[0].HardwareAddr, macA) {
		t.Errorf("neighbours on vb: %+v, %v", neighs, err)
	}

	var server, client net.PacketConn
	// A socket stays in the namespace it was created in.
	if err := a.Do(func() (err error) {
		server, err = net.ListenPacket("udp4", "10.9.0.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	if err := b.Do(func() (err error) {
		client, err = net.ListenPacket("udp4", ":0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := client.WriteTo([]byte("hello"), server.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	server.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, from, err := server.ReadFrom(buf)
	if err != nil || string(buf[:n]) != "hello" || from.(*net.UDPAddr).IP.String() != "10.0.0.2" {
		t.Fatalf("received %q from %v, %v", buf[:n], from, err)
	}
}

func TestAttachXDP(t *testing.T) {
	a, b := newNetns(t, "tb-a-"), newNetns(t, "tb-b-")
	if err := Veth(a, "va", b, "vb"); err != nil {
		t.Fatal(err)
	}
	prog, err := baseline.LoadPass()
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	// IFLA_XDP_ATTACHED values from linux/if_link.h.
	const attachedDrv, attachedSKB = 1, 2
	for _, generic := range []bool{false, true} {
		want := uint32(attachedDrv)
		if generic {
			want = attachedSKB
		}
		l, err := a.AttachXDP("va", prog, generic)
		if err != nil {
			t.Fatal(err)
		}
		if xdp := xdpOf(t, a, "va"); xdp == nil || xdp.AttachMode != want {
			t.Errorf("generic=%v: XDP state after attach %+v", generic, xdp)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if xdp := xdpOf(t, a, "va"); xdp != nil && xdp.Attached {
			t.Errorf("generic=%v: still attached after Close: %+v", generic, xdp)
		}
	}
}

func xdpOf(t *testing.T, n *Netns, ifname string) *netlink.LinkXdp {
	l, err := n.link(ifname)
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().Xdp
}

// A veth drops what it transmits while its peer is down, and says so.
func TestTxDropped(t *testing.T) {
	a, b := newNetns(t, "tb-a-"), newNetns(t, "tb-b-")
	if err := Veth(a, "va", b, "vb"); err != nil {
		t.Fatal(err)
	}
	_, peerMAC, err := b.Link("vb")
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{a.AddAddr("va", "10.9.9.1/24"), a.SetNeigh("va", "10.9.9.2", peerMAC)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	vb, err := b.link("vb")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.nl.LinkSetDown(vb); err != nil {
		t.Fatal(err)
	}
	const datagrams = 3
	if err := a.Do(func() error {
		conn, err := net.Dial("udp4", "10.9.9.2:9")
		if err != nil {
			return err
		}
		defer conn.Close()
		for range datagrams {
			if _, err := conn.Write([]byte("dropped")); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := a.TxDropped("va"); err != nil || got != datagrams {
		t.Errorf("TxDropped = %d, %v; want %d", got, err, datagrams)
	}
	if _, err := a.TxDropped("nope"); err == nil {
		t.Error("TxDropped of no link gave no error")
	}
}
