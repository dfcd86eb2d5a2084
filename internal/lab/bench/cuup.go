package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/lab/baseline"
	"github.com/xdp5g/xdp5g/internal/lab/videonet"
	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/ran/cellsite"
	"github.com/xdp5g/xdp5g/internal/ran/cuup"
	"github.com/xdp5g/xdp5g/internal/ran/cuupxdp"
	"github.com/xdp5g/xdp5g/internal/ran/e1"
)

// The cell site of `xdp5g-lab bench --cuup`: a UPF, the CU-UP and a
// DU, each in a namespace, N3 and F1-U on veth pairs; the generator sends
// the UPF's downlink G-PDUs, the DU's sink counts what reaches it.
var (
	cuupUPFN3  = cellsite.UPFAddr
	cuupN3     = cellsite.CUN3Addr
	cuupF1U    = cellsite.CUF1UAddr
	cuupDUF1U  = cellsite.DUAddr
	cuupServer = netip.MustParseAddr("192.0.2.1") // the user packets' source, in the DN
	cuupUE     = netip.MustParseAddr("10.45.0.7")
)

const (
	cuupQFI       = 9
	cuupFirstPort = 5000 // the user packets' UDP source port; each flow has the next
	// maxCUUPSize is the largest user packet whose F1-U G-PDU (IPv4, UDP,
	// GTP-U with an NR RAN Container, PDCP and SDAP headers, MAC-I) fits
	// the veths' MTU of 1500.
	maxCUUPSize  = 1440
	maxCUUPFlows = 4096
	// The stack-only measurement hands the worker batches as large as the
	// paths' and buffers laid out as AF_XDP frames: the packet after
	// XDP's headroom.
	stackBatch    = 64
	stackHeadroom = 256
	stackFrame    = 4096
	userHZ        = 100 // the unit of /proc/stat on every Linux architecture Go supports
)

// stackFrameCounts are the buffers the stack alone cycles over: a batch's
// worth, in the core's L2 cache, and a UMEM's worth (cuup.DefaultFrames,
// 32 MiB), where the AF_XDP path's frames come from.
var stackFrameCounts = [2]int{stackBatch, cuup.DefaultFrames}

// cuupSecurity is how a UE's downlink is protected; each has a bearer
// context of its own, one PDU session with one DRB.
type cuupSecurity struct {
	name      string
	ciphering e1.Ciphering
	integrity bool
}

// Indexes of cuupSecurities.
const (
	secNone = iota
	secNEA2
	secNEA2NIA2
)

var cuupSecurities = []cuupSecurity{
	secNone:     {"none", 0, false},
	secNEA2:     {"NEA2", 2, false},
	secNEA2NIA2: {"NEA2+NIA2", 2, true},
}

// cuupCase is traffic the paths carry: the UE of a security, and how many
// flows its packets cycle over.
type cuupCase struct {
	security, flows int
}

// cuupCases are the flow counts under NEA2, then one flow without
// security and one under NEA2+NIA2.
func cuupCases(flows []int) []cuupCase {
	var cases []cuupCase
	for _, f := range flows {
		cases = append(cases, cuupCase{secNEA2, f})
	}
	return append(cases, cuupCase{secNone, 1}, cuupCase{secNEA2NIA2, 1})
}

// What carries the generator's packets from the CU-UP's N3, by index in
// cuupPaths: the two CU-UP paths, and two baselines without the CU-UP.
const (
	pathXDP = iota
	pathSockets
	pathRedirect
	pathDrop
	numPaths
)

var cuupPaths = [numPaths]struct {
	name string
	open func(s *cuupSite) (cuupRun, error)
}{
	pathXDP:      {"AF_XDP", (*cuupSite).serveXDP},
	pathSockets:  {"sockets", (*cuupSite).serveSockets},
	pathRedirect: {"XDP redirect N3 → F1-U", (*cuupSite).redirectBaseline},
	pathDrop:     {"XDP drop at N3", (*cuupSite).dropBaseline},
}

// cuupRun is a path set up: where its packets are counted, and how to
// take it down.
type cuupRun struct {
	sink *trafficgen.Sink
	stop func() error
}

// cuupPoint is a case through a path in one round.
type cuupPoint struct {
	sent, delivered uint64
	// received and forwarded are the CU-UP workers' Downlink and
	// DownlinkSent.
	received, forwarded uint64
	elapsed             time.Duration // of the sending
	// span runs from the start of the sending until the sink's count
	// settled; busy and steal are CPU 0's and CPU 1's over it, by
	// /proc/stat.
	span        time.Duration
	busy, steal [2]time.Duration
	// process is the CPU time of the process less the generator's thread
	// over the same span, softirqd that of ksoftirqd/1.
	process, softirqd time.Duration
}

// foreign is the share of the span CPU 1 was busy with neither the process
// nor ksoftirqd/1: other tenants of the machine, or the kernel on their
// behalf. Tick sampling makes it a little negative at times.
func (p cuupPoint) foreign() float64 {
	return (p.busy[1] - p.process - p.softirqd).Seconds() / p.span.Seconds()
}

