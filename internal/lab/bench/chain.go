package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// The targets of the chain.
const (
	targetChainAlone = 1.05 // the chain of the UPF alone over the UPF's program
	chainSessions    = 1000
	chainFlows       = 64 // inner flows of one gNB's tunnel, steered
	chainSlice       = 1
	// loopback is the UPF namespace's loopback, which the measured chains
	// run on: a test run's packet comes in on the loopback of the
	// namespace of the thread that runs it.
	loopback = "lo"
)

// chainRow is what one count of classifier rules costs: the UPF alone,
// the classifier alone, the chain of both, and the steer stage in front
// of the UPF, each per uplink packet, with XDP_TX in the same rounds.
type chainRow struct {
	rules                              int
	empty, tx, upf, classify, classUPF rounds
	// The chain on the packet VLAN-tagged, which the UPF reads with its
	// parser rather than at fixed offsets: with the classify stage's parse
	// handed on, and with the UPF parsing the packet again.
	taggedShared, taggedOwn rounds
	steerUPF, steerOnly     rounds // the steer stage's rounds, with their own UPF alone
	// Rounds with a mirroring rule that one session's packets match: the
	// chain for another session's packet, and for that session's.
	unmirrored, mirrored rounds
}

// chainBalance is how the steer stage spread one gNB's inner flows over
// the CPUs under live traffic.
type chainBalance struct {
	sent, delivered uint64
	flows           map[int]int    // flows per CPU
	packets         map[int]uint64 // packets per CPU
	split           int            // flows seen on more than one CPU
	queueDrops      uint64         // packets the CPUs' queues dropped, full
}

type chainResult struct {
	rows     []chainRow
	balance  chainBalance
	frameLen int
	load     [2]string // /proc/loadavg before and after
	elapsed  elapsed
}

// measureChain measures the UPF's chains on the demo testbed, with
// chainSessions sessions and the classifier's rules of each count.
func measureChain(ctx context.Context, tb *demo.Testbed, b *baselines, cfg config) (res chainResult, err error) {
	res.load[0] = loadAvg()
	u, err := tb.OpenUPF(chainSessions)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, u.Close()) }()
	if _, err := install(ctx, u, chainSessions); err != nil {
		return res, err
	}
	// The mirroring rule's copies go to the collector: a mirror port is an
	// interface of the copies role.
	c, err := tb.NewCollector()
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, c.Close()) }()
	if err := errors.Join(u.Attach(), u.AttachCollector()); err != nil {
		return res, err
	}
	port, _, err := tb.UPF.Link(demo.CollectorLink)
	if err != nil {
		return res, err
	}
	mirrorOut := &classifyxdp.Egress{Ifindex: port, DstMAC: c.MAC, SrcMAC: c.UPFMAC}
	last := chainSessions - 1
	frame := uplinkFrame(tb, teid(last), last)
	res.frameLen = len(frame)
	// The chains under test run on the loopback, generic XDP.
	if err := tb.UPF.Do(func() error {
		return u.Datapath.Attach(loopback, upfxdp.RoleAccess|upfxdp.RoleCore, xdplink.ModeGeneric)
	}); err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, tb.UPF.Do(func() error { return u.Datapath.Detach(loopback) })) }()
	for _, n := range cfg.classifyRules {
		progress("chain with %d rules", n)
		row, err := measureChainRules(ctx, tb, b, u, n, frame, mirrorOut, cfg.runs)
		if err != nil {
			return res, fmt.Errorf("%d rules: %w", n, err)
		}
		res.rows = append(res.rows, row)
	}
	progress("chain: steering %d inner flows of one tunnel", chainFlows)
	if res.balance, err = measureBalance(tb, u, cfg.packets); err != nil {
		return res, err
	}
	res.load[1] = loadAvg()
	return res, nil
}

