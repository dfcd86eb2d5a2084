package classify

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/testbed"
	"github.com/xdp5g/xdp5g/internal/trafficgen"
)

// videoNet is the paper's edge-to-core segment in namespaces: a sender
// whose frames the generator forges, a router whose ingress runs the
// classifier and whose kernel forwards what passes, a sink that counts
// what arrives, and a monitor behind the router's tap interface that
// counts what rules redirect there.
type videoNet struct {
	sender, router, sink, monitor *testbed.Netns
	senderIndex                   int
	routerMAC                     net.HardwareAddr
	counter, tapped               *trafficgen.Sink
	gen                           *trafficgen.Generator
}

// The outer addresses: the sender's side, and the sink.
const (
	videoSrc = "198.51.100.2"
	videoDst = "203.0.113.2"
)

func newVideoNet(t *testing.T, p *parser) *videoNet {
	t.Helper()
	n := &videoNet{}
	for _, ns := range []**testbed.Netns{&n.sender, &n.router, &n.sink, &n.monitor} {
		var err error
		*ns, err = testbed.New("xdp5g-video-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { (*ns).Delete() })
	}
	fatal := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	fatal(testbed.Veth(n.sender, "out", n.router, "edge"))
	fatal(testbed.Veth(n.router, "core", n.sink, "in"))
	fatal(testbed.Veth(n.router, "tap", n.monitor, "in"))
	fatal(n.router.AddAddr("edge", "198.51.100.1/24"))
	fatal(n.router.AddAddr("core", "203.0.113.1/24"))
	fatal(n.sink.AddAddr("in", videoDst+"/24"))
	fatal(n.router.Sysctl("net.ipv4.ip_forward", "1"))
	_, sinkMAC, err := n.sink.Link("in")
	fatal(err)
	fatal(n.router.SetNeigh("core", videoDst, sinkMAC))
	_, n.routerMAC, err = n.router.Link("edge")
	fatal(err)
	n.senderIndex, _, err = n.sender.Link("out")
	fatal(err)
	classifier, err := n.router.AttachXDP("edge", p.Program(), false)
	fatal(err)
	t.Cleanup(func() { classifier.Close() })
	udpOnly := trafficgen.Filter{EtherType: 0x0800, IPProto: 17}
	n.counter, err = trafficgen.NewSink(n.sink, "in", udpOnly, false)
	fatal(err)
	t.Cleanup(func() { n.counter.Close() })
	n.tapped, err = trafficgen.NewSink(n.monitor, "in", udpOnly, false)
	fatal(err)
	t.Cleanup(func() { n.tapped.Close() })
	n.gen, err = trafficgen.NewGenerator()
	fatal(err)
	t.Cleanup(func() { n.gen.Close() })
	return n
}

// videoFrame is an RTP packet of H.265 layer layerID from the UE's port
// 20000 (the flows count up from it) in one of the paper's traffic types,
// and the offset of that port in the frame.
func (n *videoNet) videoFrame(t *testing.T, kind int, layerID byte) ([]byte, int) {
	t.Helper()
	outer := func(dstPort layers.UDPPort) []gopacket.SerializableLayer {
		return []gopacket.SerializableLayer{&layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 9}, DstMAC: n.routerMAC,
			EthernetType: layers.EthernetTypeIPv4}, ipv4(videoSrc, videoDst, layers.IPProtocolUDP), udp(50000, dstPort)}
	}
	inner := []gopacket.SerializableLayer{ipv4("10.45.0.2", "10.200.0.2", layers.IPProtocolUDP), udp(20000, 5004)}
	video := rtpH265(7, 1, layerID, 1, make([]byte, 64)...) // the generator sends up to 256 octets
	var ls []gopacket.SerializableLayer
	switch kind {
	case 0: // IP flow: the UE's packet is the outer one
		ls = append(outer(5004)[:2], udp(20000, 5004), video)
	case 1:
		ls = append(append(outer(4789), &layers.VXLAN{ValidIDFlag: true, VNI: 100}, eth(layers.EthernetTypeIPv4)), append(inner, video)...)
	default:
		gtp := []gopacket.SerializableLayer{ipv4("10.100.3.1", "10.100.3.2", layers.IPProtocolUDP), udp(2152, 2152),
			&layers.GTPv1U{Version: 1, ProtocolType: 1, MessageType: 255, TEID: 0x100}}
		ls = append(append(append(outer(4789), &layers.VXLAN{ValidIDFlag: true, VNI: 100}, eth(layers.EthernetTypeIPv4)), gtp...), append(inner, video)...)
	}
	frame := demo.Serialize(false, ls...)
	// The router checks the outer IPv4 header's checksum, nothing inside.
	binary.BigEndian.PutUint16(frame[24:], gopacket.FoldChecksum(gopacket.ComputeChecksum(frame[14:34], 0)))
	// The innermost UDP header, as an independent decoder finds it.
	var port int
	for _, l := range gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default).Layers() {
		if u, ok := l.(*layers.UDP); ok {
			port = len(frame) - len(u.Contents) - len(u.Payload)
		}
	}
	return frame, port
}

