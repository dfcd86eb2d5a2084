package classifyxdp

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
)

// loadCPU makes a CPU's queue hold packets, as if it had been sent them.
func (p *parser) loadCPU(t *testing.T, cpu int, packets uint64) {
	t.Helper()
	var l CPULoad
	if err := p.objs.CpuLoads.Lookup(uint32(cpu), &l); err != nil {
		t.Fatal(err)
	}
	l.Enqueued = l.Dequeued + l.Dropped + packets
	if err := p.objs.CpuLoads.Put(uint32(cpu), &l); err != nil {
		t.Fatal(err)
	}
}

// passHold makes the flows sent to alternative nodes look sent there hold
// ago.
func passHold(t *testing.T, p *parser, hold time.Duration) {
	t.Helper()
	var hash uint32
	var route classifyFlowRoute
	for it := p.objs.FlowRoutes.Iterate(); it.Next(&hash, &route); {
		route.Since -= uint64(hold)
		if err := p.objs.FlowRoutes.Put(hash, &route); err != nil {
			t.Fatal(err)
		}
	}
}

// runOut runs the classifier on a frame and returns its action and the
// frame as it left.
func (p *parser) runOut(t *testing.T, frame []byte) (xdplink.Action, []byte) {
	t.Helper()
	out := make([]byte, len(frame)+256)
	opts := ebpf.RunOptions{Data: frame, DataOut: out}
	ret, err := p.objs.XdpClassify.Run(&opts)
	if err != nil {
		t.Fatal(err)
	}
	return xdplink.Action(ret), opts.DataOut
}

// A GTP-U-in-VXLAN frame with every checksum right, the outer UDP one
// included, from the UE's port, over IPv4.
func offloadFrame(port layers.UDPPort) []byte {
	return offloadFrameOver(&layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP,
		SrcIP: net.ParseIP("192.0.2.1").To4(), DstIP: net.ParseIP("192.0.2.2").To4()}, port)
}

// offloadFrameOver is offloadFrame over an outer IPv4 or IPv6 header.
func offloadFrameOver(outerIP gopacket.NetworkLayer, port layers.UDPPort) []byte {
	outerUDP := &layers.UDP{SrcPort: 50000, DstPort: 4789}
	etherType := layers.EthernetTypeIPv4
	if _, v6 := outerIP.(*layers.IPv6); v6 {
		etherType = layers.EthernetTypeIPv6
	}
	gtpIP, gtpUDP := ipv4("10.100.3.1", "10.100.3.2", layers.IPProtocolUDP), udp(2152, 2152)
	ueIP, ueUDP := ipv4("10.45.0.2", "10.100.6.2", layers.IPProtocolUDP), udp(port, 5004)
	for _, l := range []struct {
		u  *layers.UDP
		ip gopacket.NetworkLayer
	}{{u: outerUDP, ip: outerIP}, {u: gtpUDP, ip: gtpIP}, {u: ueUDP, ip: ueIP}} {
		l.u.SetNetworkLayerForChecksum(l.ip)
	}
	return demo.Serialize(true, eth(etherType), outerIP.(gopacket.SerializableLayer), outerUDP, &layers.VXLAN{ValidIDFlag: true, VNI: 7},
		eth(layers.EthernetTypeIPv4), gtpIP, gtpUDP, &layers.GTPv1U{Version: 1, ProtocolType: 1, MessageType: 255, TEID: 0x100},
		ueIP, ueUDP, gopacket.Payload("payload"))
}