func (p cuupPoint) rate() float64    { return float64(p.delivered) / p.elapsed.Seconds() }
func (p cuupPoint) offered() float64 { return float64(p.sent) / p.elapsed.Seconds() }
func (p cuupPoint) loss() float64    { return 1 - float64(p.delivered)/float64(p.sent) }

// cuupResults are everything --cuup measured.
type cuupResults struct {
	cases []cuupCase
	size  int // of the user packets
	frame int // of the generator's frames
	// points are by path, case and round; the baselines have the first
	// case only (they forward whatever comes).
	points [numPaths][][]cuupPoint
	stack  [len(stackFrameCounts)][][]float64 // ns per packet by frame count, security and round
	// remeasured counts the measurements taken again since other tenants
	// took CPU 1 (foreignLimit).
	remeasured int
	elapsed    elapsed
}

// runCUUP is `xdp5g-lab bench --cuup`.
func runCUUP(ctx context.Context, w io.Writer, args []string, cfg config) error {
	since := clock()
	res, err := measureCUUP(ctx, cfg)
	if err != nil {
		return err
	}
	res.elapsed = since()
	reportCUUP(w, args, cfg, res)
	return nil
}

// measureCUUP builds the cell site and measures every path and case, and
// the stack alone, round by round.
func measureCUUP(ctx context.Context, cfg config) (res cuupResults, err error) {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil || !allowed.IsSet(0) || !allowed.IsSet(1) {
		return res, errors.New("--cuup needs CPUs 0 and 1: the generator's and the CU-UP's")
	}
	gen, err := startCPU0Thread()
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, gen.stop()) }()
	// Everything else, the CU-UP's workers and the Go runtime among them,
	// runs on CPU 1, whose busy time is the CU-UP's; with one P, as Go
	// would have started with, so that no idle P's thread spins for work
	// on the CU-UP's CPU. The generator holds no P while it sends.
	if err := pinThreads(cpuSet(1), gen.tid); err != nil {
		return res, err
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	defer func() { err = errors.Join(err, pinThreads(allowed, gen.tid)) }()

	s, err := newCUUPSite(gen, cfg.cuupSize)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, s.Close()) }()
	stack, err := newStackBench(cfg.cuupSize)
	if err != nil {
		return res, err
	}
	defer stack.c.Close()
	res = cuupResults{cases: cuupCases(cfg.cuupFlows), size: cfg.cuupSize, frame: len(s.frames[0])}
	for p := range res.points {
		n := len(res.cases)
		if p >= pathRedirect {
			n = 1
		}
		res.points[p] = make([][]cuupPoint, n)
	}
	for i := range res.stack {
		res.stack[i] = make([][]float64, len(cuupSecurities))
	}
	for r := range cfg.cuupRounds {
		for k := range numPaths {
			p := (k + r) % numPaths
			progress("CU-UP: %s, round %d of %d", cuupPaths[p].name, r+1, cfg.cuupRounds)
			if err := s.measurePath(ctx, p, res.cases, cfg.cuupPackets, res.points[p], &res.remeasured); err != nil {
				return res, fmt.Errorf("%s: %w", cuupPaths[p].name, err)
			}
		}
		progress("CU-UP: the stack alone, round %d of %d", r+1, cfg.cuupRounds)
		for i, frames := range stackFrameCounts {
			for sec := range cuupSecurities {
				ns, err := stack.measure(sec, stackPackets(cfg.cuupPackets), frames)
				if err != nil {
					return res, fmt.Errorf("the stack alone, %s: %w", cuupSecurities[sec].name, err)
				}
				res.stack[i][sec] = append(res.stack[i][sec], ns)
			}
		}
	}
	return res, nil
}

// stackPackets is how many packets a run of the stack alone takes: its
// figures vary less than the paths' do.
func stackPackets(packets uint64) uint64 { return max(packets/8, 1) }

// cuupSite is the cell site with the CU-UP and its classifier loaded, the
// UEs of every security set up, and the baselines' programs.
type cuupSite struct {
	*cellsite.Site
	gen        *cpu0Thread
	sink       *trafficgen.Sink // on the DU's F1-U
	dp         *cuupxdp.Datapath
	c          *cuup.CUUP
	frames     [][]byte // the UPF's downlink G-PDUs, by security
	flowOffset int      // of the user packets' UDP source port in frames
	upfN3      int      // the ifindex the generator sends from
	pass       *ebpf.Program
	redirect   *ebpf.Program // from the CU-UP's N3 out of its F1-U to the DU
	softirqd   string        // ksoftirqd/1's schedstat
	closers    []func() error
}

