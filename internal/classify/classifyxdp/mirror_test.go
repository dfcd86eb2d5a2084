package classifyxdp

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// tc_classify_mirror copies a packet a chain's UPF stage passed to the
// kernel only when its metadata is exactly a chain_mirror_request with its
// magic (CHAIN_MIRROR_MAGIC). Frames with the metadata given enter the
// kernel through a live test run of an XDP program that passes them, reach
// the program at TC ingress, and the copies are counted where they arrive.
func TestChainMirrorRequestNeedsItsMagic(t *testing.T) {
	d := newParser(t).Datapath
	ns := testsupport.Netns(t, "cmir")
	testsupport.NoIPv6(t, ns)
	for _, pair := range [][2]string{{"in0", "in1"}, {"copy0", "copy1"}} {
		if err := namespace.Veth(ns, pair[0], ns, pair[1]); err != nil {
			t.Fatal(err)
		}
	}
	in, _, err := ns.Link("in0")
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := ns.Link("copy0")
	if err != nil {
		t.Fatal(err)
	}
	var tc link.Link
	if err := ns.Do(func() (err error) {
		tc, err = link.AttachTCX(link.TCXOptions{Interface: in, Program: d.MirrorProgram(), Attach: ebpf.AttachTCXIngress})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	testsupport.Cleanup(t, tc.Close)
	pass, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, int32(xdplink.Pass)), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	defer pass.Close()

	frame := demo.Serialize(false, eth(layers.EthernetTypeIPv4), ipv4("10.45.0.2", "10.100.6.2", layers.IPProtocolUDP),
		udp(40000, 5004), gopacket.Payload(make([]byte, 32)))
	const chainMirrorMagic = 0x636d6972 // CHAIN_MIRROR_MAGIC
	request := func(magic uint32, size int) []byte {
		m := binary.NativeEndian.AppendUint32(nil, magic)
		m = binary.NativeEndian.AppendUint32(m, uint32(out))
		m = append(m, macB...)
		m = append(m, macA...)
		return append(m, make([]byte, size-len(m))...)
	}
	const frames = 4
	for _, c := range []struct {
		name   string
		meta   []byte
		copied bool
	}{
		{"request", request(chainMirrorMagic, 20), true},
		{"another magic", request(chainMirrorMagic+1, 20), false},
		{"no magic, a request's size before", request(uint32(out), 20)[4:], false},
		{"longer", request(chainMirrorMagic, 24), false},
		{"no metadata", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := received(t, ns, "copy1")
			data := append(bytes.Clone(c.meta), frame...)
			err := ns.Do(func() error {
				_, err := pass.Run(&ebpf.RunOptions{Data: data, Repeat: frames, Flags: unix.BPF_F_TEST_XDP_LIVE_FRAMES,
					Context: xdplink.Context{Data: uint32(len(c.meta)), DataEnd: uint32(len(data)), IngressIfindex: uint32(in)}})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			want := uint64(0)
			if c.copied {
				want = frames
			}
			if got := received(t, ns, "copy1") - before; got != want {
				t.Errorf("%d copies of %d frames, want %d", got, frames, want)
			}
		})
	}
}

// received is how many packets a link of the namespace received.
func received(t *testing.T, ns *namespace.Netns, name string) (n uint64) {
	t.Helper()
	if err := ns.Do(func() error {
		l, err := netlink.LinkByName(name)
		if err == nil {
			n = l.Attrs().Statistics.RxPackets
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return n
}
