// Package videonet is the edge-to-core segment of
// "Towards an FPGA-Accelerated Programmable Data Path for Edge-to-Core Communications in 5G Networks"
// in network namespaces, with its traffic: scalable H.265 video as RTP, in
// the paper's three traffic types, from a generator that
// forges the frames. Tests and benchmarks of the classifier run it.
package videonet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
)

// Kind is one of the paper's traffic types.
type Kind int

const (
	IP          Kind = iota // the UE's packet as it is
	VXLAN                   // in VXLAN (VNI 100): a multi-tenant flow
	GTPUInVXLAN             // in GTP-U (TEID 0x100) in VXLAN: a 5G multi-tenant flow
)

// Kinds are the traffic types, in order.
var Kinds = []Kind{IP, VXLAN, GTPUInVXLAN}

func (k Kind) String() string { return [...]string{"IP", "VXLAN", "GTP-U in VXLAN"}[k] }

// The addresses of the segment: the sender's side of the router, the
// sink, and the UE's flows inside the tunnels.
const (
	SenderAddr = "198.51.100.2"
	RouterAddr = "198.51.100.1" // of edge: a UPF's N3 address
	SinkAddr   = "203.0.113.2"
	UEAddr     = "10.45.0.2"
	ServerAddr = "10.200.0.2"
	// FirstPort is the UE's source port of the first flow; flows count
	// up from it.
	FirstPort = 20000
)

// Net is a sender whose frames the generator forges, a router whose edge
// ingress runs a classifier (or a UPF with its stages) and whose kernel
// forwards what passes, a sink
// that counts what arrives, a monitor behind the router's tap interface
// that counts what rules send there, and an alternative node behind the
// router's alt interface that counts what the router offloads to it.
type Net struct {
	Sender, Router, Sink, Monitor, Alt *namespace.Netns
	SenderIndex                        int
	RouterMAC                          net.HardwareAddr // of edge
	AltIndex                           int              // the router's alt
	AltMAC                             net.HardwareAddr // the alternative node's
	// Counter counts UDP at the sink, Tapped at the monitor, Offloaded at
	// the alternative node.
	Counter, Tapped, Offloaded *trafficgen.Sink
	Gen                        *trafficgen.Generator
	closers                    []func() error
}

// Stamps are where the frames arriving at the sinks carry the
// generator's stamps (trafficgen.Filter.StampOffset), 0 for none: Forwarded
// at the sink and the monitor, Offloaded at the alternative node. They
// differ where the router takes headers off what it forwards, as a UPF
// does, and sends the alternative node the frames as they came.
type Stamps struct {
	Forwarded, Offloaded int
}