func newCUUPSite(gen *cpu0Thread, size int) (s *cuupSite, err error) {
	s = &cuupSite{gen: gen}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Close())
		}
	}()
	if s.softirqd, err = kthreadSchedstat("ksoftirqd/1"); err != nil {
		return nil, err
	}
	if s.Site, err = cellsite.New("cuup-"); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, s.Site.Close)
	var upfMAC, n3MAC, f1uMAC, duMAC net.HardwareAddr
	var f1uIndex int
	if s.upfN3, upfMAC, err = s.UPF.Link("n3"); err != nil {
		return nil, err
	}
	if _, n3MAC, err = s.CU.Link("n3"); err != nil {
		return nil, err
	}
	if f1uIndex, f1uMAC, err = s.CU.Link("f1u"); err != nil {
		return nil, err
	}
	if _, duMAC, err = s.DU.Link("f1u"); err != nil {
		return nil, err
	}
	// The DU's sink answers no ARP: the CU-UP knows its MAC from the start.
	if err := s.CU.SetNeigh("f1u", cuupDUF1U.String(), duMAC); err != nil {
		return nil, err
	}
	if s.sink, err = trafficgen.NewSink(s.DU, "f1u", gtpuFilter(), false); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, s.sink.Close)
	if s.pass, err = baseline.LoadPass(); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, s.pass.Close)
	if s.redirect, err = baseline.LoadRedirect(f1uIndex, duMAC, f1uMAC); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, s.redirect.Close)
	if s.dp, err = cuupxdp.Open(cuupxdp.Config{}); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, s.dp.Close)
	if s.c, err = cuup.New(cuup.Config{N3: cuupN3, F1U: cuupF1U, Tunnels: s.dp}); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func() error { s.c.Close(); return nil })
	teids, err := setUpUEs(s.c)
	if err != nil {
		return nil, err
	}
	for _, teid := range teids {
		frame, flowOffset := cuupFrame(n3MAC, upfMAC, teid, size)
		s.frames, s.flowOffset = append(s.frames, frame), flowOffset
	}
	return s, nil
}

// Close removes everything the site holds, the namespaces last.
func (s *cuupSite) Close() error {
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		errs = append(errs, s.closers[i]())
	}
	return errors.Join(errs...)
}

// gtpuFilter matches GTP-U over IPv4.
func gtpuFilter() trafficgen.Filter {
	return trafficgen.Filter{EtherType: 0x0800, IPProto: 17, DstPort: 2152}
}

// setUpUEs sets up a UE of each security, in the order of cuupSecurities:
// one IPv4 PDU session with one DRB (the default, QFI 9, SDAP headers both
// ways, 18-bit SNs, RLC AM), the DU's tunnel given; it returns their N3
// downlink TEIDs. Every UE offers NIA2; whether its session uses it is the
// security indication.
func setUpUEs(c *cuup.CUUP) ([]uint32, error) {
	nia2 := e1.Integrity(2)
	encKey, intKey := e1.Key(make([]byte, 16)), e1.Key(make([]byte, 16))
	for i := range encKey {
		encKey[i], intKey[i] = 0x2b, 0x7e
	}
	var teids []uint32
	for i, sec := range cuupSecurities {
		indication := e1.SecurityIndication{Integrity: e1.NotNeeded, Confidentiality: e1.Required}
		if sec.integrity {
			indication.Integrity = e1.Required
		}
		if sec.ciphering == 0 {
			indication.Confidentiality = e1.NotNeeded
		}
		resp, err := c.Setup(e1.BearerContextSetupRequest{CUCPUEID: uint32(i + 1),
			Security: e1.SecurityInformation{Algorithm: e1.SecurityAlgorithm{Ciphering: sec.ciphering, Integrity: &nia2},
				Key: e1.UPSecurityKey{Encryption: encKey, Integrity: &intKey}},
			PDUSessions: []e1.PDUSessionToSetup{{ID: 1, Type: e1.IPv4, SNSSAI: e1.SNSSAI{SST: 1}, SecurityIndication: indication,
				ULTunnel: e1.UPTunnel{Address: cuupUPFN3, TEID: uint32(0x100 + i)},
				DRBs: []e1.DRBToSetup{{ID: 1, SDAP: e1.SDAPConfiguration{DefaultDRB: true, HeaderUL: true, HeaderDL: true},
					PDCP:     e1.PDCPConfiguration{SNSizeUL: 18, SNSizeDL: 18, RLCMode: e1.RLCAM},
					QoSFlows: []e1.QoSFlow{{QFI: cuupQFI, FiveQI: 9}}}}}}})
		if err != nil {
			return nil, fmt.Errorf("setting up the %s UE: %w", sec.name, err)
		}
		_, err = c.Modify(resp.CUUPUEID, e1.BearerContextModificationRequest{Modify: []e1.PDUSessionToModify{{ID: 1,
			ModifyDRBs: []e1.DRBToModify{{ID: 1, DLTunnel: &e1.UPTunnel{Address: cuupDUF1U, TEID: uint32(0xd00 + i)}}}}}})
		if err != nil {
			return nil, fmt.Errorf("giving the %s UE the DU's tunnel: %w", sec.name, err)
		}
		teids = append(teids, resp.PDUSessions[0].DLTunnel.TEID)
	}
	return teids, nil
}

