package xdplink

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"

	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// A run with another xdp_mode than the previous one's runs its program in
// that mode, not in the mode of the link it finds pinned.
func TestAnotherModeReplacesTheLink(t *testing.T) {
	ns, peer := testsupport.Netns(t, "xdplink"), testsupport.Netns(t, "xdplink")
	if err := namespace.Veth(ns, "x0", peer, "x1"); err != nil {
		t.Fatal(err)
	}
	prog := passProgram(t, ebpf.XDP)
	pin := filepath.Join(pinDir(t), "x0")
	for _, c := range []struct {
		mode     Mode
		attached uint32
	}{{ModeGeneric, nl.XDP_ATTACHED_SKB}, {ModeNative, nl.XDP_ATTACHED_DRV}, {ModeGeneric, nl.XDP_ATTACHED_SKB}} {
		err := ns.Do(func() error {
			if err := XDP(pin, prog, "x0", c.mode); err != nil {
				return err
			}
			l, err := netlink.LinkByName("x0")
			if err != nil {
				return err
			}
			if x := l.Attrs().Xdp; x == nil || x.AttachMode != c.attached {
				t.Errorf("after attaching in %s mode, the interface's XDP is %+v; want attach mode %d", c.mode, x, c.attached)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A run in another namespace whose interface has the same name and index
// as the previous run's attaches there, and takes the program off the
// previous one's: at XDP, and at TC ingress.
func TestAnotherNamespaceReplacesTheLink(t *testing.T) {
	xdp, tc := passProgram(t, ebpf.XDP), passProgram(t, ebpf.SchedCLS)
	dir := pinDir(t)
	var before, after *namespace.Netns
	for _, ns := range []**namespace.Netns{&before, &after} {
		*ns = testsupport.Netns(t, "xdplink")
		if err := namespace.Veth(*ns, "x0", testsupport.Netns(t, "xdplink"), "x1"); err != nil {
			t.Fatal(err)
		}
	}
	i, _, err := before.Link("x0")
	if err != nil {
		t.Fatal(err)
	}
	if j, _, err := after.Link("x0"); err != nil || i != j {
		t.Skipf("x0 is interface %d in one namespace, %d (%v) in the other", i, j, err)
	}
	pinned := func() (ids [2]link.ID) {
		for i, name := range []string{"xdp", "tc"} {
			l, err := link.LoadPinnedLink(filepath.Join(dir, name), nil)
			if err != nil {
				t.Fatal(err)
			}
			info, err := l.Info()
			l.Close()
			if err != nil {
				t.Fatal(err)
			}
			ids[i] = info.ID
		}
		return ids
	}
	var first [2]link.ID
	for run, ns := range []*namespace.Netns{before, before, after} {
		err := ns.Do(func() error {
			return errors.Join(XDP(filepath.Join(dir, "xdp"), xdp, "x0", ModeNative), TCIngress(filepath.Join(dir, "tc"), tc, "x0"))
		})
		if err != nil {
			t.Fatal(err)
		}
		switch ids := pinned(); run {
		case 0:
			first = ids
		case 1: // the same interface: the links are updated in place, without a gap
			if ids != first {
				t.Errorf("links %v after a second run on the same interface, %v after the first; want the same", ids, first)
			}
		}
	}
	for _, c := range []struct {
		ns   *namespace.Netns
		want bool
	}{{before, false}, {after, true}} {
		err := c.ns.Do(func() error {
			l, err := netlink.LinkByName("x0")
			if err != nil {
				return err
			}
			if runs := l.Attrs().Xdp != nil && l.Attrs().Xdp.Attached; runs != c.want {
				t.Errorf("x0 of %s runs XDP: %t; want %t", c.ns.Name, runs, c.want)
			}
			q, err := link.QueryPrograms(link.QueryOptions{Target: i, Attach: ebpf.AttachTCXIngress})
			if err != nil {
				return err
			}
			if runs := len(q.Programs) > 0; runs != c.want {
				t.Errorf("x0 of %s runs a program at TC ingress: %t; want %t", c.ns.Name, runs, c.want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// passProgram is a program of the type that lets every packet by.
func passProgram(t *testing.T, typ ebpf.ProgramType) *ebpf.Program {
	t.Helper()
	verdict := int32(Pass)
	if typ == ebpf.SchedCLS {
		verdict = -1 // TCX_NEXT
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: typ, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, verdict), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Close() })
	return prog
}

// pinDir is a directory of bpffs of the test's own.
func pinDir(t *testing.T) string {
	t.Helper()
	dir := testsupport.PinDir(t)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
