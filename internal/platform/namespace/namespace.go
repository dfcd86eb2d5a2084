// Package namespace builds throwaway networks out of named network namespaces
// and veth pairs for tests, the demo and benchmarks.
package namespace

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// maxIfName is IFNAMSIZ less the terminating NUL.
const maxIfName = 15

// UniqueName returns prefix, cut to fit, followed by six random hex digits:
// at most 15 characters, so it is valid as an interface name too.
func UniqueName(prefix string) string {
	const suffix = 6
	var b [suffix / 2]byte
	rand.Read(b[:])
	if len(prefix) > maxIfName-suffix {
		prefix = prefix[:maxIfName-suffix]
	}
	return prefix + hex.EncodeToString(b[:])
}

// Netns is a named network namespace, visible in `ip netns list`.
type Netns struct {
	Name   string
	handle netns.NsHandle
	nl     *netlink.Handle
}

// runDir is where named namespaces are mounted, as iproute2 has them.
const runDir = "/run/netns"

// mountRunDir makes runDir a shared mount point of its own, as iproute2
// does before it mounts a namespace there. Where it is a plain directory,
// iproute2's next `ip netns add` mounts it over itself and hides the
// namespaces mounted there before: they can then be neither unmounted
// nor deleted.
func mountRunDir() error {
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return err
	}
	const shared = unix.MS_SHARED | unix.MS_REC
	if err := unix.Mount("", runDir, "none", shared, ""); !errors.Is(err, unix.EINVAL) {
		return err // nil: a mount point already
	}
	if err := unix.Mount(runDir, runDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	return unix.Mount("", runDir, "none", shared, "")
}

// New creates a namespace named UniqueName(prefix) with lo up.
func New(prefix string) (*Netns, error) {
	n := &Netns{Name: UniqueName(prefix)}
	if err := mountRunDir(); err != nil {
		return nil, fmt.Errorf("mount %s: %w", runDir, err)
	}
	err := onLockedThread(func() (err error) {
		// NewNamed moves the thread into the new namespace.
		n.handle, err = netns.NewNamed(n.Name)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create netns %s: %w", n.Name, err)
	}
	if n.nl, err = netlink.NewHandleAt(n.handle); err == nil {
		err = n.setUp("lo")
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("netns %s: %w", n.Name, err), n.Delete())
	}
	return n, nil
}

// Delete removes the namespace; the kernel destroys it, and the interfaces
// in it, once nothing else holds it.
func (n *Netns) Delete() error {
	if n.nl != nil {
		n.nl.Close()
	}
	return errors.Join(n.handle.Close(), netns.DeleteNamed(n.Name))
}

// Do runs f on the calling goroutine with its OS thread locked and moved into
// the namespace: what syscalls that take an ifindex or open /proc/sys/net
// need.
func (n *Netns) Do(f func() error) error {
	return onLockedThread(func() error {
		if err := netns.Set(n.handle); err != nil {
			return fmt.Errorf("enter netns %s: %w", n.Name, err)
		}
		return f()
	})
}

// onLockedThread runs f, which may switch network namespaces, with the OS
// thread locked, then switches it back. A thread that cannot be switched back
// stays locked, so Go discards it when the goroutine exits.
func onLockedThread(f func() error) (err error) {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	defer func() {
		if restoreErr := netns.Set(orig); restoreErr != nil {
			err = errors.Join(err, fmt.Errorf("restore netns: %w", restoreErr))
			return
		}
		runtime.UnlockOSThread()
	}()
	return f()
}

// Veth creates a veth pair with end aName in a and bName in b, sets both
// up and waits until both run: until the kernel has attached their queues,
// in the background and up to a second later on a busy host, they drop what
// is sent, a first datagram included.
func Veth(a *Netns, aName string, b *Netns, bName string) error {
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: aName},
		PeerName:      bName,
		PeerNamespace: netlink.NsFd(b.handle),
	}
	if err := a.nl.LinkAdd(veth); err != nil {
		return fmt.Errorf("add veth %s/%s: %w", aName, bName, err)
	}
	if err := errors.Join(a.setUp(aName), b.setUp(bName)); err != nil {
		return err
	}
	return errors.Join(a.waitRunning(aName), b.waitRunning(bName))
}

// waitRunning waits up to 5 s for a link's operational state to be up.
func (n *Netns) waitRunning(name string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err := n.link(name)
		if err != nil {
			return err
		}
		if l.Attrs().OperState == netlink.OperUp {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s in %s: %s 5 s after it was set up", name, n.Name, l.Attrs().OperState)
		}
		time.Sleep(time.Millisecond)
	}
}