// New builds the segment with edge, a classifier, at the router's edge, or
// none if nil: the caller attaches the router's program, a UPF's say. The
// router forwards the UE's flows inside the tunnels (to ServerAddr) to the
// sink too.
func New(edge *ebpf.Program, stamps Stamps) (n *Net, err error) {
	n = &Net{}
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Close())
		}
	}()
	for _, ns := range []**namespace.Netns{&n.Sender, &n.Router, &n.Sink, &n.Monitor, &n.Alt} {
		if *ns, err = namespace.New("xdp5g-video-"); err != nil {
			return n, err
		}
		n.closers = append(n.closers, (*ns).Delete)
	}
	steps := []func() error{
		func() error { return namespace.Veth(n.Sender, "out", n.Router, "edge") },
		func() error { return namespace.Veth(n.Router, "core", n.Sink, "in") },
		func() error { return namespace.Veth(n.Router, "tap", n.Monitor, "in") },
		func() error { return namespace.Veth(n.Router, "alt", n.Alt, "in") },
		func() (err error) { n.AltIndex, _, err = n.Router.Link("alt"); return err },
		func() (err error) { _, n.AltMAC, err = n.Alt.Link("in"); return err },
		func() error { return n.Router.AddAddr("edge", "198.51.100.1/24") },
		func() error { return n.Router.AddAddr("core", "203.0.113.1/24") },
		func() error { return n.Sink.AddAddr("in", SinkAddr+"/24") },
		func() error { return n.Router.Sysctl("net.ipv4.ip_forward", "1") },
		func() error { return n.Router.AddRoute(ServerAddr+"/24", SinkAddr, "core") },
		func() error {
			_, sinkMAC, err := n.Sink.Link("in")
			if err == nil {
				err = n.Router.SetNeigh("core", SinkAddr, sinkMAC)
			}
			return err
		},
		func() (err error) { _, n.RouterMAC, err = n.Router.Link("edge"); return err },
		func() (err error) { n.SenderIndex, _, err = n.Sender.Link("out"); return err },
	}
	if edge != nil {
		steps = append(steps, func() error { return n.attach(n.Router.AttachXDP("edge", edge, false)) })
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return n, err
		}
	}
	udpOnly := func(stampOffset int) trafficgen.Filter {
		return trafficgen.Filter{EtherType: 0x0800, IPProto: 17, StampOffset: stampOffset}
	}
	if n.Counter, err = trafficgen.NewSink(n.Sink, "in", udpOnly(stamps.Forwarded), false); err != nil {
		return n, err
	}
	n.closers = append(n.closers, n.Counter.Close)
	if n.Tapped, err = trafficgen.NewSink(n.Monitor, "in", udpOnly(stamps.Forwarded), false); err != nil {
		return n, err
	}
	n.closers = append(n.closers, n.Tapped.Close)
	if n.Offloaded, err = trafficgen.NewSink(n.Alt, "in", udpOnly(stamps.Offloaded), false); err != nil {
		return n, err
	}
	n.closers = append(n.closers, n.Offloaded.Close)
	if n.Gen, err = trafficgen.NewGenerator(); err != nil {
		return n, err
	}
	n.closers = append(n.closers, n.Gen.Close)
	return n, nil
}

func (n *Net) attach(c io.Closer, err error) error {
	if err == nil {
		n.closers = append(n.closers, c.Close)
	}
	return err
}

// Close removes the segment: the programs it attached, then the
// namespaces.
func (n *Net) Close() error {
	var errs []error
	for i := len(n.closers) - 1; i >= 0; i-- {
		errs = append(errs, n.closers[i]())
	}
	n.closers = nil
	return errors.Join(errs...)
}

// Frame is an RTP packet of H.265 layer layerID (0 base, above
// enhancement) from the UE's port FirstPort in a traffic type, addressed
// to the router, and the offset of that port in the frame: the field
// trafficgen.Options.FlowOffset counts flows in.
func (n *Net) Frame(kind Kind, layerID byte) ([]byte, int) {
	ipv4 := func(src, dst string) *layers.IPv4 {
		return &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.ParseIP(src).To4(), DstIP: net.ParseIP(dst).To4()}
	}
	udp := func(src, dst layers.UDPPort) *layers.UDP { return &layers.UDP{SrcPort: src, DstPort: dst} }
	innerEth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		EthernetType: layers.EthernetTypeIPv4}
	outer := func(dstPort layers.UDPPort) []gopacket.SerializableLayer {
		return []gopacket.SerializableLayer{&layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 9}, DstMAC: n.RouterMAC,
			EthernetType: layers.EthernetTypeIPv4}, ipv4(SenderAddr, SinkAddr), udp(50000, dstPort)}
	}
	inner := []gopacket.SerializableLayer{ipv4(UEAddr, ServerAddr), udp(FirstPort, 5004)}
	video := demo.RTPH265(7, 1, layerID, 1, make([]byte, 64)...) // the generator sends up to 256 octets
	var ls []gopacket.SerializableLayer
	switch kind {
	case IP: // the UE's packet is the outer one
		ls = append(outer(5004)[:2], udp(FirstPort, 5004), video)
	case VXLAN:
		ls = append(append(outer(4789), &layers.VXLAN{ValidIDFlag: true, VNI: 100}, innerEth), append(inner, video)...)
	default:
		gtp := []gopacket.SerializableLayer{ipv4("10.100.3.1", "10.100.3.2"), udp(2152, 2152),
			&layers.GTPv1U{Version: 1, ProtocolType: 1, MessageType: 255, TEID: 0x100}}
		ls = append(append(append(outer(4789), &layers.VXLAN{ValidIDFlag: true, VNI: 100}, innerEth), gtp...), append(inner, video)...)
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

// Settled reads a sink's counts once they have stopped changing.
func Settled(s *trafficgen.Sink) (trafficgen.Counts, error) {
	var last trafficgen.Counts
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		c, err := s.Counts()
		if err != nil || c == last {
			return c, err
		}
		last = c
	}
	return last, errors.New("the sink's counts keep changing")
}

