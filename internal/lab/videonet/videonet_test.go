package videonet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/fielderr"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

func newClassifier(t *testing.T) *classifyxdp.Datapath {
	t.Helper()
	testsupport.NeedRoot(t, "BPF and namespaces")
	d, err := classifyxdp.OpenDatapath(classifyxdp.Config{})
	testsupport.CheckLoad(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

// newVideoNet is the segment with the classifier at the router's edge.
func newVideoNet(t *testing.T, p *classifyxdp.Datapath) *Net {
	t.Helper()
	n, err := New(p.Program(), Stamps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	return n
}

// settled reads a sink's counts once they have stopped changing.
func settled(t *testing.T, s *trafficgen.Sink) trafficgen.Counts {
	t.Helper()
	c, err := Settled(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The paper's use case: scalable H.265 video, one rule per flow dropping
// its enhancement layer, for 1 and 512 flows of each traffic type, through
// namespaces: every base-layer packet arrives, no enhancement-layer
// packet does, and each rule counts its flow's enhancement layer.
func TestEnhancementLayerIsDropped(t *testing.T) {
	p := newClassifier(t)
	n := newVideoNet(t, p)
	const packets, rate = 20000, 500_000
	for _, kind := range Kinds {
		for _, flows := range []int{1, 512} {
			t.Run(fmt.Sprintf("%s, %d flows", kind, flows), func(t *testing.T) {
				rules := EnhancementLayerDrops(kind, flows)
				if err := p.Add(rules...); err != nil {
					t.Fatal(err)
				}
				defer p.Clear()
				base, err := n.SendLayer(kind, 0, flows, packets, rate)
				if err != nil {
					t.Fatal(err)
				}
				enhancement, err := n.SendLayer(kind, 1, flows, packets, rate)
				if err != nil {
					t.Fatal(err)
				}
				if base.Arrived != base.Sent {
					t.Errorf("%d of %d base-layer packets arrived", base.Arrived, base.Sent)
				}
				if enhancement.Arrived != 0 {
					t.Errorf("%d of %d enhancement-layer packets arrived", enhancement.Arrived, enhancement.Sent)
				}
				var counted uint64
				for _, r := range rules {
					c, _, err := p.Counters(r.ID)
					if err != nil {
						t.Fatal(err)
					}
					counted += c
				}
				if counted != enhancement.Sent {
					t.Errorf("the rules counted %d enhancement-layer packets of %d", counted, enhancement.Sent)
				}
			})
		}
	}
}

// A rule redirects the enhancement layer of GTP-U-in-VXLAN video out of
// the router's tap interface, its Ethernet addresses rewritten for the
// monitor behind it; the base layer goes on to the sink.
func TestRedirectToMonitor(t *testing.T) {
	p := newClassifier(t)
	n := newVideoNet(t, p)
	out := toMonitor(t, n)
	if err := p.Add(classifyxdp.Rule{ID: 1, Action: classifyxdp.ActionRedirect, Out: out, Matches: []classifyxdp.Match{{Field: "layerId", Value: 1, Mask: 0x3f},
		{Field: "tunnel2", Value: uint64(classifyxdp.TunnelGTPU), Mask: 0xff}}}); err != nil {
		t.Fatal(err)
	}
	const packets = 10000
	send := func(layerID byte) {
		frame, _ := n.Frame(GTPUInVXLAN, layerID)
		if _, _, err := n.Gen.Send(n.Sender, n.SenderIndex, frame, packets, trafficgen.Options{Rate: 500_000}); err != nil {
			t.Fatal(err)
		}
	}
	send(0)
	send(1)
	sunk, tapped := settled(t, n.Counter), settled(t, n.Tapped)
	if sunk.MatchPackets != packets || tapped.MatchPackets != packets {
		t.Errorf("the sink got %d packets and the monitor %d; want %d each", sunk.MatchPackets, tapped.MatchPackets, packets)
	}
	checkMonitorSample(t, n, out)

	// An egress is a redirecting rule's only, and one needs it.
	for _, bad := range []classifyxdp.Rule{{ID: 2, Action: classifyxdp.ActionDrop, Out: out}, {ID: 2, Action: classifyxdp.ActionRedirect},
		{ID: 2, Action: classifyxdp.ActionRedirect, Out: &classifyxdp.Egress{Ifindex: out.Ifindex, DstMAC: out.DstMAC}}} {
		var re *fielderr.Error
		if err := p.Add(bad); !errors.As(err, &re) || re.Field != "out" {
			t.Errorf("rule %+v: %v, want an error naming out", bad, err)
		}
	}
}

// A rule mirrors the enhancement layer: the TC program behind the
// classifier sends a copy of each enhancement-layer packet to the monitor,
// with its Ethernet addresses, and the packet goes on to the rule below:
// none, and the router forwards every packet to the sink as usual; a drop,
// and the sink gets the base layer only; a steer, and the copies are made
// on the slice's CPU, the packets forwarded from there.
func TestMirrorToMonitor(t *testing.T) {
	enhancement := []classifyxdp.Match{{Field: "layerId", Value: 1, Mask: 0x3f}}
	for _, c := range []struct {
		name  string
		slice *classifyxdp.Slice
		below []classifyxdp.Rule
		// packets of each layer sent at rate; layers of them the sink gets
		packets, rate, layers uint64
	}{
		{name: "alone", packets: 10000, rate: 500_000, layers: 2},
		{name: "above a drop", below: []classifyxdp.Rule{{ID: 2, Action: classifyxdp.ActionDrop, Matches: enhancement}},
			packets: 10000, rate: 500_000, layers: 1},
		// Bursts shorter than a CPU's queue, so that the slice's CPU drops none.
		{name: "above a steer", slice: &classifyxdp.Slice{ID: 3, CPUs: []int{0}},
			below:   []classifyxdp.Rule{{ID: 2, Action: classifyxdp.ActionSteer, Slice: 3, Matches: enhancement}},
			packets: 2000, rate: 10_000, layers: 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newClassifier(t)
			n := newVideoNet(t, p)
			edge, _, err := n.Router.Link("edge")
			if err != nil {
				t.Fatal(err)
			}
			var tc link.Link
			if err := n.Router.Do(func() (err error) {
				tc, err = link.AttachTCX(link.TCXOptions{Interface: edge, Program: p.MirrorProgram(), Attach: ebpf.AttachTCXIngress})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer tc.Close()
			out := toMonitor(t, n)
			if c.slice != nil {
				if err := p.SetSlice(*c.slice); err != nil {
					t.Fatal(err)
				}
			}
			mirror := classifyxdp.Rule{ID: 1, Priority: 1, Action: classifyxdp.ActionMirror, Out: out, Matches: enhancement}
			if err := p.Add(append([]classifyxdp.Rule{mirror}, c.below...)...); err != nil {
				t.Fatal(err)
			}
			for _, layer := range []byte{0, 1} {
				frame, _ := n.Frame(VXLAN, layer)
				if _, _, err := n.Gen.Send(n.Sender, n.SenderIndex, frame, c.packets, trafficgen.Options{Rate: c.rate}); err != nil {
					t.Fatal(err)
				}
			}
			sunk, tapped := settled(t, n.Counter), settled(t, n.Tapped)
			if sunk.MatchPackets != c.layers*c.packets || tapped.MatchPackets != c.packets {
				t.Errorf("the sink got %d packets and the monitor %d copies; want %d and %d", sunk.MatchPackets, tapped.MatchPackets, c.layers*c.packets, c.packets)
			}
			for _, r := range c.below {
				if n, _, err := p.Counters(r.ID); err != nil || n != c.packets {
					t.Errorf("rule %d counted %d packets (%v), want %d", r.ID, n, err, c.packets)
				}
			}
			checkMonitorSample(t, n, out)
		})
	}
}

// toMonitor is the egress out of the router's tap to the monitor.
func toMonitor(t *testing.T, n *Net) *classifyxdp.Egress {
	t.Helper()
	tapIndex, tapMAC, err := n.Router.Link("tap")
	if err != nil {
		t.Fatal(err)
	}
	_, monitorMAC, err := n.Monitor.Link("in")
	if err != nil {
		t.Fatal(err)
	}
	return &classifyxdp.Egress{Ifindex: tapIndex, DstMAC: monitorMAC, SrcMAC: tapMAC}
}

// checkMonitorSample checks the Ethernet addresses of a frame the monitor
// got: those of the egress.
func checkMonitorSample(t *testing.T, n *Net, out *classifyxdp.Egress) {
	t.Helper()
	sample, err := n.Tapped.Sample()
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
	needTwoCPUs(t)
	p := newClassifier(t)
	n := newVideoNet(t, p)
	if err := p.SetSlice(classifyxdp.Slice{ID: 3, CPUs: []int{1}}); err != nil {
		t.Fatal(err)
	}
	if err := p.Add(classifyxdp.Rule{ID: 1, Action: classifyxdp.ActionSteer, Slice: 3, Matches: []classifyxdp.Match{{Field: "layerId", Value: 1, Mask: 0x3f}}}); err != nil {
		t.Fatal(err)
	}
	// The generator, and with it the classifier, runs on CPU 0.
	restore, err := OnCPU0()
	if err != nil {
		t.Fatal(err)
	}
	defer restore()

	// Bursts shorter than a CPU's queue, so that a busy CPU 1 drops none.
	const packets, rate = 2000, 10_000
	// The steered layer lands on CPU 1, the other stays with the kernel's
	// receive path on CPU 0, but for the odd packet that the sink's NAPI,
	// still running on the other CPU, takes over.
	for _, c := range []struct {
		layerID byte
		cpu     int
	}{{layerID: 1, cpu: 1}, {layerID: 0, cpu: 0}} {
		before, err := n.Counter.CountsByCPU()
		if err != nil {
			t.Fatal(err)
		}
		frame, _ := n.Frame(GTPUInVXLAN, c.layerID)
		if _, _, err := n.Gen.Send(n.Sender, n.SenderIndex, frame, packets, trafficgen.Options{Rate: rate}); err != nil {
			t.Fatal(err)
		}
		settled(t, n.Counter)
		after, err := n.Counter.CountsByCPU()
		if err != nil {
			t.Fatal(err)
		}
		var total uint64
		for cpu := range after {
			total += after[cpu].MatchPackets - before[cpu].MatchPackets
		}
		const least = packets * 99 / 100
		if on := after[c.cpu].MatchPackets - before[c.cpu].MatchPackets; total != packets || on < least {
			t.Errorf("layer %d: %d packets forwarded, %d of them on CPU %d; want %d, %d at least", c.layerID, total, on, c.cpu, packets, least)
		}
	}
	if got, _, err := p.Counters(1); err != nil || got != packets {
		t.Errorf("the steering rule counted %d packets (%v), want %d", got, err, packets)
	}
}

// needTwoCPUs skips a test without CPUs 0 and 1 to run on.
func needTwoCPUs(t *testing.T) {
	t.Helper()
	var online unix.CPUSet
	if err := unix.SchedGetaffinity(0, &online); err != nil || !online.IsSet(0) || !online.IsSet(1) {
		t.Skip("needs CPUs 0 and 1")
	}
}

// steerVideo spreads GTP-U-in-VXLAN traffic over a slice of CPUs 0 and 1.
func steerVideo(t *testing.T, p *classifyxdp.Datapath) {
	t.Helper()
	if err := p.SetSlice(classifyxdp.Slice{ID: 1, CPUs: []int{0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := p.Add(classifyxdp.Rule{ID: 1, Action: classifyxdp.ActionSteer, Slice: 1,
		Matches: []classifyxdp.Match{{Field: "tunnel2", Value: uint64(classifyxdp.TunnelGTPU), Mask: 0xff}}}); err != nil {
		t.Fatal(err)
	}
}

// flowsOnCPUs checks that every flow steered was taken by one CPU only,
// that the flows add up to sent packets, and returns how many flows each
// CPU took.
func flowsOnCPUs(t *testing.T, p *classifyxdp.Datapath, flows int, sent uint64) []int {
	t.Helper()
	byFlow, err := p.FlowCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(byFlow) != flows {
		t.Errorf("%d flows steered, want %d", len(byFlow), flows)
	}
	var perCPU []int
	var total uint64
	for hash, cpus := range byFlow {
		if perCPU == nil {
			perCPU = make([]int, len(cpus))
		}
		on := -1
		for cpu, c := range cpus {
			total += c.Packets
			if c.Packets == 0 {
				continue
			}
			if on >= 0 {
				t.Errorf("flow %#x on CPUs %d and %d", hash, on, cpu)
			}
			on = cpu
		}
		if on >= 0 {
			perCPU[on]++
		}
	}
	if total != sent {
		t.Errorf("the CPUs took %d packets, want %d", total, sent)
	}
	return perCPU
}

// Every packet of a flow goes to one CPU, and the flows spread over the
// slice's CPUs: 64 flows inside one GTP-U tunnel in one VXLAN tunnel, which
// receive-side scaling would see as one.
func TestSteeringKeepsFlowAffinity(t *testing.T) {
	needTwoCPUs(t)
	p := newClassifier(t)
	n := newVideoNet(t, p)
	steerVideo(t, p)
	const flows, packets = 64, 6400
	layer, err := n.SendLayer(GTPUInVXLAN, 0, flows, packets, 10_000) // bursts of half a queue
	if err != nil {
		t.Fatal(err)
	}
	if layer.Arrived != packets {
		t.Errorf("%d of %d packets arrived", layer.Arrived, packets)
	}
	perCPU := flowsOnCPUs(t, p, flows, packets)
	if perCPU[0] == 0 || perCPU[1] == 0 {
		t.Errorf("flows per CPU %v: want both CPUs used", perCPU)
	}
	byCPU, err := p.SliceCPUs(1)
	if err != nil {
		t.Fatal(err)
	}
	if byCPU[0].Packets+byCPU[1].Packets != packets {
		t.Errorf("the slice's CPUs took %+v, want %d packets in all", byCPU, packets)
	}
}

// Changing a slice's CPUs while its traffic flows moves flows and loses
// no packet.
func TestRebalancingLosesNothing(t *testing.T) {
	needTwoCPUs(t)
	p := newClassifier(t)
	n := newVideoNet(t, p)
	steerVideo(t, p)
	done := make(chan struct{})
	changes := make(chan int)
	go func() {
		sets := [][]int{{1}, {0}, {1, 0}, {0, 1}}
		changed := 0
		defer func() { changes <- changed }()
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
				if err := p.SetSlice(classifyxdp.Slice{ID: 1, CPUs: sets[changed%len(sets)]}); err != nil {
					t.Error(err)
					return
				}
				changed++
			}
		}
	}()
	const flows, packets = 64, 10_000
	layer, err := n.SendLayer(GTPUInVXLAN, 0, flows, packets, 10_000) // a second, bursts of half a queue
	close(done)
	changed := <-changes
	if err != nil {
		t.Fatal(err)
	}
	if changed < 10 {
		t.Errorf("the slice changed %d times during the traffic", changed)
	}
	if layer.Arrived != packets {
		t.Errorf("%d of %d packets arrived", layer.Arrived, packets)
	}
	byCPU, err := p.SliceCPUs(1)
	if err != nil {
		t.Fatal(err)
	}
	if byCPU[0].Packets+byCPU[1].Packets != packets || byCPU[0].Packets == 0 || byCPU[1].Packets == 0 {
		t.Errorf("the slice's CPUs took %+v: want %d packets in all, on both", byCPU, packets)
	}
}

// The overload of Algorithm 1 of "XDP-Based SmartNIC Hardware Performance Acceleration for Next-Generation Networks",
// live: the CPU of the
// non-prioritised slice is taken by another task, its queue fills, and its
// flows leave for the alternative node, rewritten; the prioritised flow
// stays on its CPU, and not a packet is lost.
func TestOverloadOffloadsNonPrioritised(t *testing.T) {
	needTwoCPUs(t)
	p := newClassifier(t)
	n := newVideoNet(t, p)
	for _, s := range []classifyxdp.Slice{{ID: 1, CPUs: []int{1}}, {ID: 2, CPUs: []int{0}, Prioritised: true}} {
		if err := p.SetSlice(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Add(
		classifyxdp.Rule{ID: 1, Priority: 1, Action: classifyxdp.ActionSteer, Slice: 1,
			Matches: []classifyxdp.Match{{Field: "tunnel2", Value: uint64(classifyxdp.TunnelGTPU), Mask: 0xff}}},
		classifyxdp.Rule{ID: 2, Priority: 2, Action: classifyxdp.ActionSteer, Slice: 2,
			Matches: []classifyxdp.Match{{Field: "srcPort", Value: FirstPort, Mask: 0xffff}}}); err != nil {
		t.Fatal(err)
	}
	alt := classifyxdp.Alternative{MAC: n.AltMAC, Addr: netip.MustParseAddr("192.0.2.99"), Ifindex: n.AltIndex}
	if err := p.SetAlternatives([]classifyxdp.Alternative{alt}); err != nil {
		t.Fatal(err)
	}
	// The generator, and with it the classifier, runs on CPU 0.
	restore, err := OnCPU0()
	if err != nil {
		t.Fatal(err)
	}
	defer restore()

	const flows, packets, prioPackets = 16, 32_000, 32_000 / 16
	frame, port := n.Frame(GTPUInVXLAN, 0)
	stop, err := HogCPU(1)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = n.Gen.Send(n.Sender, n.SenderIndex, frame, packets,
		trafficgen.Options{FlowOffset: port, Flows: flows, Rate: 100_000})
	stop()
	if err != nil {
		t.Fatal(err)
	}
	sunk, offloaded := settled(t, n.Counter), settled(t, n.Offloaded)

	prioStats, err := p.SliceStats(classifyxdp.Slice{ID: 2})
	if err != nil {
		t.Fatal(err)
	}
	stats, err := p.SliceStats(classifyxdp.Slice{ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	prioLocal, local, prioAway, away := prioStats.Local.Packets, stats.Local.Packets, prioStats.Offloaded, stats.Offloaded
	t.Logf("non-prioritised: %d local, %d offloaded; prioritised: %d local", local, away.Packets, prioLocal)
	// What the router received of each, by the rules' counters: on a
	// busy machine the veth into the router may drop some first.
	var got [2]uint64
	for i := range got {
		if got[i], _, err = p.Counters(uint32(i + 1)); err != nil {
			t.Fatal(err)
		}
	}
	if got[0] < (packets-prioPackets)*95/100 || got[1] < prioPackets*95/100 {
		t.Errorf("the router received %d of the other flows' %d packets and %d of the prioritised flow's %d",
			got[0], packets-prioPackets, got[1], prioPackets)
	}
	if prioLocal != got[1] || prioAway.Packets != 0 {
		t.Errorf("the prioritised flow: %d local, %d offloaded; want all %d local", prioLocal, prioAway.Packets, got[1])
	}
	if away.Packets == 0 || local+away.Packets != got[0] {
		t.Errorf("the other flows: %d local, %d offloaded; want some offloaded, %d in all", local, away.Packets, got[0])
	}
	if sunk.MatchPackets != prioLocal+local || offloaded.MatchPackets != away.Packets {
		t.Errorf("the sink got %d, the alternative %d; want %d and %d", sunk.MatchPackets, offloaded.MatchPackets, prioLocal+local, away.Packets)
	}
	loads, err := p.CPULoads()
	if err != nil {
		t.Fatal(err)
	}
	if loads[1].Dropped != 0 {
		t.Errorf("CPU 1 dropped %d packets from a full queue", loads[1].Dropped)
	}
	sample, err := n.Offloaded.Sample()
	if err != nil || len(sample) < 34 {
		t.Fatalf("the alternative's sample: %x, %v", sample, err)
	}
	if dst, ip := net.HardwareAddr(sample[0:6]), netip.AddrFrom4([4]byte(sample[30:34])); dst.String() != alt.MAC.String() || ip != alt.Addr {
		t.Errorf("the alternative got a frame to %v, %v; want %v, %v", dst, ip, alt.MAC, alt.Addr)
	}
}

// With nowhere to offload, an overloaded CPU's queue overflows: the CPU
// map's tracepoint counts what it drops, so that sent, taken and dropped
// add up and the queue's fill stays exact.
func TestFullQueueDropsAreCounted(t *testing.T) {
	needTwoCPUs(t)
	p := newClassifier(t)
	n := newVideoNet(t, p)
	steerVideo(t, p)
	if err := p.SetSlice(classifyxdp.Slice{ID: 1, CPUs: []int{1}}); err != nil {
		t.Fatal(err)
	}
	restore, err := OnCPU0()
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	stop, err := HogCPU(1)
	if err != nil {
		t.Fatal(err)
	}
	const packets = 8_000 // four queues' worth
	_, err = n.SendLayer(GTPUInVXLAN, 0, 16, packets, 100_000)
	stop()
	if err != nil {
		t.Fatal(err)
	}
	settled(t, n.Counter)
	// The queue's thread on CPU 1 may start late, the hog gone: what it
	// holds is neither taken nor dropped until it does.
	var l classifyxdp.CPULoad
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		loads, err := p.CPULoads()
		if err != nil {
			t.Fatal(err)
		}
		if l = loads[1]; l.Backlog() == 0 || time.Now().After(deadline) {
			break
		}
	}
	if l.Dropped == 0 || l.Enqueued != l.Dequeued+l.Dropped {
		t.Errorf("CPU 1's queue: %d sent, %d taken, %d dropped; want drops, and the three to add up", l.Enqueued, l.Dequeued, l.Dropped)
	}
}

// With ReceiveOn, the router receives in a thread on CPU 1 while the
// generator sends on CPU 0, and the sink, the monitor and the alternative
// node receive in threads on CPU 0: the router's does the router's work,
// the sink's the sink's. The threads end with the segment.
func TestReceiveOn(t *testing.T) {
	needTwoCPUs(t)
	p := newClassifier(t)
	n, err := New(p.Program(), Stamps{})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			n.Close()
		}
	}()
	ports := map[string]struct{ cpu, threads int }{"edge": {cpu: 1, threads: 1}, "in": {cpu: 0, threads: 3}}
	before := map[string]map[int]bool{}
	for port := range ports {
		if before[port], err = napiThreads(port); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.ReceiveOn(1, 0); err != nil {
		t.Fatal(err)
	}
	threads := map[string][]int{}
	for port, want := range ports {
		after, err := napiThreads(port)
		if err != nil {
			t.Fatal(err)
		}
		for pid := range after {
			if !before[port][pid] {
				threads[port] = append(threads[port], pid)
			}
		}
		if len(threads[port]) != want.threads {
			t.Fatalf("%d new NAPI threads of ports %s, want %d", len(threads[port]), port, want.threads)
		}
		for _, pid := range threads[port] {
			var set unix.CPUSet
			if err := unix.SchedGetaffinity(pid, &set); err != nil || set.Count() != 1 || !set.IsSet(want.cpu) {
				t.Errorf("the NAPI thread %d of %s may run on %d CPUs, CPU %d among them: %v (%v)", pid, port, set.Count(), want.cpu, set.IsSet(want.cpu), err)
			}
			if attr, err := unix.SchedGetAttr(pid, 0); err != nil || attr.Policy != unix.SCHED_FIFO || attr.Priority != receivePriority {
				t.Errorf("the NAPI thread %d of %s is scheduled %+v (%v), want SCHED_FIFO %d", pid, port, attr, err, receivePriority)
			}
		}
	}
	routerThread := threads["edge"][0]
	ranBefore := runTime(t, routerThread)

	restore, err := OnCPU0()
	if err != nil {
		t.Fatal(err)
	}
	const packets, rate = 2000, 10_000
	frame, _ := n.Frame(GTPUInVXLAN, 0)
	_, _, err = n.Gen.Send(n.Sender, n.SenderIndex, frame, packets, trafficgen.Options{Rate: rate})
	restore()
	if err != nil {
		t.Fatal(err)
	}
	settled(t, n.Counter)
	if ran := runTime(t, routerThread) - ranBefore; ran <= 0 {
		t.Errorf("the router's NAPI thread ran %v while %d packets went through", ran, packets)
	}
	byCPU, err := n.Counter.CountsByCPU()
	if err != nil {
		t.Fatal(err)
	}
	if byCPU[0].MatchPackets != packets || byCPU[1].MatchPackets != 0 {
		t.Errorf("the sink got %d packets on CPU 0 and %d on CPU 1; want %d, 0", byCPU[0].MatchPackets, byCPU[1].MatchPackets, packets)
	}

	closed = true
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	for port, pids := range threads {
		for _, pid := range pids {
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if alive, err := napiThreads(port); err != nil || !alive[pid] {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the NAPI thread %d of %s outlived the segment", pid, port)
				}
			}
		}
	}
}

// runTime is how long a thread has run on a CPU.
func runTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		t.Fatal(err)
	}
	var ns int64
	if _, err := fmt.Sscan(string(stat), &ns); err != nil {
		t.Fatalf("schedstat %q: %v", stat, err)
	}
	return time.Duration(ns)
}