// checkOffloaded checks that a frame left for the alternative: its outer
// destination MAC and address are the alternative's, its source MAC the
// one it was sent to, and its IPv4 and UDP checksums right, by gopacket.
func checkOffloaded(t *testing.T, sent, out []byte, alt Alternative) {
	t.Helper()
	pkt := gopacket.NewPacket(out, layers.LayerTypeEthernet, gopacket.Default)
	e, _ := pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	u, _ := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
	var dst net.IP
	network := pkt.NetworkLayer() // the outermost
	switch ip := network.(type) {
	case *layers.IPv4:
		dst = ip.DstIP
		if want := ip.Checksum; recomputeIPv4(t, ip) != want {
			t.Errorf("IPv4 checksum %#04x is wrong", want)
		}
	case *layers.IPv6:
		dst = ip.DstIP
	}
	if e == nil || network == nil || u == nil {
		t.Fatalf("the frame that left does not decode: %v", pkt)
	}
	if e.DstMAC.String() != alt.MAC.String() || e.SrcMAC.String() != net.HardwareAddr(sent[0:6]).String() ||
		!dst.Equal(alt.Addr.AsSlice()) {
		t.Errorf("left from %v to %v, %v; want from %v to %v, %v", e.SrcMAC, e.DstMAC, dst,
			net.HardwareAddr(sent[0:6]), alt.MAC, alt.Addr)
	}
	if want := u.Checksum; recomputeUDP(t, network, u) != want || want == 0 {
		t.Errorf("UDP checksum %#04x is wrong", want)
	}
}

func recomputeIPv4(t *testing.T, ip *layers.IPv4) uint16 {
	t.Helper()
	b := gopacket.NewSerializeBuffer()
	c := *ip
	if err := c.SerializeTo(b, gopacket.SerializeOptions{ComputeChecksums: true}); err != nil {
		t.Fatal(err)
	}
	return c.Checksum
}

func recomputeUDP(t *testing.T, ip gopacket.NetworkLayer, u *layers.UDP) uint16 {
	t.Helper()
	c := *u
	c.SetNetworkLayerForChecksum(ip)
	b := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(b, gopacket.SerializeOptions{ComputeChecksums: true}, &c, gopacket.Payload(u.Payload)); err != nil {
		t.Fatal(err)
	}
	return c.Checksum
}

