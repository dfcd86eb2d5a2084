// Package xdplink attaches programs to interfaces with pinned links, so an
// attachment outlives the daemon and the next run replaces its program
// atomically: a restart drops nothing. Action names the verdicts of XDP
// programs.
package xdplink

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// Mode is the XDP attach mode.
type Mode string

const (
	ModeNative  Mode = "native"
	ModeGeneric Mode = "generic"
	ModeOffload Mode = "offload"
)

func (m Mode) flags() (link.XDPAttachFlags, error) {
	switch m {
	case ModeNative, "":
		return link.XDPDriverMode, nil
	case ModeGeneric:
		return link.XDPGenericMode, nil
	case ModeOffload:
		return link.XDPOffloadMode, nil
	}
	return 0, fmt.Errorf("unknown XDP mode %q (native, generic or offload)", m)
}

// XDP attaches prog to ifname, an interface of the calling thread's
// namespace, and pins the link at pin; or, if pin holds a link to the same
// interface in the same mode, replaces that link's program atomically. A
// link in another mode (a changed xdp_mode) goes first: the kernel runs
// one mode at a time. So does one of an interface of another namespace
// that has the same index (a changed netns).
func XDP(pin string, prog *ebpf.Program, ifname string, mode Mode) error {
	flags, err := mode.flags()
	if err != nil {
		return err
	}
	return attach(pin, ifname, prog, func(info *link.Info) uint32 {
		if xdp := info.XDP(); xdp != nil && runs(int(xdp.Ifindex), info.Program, flags) {
			return xdp.Ifindex
		}
		return 0
	}, func(ifindex int) (link.Link, error) {
		l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex, Flags: flags})
		switch {
		case err != nil && mode == ModeOffload:
			return nil, fmt.Errorf("hardware offload is not available on %s (its driver cannot run XDP programs on the NIC); use native or generic mode: %w", ifname, err)
		case errors.Is(err, unix.EBUSY):
			return nil, fmt.Errorf("%s runs another XDP program (attached by hand, or by a daemon with another datapath.pin_path): detach it first: %w", ifname, err)
		case err != nil:
			return nil, fmt.Errorf("attaching XDP (%s) to %s: %w", mode, ifname, err)
		}
		return l, nil
	})
}

// attachedAs is the mode netlink reports (IFLA_XDP_ATTACHED) of a program
// attached with the flags.
var attachedAs = map[link.XDPAttachFlags]uint32{link.XDPDriverMode: nl.XDP_ATTACHED_DRV,
	link.XDPGenericMode: nl.XDP_ATTACHED_SKB, link.XDPOffloadMode: nl.XDP_ATTACHED_HW}

// runs says whether interface ifindex of the calling thread's namespace
// runs program id in the mode of the flags; so it is taken when netlink
// cannot tell.
func runs(ifindex int, id ebpf.ProgramID, flags link.XDPAttachFlags) bool {
	l, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		return true
	}
	x := l.Attrs().Xdp
	return x != nil && x.Attached && x.ProgId == uint32(id) && x.AttachMode == attachedAs[flags]
}

// tcxHolds says whether link id is one of the TC ingress hook of interface
// ifindex of the calling thread's namespace, not of an interface with that
// index in another namespace; so it is taken when the kernel cannot tell.
func tcxHolds(ifindex int, id link.ID) bool {
	q, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: ebpf.AttachTCXIngress})
	if err != nil || len(q.Programs) > 0 && !q.HaveLinkInfo() {
		return true
	}
	return slices.ContainsFunc(q.Programs, func(p link.AttachedProgram) bool {
		l, _ := p.LinkID()
		return l == id
	})
}

// TCIngress is XDP for a program at the TC ingress hook (tcx) of ifname.
func TCIngress(pin string, prog *ebpf.Program, ifname string) error {
	return attach(pin, ifname, prog, func(info *link.Info) uint32 {
		if tcx := info.TCX(); tcx != nil && tcxHolds(int(tcx.Ifindex), info.ID) {
			return tcx.Ifindex
		}
		return 0
	}, func(ifindex int) (link.Link, error) {
		l, err := link.AttachTCX(link.TCXOptions{Program: prog, Attach: ebpf.AttachTCXIngress, Interface: ifindex})
		if err != nil {
			return nil, fmt.Errorf("attaching to TC ingress of %s: %w", ifname, err)
		}
		return l, nil
	})
}

// attach gives the link pinned at pin prog if that link is of the wanted
// kind on ifname (linkIfindex says where it is, 0 for another kind), and
// otherwise makes a new link with newLink and pins it. A pinned link to an
// interface since re-created is defunct: its pin goes.
func attach(pin, ifname string, prog *ebpf.Program, linkIfindex func(*link.Info) uint32,
	newLink func(ifindex int) (link.Link, error)) error {
	iface, err := net.InterfaceByName(ifname)
	if err != nil {
		return fmt.Errorf("%s: %w", ifname, err)
	}
	if old, err := link.LoadPinnedLink(pin, nil); err == nil {
		if info, err := old.Info(); err == nil && int(linkIfindex(info)) == iface.Index {
			defer old.Close()
			return old.Update(prog)
		}
		// Detached (closed unpinned) before the new link is made, which
		// the kernel would refuse beside it on the same interface.
		if err := errors.Join(old.Unpin(), old.Close()); err != nil {
			return err
		}
	}
	l, err := newLink(iface.Index)
	if err != nil {
		return err
	}
	defer l.Close()
	return l.Pin(pin)
}

// Detach removes the attachment pinned at pin. Closing the last file
// descriptor detaches at once; removing the pin alone would leave the
// detach to a kernel work queue, a moment later.
func Detach(pin string) error {
	l, err := link.LoadPinnedLink(pin, nil)
	if err != nil {
		return fmt.Errorf("no xdp5g attachment: %w", err)
	}
	defer l.Close()
	if err := l.Unpin(); err != nil {
		return err
	}
	return l.Close()
}

// DetachAll removes every attachment pinned in dir; none if dir does not
// exist.
func DetachAll(dir string) error {
	pins, err := Pinned(dir)
	var errs []error
	for _, p := range pins {
		if err := Detach(filepath.Join(dir, p)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
		}
	}
	return errors.Join(append(errs, err)...)
}

// Pinned lists the names pinned in dir; none if dir does not exist.
func Pinned(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, nil
}