// openChainClassifier is a classifier whose stages run in u's chains, with
// n rules that the frames do not match and a slice over every CPU, room
// for the mask of the mirroring rule of measureMirrored; its classify
// stage hands its parse on to the UPF stage when shared.
func openChainClassifier(u *demo.UPF, n int, shared bool) (*classifyxdp.Datapath, error) {
	maps := u.Datapath.ChainMaps()
	if !shared {
		delete(maps, upfxdp.ChainParseMap)
	}
	rules, err := classifyxdp.OpenDatapath(classifyxdp.Config{Chain: maps, MaxMasks: benchMasks + 1})
	if err != nil {
		return nil, err
	}
	slice := classifyxdp.Slice{ID: chainSlice}
	for cpu := range runtime.NumCPU() {
		slice.CPUs = append(slice.CPUs, cpu)
	}
	if err := errors.Join(rules.SetSlice(slice), rules.Add(benchRules(n, false)...)); err != nil {
		return nil, errors.Join(err, rules.Close())
	}
	return rules, nil
}

func measureChainRules(ctx context.Context, tb *demo.Testbed, b *baselines, u *demo.UPF, n int, frame []byte,
	mirrorOut *classifyxdp.Egress, runs int) (row chainRow, err error) {
	row.rules = n
	rules, err := openChainClassifier(u, n, true)
	if err != nil {
		return row, err
	}
	defer rules.Close()
	unshared, err := openChainClassifier(u, n, false)
	if err != nil {
		return row, err
	}
	defer unshared.Close()
	frames := [][]byte{frame}
	tagged := [][]byte{slices.Concat(frame[:12], []byte{0x81, 0x00, 0, 1}, frame[12:])} // VLAN 1
	upf, err := attachedProgram(tb.UPF, demo.N3)
	if err != nil {
		return row, err
	}
	defer upf.Close()
	// A test run's packet comes in on the loopback of the thread's
	// namespace: the chains' interface.
	measure := func(c upfxdp.Chain, entries ...subject) (figures []rounds, err error) {
		err = tb.UPF.Do(func() error {
			if err := u.Datapath.SetStages(loopback, c); err != nil {
				return err
			}
			figures, err = perPacketNs(ctx, append([]subject{
				{"empty program", b.pass, frames, xdplink.Pass},
				{"XDP_TX baseline", b.tx, frames, xdplink.TX},
				{"UPF alone", upf, frames, xdplink.Redirect},
				{"classifier alone", rules.Program(), frames, xdplink.Pass},
			}, entries...), runs)
			return err
		})
		return figures, err
	}
	// The classify stage of the classifier that keeps its parse runs the
	// same chain: the interface's stages are in the shared maps.
	c := upfxdp.NewChain(rules, true, false, chainSlice)
	own, _, _ := unshared.Stages()
	ns, err := measure(c, subject{"classify, upf", c.Classify, frames, xdplink.Redirect},
		subject{"classify, upf, tagged", c.Classify, tagged, xdplink.Redirect},
		subject{"classify, upf, tagged, the UPF parsing again", own, tagged, xdplink.Redirect})
	if err != nil {
		return row, err
	}
	row.empty, row.tx, row.upf, row.classify, row.classUPF = ns[0], ns[1], ns[2], ns[3], ns[4]
	row.taggedShared, row.taggedOwn = ns[5], ns[6]
	// Steered, the packet goes to a CPU map, which a test run does not
	// carry out: its verdict is the redirect.
	c = upfxdp.NewChain(rules, false, true, chainSlice)
	if ns, err = measure(c, subject{"steer, upf", c.SteerFirst, frames, xdplink.Redirect}); err != nil {
		return row, err
	}
	row.steerUPF, row.steerOnly = ns[2], ns[4]
	if row.unmirrored, row.mirrored, err = measureMirrored(tb, rules, n, mirrorOut, measure); err != nil {
		return row, err
	}
	return row, tb.UPF.Do(func() error { return u.Datapath.SetStages(loopback, upfxdp.Chain{}) })
}