// Algorithm 1 of "XDP-Based SmartNIC Hardware Performance Acceleration for Next-Generation Networks",
// under BPF_PROG_TEST_RUN with the queue fills set
// by hand: a flow leaves for the alternative when its CPU's queue passes
// three quarters (a prioritised one only when nearly full), rewritten with
// right checksums; it stays away while the queue has not drained or the
// hold has not passed, and comes back after.
func TestOffloadFollowsTheQueue(t *testing.T) {
	// The hold passes when the test says (passHold): a busy host's stall
	// between two packets must not pass it.
	const hold = 10 * time.Second
	p := newParserWith(t, Config{MaxMasks: MaxMasks, OffloadHold: hold})
	cpu := p.cpu
	for _, s := range []Slice{{ID: 1, CPUs: []int{cpu}}, {ID: 2, CPUs: []int{cpu}, Prioritised: true}} {
		if err := p.SetSlice(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Add(Rule{ID: 1, Priority: 1, Action: ActionSteer, Slice: 1, Matches: []Match{{Field: "tunnel2", Value: uint64(TunnelGTPU), Mask: 0xff}}},
		Rule{ID: 2, Priority: 2, Action: ActionSteer, Slice: 2, Matches: []Match{{Field: "srcPort", Value: 1000, Mask: 0xffff}}}); err != nil {
		t.Fatal(err)
	}
	alt := Alternative{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 0xaa}, Addr: netip.MustParseAddr("198.51.100.99")}
	if err := p.SetAlternatives([]Alternative{alt}); err != nil {
		t.Fatal(err)
	}
	plain, prio := offloadFrame(2000), offloadFrame(1000)
	expect := func(what string, frame []byte, queued uint64, want xdplink.Action) {
		t.Helper()
		p.loadCPU(t, cpu, queued)
		action, out := p.runOut(t, frame)
		if action != want {
			t.Fatalf("%s with %d queued: action %d, want %d", what, queued, action, want)
		}
		if action == xdplink.TX {
			checkOffloaded(t, frame, out, alt)
		}
	}
	expect("a flow", plain, steerQueue*3/4-1, xdplink.Redirect)
	expect("a flow", plain, steerQueue*3/4, xdplink.TX)
	expect("a prioritised flow", prio, steerQueue*3/4, xdplink.Redirect)
	expect("a prioritised flow", prio, steerQueue-64, xdplink.TX)
	// Away until the queue has drained and the hold has passed.
	expect("an offloaded flow", plain, steerQueue/4+1, xdplink.TX)
	expect("an offloaded flow", plain, 0, xdplink.TX)
	passHold(t, p, hold)
	expect("an offloaded flow", plain, steerQueue/4+1, xdplink.TX)
	expect("an offloaded flow", plain, steerQueue/4, xdplink.Redirect)
	expect("a flow back", plain, steerQueue/4+1, xdplink.Redirect)

	if st, err := p.SliceStats(Slice{ID: 1}); err != nil || st.Offloaded.Packets != 4 {
		t.Errorf("slice 1 offloaded %+v (%v), want 4 packets", st.Offloaded, err)
	}
	// Without an alternative, a flow stays whatever the queue.
	if err := p.SetAlternatives(nil); err != nil {
		t.Fatal(err)
	}
	expect("a flow with nowhere to go", offloadFrame(3000), steerQueue, xdplink.Redirect)
}

// A flow prioritised by its hash (the paper's prio-map) stays on its own
// CPU when its slice's flows leave, and counts what it sent; FlowHash
// gives the hash the data path computes.
func TestPrioritisedFlow(t *testing.T) {
	p := newParser(t)
	if err := p.SetSlice(Slice{ID: 1, CPUs: []int{p.cpu}}); err != nil {
		t.Fatal(err)
	}
	if err := p.Add(Rule{ID: 1, Action: ActionSteer, Slice: 1, Matches: []Match{{Field: "tunnel2", Value: uint64(TunnelGTPU), Mask: 0xff}}}); err != nil {
		t.Fatal(err)
	}
	if err := p.SetAlternatives([]Alternative{{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 0xaa}, Addr: netip.MustParseAddr("198.51.100.99")}}); err != nil {
		t.Fatal(err)
	}
	prio, other := offloadFrame(1000), offloadFrame(2000)
	_, st := p.run(t, prio)
	key := Key(bytesOf(st.Key))
	if err := p.SetPrioFlow(PrioFlow{Hash: FlowHash(&key), CPU: p.cpu}); err != nil {
		t.Fatal(err)
	}
	p.loadCPU(t, p.cpu, steerQueue*3/4)
	if action, _ := p.runOut(t, prio); action != xdplink.Redirect {
		t.Errorf("the prioritised flow: action %d, want XDP_REDIRECT to its CPU", action)
	}
	if action, _ := p.runOut(t, other); action != xdplink.TX {
		t.Errorf("another flow of the slice: action %d, want XDP_TX to the alternative", action)
	}
	flows, err := p.PrioFlows()
	if err != nil {
		t.Fatal(err)
	}
	if len(flows) != 1 || flows[0].Hash != FlowHash(&key) || flows[0].Packets != 1 || flows[0].Bytes != uint64(len(prio)) {
		t.Errorf("prioritised flows %+v, want the one with 1 packet of %d octets", flows, len(prio))
	}
	if err := p.SetPrioFlow(PrioFlow{Hash: 1, CPU: 1 << 20}); err == nil {
		t.Error("a flow prioritised on a CPU that is not there")
	}
	if err := p.DeletePrioFlow(FlowHash(&key)); err != nil {
		t.Fatal(err)
	}
	if err := p.DeletePrioFlow(FlowHash(&key)); !errors.Is(err, ErrNoPrioFlow) {
		t.Errorf("deleting it again: %v", err)
	}
	if action, _ := p.runOut(t, prio); action != xdplink.TX {
		t.Errorf("the flow no longer prioritised: action %d, want XDP_TX", action)
	}
}

