package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/lab/videonet"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
)

// Table 1 of "XDP-Based SmartNIC Hardware Performance Acceleration for Next-Generation Networks":
// 16 services told apart by their GTP-U TEID, 8 of them
// prioritised, at every frame size, from below to above what the host can
// forward.
var (
	prioFrameSizes = []int{132, 256, 512, 1024, 1280, 1500}
	prioRates      = []uint64{50_000, 100_000, 200_000, 400_000, 800_000, 0} // packets/s; 0: as fast as the generator goes
)

const (
	prioServices = 16
	prioFirst    = 8           // services 0 to 7 (TEIDs prioTEID to prioTEID+7) are prioritised
	prioTEID     = 0x100       // the first service's
	prioSpan     = time.Second // of each measurement
	// Where the frames of gtpFrame keep the TEID's low half, which the
	// generator counts services in, and the stamp.
	gtpTEIDLowAt = 14 + 20 + 8 + 6
	gtpStampAt   = 14 + 20 + 8 + 8 + 20 + 8
)

// The router receives on prioReceiveCPU (videonet's ReceiveOn), as from a
// NIC's one receive queue, and so the baseline does all its work there.
// The generator, on prioOthersCPU (videonet.OnCPU0), only fills the
// router's receive ring; the sink and the alternative node, the other
// machines, receive on prioOthersCPU too.
const (
	prioReceiveCPU = 1
	prioOthersCPU  = 0
	// Deleting a segment leaves the kernel work for a while, on either CPU
	// (its namespaces' cleanup, the freeing of its BPF maps): without a
	// pause, that would take turns with the next measurement's receiving.
	prioSettle = time.Second
)

// prioSetups are what the measurements compare: no steering (the
// classifier passes every packet to the kernel of the CPU it arrived on,
// prioReceiveCPU), and xdp5g steering the services to the receiving CPU
// or to both, the prioritised ones in a prioritised slice, the alternative
// node taking what the host cannot.
var prioSetups = []struct {
	name string
	cpus []int // none: no steering
}{{"baseline", nil}, {"xdp5g, 1 CPU", []int{prioReceiveCPU}}, {"xdp5g, 2 CPUs", []int{0, 1}}}

// prioPoint is one measurement: what became of the prioritised services'
// packets and of the others'.
type prioPoint struct {
	setup       string
	size        int
	rate        uint64  // asked; 0: flat out
	offered     float64 // packets/s sent
	prio, other layerFate
	// outDropped are the packets the router's links to the sink and the
	// alternative dropped, of either class: the test bed's loss after the
	// router.
	outDropped uint64
}

// layerFate is what became of packets: sent, received by the router
// (its classifier's rule counted them), forwarded by the host, sent to the
// alternative node.
type layerFate struct {
	sent, received, local, offloaded uint64
}

// lostInRing are the packets the router's receive ring dropped, its
// receiving CPU behind, before its classifier saw them.
func (f layerFate) lostInRing() uint64 { return f.sent - min(f.sent, f.received) }

// lostAfterRing are the packets the router's classifier saw and that were
// neither forwarded nor offloaded.
func (f layerFate) lostAfterRing() uint64 { return f.received - min(f.received, f.local+f.offloaded) }

// gtpFrame is a G-PDU of a service to dst, size octets in all, the stamp
// inside the user's UDP payload.
func gtpFrame(routerMAC net.HardwareAddr, dst string, size int) []byte {
	ip := func(src, dst string) *layers.IPv4 {
		return &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.ParseIP(src).To4(), DstIP: net.ParseIP(dst).To4()}
	}
	frame := demo.Serialize(false, &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 9}, DstMAC: routerMAC, EthernetType: layers.EthernetTypeIPv4},
		ip(videonet.SenderAddr, dst), &layers.UDP{SrcPort: 2152, DstPort: 2152},
		&layers.GTPv1U{Version: 1, ProtocolType: 1, MessageType: 255, TEID: prioTEID},
		ip(videonet.UEAddr, videonet.ServerAddr), &layers.UDP{SrcPort: videonet.FirstPort, DstPort: 5004},
		gopacket.Payload(make([]byte, size-gtpStampAt)))
	// The router checks the outer IPv4 header's checksum, nothing inside.
	binary.BigEndian.PutUint16(frame[24:], gopacket.FoldChecksum(gopacket.ComputeChecksum(frame[14:34], 0)))
	return frame
}