// measureMirrored measures the chain classify, upf with one more rule (in
// the last one's place when the table is full), a mirroring rule on the
// tunnel of the session before the measured one, whose copies would leave
// by out (a test run sends none): for the measured session's packet, and
// for the mirrored session's.
func measureMirrored(tb *demo.Testbed, rules *classifyxdp.Datapath, n int, out *classifyxdp.Egress,
	measure func(upfxdp.Chain, ...subject) ([]rounds, error)) (unmirrored, mirrored rounds, err error) {
	mirroredSession := chainSessions - 2
	id := uint32(n + 1) // past benchRules' IDs
	if n >= classifyxdp.MaxRules {
		// A full table: the mirroring rule takes the last rule's place.
		last := benchRules(n, false)[n-1]
		if err := rules.Delete(last.ID); err != nil {
			return nil, nil, err
		}
		defer func() { err = errors.Join(err, rules.Add(last)) }()
	}
	if err := rules.Add(classifyxdp.Rule{ID: id, Priority: uint32(n + 1), Action: classifyxdp.ActionMirror,
		Out:     out,
		Matches: []classifyxdp.Match{{Field: "tunnel1Id", Value: uint64(teid(mirroredSession)), Mask: 0xffffffff}}}); err != nil {
		return nil, nil, err
	}
	defer func() { err = errors.Join(err, rules.Delete(id)) }()
	c := upfxdp.NewChain(rules, true, false, chainSlice)
	last := chainSessions - 1
	ns, err := measure(c, subject{"classify, upf", c.Classify, [][]byte{uplinkFrame(tb, teid(last), last)}, xdplink.Redirect},
		subject{"classify (mirror), upf", c.Classify, [][]byte{uplinkFrame(tb, teid(mirroredSession), mirroredSession)},
			xdplink.Redirect})
	if err != nil {
		return nil, nil, err
	}
	return ns[4], ns[5], nil
}

