package baseline

import (
	"net"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// Every floor program bounces an IPv4 frame with its MAC addresses swapped
// and the last value it read in the new source's last octet, whatever line
// its address picks, and drops a frame too short for an IPv4 header; the
// table is whole pages of lines. The counting one counts what it bounces.
// Loaded with two reads alone, the floor has no other program.
func TestFloor(t *testing.T) {
	testsupport.NeedRoot(t, "BPF")
	if _, err := LoadFloor(0, true, false); err == nil {
		t.Error("a floor of 0 lines loaded")
	}
	for _, mmapable := range []bool{true, false} {
		f, err := LoadFloor(100, mmapable, false)
		testsupport.CheckLoad(t, err)
		testsupport.Cleanup(t, f.Close)
		if f.Lines() != 128 {
			t.Errorf("mmapable %v: a floor of 100 lines has %d, want two pages' 128", mmapable, f.Lines())
		}
		// Every line's first word 0x15: what each read returns, the last
		// into the frame.
		for i := range f.Lines() {
			if err := f.lines.Update(i, [LineSize]byte{0x15}, ebpf.UpdateExist); err != nil {
				t.Fatal(err)
			}
		}
		dmac, smac := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}
		for _, dst := range []net.IP{{100, 64, 0, 1}, {100, 64, 0, 2}, {255, 255, 255, 255}} {
			in, want := ipv4Frame(t, dmac, smac, dst), ipv4Frame(t, smac, net.HardwareAddr{2, 0, 0, 0, 0, 1 ^ 0x15}, dst)
			for name, prog := range map[string]*ebpf.Program{"one": f.One, "two": f.Two, "two near": f.TwoNear, "two, counted": f.TwoCount} {
				out := make([]byte, len(in))
				ret, err := prog.Run(&ebpf.RunOptions{Data: in, DataOut: out})
				if err != nil {
					t.Fatal(err)
				}
				if ret != 3 { // XDP_TX
					t.Errorf("%s, mmapable %v, to %v: verdict %d, want XDP_TX", name, mmapable, dst, ret)
				}
				testsupport.EqualFrames(t, out, want)
				if ret, err := prog.Run(&ebpf.RunOptions{Data: in[:14+19]}); err != nil || ret != 1 { // XDP_DROP
					t.Errorf("%s: a frame short of an IPv4 header: verdict %d (%v), want XDP_DROP", name, ret, err)
				}
			}
		}
		// The counting program counted each frame it bounced, once.
		var packets uint64
		for i := range f.counts.MaxEntries() {
			var c [2]uint64
			if err := f.counts.Lookup(i, &c); err != nil {
				t.Fatal(err)
			}
			packets += c[0]
		}
		if packets != 3 {
			t.Errorf("mmapable %v: %d packets counted, want 3", mmapable, packets)
		}
	}
	two, err := LoadFloor(100, false, true)
	testsupport.CheckLoad(t, err)
	testsupport.Cleanup(t, two.Close)
	if two.Two == nil || two.One != nil || two.TwoNear != nil || two.TwoCount != nil || two.Lines() != 128 {
		t.Errorf("the floor of two reads alone: %+v, %d lines; want Two alone over 128", two, two.Lines())
	}
	in := ipv4Frame(t, net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}, net.IP{100, 64, 0, 1})
	if ret, err := two.Two.Run(&ebpf.RunOptions{Data: in}); err != nil || ret != 3 {
		t.Errorf("two reads alone: verdict %d (%v), want XDP_TX", ret, err)
	}
}

func ipv4Frame(t *testing.T, dmac, smac net.HardwareAddr, dst net.IP) []byte {
	buf := gopacket.NewSerializeBuffer()
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{192, 0, 2, 1}, DstIP: dst}
	udp := &layers.UDP{SrcPort: 1, DstPort: 2}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{DstMAC: dmac, SrcMAC: smac, EthernetType: layers.EthernetTypeIPv4}, ip, udp,
		gopacket.Payload(make([]byte, 18)))
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