// prioRouter is the router of one measurement: videonet's segment, the
// classifier whose rules take the services (steerServices), if it runs
// one, and the G-PDUs' outer destination.
type prioRouter struct {
	n  *videonet.Net
	d  *classifyxdp.Datapath
	to string
	// received counts the packets of each class (prioritised, other) that
	// the router's first program saw.
	received func() ([2]uint64, error)
	close    func() error // removes it all
}

// prioOpen opens a router steering over cpus, or without steering for none.
type prioOpen func(cpus []int) (prioRouter, error)

// classifierRouter is the classifier alone at the router's edge: its rules
// pass the services to the kernel, which forwards them to the sink,
// G-PDUs as they came.
func classifierRouter([]int) (prioRouter, error) {
	d, n, closeAll, err := newSegment()
	return prioRouter{n: n, d: d, to: videonet.SinkAddr, received: func() ([2]uint64, error) { return ruleCounts(d) },
		close: closeAll}, err
}

// ruleCounts are the packets steerServices' rules 1 and 2 took.
func ruleCounts(d *classifyxdp.Datapath) (received [2]uint64, err error) {
	for i := range received {
		if received[i], _, err = d.Counters(uint32(i + 1)); err != nil {
			return received, err
		}
	}
	return received, nil
}

// measurePrio runs Table 1 through videonet's segment with the routers
// open opens, the generator on CPU 0.
func measurePrio(name string, open prioOpen) (points []prioPoint, err error) {
	restore, err := videonet.OnCPU0()
	if err != nil {
		return nil, err
	}
	defer restore()
	for _, setup := range prioSetups {
		for _, size := range prioFrameSizes {
			for _, rate := range prioRates {
				progress("%s: %s, %d-octet frames, %s", name, setup.name, size, rateName(rate))
				p, err := measurePrioPoint(open, setup.cpus, size, rate)
				if err != nil {
					return nil, err
				}
				p.setup = setup.name
				points = append(points, p)
			}
		}
	}
	return points, nil
}

// newSegment is a classifier at the edge of videonet's segment, whose
// sinks read the stamps of gtpFrame; closeAll removes both.
func newSegment() (d *classifyxdp.Datapath, n *videonet.Net, closeAll func() error, err error) {
	if d, err = classifyxdp.OpenDatapath(classifyxdp.Config{}); err != nil {
		return nil, nil, nil, err
	}
	if n, err = videonet.New(d.Program(), videonet.Stamps{Forwarded: gtpStampAt, Offloaded: gtpStampAt}); err != nil {
		return nil, nil, nil, errors.Join(err, d.Close())
	}
	return d, n, func() error { return errors.Join(n.Close(), d.Close()) }, nil
}

// measurePrioPoint measures one setup, size and rate on a fresh segment.
func measurePrioPoint(open prioOpen, cpus []int, size int, rate uint64) (p prioPoint, err error) {
	r, err := open(cpus)
	if err != nil {
		return p, err
	}
	defer func() { err = errors.Join(err, r.close()) }()
	return r.measure(cpus, size, rate)
}