// The paper's use case: scalable H.265 video, one rule per flow dropping
// its enhancement layer, for 1 and 512 flows of each traffic type, through
// namespaces: every base-layer packet arrives, no enhancement-layer
// packet does, and each rule counts its flow's enhancement layer.
func TestEnhancementLayerIsDropped(t *testing.T) {
	p := newParser(t)
	n := newVideoNet(t, p)
	const packets = 20000
	for kind, name := range []string{"IP", "VXLAN", "GTP-U in VXLAN"} {
		for _, flows := range []int{1, 512} {
			t.Run(fmt.Sprintf("%s, %d flows", name, flows), func(t *testing.T) {
				var rules []Rule
				for i := range flows {
					rules = append(rules, Rule{ID: uint32(i + 1), Action: ActionDrop, Matches: []Match{
						{Field: "srcPort", Value: uint64(20000 + i), Mask: 0xffff},
						{Field: "innerSrc", Prefix: netip.MustParsePrefix(map[bool]string{true: videoSrc + "/32", false: "10.45.0.2/32"}[kind == 0])},
						{Field: "layerId", Value: 1, Mask: 0x3f}}})
				}
				if err := p.Add(rules...); err != nil {
					t.Fatal(err)
				}
				defer p.Clear()
				// send sends packets of a layer over the flows and returns
				// how many arrived, how many went and their octets.
				send := func(layerID byte) (arrived, sent, octets uint64) {
					frame, port := n.videoFrame(t, kind, layerID)
					before := settled(t, n.counter)
					sent, _, err := n.gen.Send(n.sender, n.senderIndex, frame, packets,
						trafficgen.Options{FlowOffset: port, Flows: flows, Rate: 500_000})
					if err != nil {
						t.Fatal(err)
					}
					return settled(t, n.counter).MatchPackets - before.MatchPackets, sent, sent * uint64(len(frame))
				}
				base, baseSent, baseOctets := send(0)
				enhancement, enhancementSent, enhancementOctets := send(1)
				if base != baseSent {
					t.Errorf("%d of %d base-layer packets arrived", base, baseSent)
				}
				if enhancement != 0 {
					t.Errorf("%d of %d enhancement-layer packets arrived", enhancement, enhancementSent)
				}
				var counted uint64
				for _, r := range rules {
					c, _, err := p.Counters(r.ID)
					if err != nil {
						t.Fatal(err)
					}
					counted += c
				}
				if counted != enhancementSent {
					t.Errorf("the rules counted %d enhancement-layer packets of %d", counted, enhancementSent)
				}
				t.Logf("bandwidth saved: %.1f%% (%d of %d octets)", 100*float64(enhancementOctets)/float64(baseOctets+enhancementOctets),
					enhancementOctets, baseOctets+enhancementOctets)
			})
		}
	}
}

// settled reads a sink's counts once they have stopped changing.
func settled(t *testing.T, s *trafficgen.Sink) trafficgen.Counts {
	t.Helper()
	var last trafficgen.Counts
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		c, err := s.Counts()
		if err != nil {
			t.Fatal(err)
		}
		if c == last {
			return c
		}
		last = c
	}
	t.Fatal("the sink's counts keep changing")
	return last
}

// A rule redirects the enhancement layer of GTP-U-in-VXLAN video out of
// the router's tap interface, its Ethernet addresses rewritten for the
// monitor behind it; the base layer goes on to the sink.
func TestRedirectToMonitor(t *testing.T) {
	p := newParser(t)
	n := newVideoNet(t, p)
	out := n.toMonitor(t)
	if err := p.Add(Rule{ID: 1, Action: ActionRedirect, Out: out, Matches: []Match{{Field: "layerId", Value: 1, Mask: 0x3f},
		{Field: "tunnel2", Value: uint64(TunnelGTPU), Mask: 0xff}}}); err != nil {
		t.Fatal(err)
	}
	const packets = 10000
	send := func(layerID byte) {
		frame, _ := n.videoFrame(t, 2, layerID)
		if _, _, err := n.gen.Send(n.sender, n.senderIndex, frame, packets, trafficgen.Options{Rate: 500_000}); err != nil {
			t.Fatal(err)
		}
	}
	send(0)
	send(1)
	sunk, tapped := settled(t, n.counter), settled(t, n.tapped)
	if sunk.MatchPackets != packets || tapped.MatchPackets != packets {
		t.Errorf("the sink got %d packets and the monitor %d; want %d each", sunk.MatchPackets, tapped.MatchPackets, packets)
	}
	n.checkMonitorSample(t, out)

	// An egress is a redirecting rule's only, and one needs it.
	for _, bad := range []Rule{{ID: 2, Action: ActionDrop, Out: out}, {ID: 2, Action: ActionRedirect},
		{ID: 2, Action: ActionRedirect, Out: &Egress{Ifindex: out.Ifindex, DstMAC: out.DstMAC}}} {
		var re *RuleError
		if err := p.Add(bad); !errors.As(err, &re) || re.Field != "out" {
			t.Errorf("rule %+v: %v, want an error naming out", bad, err)
		}
	}
}