// EnhancementLayerDrops is the paper's rule set for flows flows of a
// traffic type: one rule per flow that drops its enhancement layer. The
// flow's innermost source (the outer one for IP flows) and port name it.
func EnhancementLayerDrops(kind Kind, flows int) []classifyxdp.Rule {
	src := netip.MustParseAddr(UEAddr)
	if kind == IP {
		src = netip.MustParseAddr(SenderAddr)
	}
	rules := make([]classifyxdp.Rule, flows)
	for i := range rules {
		rules[i] = classifyxdp.Rule{ID: uint32(i + 1), Action: classifyxdp.ActionDrop, Matches: []classifyxdp.Match{
			{Field: "srcPort", Value: uint64(FirstPort + i), Mask: 0xffff},
			{Field: "innerSrc", Prefix: netip.PrefixFrom(src, 32)},
			{Field: "layerId", Value: 1, Mask: 0x3f}}}
	}
	return rules
}

// OutDropped is how many packets the router's links to the sink and to
// the alternative node dropped, their receivers' rings full: the test
// bed's loss after the router.
func (n *Net) OutDropped() (uint64, error) {
	var total uint64
	for _, name := range []string{"core", "alt"} {
		d, err := n.Router.TxDropped(name)
		if err != nil {
			return 0, err
		}
		total += d
	}
	return total, nil
}

// Layer is what became of one layer's packets sent over the flows.
type Layer struct {
	Sent, Arrived, FrameLen uint64
}

// SendLayer sends packets of one layer of a traffic type over flows flows
// at rate packets per second and counts what arrived at the sink.
func (n *Net) SendLayer(kind Kind, layerID byte, flows int, packets, rate uint64) (Layer, error) {
	frame, port := n.Frame(kind, layerID)
	before, err := Settled(n.Counter)
	if err != nil {
		return Layer{}, err
	}
	sent, _, err := n.Gen.Send(n.Sender, n.SenderIndex, frame, packets,
		trafficgen.Options{FlowOffset: port, Flows: flows, Rate: rate})
	if err != nil {
		return Layer{}, fmt.Errorf("sending %s layer %d: %w", kind, layerID, err)
	}
	after, err := Settled(n.Counter)
	return Layer{Sent: sent, Arrived: after.MatchPackets - before.MatchPackets, FrameLen: uint64(len(frame))}, err
}

// receivePriority is the SCHED_FIFO priority of ReceiveOn's threads: that
// of the kernel's threaded interrupt handlers.
const receivePriority = 50

// ReceiveOn has the router receive on its edge port in a kernel thread of
// its own bound to CPU router, like a NIC's receive queue whose interrupts
// go to that CPU: the port's XDP program, and what the kernel does with
// what it passes, run there. Otherwise they run in the softirq of the CPU
// that sends, the generator's, which an overloaded router then slows down
// instead of losing packets in its 256-frame receive ring. The sink, the
// monitor and the alternative node receive in threads of their own on CPU
// others, so that their work is not the router's. The threads run at
// real-time priority, ahead of the CPU's other threads as a NIC's receive
// softirq is, and end with their ports' XDP programs, at Close.
func (n *Net) ReceiveOn(router, others int) error {
	if err := receiveOn(n.Router, "edge", router); err != nil {
		return err
	}
	for _, ns := range []*namespace.Netns{n.Sink, n.Monitor, n.Alt} {
		if err := receiveOn(ns, "in", others); err != nil {
			return err
		}
	}
	return nil
}