// measure has the router steer over cpus, or not for none, and sends the
// services' frames of size octets at rate.
func (r prioRouter) measure(cpus []int, size int, rate uint64) (p prioPoint, err error) {
	p.size, p.rate = size, rate
	n, d := r.n, r.d
	if err := n.ReceiveOn(prioReceiveCPU, prioOthersCPU); err != nil {
		return p, err
	}
	if d != nil {
		alt := classifyxdp.Alternative{MAC: n.AltMAC, Addr: netip.MustParseAddr("192.0.2.99"), Ifindex: n.AltIndex}
		if err := steerServices(d, cpus, alt); err != nil {
			return p, err
		}
	}
	count := uint64(float64(rate) * prioSpan.Seconds())
	if rate == 0 {
		count = uint64(4e6 * prioSpan.Seconds()) // the span lasts as long as these take
	}
	opts := trafficgen.Options{FlowOffset: gtpTEIDLowAt, Flows: prioServices, FlowsPerSlice: prioFirst, StampOffset: gtpStampAt, Rate: rate}
	// The segment before this one goes on being torn down in the kernel's
	// workers, on any CPU, after it is deleted.
	time.Sleep(prioSettle)
	frames, elapsed, err := n.Gen.Send(n.Sender, n.SenderIndex, gtpFrame(n.RouterMAC, r.to, size), count, opts)
	if err != nil {
		return p, err
	}
	p.offered = float64(frames) / elapsed.Seconds()
	if _, err := videonet.Settled(n.Counter); err != nil {
		return p, err
	}
	if _, err := videonet.Settled(n.Offloaded); err != nil {
		return p, err
	}
	sent := opts.SliceCounts(frames)
	local, err := n.Counter.Delays()
	if err != nil {
		return p, err
	}
	away, err := n.Offloaded.Delays()
	if err != nil {
		return p, err
	}
	received, err := r.received()
	if err != nil {
		return p, err
	}
	if p.outDropped, err = n.OutDropped(); err != nil {
		return p, err
	}
	p.prio = layerFate{sent: sent[0], received: received[0], local: local[0].Received, offloaded: away[0].Received}
	p.other = layerFate{sent: sent[1], received: received[1], local: local[1].Received, offloaded: away[1].Received}
	return p, nil
}

// The slices of steerServices.
const (
	prioSlice  = 1
	otherSlice = 2
)

// steerServices has rule 1 take the prioritised services and rule 2 the
// others. Over cpus, they steer them to a prioritised slice and another,
// with an alternative node; without, they pass them to the kernel, counted
// (a count rule would hand rule 1's packets on to rule 2).
func steerServices(d *classifyxdp.Datapath, cpus []int, alt classifyxdp.Alternative) error {
	rules := []classifyxdp.Rule{
		{ID: 1, Priority: 2, Action: classifyxdp.ActionPass,
			Matches: []classifyxdp.Match{{Field: "tunnel1Id", Value: prioTEID, Mask: ^uint64(prioFirst-1) & 0xffffffff}}},
		{ID: 2, Priority: 1, Action: classifyxdp.ActionPass,
			Matches: []classifyxdp.Match{{Field: "tunnel1", Value: uint64(classifyxdp.TunnelGTPU), Mask: 0xff}}}}
	if cpus == nil {
		return d.Add(rules...)
	}
	for i, s := range []classifyxdp.Slice{{ID: prioSlice, CPUs: cpus, Prioritised: true}, {ID: otherSlice, CPUs: cpus}} {
		if err := d.SetSlice(s); err != nil {
			return err
		}
		rules[i].Action, rules[i].Slice = classifyxdp.ActionSteer, s.ID
	}
	if err := d.Add(rules...); err != nil {
		return err
	}
	return d.SetAlternatives([]classifyxdp.Alternative{alt})
}

func rateName(rate uint64) string {
	if rate == 0 {
		return "flat out"
	}
	return fmt.Sprintf("%d packets/s", rate)
}

func percent(part, whole uint64) float64 {
	if whole == 0 {
		return 0
	}
	return 100 * float64(part) / float64(whole)
}

// prioText is what the report of Table 1 says of a router.
type prioText struct {
	heading string // the section's
	router  string // what the router does with the services' frames
	// what runs on the receiving CPU, and what the classifier is in the
	// loss after the ring
	receiving, classifier string
	setups                string // the setups, in order
	local                 string // what the local packets are
}

// classifierText describes the classifier alone at the router's edge.
var classifierText = prioText{
	heading:    "Priority and offload (Table 1 of " + smartNIC + ")",
	receiving:  "its classifier, and what the kernel does with what it passes,",
	classifier: "its classifier",
	setups: fmt.Sprintf("Baseline: no steering, all of the router's work on CPU %d. xdp5g, 1 CPU: the prioritised services in a "+
		"prioritised slice, the others in another, both on CPU %d, the baseline's one CPU. xdp5g, 2 CPUs: both slices over "+
		"CPUs 0 and 1, CPU 0 shared with the generator and the sinks.", prioReceiveCPU, prioReceiveCPU),
	local: "forwarded by the host to the sink",
}