// A slice's rate lets a burst through, then drops and counts what exceeds
// it; a slice without a rate drops nothing.
func TestSliceRate(t *testing.T) {
	p := newParser(t)
	frame := offloadFrame(1000)
	const burstFrames = 5
	for _, s := range []Slice{{ID: 1, CPUs: []int{p.cpu}, Rate: 8, Burst: burstFrames * uint64(len(frame))}, {ID: 2, CPUs: []int{p.cpu}}} {
		if err := p.SetSlice(s); err != nil {
			t.Fatal(err)
		}
	}
	steerTo := func(slice uint32) {
		t.Helper()
		if err := p.Clear(); err != nil {
			t.Fatal(err)
		}
		if err := p.Add(Rule{ID: slice, Action: ActionSteer, Slice: slice}); err != nil {
			t.Fatal(err)
		}
	}
	steerTo(1)
	var actions []xdplink.Action
	for range burstFrames + 3 {
		action, _ := p.runOut(t, frame)
		actions = append(actions, action)
	}
	want := []xdplink.Action{xdplink.Redirect, xdplink.Redirect, xdplink.Redirect, xdplink.Redirect, xdplink.Redirect, xdplink.Drop, xdplink.Drop, xdplink.Drop}
	if !slices.Equal(actions, want) {
		t.Errorf("actions %v, want %v: the burst, then drops at 1 byte/s", actions, want)
	}
	if st, err := p.SliceStats(Slice{ID: 1}); err != nil || st.Policed.Packets != 3 || st.Policed.Bytes != 3*uint64(len(frame)) {
		t.Errorf("slice 1 policed %+v (%v), want 3 packets", st.Policed, err)
	}
	steerTo(2)
	for range 20 {
		if action, _ := p.runOut(t, frame); action != xdplink.Redirect {
			t.Fatalf("a slice without a rate: action %d", action)
		}
	}
	if err := p.SetSlice(Slice{ID: 3, CPUs: []int{p.cpu}, Rate: 1, Burst: 1 << 62}); err == nil {
		t.Error("a burst no bucket holds was accepted")
	}
}

// steeringAll is a parser that steers every packet to slice 1, on its
// CPU.
func steeringAll(t *testing.T) *parser {
	t.Helper()
	p := newParser(t)
	if err := p.SetSlice(Slice{ID: 1, CPUs: []int{p.cpu}}); err != nil {
		t.Fatal(err)
	}
	if err := p.Add(Rule{ID: 1, Action: ActionSteer, Slice: 1}); err != nil {
		t.Fatal(err)
	}
	return p
}

// Over IPv6 the alternative's IPv6 address replaces the outer destination
// and the mandatory UDP checksum follows; a packet of the other family than
// the alternative's stays on its CPU.
func TestOffloadOverIPv6(t *testing.T) {
	p := steeringAll(t)
	alt := Alternative{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 0xbb}, Addr: netip.MustParseAddr("2001:db8::99")}
	if err := p.SetAlternatives([]Alternative{alt}); err != nil {
		t.Fatal(err)
	}
	if got, err := p.Alternatives(); err != nil || len(got) != 1 || got[0].Addr != alt.Addr {
		t.Fatalf("alternatives %+v (%v)", got, err)
	}
	p.loadCPU(t, p.cpu, steerQueue)
	v6 := offloadFrameOver(&layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP,
		SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("2001:db8::2")}, 1000)
	action, out := p.runOut(t, v6)
	if action != xdplink.TX {
		t.Fatalf("an IPv6 frame: action %d, want XDP_TX", action)
	}
	checkOffloaded(t, v6, out, alt)
	if action, _ := p.runOut(t, offloadFrame(2000)); action != xdplink.Redirect {
		t.Errorf("an IPv4 frame with an IPv6 alternative: action %d, want XDP_REDIRECT to its CPU", action)
	}
}