// cuupFrame is the UPF's G-PDU on N3 for tunnel teid with a DL PDU Session
// Container of QFI 9 around a UDP/IPv4 packet of size octets to the UE,
// and where that packet's UDP source port is. Both IPv4 header checksums
// are right; the UDP checksums are 0, so the generator may change the
// port.
func cuupFrame(dst, src net.HardwareAddr, teid uint32, size int) (frame []byte, portAt int) {
	ip := func(from, to netip.Addr) *layers.IPv4 {
		return &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: from.AsSlice(), DstIP: to.AsSlice()}
	}
	const dlPDUSessionInformation = 0x00
	frame = demo.Serialize(false, &layers.Ethernet{SrcMAC: src, DstMAC: dst, EthernetType: layers.EthernetTypeIPv4},
		ip(cuupUPFN3, cuupN3), &layers.UDP{SrcPort: 2152, DstPort: 2152},
		&layers.GTPv1U{Version: 1, ProtocolType: 1, MessageType: 255, TEID: teid, ExtensionHeaderFlag: true,
			GTPExtensionHeaders: []layers.GTPExtensionHeader{{Type: demo.PDUSessionContainer, Content: []byte{dlPDUSessionInformation, cuupQFI}}}},
		ip(cuupServer, cuupUE), &layers.UDP{SrcPort: cuupFirstPort, DstPort: 5001},
		gopacket.Payload(make([]byte, size-28)))
	user := len(frame) - size
	for _, at := range []int{14, user} {
		binary.BigEndian.PutUint16(frame[at+10:], gopacket.FoldChecksum(gopacket.ComputeChecksum(frame[at:at+20], 0)))
	}
	return frame, user + 20
}

// serveXDP runs the CU-UP's AF_XDP path: its classifier on N3 and F1-U
// (native mode: the veths' own XDP, the sockets in copy mode), one queue
// and worker, the worker sleeping in poll(2) when idle.
func (s *cuupSite) serveXDP() (cuupRun, error) {
	var x *cuup.XDP
	err := s.CU.Do(func() (err error) {
		x, err = s.c.OpenXDP(s.dp, cuup.XDPConfig{N3: "n3", F1U: "f1u", Mode: xdplink.ModeNative})
		return err
	})
	if err != nil {
		return cuupRun{}, err
	}
	return cuupRun{s.sink, serve(x.Serve, x.Close)}, nil
}

// serveSockets runs the CU-UP's socket path, an XDP_PASS program on N3 so
// that the generator's frames arrive.
func (s *cuupSite) serveSockets() (cuupRun, error) {
	pass, err := s.CU.AttachXDP("n3", s.pass, false)
	if err != nil {
		return cuupRun{}, err
	}
	var sockets *cuup.Sockets
	if err := s.CU.Do(func() (err error) {
		sockets, err = s.c.OpenSockets()
		return err
	}); err != nil {
		return cuupRun{}, errors.Join(err, pass.Close())
	}
	stop := serve(sockets.Serve, sockets.Close)
	return cuupRun{s.sink, func() error { return errors.Join(stop(), pass.Close()) }}, nil
}

// redirectBaseline forwards in XDP from the CU-UP's N3 to the DU, with no
// CU-UP: what the testbed carries.
func (s *cuupSite) redirectBaseline() (cuupRun, error) {
	l, err := s.CU.AttachXDP("n3", s.redirect, false)
	if err != nil {
		return cuupRun{}, err
	}
	return cuupRun{s.sink, l.Close}, nil
}

// dropBaseline counts and drops at the CU-UP's N3: what the generator's
// CPU spends per packet without a receiver behind N3.
func (s *cuupSite) dropBaseline() (cuupRun, error) {
	sink, err := trafficgen.NewSink(s.CU, "n3", gtpuFilter(), false)
	if err != nil {
		return cuupRun{}, err
	}
	return cuupRun{sink, sink.Close}, nil
}

// serve runs a path's Serve until the returned stop, which then closes it.
func serve(run func(context.Context) error, closePath func() error) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	return func() error {
		cancel()
		return errors.Join(<-done, closePath())
	}
}

// warmUp is sent through a path before it is measured: the workers' and
// the kernel's first packets (page faults, neighbour lookup) stay out of
// the figures.
const warmUp = 20_000

// A measurement where other tenants had more than foreignLimit of CPU 1
// is taken again, up to maxRemeasure times.
const (
	foreignLimit = 0.05
	maxRemeasure = 3
)

// measurePath sets up path p, sends each case (the first only for the
// baselines) and appends the points to points, by case; remeasured counts
// the measurements taken again.
func (s *cuupSite) measurePath(ctx context.Context, p int, cases []cuupCase, packets uint64, points [][]cuupPoint,
	remeasured *int) (err error) {
	run, err := cuupPaths[p].open(s)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, run.stop()) }()
	if _, err := s.measure(run.sink, cases[0], warmUp); err != nil {
		return err
	}
	for i := range points {
		if err := ctx.Err(); err != nil {
			return err
		}
		pt, err := s.measure(run.sink, cases[i], packets)
		for try := 0; err == nil && pt.foreign() > foreignLimit && try < maxRemeasure; try++ {
			*remeasured++
			pt, err = s.measure(run.sink, cases[i], packets)
		}
		if err != nil {
			return err
		}
		if pt.delivered == 0 {
			return fmt.Errorf("%s, %s: none of %d packets arrived", cuupSecurities[cases[i].security].name, flowCount(cases[i].flows), pt.sent)
		}
		points[i] = append(points[i], pt)
	}
	return nil
}

