package e2e

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/demo/demotest"
	"github.com/xdp5g/xdp5g/internal/testsupport"
	"github.com/xdp5g/xdp5g/internal/upf/session"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// otherUE is the address of the second UE's session (otherSession).
var otherUE = netip.MustParseAddr("10.45.0.3")

// otherSession is the demo's session for a second UE, IPv4 only.
func otherSession() session.Session {
	s := demo.Session()
	s.SEID++
	s.PDRs = s.PDRs[:2] // the uplink and the IPv4 downlink
	s.PDRs[0].PDI.TEID++
	for i := range s.PDRs {
		s.PDRs[i].PDI.UEAddress = netip.PrefixFrom(otherUE, 32)
	}
	return s
}

// ipReceived is the IP packets the calling thread's namespace took in.
func ipReceived() (uint64, error) {
	b, err := os.ReadFile("/proc/thread-self/net/snmp")
	if err != nil {
		return 0, err
	}
	var names []string
	for line := range strings.Lines(string(b)) {
		fields := strings.Fields(strings.TrimPrefix(line, "Ip:"))
		if !strings.HasPrefix(line, "Ip:") {
			continue
		}
		if names == nil {
			names = fields
			continue
		}
		if i := slices.Index(names, "InReceives"); i >= 0 && i < len(fields) {
			return strconv.ParseUint(fields[i], 10, 64)
		}
	}
	return 0, errors.New("no InReceives in /proc/thread-self/net/snmp")
}

// downlinkTo is the DN's UDP datagram from AppPort to port of the UE ue.
func downlinkTo(ue netip.Addr, port uint16) []byte {
	ip := &layers.IPv4{Version: 4, TTL: demo.UETTL, Protocol: layers.IPProtocolUDP, SrcIP: demo.DNAddr.AsSlice(), DstIP: ue.AsSlice()}
	udp := &layers.UDP{SrcPort: demo.AppPort, DstPort: layers.UDPPort(port)}
	udp.SetNetworkLayerForChecksum(ip)
	return demo.Serialize(true, ip, udp, gopacket.Payload("to the UE, mirrored or not"))
}