// A packet in no tunnel (the UPF's downlink on N6) is addressed to its
// end, not to this node: it leaves for the alternative with only its MACs
// changed, so that the node, a router of that end's addresses, forwards it
// on. Its addresses and checksums are as they came.
func TestOffloadKeepsAnUntunnelledPacketsAddresses(t *testing.T) {
	p := steeringAll(t)
	for _, c := range []struct{ alt, ue, dn string }{
		{"198.51.100.99", "10.45.0.7", "10.100.6.2"},
		{"2001:db8::99", "2001:db8:45::7", "2001:db8:6::2"},
	} {
		alt := Alternative{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 0xaa}, Addr: netip.MustParseAddr(c.alt)}
		if err := p.SetAlternatives([]Alternative{alt}); err != nil {
			t.Fatal(err)
		}
		p.loadCPU(t, p.cpu, steerQueue)
		ip := demo.UEPacket(netip.MustParseAddr(c.ue), netip.MustParseAddr(c.dn), false, 64)
		frame := demo.Ethernet(net.HardwareAddr{2, 0, 0, 0, 0, 6}, net.HardwareAddr{2, 0, 0, 0, 0, 1}, ip)
		action, out := p.runOut(t, frame)
		if action != xdplink.TX {
			t.Fatalf("a packet to %s: action %d, want XDP_TX to the alternative", c.ue, action)
		}
		want := demo.Ethernet(alt.MAC, net.HardwareAddr{2, 0, 0, 0, 0, 6}, ip)
		if !bytes.Equal(out, want) {
			t.Errorf("a packet to %s left as\n%x\nwant\n%x", c.ue, out, want)
		}
	}
}

// Setting and deleting a slice are changes as adding a rule is, so that
// the daemon saves slices set by hand at once; a refused one is none.
func TestSliceChangesAreReported(t *testing.T) {
	changes := 0
	p := newParserWith(t, Config{Changed: func() { changes++ }})
	if err := p.SetSlice(Slice{ID: 1, CPUs: []int{p.cpu}}); err != nil || changes != 1 {
		t.Fatalf("setting a slice: %v, %d changes reported, want 1", err, changes)
	}
	if err := p.SetSlice(Slice{ID: 1, CPUs: []int{-1}}); err == nil || changes != 1 {
		t.Errorf("a refused slice: %v, %d changes reported, want 1", err, changes)
	}
	if err := p.DeleteSlice(1); err != nil || changes != 2 {
		t.Errorf("deleting the slice: %v, %d changes reported, want 2", err, changes)
	}
}

// AwaitSteered returns once the CPUs' queues are through with what they
// held when it was called, taken or dropped; a queue that never drains
// holds it for the timeout.
func TestAwaitSteeredWaitsForTheQueues(t *testing.T) {
	p := newParser(t)
	p.loadCPU(t, p.cpu, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.AwaitSteered(time.Minute)
	}()
	select {
	case <-done:
		t.Fatal("AwaitSteered returned with 100 packets queued")
	case <-time.After(100 * time.Millisecond):
	}
	var l CPULoad
	if err := p.objs.CpuLoads.Lookup(uint32(p.cpu), &l); err != nil {
		t.Fatal(err)
	}
	l.Dequeued, l.Dropped = l.Dequeued+60, l.Dropped+40
	if err := p.objs.CpuLoads.Put(uint32(p.cpu), &l); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("AwaitSteered still waits with the queue through")
	}

	p.loadCPU(t, p.cpu, 1)
	start := time.Now()
	if p.AwaitSteered(50 * time.Millisecond); time.Since(start) < 50*time.Millisecond {
		t.Errorf("AwaitSteered on a queue that never drains returned after %v, want the timeout", time.Since(start))
	}
	// Closed, it cannot tell: it returns at once.
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if p.AwaitSteered(time.Minute); time.Since(start) > 10*time.Second {
		t.Errorf("AwaitSteered on a closed datapath returned after %v", time.Since(start))
	}
}