// measure sends a case's packets as fast as the generator goes and
// counts what sink got once its count settled.
func (s *cuupSite) measure(sink *trafficgen.Sink, c cuupCase, packets uint64) (p cuupPoint, err error) {
	// The threads started since are moved too.
	if err := pinThreads(cpuSet(1), s.gen.tid); err != nil {
		return p, err
	}
	before, err := sink.Counts()
	if err != nil {
		return p, err
	}
	workers := s.c.Stats()
	busy, steal, err := cpuTimes()
	if err != nil {
		return p, err
	}
	process := cpuClock(unix.CLOCK_PROCESS_CPUTIME_ID)
	softirqd, err := readSchedstat(s.softirqd)
	if err != nil {
		return p, err
	}
	start := time.Now()
	var generator time.Duration
	s.gen.do(func() {
		t := cpuClock(unix.CLOCK_THREAD_CPUTIME_ID)
		opts := trafficgen.Options{FlowOffset: s.flowOffset, Flows: c.flows}
		p.sent, p.elapsed, err = s.gen.Send(s.UPF, s.upfN3, s.frames[c.security], packets, opts)
		generator = cpuClock(unix.CLOCK_THREAD_CPUTIME_ID) - t
	})
	if err != nil {
		return p, err
	}
	after, err := videonet.Settled(sink)
	if err != nil {
		return p, err
	}
	p.process = cpuClock(unix.CLOCK_PROCESS_CPUTIME_ID) - process - generator
	p.span = time.Since(start)
	busyAfter, stealAfter, err := cpuTimes()
	if err != nil {
		return p, err
	}
	softirqdAfter, err := readSchedstat(s.softirqd)
	if err != nil {
		return p, err
	}
	p.softirqd = softirqdAfter - softirqd
	for i := range p.busy {
		p.busy[i], p.steal[i] = busyAfter[i]-busy[i], stealAfter[i]-steal[i]
	}
	workersAfter := s.c.Stats()
	p.delivered = after.MatchPackets - before.MatchPackets
	p.received, p.forwarded = workersAfter.Downlink-workers.Downlink, workersAfter.DownlinkSent-workers.DownlinkSent
	return p, nil
}

// cpu0Thread is a thread of its own on CPU 0 for the generator, which then
// takes all of CPU 0, with the softirqs its packets raise there.
type cpu0Thread struct {
	gen   *trafficgen.Generator
	calls chan func()
	tid   int
}

func startCPU0Thread() (*cpu0Thread, error) {
	gen, err := trafficgen.NewGenerator()
	if err != nil {
		return nil, err
	}
	t := &cpu0Thread{gen: gen, calls: make(chan func())}
	ready := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		cpu0 := cpuSet(0)
		if err := unix.SchedSetaffinity(0, &cpu0); err != nil {
			ready <- fmt.Errorf("binding the generator to CPU 0: %w", err)
			return
		}
		t.tid = unix.Gettid()
		ready <- nil
		for f := range t.calls {
			f()
		}
	}()
	if err := <-ready; err != nil {
		return nil, errors.Join(err, gen.Close())
	}
	return t, nil
}

// Send sends through the generator from CPU 0.
func (t *cpu0Thread) Send(ns *namespace.Netns, ifindex int, frame []byte, count uint64, opts trafficgen.Options) (uint64, time.Duration, error) {
	return t.gen.Send(ns, ifindex, frame, count, opts)
}

// do runs f on the thread.
func (t *cpu0Thread) do(f func()) {
	done := make(chan struct{})
	t.calls <- func() {
		defer close(done)
		f()
	}
	<-done
}

func (t *cpu0Thread) stop() error {
	close(t.calls)
	return t.gen.Close()
}

func cpuSet(cpu int) unix.CPUSet {
	var set unix.CPUSet
	set.Set(cpu)
	return set
}

// pinThreads binds every thread of the process but except to cpus.
func pinThreads(cpus unix.CPUSet, except int) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil || tid == except {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &cpus); err != nil && !errors.Is(err, unix.ESRCH) { // ESRCH: it ended
			return fmt.Errorf("binding thread %d: %w", tid, err)
		}
	}
	return nil
}

// cpuTimes reads how long CPUs 0 and 1 have been busy (neither idle nor
// waiting for I/O nor stolen by the hypervisor) and stolen, by /proc/stat.
func cpuTimes() (busy, steal [2]time.Duration, err error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return busy, steal, err
	}
	defer f.Close()
	found := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		fields := strings.Fields(sc.Text())
		if len(fields) < 9 || fields[0] != "cpu0" && fields[0] != "cpu1" {
			continue
		}
		cpu := int(fields[0][3] - '0')
		var ticks [8]uint64 // user nice system idle iowait irq softirq steal
		for i := range ticks {
			if ticks[i], err = strconv.ParseUint(fields[i+1], 10, 64); err != nil {
				return busy, steal, fmt.Errorf("/proc/stat: %q: %w", sc.Text(), err)
			}
		}
		tick := time.Second / userHZ
		busy[cpu] = time.Duration(ticks[0]+ticks[1]+ticks[2]+ticks[5]+ticks[6]) * tick
		steal[cpu] = time.Duration(ticks[7]) * tick
		found++
	}
	if found != 2 {
		return busy, steal, errors.New("/proc/stat: no lines for CPUs 0 and 1")
	}
	return busy, steal, nil
}