// receiveOn has port of ns receive in a NAPI thread of its own, bound to
// cpu at real-time priority.
func receiveOn(ns *namespace.Netns, port string, cpu int) error {
	before, err := napiThreads(port)
	if err != nil {
		return err
	}
	if err := writeSysfs(ns, "class/net/"+port+"/threaded", "1"); err != nil {
		return fmt.Errorf("threaded NAPI on %s in %s: %w", port, ns.Name, err)
	}
	after, err := napiThreads(port)
	if err != nil {
		return err
	}
	// Other namespaces have ports of the same name: the new thread is ours.
	var ours []int
	for pid := range after {
		if !before[pid] {
			ours = append(ours, pid)
		}
	}
	if len(ours) != 1 {
		// More: another process made a port of the same name threaded meanwhile.
		return fmt.Errorf("port %q in %s: %d new NAPI threads named napi/%s-*, want 1", port, ns.Name, len(ours), port)
	}
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(ours[0], &set); err != nil {
		return fmt.Errorf("binding the NAPI thread %d of %s in %s to CPU %d: %w", ours[0], port, ns.Name, cpu, err)
	}
	// Not a fair share with the CPU's other threads, the CPU map's among
	// them: a slice of theirs of a few milliseconds would overflow the ring.
	realTime := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: receivePriority}
	if err := unix.SchedSetAttr(ours[0], &realTime, 0); err != nil {
		return fmt.Errorf("real-time priority for the NAPI thread %d of %s in %s: %w", ours[0], port, ns.Name, err)
	}
	return nil
}

// napiThreads are the kernel threads that run the NAPI of ports named
// port, in any namespace, by pid.
func napiThreads(port string) (map[int]bool, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	threads := map[int]bool{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		// Gone meanwhile if unreadable. The name is napi/<port>-<NAPI id>.
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err == nil && strings.HasPrefix(string(comm), "napi/"+port+"-") {
			threads[pid] = true
		}
	}
	return threads, nil
}

// writeSysfs writes value to a file of the /sys of ns: sysfs shows the
// ports of the network namespace it was mounted from. The thread that
// mounts it does so in a mount namespace of its own, which ends with the
// thread.
func writeSysfs(ns *namespace.Netns, file, value string) error {
	done := make(chan error)
	go func() {
		// Never unlocked: Go ends the thread, in its own mount namespace,
		// with the goroutine.
		runtime.LockOSThread()
		done <- func() error {
			if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
				return fmt.Errorf("new mount namespace: %w", err)
			}
			// So that the mount stays out of the host's namespace.
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
				return fmt.Errorf("make mounts private: %w", err)
			}
			return ns.Do(func() error {
				if err := unix.Mount("sysfs", "/sys", "sysfs", 0, ""); err != nil {
					return fmt.Errorf("mount the sysfs of %s: %w", ns.Name, err)
				}
				return os.WriteFile(filepath.Join("/sys", file), []byte(value), 0)
			})
		}()
	}()
	return <-done
}

// HogCPU keeps a CPU busy with a real-time thread until the returned
// function is called: the kernel's threads there, the CPU map's among
// them, get only what real-time throttling leaves them.
func HogCPU(cpu int) (stop func(), err error) {
	var stopping atomic.Bool
	started, done := make(chan error), make(chan struct{})
	go func() {
		defer close(done)
		// Never unlocked: the thread, its scheduling changed, ends with
		// the goroutine.
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(cpu)
		err := unix.SchedSetaffinity(0, &set)
		if err == nil {
			err = unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 1}, 0)
		}
		started <- err
		for err == nil && !stopping.Load() {
		}
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("taking CPU %d: %w", cpu, err)
	}
	return func() {
		stopping.Store(true)
		<-done
	}, nil
}

// OnCPU0 moves the calling goroutine's thread to CPU 0, so that a
// Generator it runs sends from there, and returns how to undo it. It needs
// CPUs 0 and 1: the other is for what the generator's packets are steered
// to.
func OnCPU0() (restore func(), err error) {
	var online, cpu0 unix.CPUSet
	if err := unix.SchedGetaffinity(0, &online); err != nil || !online.IsSet(0) || !online.IsSet(1) {
		return nil, errors.New("needs CPUs 0 and 1")
	}
	runtime.LockOSThread()
	cpu0.Set(0)
	if err := unix.SchedSetaffinity(0, &cpu0); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	return func() {
		unix.SchedSetaffinity(0, &online)
		runtime.UnlockOSThread()
	}, nil
}