// A rule mirrors the enhancement layer: the router forwards every packet
// to the sink as usual, and the TC program behind the classifier sends a
// copy of each enhancement-layer packet to the monitor, with its Ethernet
// addresses.
func TestMirrorToMonitor(t *testing.T) {
	p := newParser(t)
	n := newVideoNet(t, p)
	edge, _, err := n.router.Link("edge")
	if err != nil {
		t.Fatal(err)
	}
	var tc link.Link
	if err := n.router.Do(func() (err error) {
		tc, err = link.AttachTCX(link.TCXOptions{Interface: edge, Program: p.MirrorProgram(), Attach: ebpf.AttachTCXIngress})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	out := n.toMonitor(t)
	if err := p.Add(Rule{ID: 1, Action: ActionMirror, Out: out,
		Matches: []Match{{Field: "layerId", Value: 1, Mask: 0x3f}}}); err != nil {
		t.Fatal(err)
	}
	const packets = 10000
	for _, layer := range []byte{0, 1} {
		frame, _ := n.videoFrame(t, 1, layer)
		if _, _, err := n.gen.Send(n.sender, n.senderIndex, frame, packets, trafficgen.Options{Rate: 500_000}); err != nil {
			t.Fatal(err)
		}
	}
	sunk, tapped := settled(t, n.counter), settled(t, n.tapped)
	if sunk.MatchPackets != 2*packets || tapped.MatchPackets != packets {
		t.Errorf("the sink got %d packets and the monitor %d copies; want %d and %d", sunk.MatchPackets, tapped.MatchPackets, 2*packets, packets)
	}
	n.checkMonitorSample(t, out)
}

// toMonitor is the egress out of the router's tap to the monitor.
func (n *videoNet) toMonitor(t *testing.T) *Egress {
	t.Helper()
	tapIndex, tapMAC, err := n.router.Link("tap")
	if err != nil {
		t.Fatal(err)
	}
	_, monitorMAC, err := n.monitor.Link("in")
	if err != nil {
		t.Fatal(err)
	}
	return &Egress{Ifindex: tapIndex, DstMAC: monitorMAC, SrcMAC: tapMAC}
}

// checkMonitorSample checks the Ethernet addresses of a frame the monitor
// got: those of the egress.
func (n *videoNet) checkMonitorSample(t *testing.T, out *Egress) {
	t.Helper()
	sample, err := n.tapped.Sample()
	if err != nil {
		t.Fatal(err)
	}
	if dst, src := net.HardwareAddr(sample[0:6]), net.HardwareAddr(sample[6:12]); dst.String() != out.DstMAC.String() || src.String() != out.SrcMAC.String() {
		t.Errorf("the monitor got a frame from %v to %v; want from %v to %v", src, dst, out.SrcMAC, out.DstMAC)
	}
}

// A rule steers the enhancement layer to another CPU than the one the
// packets arrive on: the router's kernel forwards them there, and so the
// sink, which counts per CPU, sees them there; the base layer stays.
func TestSteerToCPU(t *testing.T) {
	var online unix.CPUSet
	if err := unix.SchedGetaffinity(0, &online); err != nil || online.Count() < 2 || !online.IsSet(0) || !online.IsSet(1) {
		t.Skip("needs CPUs 0 and 1")
	}
	p := newParser(t)
	n := newVideoNet(t, p)
	if err := p.Add(Rule{ID: 1, Action: ActionSteer, CPU: 1, Matches: []Match{{Field: "layerId", Value: 1, Mask: 0x3f}}}); err != nil {
		t.Fatal(err)
	}
	// The generator, and with it the classifier, runs on this thread's CPU.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpu0 unix.CPUSet
	cpu0.Set(0)
	if err := unix.SchedSetaffinity(0, &cpu0); err != nil {
		t.Fatal(err)
	}
	defer unix.SchedSetaffinity(0, &online)

	// Bursts shorter than a CPU's queue, so that a busy CPU 1 drops none.
	const packets, rate = 2000, 10_000
	for _, c := range []struct {
		layerID byte
		cpu     int
	}{{1, 1}, {0, 0}} {
		before, err := n.counter.CountsByCPU()
		if err != nil {
			t.Fatal(err)
		}
		frame, _ := n.videoFrame(t, 2, c.layerID)
		if _, _, err := n.gen.Send(n.sender, n.senderIndex, frame, packets, trafficgen.Options{Rate: rate}); err != nil {
			t.Fatal(err)
		}
		settled(t, n.counter)
		after, err := n.counter.CountsByCPU()
		if err != nil {
			t.Fatal(err)
		}
		for cpu := range after {
			want := uint64(0)
			if cpu == c.cpu {
				want = packets
			}
			if got := after[cpu].MatchPackets - before[cpu].MatchPackets; got != want {
				t.Errorf("layer %d: CPU %d forwarded %d packets, want %d", c.layerID, cpu, got, want)
			}
		}
	}
	if got, _, err := p.Counters(1); err != nil || got != packets {
		t.Errorf("the steering rule counted %d packets (%v), want %d", got, err, packets)
	}
}