// kthreadSchedstat finds the kernel thread named comm and returns the
// path of its schedstat.
func kthreadSchedstat(comm string) (string, error) {
	comms, err := filepath.Glob("/proc/[0-9]*/comm")
	if err != nil {
		return "", err
	}
	for _, path := range comms {
		if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) == comm {
			return filepath.Join(filepath.Dir(path), "schedstat"), nil
		}
	}
	return "", fmt.Errorf("no kernel thread %s", comm)
}

// readSchedstat reads how long a thread has run, from its schedstat.
func readSchedstat(path string) (time.Duration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(b), " ")
	ns, err := strconv.ParseInt(first, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q: %w", path, b, err)
	}
	return time.Duration(ns), nil
}

// cpuClock reads a CPU-time clock.
func cpuClock(clock int32) time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(clock, &ts) // these clocks always exist for the caller
	return time.Duration(ts.Nano())
}

// stackBench drives a worker of a CU-UP of its own straight, without I/O:
// the downlink through SDAP, PDCP, NR-U and GTP-U as the paths run it,
// on buffers laid out as AF_XDP frames, a UMEM's worth.
type stackBench struct {
	c      *cuup.CUUP
	io     *stackIO
	worker *cuup.Worker
	teids  []uint32
	frames []byte
	size   int
	pkts   []cuup.Packet
}

// stackIO takes back every buffer at once: sending is counted, no more.
type stackIO struct{ sent uint64 }

func (s *stackIO) Send(cuup.Role, netip.Addr, []byte, int, int, uint64) { s.sent++ }
func (s *stackIO) Free(uint64)                                          {}
func (s *stackIO) Buffer() ([]byte, uint64, bool)                       { return nil, 0, false }

// Headroom is the AF_XDP path's: Ethernet, IPv6 and UDP.
func (s *stackIO) Headroom() int { return 14 + 40 + 8 }

func newStackBench(size int) (*stackBench, error) {
	c, err := cuup.New(cuup.Config{N3: cuupN3, F1U: cuupF1U})
	if err != nil {
		return nil, err
	}
	teids, err := setUpUEs(c)
	if err != nil {
		c.Close()
		return nil, err
	}
	b := &stackBench{c: c, io: &stackIO{}, teids: teids, frames: make([]byte, cuup.DefaultFrames*stackFrame), size: size}
	b.worker = c.NewWorker("bench", b.io)
	frame, _ := cuupFrame(make(net.HardwareAddr, 6), make(net.HardwareAddr, 6), teids[0], size)
	for f := range cuup.DefaultFrames {
		copy(b.frames[f*stackFrame+stackHeadroom:], frame[len(frame)-size:])
	}
	return b, nil
}

// measure runs packets of a security's UE through the worker on CPU 1,
// cycling over the first frames buffers, and returns the thread's CPU time
// per packet in nanoseconds.
func (b *stackBench) measure(sec int, packets uint64, frames int) (float64, error) {
	teid := b.teids[sec]
	sent := b.io.sent
	var took time.Duration
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cpu1 := cpuSet(1)
		if err = unix.SchedSetaffinity(0, &cpu1); err != nil {
			return
		}
		start := cpuClock(unix.CLOCK_THREAD_CPUTIME_ID)
		next := 0
		for n := uint64(0); n < packets; {
			batch := min(packets-n, stackBatch)
			b.pkts = b.pkts[:0]
			for range batch {
				buf := b.frames[next*stackFrame : (next+1)*stackFrame : (next+1)*stackFrame]
				b.pkts = append(b.pkts, cuup.Packet{Role: cuup.N3, Bearer: teid & (1<<24 - 1), TEID: teid, QFI: cuupQFI,
					Buf: buf, Off: stackHeadroom, Len: b.size, Handle: uint64(next)})
				next = (next + 1) % frames
			}
			b.worker.Process(b.pkts, time.Now())
			n += batch
		}
		took = cpuClock(unix.CLOCK_THREAD_CPUTIME_ID) - start
	}()
	<-done
	if err != nil {
		return 0, err
	}
	if got := b.io.sent - sent; got != packets {
		return 0, fmt.Errorf("the worker sent %d of %d packets: %+v", got, packets, b.c.Stats().WorkerStats)
	}
	return float64(took.Nanoseconds()) / float64(packets), nil
}

// Targets of the CU-UP: AF_XDP against sockets, and Gbit/s per core.
const (
	targetXDPOverSockets = 1.3
	targetNEA2PerCore    = 5 // Gbit/s
	targetNIA2PerCore    = 3
)

// series is a figure of a path's case, round by round.
func (r *cuupResults) series(path, c int, f func(cuupPoint) float64) rounds {
	var out rounds
	for _, p := range r.points[path][c] {
		out = append(out, f(p))
	}
	return out
}

// coreNs is CPU 1's busy time per packet delivered, round by round.
func (r *cuupResults) coreNs(path, c int) rounds {
	return r.series(path, c, func(p cuupPoint) float64 { return float64(p.busy[1].Nanoseconds()) / float64(p.delivered) })
}

// receiveNs is what CPU 0 spent per packet sent beyond the drop
// baseline's of the same round.
func (r *cuupResults) receiveNs(path, c int) rounds {
	out := r.series(path, c, func(p cuupPoint) float64 { return float64(p.busy[0].Nanoseconds()) / float64(p.sent) })
	for i, d := range r.points[pathDrop][0] {
		out[i] -= float64(d.busy[0].Nanoseconds()) / float64(d.sent)
	}
	return out
}