// measureBalance sends packets of chainFlows inner flows in the session's
// tunnel from the gNB through N3 with the chain steer, upf, paced below
// what the testbed carries, and reads where each flow ran.
func measureBalance(tb *demo.Testbed, u *demo.UPF, packets uint64) (bal chainBalance, err error) {
	rules, err := openChainClassifier(u, 0, true)
	if err != nil {
		return bal, err
	}
	defer rules.Close()
	steer := upfxdp.NewChain(rules, false, true, chainSlice)
	if err := tb.UPF.Do(func() error { return u.Datapath.SetStages(demo.N3, steer) }); err != nil {
		return bal, err
	}
	defer func() {
		err = errors.Join(err, tb.UPF.Do(func() error { return u.Datapath.SetStages(demo.N3, upfxdp.Chain{}) }))
	}()
	gen, err := trafficgen.NewGenerator()
	if err != nil {
		return bal, err
	}
	defer gen.Close()
	inner := demo.UEPacket(ueAddr(0), demo.DNAddr, true, demo.UETTL)
	frame := uplinkFrame(tb, teid(0), 0)
	portAt := len(frame) - len(inner) + 20 // the inner UDP source port, behind an IPv4 header without options
	dir := tb.Uplink()
	if bal.sent, _, err = dir.Send(gen, frame, packets, trafficgen.Options{FlowOffset: portAt, Flows: chainFlows,
		Rate: 200_000}); err != nil {
		return bal, err
	}
	if bal.delivered, err = dir.Delivered(bal.sent); err != nil {
		return bal, err
	}
	flows, err := rules.FlowCPUs()
	if err != nil {
		return bal, err
	}
	loads, err := rules.CPULoads()
	if err != nil {
		return bal, err
	}
	for _, l := range loads {
		bal.queueDrops += l.Dropped
	}
	bal.flows, bal.packets = map[int]int{}, map[int]uint64{}
	for _, cpus := range flows {
		on := 0
		for cpu, c := range cpus {
			if c.Packets > 0 {
				on++
				bal.flows[cpu]++
				bal.packets[cpu] += c.Packets
			}
		}
		if on > 1 {
			bal.split++
		}
	}
	return bal, nil
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func reportChain(w io.Writer, args []string, cfg config, res chainResult) {
	p := linesTo(w)
	p("%s", headline(args, res.elapsed))
	p("\nLoad average (1, 5, 15 min) before: %s; after: %s.", res.load[0], res.load[1])
	p("\n### Per-packet cost of the chains by BPF_PROG_TEST_RUN (ns/packet)\n")
	p("An uplink G-PDU of %d bytes of one of %d sessions. The UPF alone is xdp_upf as attached to N3, which the", res.frameLen, chainSessions)
	p("chain of the UPF alone is (×%.2f at most, the target; 1.00 by construction). The classifier alone is xdp_classify", targetChainAlone)
	p("with the rules (none matching the packet, its verdict in the flow cache). \"classify, upf\" is the chain: the")
	p("classify stage, a tail call, the UPF's stage. Each figure holds a test run's fixed cost once, which the empty")
	p("program's figure is: \"overhead\" is the chain less the classifier and the UPF alone plus the empty program, round by")
	p("round: the interface's chain lookup and the tail call. The classify stage hands its parse of the outer IP header and")
	p("the GTP-U message on to the UPF only for a packet the UPF would not read at fixed offsets, which this one is not:")
	p("\"tagged\" is the chain on the packet with a VLAN tag, which the UPF parses, with the parse handed on; \"own parse\"")
	p("the same with a classify stage that keeps its parse, the UPF parsing the packet again; \"saved\", the difference,")
	p("round by round. \"steer, upf\" is the")
	p("steer stage first (it walks the packet itself), to the CPU map, which a test run does not carry out, so the UPF")
	p("behind it is not in its figure; it runs in rounds of its own with their own UPF alone. A test run never dequeues, so")
	p("the steer stage finds its CPU's queue full and looks the flow up for offloading, with no alternative node: an upper")
	p("bound. Median of %d rounds, ratios the median of the rounds' ratios.\n", cfg.runs)
	p("| Rules | Empty | XDP_TX | UPF alone | Classifier alone | classify, upf | ×(classifier + UPF) | Overhead | Tagged | Tagged, own parse | Saved | steer, upf (steer stage) | ×UPF alone |")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range res.rows {
		sum := make(rounds, len(r.upf))
		for i := range sum {
			sum[i] = r.upf[i] + r.classify[i] - r.empty[i]
		}
		p("| %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f |", r.rules, r.empty.median(),
			r.tx.median(), r.upf.median(), r.classify.median(), r.classUPF.median(), r.classUPF.per(sum),
			r.classUPF.minus(sum).median(), r.taggedShared.median(), r.taggedOwn.median(), r.taggedOwn.minus(r.taggedShared).median(),
			r.steerOnly.median(), r.steerOnly.per(r.steerUPF))
	}
	p("\nWith one more rule (at a full table, in the last one's place), a mirror rule on another session's tunnel (copies")
	p("out of the collector's link, of the role copies), in rounds of their own: the")
	p("chain for the measured session's packet, and for the mirrored session's, whose figure holds the metadata, the")
	p("fanout's lookup and the broadcast's verdict, not the copy (a test run carries out no redirect).\n")
	p("| Rules | classify, upf | classify (mirror), upf | ×unmirrored | Difference |")
	p("|---:|---:|---:|---:|---:|")
	for _, r := range res.rows {
		p("| %d | %.1f | %.1f | %.2f | %.1f |", min(r.rules+1, classifyxdp.MaxRules), r.unmirrored.median(), r.mirrored.median(), r.mirrored.per(r.unmirrored),
			r.mirrored.minus(r.unmirrored).median())
	}
	b := res.balance
	p("\n### Balance of %d inner flows of one tunnel, steered over %d CPUs\n", chainFlows, runtime.NumCPU())
	p("Live: %d packets of %d inner flows (the UE's source port) in one gNB's tunnel, one outer 5-tuple, paced at", b.sent, chainFlows)
	p("200,000 packets/s from the gNB's namespace into N3 with the chain steer, upf; the UPF behind the CPU map forwards")
	p("them to the data network.\n")
	p("| CPU | Flows | Packets |")
	p("|---:|---:|---:|")
	cpus := slices.Sorted(func(yield func(int) bool) {
		for cpu := range b.packets {
			if !yield(cpu) {
				return
			}
		}
	})
	largest := 0
	for _, cpu := range cpus {
		p("| %d | %d | %d |", cpu, b.flows[cpu], b.packets[cpu])
		largest = max(largest, b.flows[cpu])
	}
	p("\nDelivered %d of %d, %d dropped by full CPU queues; flows on more than one CPU: %d; the largest CPU's share of the",
		b.delivered, b.sent, b.queueDrops, b.split)
	p("flows: %.2f.", float64(largest)/chainFlows)
}
