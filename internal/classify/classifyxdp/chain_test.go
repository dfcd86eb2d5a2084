package classifyxdp

import (
	"net"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
)

// returning is an XDP program that returns act.
func returning(t *testing.T, act xdplink.Action) *ebpf.Program {
	t.Helper()
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, AttachType: ebpf.AttachXDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, int32(act)), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// The classify stage goes on to the stages of its interface's slot, every
// slot's its own: the steer stage when the slot has one, else the UPF
// stage, else none (the packet passes). Every slot's places hold stages
// that drop, but the slot under test's, which tell the steer stage
// (redirect) and the UPF stage (XDP_TX). The places per slot and the
// slots come from the maps' sizes: the UPF stage is a slot's last place,
// the steer stage the one before.
func TestClassifyStageGoesOnInItsSlot(t *testing.T) {
	d := newParser(t).Datapath
	stages, ifaces := d.objs.ChainStages, d.objs.ChainIfaces
	slots := d.objs.ChainCpuStages.MaxEntries()
	places := stages.MaxEntries() / slots
	lo, err := net.InterfaceByName("lo") // a test run's packet comes in on it
	if err != nil {
		t.Fatal(err)
	}
	drop, steer, upf := returning(t, xdplink.Drop), returning(t, xdplink.Redirect), returning(t, xdplink.TX)
	for i := range stages.MaxEntries() {
		if err := stages.Put(i, drop); err != nil {
			t.Fatal(err)
		}
	}
	frame := demo.Serialize(false, eth(layers.EthernetTypeIPv4), ipv4("10.45.0.2", "10.100.6.2", layers.IPProtocolUDP),
		udp(40000, 5004), gopacket.Payload(make([]byte, 32)))
	place := uint32(lo.Index) % ifaces.MaxEntries()
	classify, _, _ := d.Stages()
	run := func(slot uint32, want xdplink.Action, what string) {
		t.Helper()
		ret, err := classify.Run(&ebpf.RunOptions{Data: frame})
		if err != nil {
			t.Fatal(err)
		}
		if got := xdplink.Action(ret); got != want {
			t.Errorf("slot %d, %s: %v, want %v", slot, what, got, want)
		}
	}
	for slot := range slots {
		if err := ifaces.Put(place, classifyChainIface{Ifindex: uint32(lo.Index), Slot: slot}); err != nil {
			t.Fatal(err)
		}
		upfAt, steerAt := slot*places+places-1, slot*places+places-2
		if err := stages.Delete(steerAt); err != nil {
			t.Fatal(err)
		}
		if err := stages.Put(upfAt, upf); err != nil {
			t.Fatal(err)
		}
		run(slot, xdplink.TX, "the UPF stage")
		if err := stages.Put(steerAt, steer); err != nil {
			t.Fatal(err)
		}
		run(slot, xdplink.Redirect, "the steer and UPF stages")
		if err := stages.Delete(upfAt); err != nil {
			t.Fatal(err)
		}
		if err := stages.Delete(steerAt); err != nil {
			t.Fatal(err)
		}
		run(slot, xdplink.Pass, "no stage after it")
		if err := stages.Put(upfAt, drop); err != nil {
			t.Fatal(err)
		}
		if err := stages.Put(steerAt, drop); err != nil {
			t.Fatal(err)
		}
	}
}