func reportPrio(w io.Writer, points []prioPoint, t prioText) {
	p := linesTo(w)
	p("\n### %s\n", t.heading)
	p("Through videonet's segment (sender → router → sink, the alternative node behind the router's alt port): %d services", prioServices)
	p("told apart by their GTP-U TEID, %d of them prioritised, each sending the same share; every frame stamped with its", prioFirst)
	p("group (prioritised or not), counted where it arrives.%s %s per point, on a fresh segment, %s after the last one", t.router, prioSpan, prioSettle)
	p("was deleted. The router receives on CPU %d in a thread of real-time priority, as from a NIC's one receive queue", prioReceiveCPU)
	p("(RSS sees one flow in GTP-U): %s run there. The generator, on CPU %d, only fills the router's 256-frame", t.receiving, prioOthersCPU)
	p("receive ring; the sink and the alternative node receive on CPU %d too. %s", prioOthersCPU, t.setups)
	p("A flow leaves for the alternative node when its CPU's queue is three quarters full (prioritised: a batch short of")
	p("full). Offered: packets/s the generator managed, the frames sent over the time from its start to the last frame;")
	p("paced, it catches up at most 64 frames at once after falling behind (between its test runs, or while CPU %d served", prioOthersCPU)
	p("other work), so it may offer less than asked. Local, %s; offloaded, arrived at the alternative node;", t.local)
	p("lost in the ring, dropped by the router's receive ring, its CPU behind, before %s saw them; lost after", t.classifier)
	p("it, seen by %s and neither forwarded nor offloaded: each %% of the class's packets sent. Out: packets (of", t.classifier)
	p("either class) the router's veths to the sink and the alternative dropped, their receivers' rings full: the test")
	p("bed's loss.")
	reportPrioTable(w, points)
}

// reportPrioTable is the table of Table 1's points and its verdicts.
func reportPrioTable(w io.Writer, points []prioPoint) {
	p := linesTo(w)
	p("\n| Setup | Frame | Offered | Prio local | Prio offloaded | Prio lost in the ring | Prio lost after it | Other local | Other offloaded | Other lost in the ring | Other lost after it | Dropped on the way out |")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, pt := range points {
		p("| %s | %d | %.0f | %.1f%% | %.1f%% | %.3f%% | %.3f%% | %.1f%% | %.1f%% | %.3f%% | %.3f%% | %d |", pt.setup, pt.size, pt.offered,
			percent(pt.prio.local, pt.prio.sent), percent(pt.prio.offloaded, pt.prio.sent),
			percent(pt.prio.lostInRing(), pt.prio.sent), percent(pt.prio.lostAfterRing(), pt.prio.sent),
			percent(pt.other.local, pt.other.sent), percent(pt.other.offloaded, pt.other.sent),
			percent(pt.other.lostInRing(), pt.other.sent), percent(pt.other.lostAfterRing(), pt.other.sent), pt.outDropped)
	}
	// ringLoss is what a setup lost of the prioritised packets in the ring:
	// at how many of its points, and at worst what share.
	type ringLoss struct {
		points, lossy int
		worst         float64
	}
	inRing := map[string]*ringLoss{}
	var xdp5g, lossless, byLinks, local int
	for _, pt := range points {
		r := inRing[pt.setup]
		if r == nil {
			r = &ringLoss{}
			inRing[pt.setup] = r
		}
		r.points++
		if pt.prio.lostInRing() > 0 {
			r.lossy++
			r.worst = max(r.worst, percent(pt.prio.lostInRing(), pt.prio.sent))
		}
		if pt.setup == prioSetups[0].name {
			continue
		}
		xdp5g++
		if pt.prio.offloaded == 0 {
			local++
		}
		switch {
		case pt.prio.lostAfterRing() == 0:
			lossless++
		case pt.prio.lostAfterRing()+pt.other.lostAfterRing() <= pt.outDropped:
			byLinks++
		}
	}
	p("\n- 0%% prioritised loss by xdp5g's data path (after the receive ring): %s (%d of %d points without any; at %d more",
		verdict[lossless+byLinks == xdp5g], lossless, xdp5g, byLinks)
	p("  the links out of the router dropped at least as many packets as went missing)")
	p("- prioritised services kept local by xdp5g (none offloaded): at %d of %d points", local, xdp5g)
	for _, setup := range prioSetups {
		r := inRing[setup.name]
		p("- prioritised packets lost in the receive ring, %s: at %d of %d points, up to %.3f%%", setup.name, r.lossy, r.points, r.worst)
	}
}