// A mirroring rule in the classify stage on N6 copies the downlink of
// one UE's flow to a monitoring port of the UPF's, from the classify stage
// straight to the UPF and through steering to another CPU alike: each
// copy is the UE's packet as it came from the DN, behind the rule's
// Ethernet addresses; the packets themselves reach the gNB as without the
// rule; the UE's other flow and the other UE are not copied. With a drop
// rule below the mirror the copies still leave, and the packets do not.
// Packets passed to the kernel, by a pass rule below or by the UPF (to a
// UE without a session), are copied at TC ingress, whose program goes
// with the classify stage.
// Sinks sample the first frame they take: each phase has fresh ones.
func TestChainMirrorsOneUE(t *testing.T) {
	tb := demotest.Testbed(t)
	upf := demotest.UPF(t, tb)
	check(t, upf.Install())
	check(t, upf.Store.Create(otherSession()))
	monitor, err := tb.NewCollector()
	check(t, err)
	testsupport.Cleanup(t, monitor.Close)
	check(t, upf.AttachCollector())
	port, _, err := tb.UPF.Link(demo.CollectorLink)
	check(t, err)
	rules, slice := stagesOf(t, upf)
	setChain := func(c upfxdp.Chain) {
		t.Helper()
		check(t, tb.UPF.Do(func() error { return upf.Datapath.SetStages(demo.N6, c) }))
	}
	// The gNB's and the monitor's fresh sinks, in place of the last.
	var copies demo.Direction
	freshSinks := func(t *testing.T) (down, fresh demo.Direction) {
		t.Helper()
		check(t, tb.NewSinks())
		if copies.Sink != nil {
			check(t, copies.Sink.Close())
		}
		copies, err = monitor.Copies()
		check(t, err)
		return tb.Downlink(), copies
	}
	defer func() {
		if copies.Sink != nil {
			check(t, copies.Sink.Close())
		}
	}()
	count := func(d demo.Direction) uint64 {
		t.Helper()
		c, err := d.Sink.Counts()
		check(t, err)
		return c.MatchPackets
	}
	sample := func(d demo.Direction) []byte {
		t.Helper()
		b, err := d.Sink.Sample()
		check(t, err)
		return b
	}
	const flowPort, otherPort = 40000, 40001
	watched := downlinkTo(demo.UEAddr, flowPort)
	// sendWatched sends the UE's watched flow and checks that want of its
	// packets reached the gNB and that each left a copy, the UE's packet
	// behind the rule's addresses.
	sendWatched := func(t *testing.T, want uint64) (down demo.Direction) {
		t.Helper()
		down, copies := freshSinks(t)
		if got := send(t, down, tb.DownlinkFrame(watched)); got != want {
			t.Errorf("%d of the %d mirrored packets reached the gNB, want %d", got, pfcpPackets, want)
		}
		if got, err := copies.Delivered(pfcpPackets); err != nil || got != pfcpPackets {
			t.Errorf("%d copies reached the monitor (%v), want %d", got, err, pfcpPackets)
		}
		testsupport.EqualFrames(t, sample(copies), monitor.Plain(watched))
		return down
	}

	setChain(upfxdp.NewChain(rules, true, false, 0))
	down, _ := freshSinks(t)
	if got := send(t, down, tb.DownlinkFrame(watched)); got != pfcpPackets {
		t.Fatalf("without the rule: %d of %d packets reached the gNB", got, pfcpPackets)
	}
	unmirrored := sample(down)

	const mirror, drop, pass, unknownMirror = 1, 2, 3, 4
	check(t, rules.Add(classifyxdp.Rule{ID: mirror, Priority: 10, Action: classifyxdp.ActionMirror,
		Out: &classifyxdp.Egress{Ifindex: port, DstMAC: monitor.MAC, SrcMAC: monitor.UPFMAC},
		Matches: []classifyxdp.Match{{Field: "innerDst", Prefix: netip.PrefixFrom(demo.UEAddr, 32)},
			{Field: "dstPort", Value: flowPort, Mask: 0xffff}}}))
	chains := []struct {
		name  string
		chain upfxdp.Chain
	}{
		{"classify, upf", upfxdp.NewChain(rules, true, false, 0)},
		{"classify, steer, upf", upfxdp.NewChain(rules, true, true, slice.ID)},
	}
	for _, c := range chains {
		t.Run(c.name, func(t *testing.T) {
			setChain(c.chain)
			down, copies := freshSinks(t)
			for name, inner := range map[string][]byte{"the UE's other flow": downlinkTo(demo.UEAddr, otherPort),
				"the other UE": downlinkTo(otherUE, flowPort)} {
				if got := send(t, down, tb.DownlinkFrame(inner)); got != pfcpPackets {
					t.Errorf("%s: %d of %d packets reached the gNB", name, got, pfcpPackets)
				}
			}
			if got := count(copies); got != 0 {
				t.Errorf("%d packets of other flows copied", got)
			}
			testsupport.EqualFrames(t, sample(sendWatched(t, pfcpPackets)), unmirrored)
		})
	}

	t.Run("a drop rule below", func(t *testing.T) {
		setChain(upfxdp.NewChain(rules, true, false, 0))
		check(t, rules.Add(classifyxdp.Rule{ID: drop, Priority: 5, Action: classifyxdp.ActionDrop,
			Matches: []classifyxdp.Match{{Field: "innerDst", Prefix: netip.PrefixFrom(demo.UEAddr, 32)}}}))
		sendWatched(t, 0)
	})

	// Packets passed to the kernel, by a rule below or by the UPF stage,
	// leave their copies at TC ingress.
	received := func(t *testing.T) uint64 {
		t.Helper()
		var n uint64
		check(t, tb.UPF.Do(func() (err error) { n, err = ipReceived(); return err }))
		return n
	}
	t.Run("a pass rule below", func(t *testing.T) {
		check(t, rules.Delete(drop))
		check(t, rules.Add(classifyxdp.Rule{ID: pass, Priority: 5, Action: classifyxdp.ActionPass,
			Matches: []classifyxdp.Match{{Field: "innerDst", Prefix: netip.PrefixFrom(demo.UEAddr, 32)}}}))
		before := received(t)
		sendWatched(t, 0)
		if got := received(t) - before; got < pfcpPackets {
			t.Errorf("the kernel took %d packets, want the %d passed", got, pfcpPackets)
		}
		check(t, rules.Delete(pass))
	})
	noSession := netip.MustParseAddr("10.45.0.99")
	check(t, rules.Add(classifyxdp.Rule{ID: unknownMirror, Priority: 10, Action: classifyxdp.ActionMirror,
		Out:     &classifyxdp.Egress{Ifindex: port, DstMAC: monitor.MAC, SrcMAC: monitor.UPFMAC},
		Matches: []classifyxdp.Match{{Field: "innerDst", Prefix: netip.PrefixFrom(noSession, 32)}}}))
	for _, c := range chains {
		t.Run("a UE without a session in "+c.name, func(t *testing.T) {
			setChain(c.chain)
			down, copies := freshSinks(t)
			inner := downlinkTo(noSession, flowPort)
			before := received(t)
			if got := send(t, down, tb.DownlinkFrame(inner)); got != 0 {
				t.Errorf("%d packets without a session reached the gNB", got)
			}
			if got, err := copies.Delivered(pfcpPackets); err != nil || got != pfcpPackets {
				t.Errorf("%d copies reached the monitor (%v), want %d", got, err, pfcpPackets)
			}
			testsupport.EqualFrames(t, sample(copies), monitor.Plain(inner))
			if got := received(t) - before; got < pfcpPackets {
				t.Errorf("the kernel took %d packets, want the %d passed", got, pfcpPackets)
			}
		})
	}
	// The TC program goes with the classify stage.
	tcPrograms := func() int {
		t.Helper()
		var n int
		check(t, tb.UPF.Do(func() error {
			iface, err := net.InterfaceByName(demo.N6)
			if err != nil {
				return err
			}
			q, err := link.QueryPrograms(link.QueryOptions{Target: iface.Index, Attach: ebpf.AttachTCXIngress})
			if err == nil {
				n = len(q.Programs)
			}
			return err
		}))
		return n
	}
	if n := tcPrograms(); n != 1 {
		t.Errorf("%d programs at TC ingress of N6 with the classify stage, want 1", n)
	}
	setChain(upfxdp.NewChain(rules, false, true, slice.ID))
	if n := tcPrograms(); n != 0 {
		t.Errorf("%d programs at TC ingress of N6 without the classify stage, want none", n)
	}
	packets, _, err := rules.Counters(mirror)
	check(t, err)
	if packets != 4*pfcpPackets {
		t.Errorf("the mirror rule counted %d packets, want %d", packets, 4*pfcpPackets)
	}
	if got := reasonCount(t, upf.Datapath, demo.N6, "duplicate"); got != 2*pfcpPackets {
		t.Errorf("duplicate on N6 counted %d packets, want %d", got, 2*pfcpPackets)
	}
}
