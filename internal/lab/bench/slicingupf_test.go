package bench

import (
	"fmt"
	"net"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/lab/videonet"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// One point of Table 1 through the UPF below what the host carries, alone
// and steered over both CPUs: the UPF forwards every service's packets to
// the sink decapsulated, its PDRs or the steering rules count each class,
// and steered, each class was counted in its slice, where the UPF took it:
// with the UPF alone on the interface, nothing would be.
func TestPrioThroughUPF(t *testing.T) {
	testsupport.NeedRoot(t, "builds videonet's segment with the UPF")
	const size, rate = 256, 10_000
	for _, cpus := range [][]int{nil, {0, 1}} {
		t.Run(fmt.Sprintf("over CPUs %v", cpus), func(t *testing.T) { checkPrioThroughUPF(t, cpus, size, rate) })
	}
}

func checkPrioThroughUPF(t *testing.T, cpus []int, size int, rate uint64) {
	r, err := upfRouter(cpus)
	testsupport.CheckLoad(t, err)
	testsupport.Cleanup(t, r.close)
	p, err := r.measure(cpus, size, rate)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		fate  layerFate
		slice uint32
	}{{"prioritised", p.prio, prioSlice}, {"other", p.other, otherSlice}} {
		f := c.fate
		if f.sent == 0 || f.received == 0 || f.local == 0 {
			t.Errorf("over CPUs %v, %s: %+v, want packets sent, received by the router, at the sink", cpus, c.name, f)
		}
		if cpus == nil {
			continue
		}
		st, err := r.d.SliceStats(classifyxdp.Slice{ID: c.slice, CPUs: cpus})
		if err != nil {
			t.Fatal(err)
		}
		// The steer stage sends the other slice what no rule took: the
		// sender's IPv6 neighbour discovery, say.
		if got := st.Local.Packets + st.Offloaded.Packets; got != f.received && (c.slice == prioSlice || got < f.received) {
			t.Errorf("%s: slice %d took %d packets and offloaded %d, want the %d its rule counted", c.name, c.slice,
				st.Local.Packets, st.Offloaded.Packets, f.received)
		}
	}
	// A CPU's backlog, released at once after the host held its thread
	// back, may overflow the sink's ring: the test bed's loss.
	if lost := p.prio.lostAfterRing() + p.other.lostAfterRing(); lost > p.outDropped {
		t.Errorf("over CPUs %v, %d packets lost after the receive ring, %d of them dropped on the way out: %+v, %+v",
			cpus, lost, p.outDropped, p.prio, p.other)
	}
	frame, err := r.n.Counter.Sample()
	if err != nil {
		t.Fatal(err)
	}
	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	ip, _ := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	udp, _ := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
	if ip == nil || udp == nil || pkt.Layer(layers.LayerTypeGTPv1U) != nil || len(frame) != size-gtpHeaders ||
		!ip.SrcIP.Equal(net.ParseIP(videonet.UEAddr)) || !ip.DstIP.Equal(net.ParseIP(videonet.ServerAddr)) ||
		ip.TTL != 63 || udp.DstPort != 5004 {
		t.Errorf("over CPUs %v, at the sink, %d octets: %v; want the UE's packet of %d octets, decapsulated, its TTL 63",
			cpus, len(frame), pkt, size-gtpHeaders)
	}
}
