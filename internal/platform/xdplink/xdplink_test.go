package xdplink

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
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
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, int32(Pass)), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	dir := testsupport.PinDir(t)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pin := filepath.Join(dir, "x0")
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