// perCore turns nanoseconds per packet into Gbit/s of user packets per
// core, round by round.
func (r *cuupResults) perCore(ns rounds) rounds {
	out := make(rounds, len(ns))
	for i, v := range ns {
		out[i] = float64(r.size*8) / v
	}
	return out
}

func (r *cuupResults) gbps(mpps float64) float64 { return mpps * float64(r.size*8) / 1e3 }

func flowCount(n int) string {
	if n == 1 {
		return "1 flow"
	}
	return fmt.Sprintf("%d flows", n)
}

func reportCUUP(w io.Writer, args []string, cfg config, r cuupResults) {
	p := linesTo(w)
	p("%s", headline(args, r.elapsed))
	p("\n### CU-UP downlink\n")
	p("A UPF, the CU-UP and a DU in namespaces, N3 and F1-U on veth pairs. The generator (BPF_PROG_TEST_RUN, live frames), on")
	p("a thread bound to CPU 0, sends the UPF's G-PDUs (%d-octet frames: a DL PDU Session Container of QFI %d around a", r.frame, cuupQFI)
	p("UDP/IPv4 packet of %d octets) out of the UPF's N3 as fast as it can, %d per measurement; an XDP sink on the DU's", r.size, cfg.cuupPackets)
	p("F1-U counts the G-PDUs that arrive. Every other thread of the process, the CU-UP's among them, is bound to CPU 1,")
	p("with GOMAXPROCS 1; PDCP security runs on the worker (inline: the crypto pool would have no other core here).")
	p("Three UEs, a bearer context each with one PDU session and one DRB (QFI %d, SDAP headers, 18-bit PDCP SNs, RLC AM):", cuupQFI)
	p("none (NEA0, integrity not needed), NEA2, NEA2 with NIA2 (integrity required). Parallel flows are flows of one UE, as")
	p("the iperf3 -P from one UE of " + pranavam + ": the user packets' UDP source port cycles over them. AF_XDP: the classifier on N3")
	p("and F1-U in native mode, the sockets in copy mode (veths have no zero-copy), one queue and worker, which sleeps in")
	p("poll(2) when idle. Sockets: recvmmsg/sendmmsg in batches of 64, XDP_PASS on N3. Without the CU-UP: XDP redirect")
	p("from N3 out of F1-U to the DU (what the testbed carries), XDP drop at N3 (what CPU 0 spends per packet with nothing")
	p("behind N3). Median of %d rounds with the paths interleaved; ratios are the median of the rounds' ratios.\n", cfg.cuupRounds)

	p("#### Downlink throughput\n")
	p("Offered: packets the generator sent per second; Mpps: the DU received per second of sending; Gbit/s of the user")
	p("packets (%d octets); lost: sent and not received.\n", r.size)
	p("| Security | Flows | AF_XDP offered | Mpps | Gbit/s | Lost | Sockets offered | Mpps | Gbit/s | Lost | AF_XDP / sockets |")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	mpps := func(p cuupPoint) float64 { return p.rate() / 1e6 }
	offered := func(p cuupPoint) float64 { return p.offered() / 1e6 }
	loss := func(p cuupPoint) float64 { return p.loss() * 100 }
	ratios := make([]float64, len(r.cases))
	for c, cs := range r.cases {
		x, s := r.series(pathXDP, c, mpps), r.series(pathSockets, c, mpps)
		ratios[c] = x.per(s)
		p("| %s | %d | %.2f | %.3f | %.2f | %.1f%% | %.2f | %.3f | %.2f | %.1f%% | %.2f |", cuupSecurities[cs.security].name, cs.flows,
			r.series(pathXDP, c, offered).median(), x.median(), r.gbps(x.median()), r.series(pathXDP, c, loss).median(),
			r.series(pathSockets, c, offered).median(), s.median(), r.gbps(s.median()), r.series(pathSockets, c, loss).median(), ratios[c])
	}
	redirect, drop := r.series(pathRedirect, 0, mpps).median(), r.series(pathDrop, 0, mpps).median()
	p("\nWithout the CU-UP: XDP redirect N3 → F1-U %.3f Mpps (%.2f Gbit/s of user packets); XDP drop at N3 %.3f Mpps.", redirect, r.gbps(redirect), drop)

	p("\n#### CPU per packet and Gbit/s per core\n")
	p("CU-UP core: CPU 1's busy time by /proc/stat (user, system, irq and softirq: not idle, I/O wait or steal) from the start")
	p("of the sending until the sink's count settled, per packet delivered; busy is its share of that span, the rest being")
	p("the wait for the count to settle. It holds the worker, its system calls, the transmit path down the F1-U veth and")
	p("the DU's sink, which runs in the softirq on the sending CPU. Process: the CPU time of the process less the")
	p("generator's thread over the same span, a cross-check (ksoftirqd's and other tenants' time are not in it). Receive")
	p("side: what CPU 0 spent per packet sent beyond the drop baseline's in the same round, i.e. the XDP classifier and the")
	p("copy into the UMEM, or the kernel's receive path up to the socket; it is charged to every packet delivered, an")
	p("estimate, since packets lost on the way cost some of it too. Lost before and after: sent but not taken by the")
	p("CU-UP's worker (a full socket buffer or XSK ring); sent by the worker but not received by the DU.\n")
	p("| Security | Flows | Path | CU-UP core busy | Lost before | after | ns/packet, CU-UP core | process | Gbit/s per CU-UP core | Receive side ns/packet | Gbit/s per core, receive side included |")
	p("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for c, cs := range r.cases {
		for _, path := range []int{pathXDP, pathSockets} {
			busy := r.series(path, c, func(p cuupPoint) float64 { return 100 * p.busy[1].Seconds() / p.span.Seconds() })
			before := r.series(path, c, func(p cuupPoint) float64 { return percent(p.sent-min(p.sent, p.received), p.sent) })
			after := r.series(path, c, func(p cuupPoint) float64 { return percent(p.forwarded-min(p.forwarded, p.delivered), p.forwarded) })
			process := r.series(path, c, func(p cuupPoint) float64 { return float64(p.process.Nanoseconds()) / float64(p.delivered) })
			core, receive := r.coreNs(path, c), r.receiveNs(path, c)
			withReceive := make(rounds, len(core))
			for i := range core {
				withReceive[i] = core[i] + receive[i]
			}
			p("| %s | %d | %s | %.0f%% | %.1f%% | %.1f%% | %.0f | %.0f | %.2f | %.0f | %.2f |", cuupSecurities[cs.security].name, cs.flows,
				cuupPaths[path].name, busy.median(), before.median(), after.median(), core.median(), process.median(),
				r.perCore(core).median(), receive.median(), r.perCore(withReceive).median())
		}
	}
	var steal time.Duration
	var foreign []float64
	for path := range r.points {
		for _, c := range r.points[path] {
			for _, pt := range c {
				steal += pt.steal[0] + pt.steal[1]
				foreign = append(foreign, 100*pt.foreign())
			}
		}
	}
	p("\nThe hypervisor stole %s of the CPUs' time over all measurements. CPU 1's time that was neither the process's", steal)
	p("nor ksoftirqd/1's (other tenants): median %.1f%%, at most %.1f%% of a measurement's span; %d measurements were", median(foreign),
		slices.Max(foreign), r.remeasured)
	p("taken again, up to %d times each, since it was over %.0f%%.", maxRemeasure, foreignLimit*100)

	p("\n#### The stack alone\n")
	p("A worker of a CU-UP of its own on CPU 1, driven with batches of %d packets of a UE through an IO that takes every", stackBatch)
	p("buffer back at once: SDAP, PDCP (ciphering, integrity), the NR-U frame and the GTP-U header in place, without I/O.")
	p("The buffers are laid out as AF_XDP frames; the packets cycle over %d of them (256 KiB, in the core's L2 cache) or", stackFrameCounts[0])
	p("over %d (32 MiB, a UMEM's worth untouched for a while: more cache misses than the AF_XDP path has, where the", stackFrameCounts[1])
	p("kernel has just copied each frame in). The thread's CPU time per packet, median of %d runs of %d packets.\n",
		cfg.cuupRounds, stackPackets(cfg.cuupPackets))
	p("| Security | ns/packet, %d frames | Gbit/s per core | ns/packet, %d frames | Gbit/s per core |", stackFrameCounts[0], stackFrameCounts[1])
	p("|---|---:|---:|---:|---:|")
	for sec := range cuupSecurities {
		hot, cold := rounds(r.stack[0][sec]), rounds(r.stack[1][sec])
		p("| %s | %.0f | %.2f | %.0f | %.2f |", cuupSecurities[sec].name, hot.median(), r.perCore(hot).median(), cold.median(), r.perCore(cold).median())
	}

	p("\n#### Targets\n")
	for c, cs := range r.cases {
		if cs.security == secNEA2 {
			p("- AF_XDP / sockets, NEA2, %s: %.2f× (target ≥ %g×): %s", flowCount(cs.flows), ratios[c], targetXDPOverSockets,
				verdict[ratios[c] >= targetXDPOverSockets])
		}
	}
	for _, t := range []struct {
		sec    int
		target float64
	}{{secNEA2, targetNEA2PerCore}, {secNEA2NIA2, targetNIA2PerCore}} {
		c := slices.Index(r.cases, cuupCase{t.sec, 1})
		core := r.coreNs(pathXDP, c)
		withReceive := make(rounds, len(core))
		for i, ns := range r.receiveNs(pathXDP, c) {
			withReceive[i] = core[i] + ns
		}
		name := cuupSecurities[t.sec].name
		for _, f := range []struct {
			what string
			gbps float64
		}{
			{"through the whole stack on the AF_XDP path, per CU-UP core", r.perCore(core).median()},
			{"the same with the receive side on the generator's core included", r.perCore(withReceive).median()},
			{fmt.Sprintf("the stack alone over %d frames", stackFrameCounts[1]), r.perCore(r.stack[1][t.sec]).median()},
		} {
			p("- %s, %d-octet packets, %s: %.2f Gbit/s (target ≥ %g): %s", name, r.size, f.what, f.gbps, t.target, verdict[f.gbps >= t.target])
		}
	}
}