func (n *Netns) setUp(name string) error {
	l, err := n.link(name)
	if err != nil {
		return err
	}
	if err := n.nl.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up in %s: %w", name, n.Name, err)
	}
	return nil
}

func (n *Netns) link(name string) (netlink.Link, error) {
	l, err := n.nl.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("link %s in %s: %w", name, n.Name, err)
	}
	return l, nil
}

// Link returns the ifindex and MAC address of an interface.
func (n *Netns) Link(name string) (index int, mac net.HardwareAddr, err error) {
	l, err := n.link(name)
	if err != nil {
		return 0, nil, err
	}
	return l.Attrs().Index, l.Attrs().HardwareAddr, nil
}

// TxDropped is how many packets a link of the namespace dropped on
// transmission: a veth does when its peer's XDP ring is full.
func (n *Netns) TxDropped(name string) (uint64, error) {
	l, err := n.link(name)
	if err != nil {
		return 0, err
	}
	if st := l.Attrs().Statistics; st != nil {
		return st.TxDropped, nil
	}
	return 0, fmt.Errorf("%s in %s has no statistics", name, n.Name)
}

// AddAddr assigns an address in CIDR notation, e.g. "10.0.0.1/24", to an
// interface.
func (n *Netns) AddAddr(ifname, cidr string) error {
	l, err := n.link(ifname)
	if err != nil {
		return err
	}
	addr, err := netlink.ParseAddr(cidr)
	if err != nil {
		return err
	}
	// No DAD: an IPv6 address must be usable as soon as this returns.
	addr.Flags |= unix.IFA_F_NODAD
	if err := n.nl.AddrAdd(l, addr); err != nil {
		return fmt.Errorf("add %s to %s in %s: %w", cidr, ifname, n.Name, err)
	}
	return nil
}

// AddRoute routes dst (CIDR) out of ifname, through the gateway via unless
// via is empty.
func (n *Netns) AddRoute(dst, via, ifname string) error {
	l, err := n.link(ifname)
	if err != nil {
		return err
	}
	_, dstNet, err := net.ParseCIDR(dst)
	if err != nil {
		return err
	}
	route := &netlink.Route{Dst: dstNet, LinkIndex: l.Attrs().Index}
	if via != "" {
		if route.Gw = net.ParseIP(via); route.Gw == nil {
			return fmt.Errorf("bad gateway %q", via)
		}
	}
	if err := n.nl.RouteAdd(route); err != nil {
		return fmt.Errorf("add route %s via %q dev %s in %s: %w", dst, via, ifname, n.Name, err)
	}
	return nil
}

// SetNeigh installs a permanent neighbour entry, so no ARP or NDP is needed.
func (n *Netns) SetNeigh(ifname, ip string, mac net.HardwareAddr) error {
	l, err := n.link(ifname)
	if err != nil {
		return err
	}
	addr := net.ParseIP(ip)
	if addr == nil {
		return fmt.Errorf("bad neighbour address %q", ip)
	}
	family := netlink.FAMILY_V6
	if addr.To4() != nil {
		family = netlink.FAMILY_V4
	}
	err = n.nl.NeighSet(&netlink.Neigh{
		LinkIndex:    l.Attrs().Index,
		Family:       family,
		State:        netlink.NUD_PERMANENT,
		IP:           addr,
		HardwareAddr: mac,
	})
	if err != nil {
		return fmt.Errorf("set neighbour %s on %s in %s: %w", ip, ifname, n.Name, err)
	}
	return nil
}

// Sysctl sets a network sysctl of the namespace, e.g.
// Sysctl("net.ipv4.ip_forward", "1").
func (n *Netns) Sysctl(key, value string) error {
	path := filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
	return n.Do(func() error {
		// /proc/sys/net shows the namespace of the thread that opens it.
		return os.WriteFile(path, []byte(value), 0)
	})
}

// AttachXDP attaches prog to an interface, in generic (skb) mode or else
// native mode; closing the result detaches it.
func (n *Netns) AttachXDP(ifname string, prog *ebpf.Program, generic bool) (io.Closer, error) {
	index, _, err := n.Link(ifname)
	if err != nil {
		return nil, err
	}
	opts := link.XDPOptions{Program: prog, Interface: index, Flags: link.XDPDriverMode}
	if generic {
		opts.Flags = link.XDPGenericMode
	}
	var l link.Link
	// The kernel looks the ifindex up in the caller's namespace.
	err = n.Do(func() (err error) {
		l, err = link.AttachXDP(opts)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("attach XDP to %s in %s: %w", ifname, n.Name, err)
	}
	return l, nil
}
