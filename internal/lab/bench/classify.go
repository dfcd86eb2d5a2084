package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
)

// The targets of the classifier.
const (
	targetRuleGrowth = 1.25             // cost with 65,536 rules over the cost with 1
	targetEnforce    = time.Millisecond // from the call to packets seeing the rule
)

// The paper's traffic types, and RTP video inside the deepest.
var trafficTypes = []string{"IP", "VXLAN", "GTP-U in VXLAN", "RTP/H.265 in GTP-U in VXLAN"}

// benchMasks are the distinct masks of the benchmark's rules.
const benchMasks = 16

// freshFlows are the flows a "new flows" round cycles through: more than
// the flow cache holds, so that every packet is classified anew.
const freshFlows = 1 << 17

type classifyRow struct {
	rules   int
	install time.Duration
	masks   int
	empty   rounds
	tx      rounds
	steady  []rounds // per traffic type: one flow, its verdict in the flow cache
	fresh   []rounds // per traffic type: every packet a new flow
	// per traffic type: every packet a new flow, the rules' priorities
	// rising with their mask's, so that the first probe finds the winner;
	// measured with XDP_TX again
	ordered   []rounds
	orderedTX rounds
}

type classifyResult struct {
	rows      []classifyRow
	frameLens []int
	singles   time.Duration // adding singleRules rules one call each
	enforce   []time.Duration
	steering  steerCosts
	video     []videoRow
	elapsed   elapsed
}

const (
	singleRules    = 1000
	enforceSamples = 200
)

// classifyFrame is a packet of a traffic type from the UE's port src and
// address 10.45.0.(2+srcHost) to 10.0.0.2, port 5004.
func classifyFrame(kind int, src uint16, srcHost byte) []byte {
	eth := func() *layers.Ethernet {
		return &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
			EthernetType: layers.EthernetTypeIPv4}
	}
	ip := func(src, dst net.IP) *layers.IPv4 {
		return &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: src, DstIP: dst}
	}
	inner := []gopacket.SerializableLayer{ip(net.IPv4(10, 45, 0, 2+srcHost), net.IPv4(10, 0, 0, 2)),
		&layers.UDP{SrcPort: layers.UDPPort(src), DstPort: 5004}}
	if kind == 3 { // RTP (V=2, PT 96, SSRC 1) with an H.265 enhancement-layer NAL unit header
		inner = append(inner, gopacket.Payload([]byte{0x80, 96, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 1 << 1, 1<<3 | 1, 0xaa, 0xbb}))
	} else {
		inner = append(inner, gopacket.Payload(make([]byte, 16)))
	}
	vxlan := []gopacket.SerializableLayer{eth(), ip(net.IPv4(192, 0, 2, 1), net.IPv4(192, 0, 2, 2)),
		&layers.UDP{SrcPort: 50000, DstPort: 4789}, &layers.VXLAN{ValidIDFlag: true, VNI: 100}, eth()}
	gtp := []gopacket.SerializableLayer{ip(net.IPv4(10, 100, 3, 1), net.IPv4(10, 100, 3, 2)),
		&layers.UDP{SrcPort: 2152, DstPort: 2152}, &layers.GTPv1U{Version: 1, ProtocolType: 1, MessageType: 255, TEID: 0x100,
			GTPExtensionHeaders: []layers.GTPExtensionHeader{{Type: demo.PDUSessionContainer, Content: []byte{0x10, demo.QFI}}}}}
	switch kind {
	case 0:
		return demo.Serialize(false, slices.Concat([]gopacket.SerializableLayer{eth()}, inner)...)
	case 1:
		return demo.Serialize(false, slices.Concat(vxlan, inner)...)
	}
	return demo.Serialize(false, slices.Concat(vxlan, gtp, inner)...)
}

// benchRules are n rules over benchMasks masks, a count of the benchmark
// frames' rules among them: rule i matches the inner destination
// 10.(j>>8).(j&255).2, j = i/16, and destination port 5004 under the
// s = i%16th of 16 port prefixes. Frames to 10.0.0.2 match the 16 rules
// of j = 0, one per mask. Rule i has priority i, so that every mask holds
// rules better than the one a frame matches and a lookup probes all 16;
// ordered, it has priority s<<16 | j instead, so that the mask probed
// first (s = 15) holds the winner and the lookup stops there.
func benchRules(n int, ordered bool) []classifyxdp.Rule {
	rules := make([]classifyxdp.Rule, n)
	for i := range rules {
		j, s := i/benchMasks, i%benchMasks
		dst := netip.AddrFrom4([4]byte{10, byte(j >> 8), byte(j), 2})
		mask := uint64(0xffff) << s & 0xffff
		priority := uint32(i)
		if ordered {
			priority = uint32(s)<<16 | uint32(j)
		}
		rules[i] = classifyxdp.Rule{ID: uint32(i + 1), Priority: priority, Action: classifyxdp.ActionPass, Matches: []classifyxdp.Match{
			{Field: "innerDst", Prefix: netip.PrefixFrom(dst, 32)}, {Field: "dstPort", Value: 5004 & mask, Mask: mask}}}
	}
	return rules
}

func measureClassify(ctx context.Context, b *baselines, cfg config) (res classifyResult, err error) {
	steadyFrames := make([][][]byte, len(trafficTypes))
	freshFrames := make([][][]byte, len(trafficTypes))
	for kind := range trafficTypes {
		steadyFrames[kind] = [][]byte{classifyFrame(kind, 40000, 0)}
		res.frameLens = append(res.frameLens, len(steadyFrames[kind][0]))
		for f := range freshFlows {
			freshFrames[kind] = append(freshFrames[kind], classifyFrame(kind, uint16(f), byte(f>>16)))
		}
	}
	for _, n := range cfg.classifyRules {
		progress("classification with %d rules", n)
		row, err := measureRules(ctx, b, cfg.runs, n, steadyFrames, freshFrames)
		if err != nil {
			return res, fmt.Errorf("%d rules: %w", n, err)
		}
		res.rows = append(res.rows, row)
	}
	progress("classification: steering")
	if res.steering, err = measureSteerCost(ctx, b, cfg.runs, steadyFrames[len(trafficTypes)-1][0]); err != nil {
		return res, err
	}
	progress("classification: rule insertion and enforcement")
	if res.singles, res.enforce, err = measureInsertion(); err != nil {
		return res, err
	}
	res.video, err = measureVideo()
	return res, err
}

func measureRules(ctx context.Context, b *baselines, runs, n int, steadyFrames, freshFrames [][][]byte) (row classifyRow, err error) {
	var d, ordered *classifyxdp.Datapath
	for _, o := range []struct {
		to      **classifyxdp.Datapath
		ordered bool
	}{{&d, false}, {&ordered, true}} {
		if *o.to, err = classifyxdp.OpenDatapath(classifyxdp.Config{MaxMasks: benchMasks}); err != nil {
			return row, err
		}
		defer (*o.to).Close()
		start := time.Now()
		if n > 0 {
			if err := (*o.to).Add(benchRules(n, o.ordered)...); err != nil {
				return row, err
			}
		}
		if !o.ordered {
			row.install = time.Since(start)
		}
	}
	row.rules, row.masks = n, min(n, benchMasks)
	subjects := []subject{{"empty", b.pass, steadyFrames[0], xdplink.Pass}, {"XDP_TX", b.tx, steadyFrames[0], xdplink.TX}}
	for kind, name := range trafficTypes {
		subjects = append(subjects, subject{name + ", one flow", d.Program(), steadyFrames[kind], xdplink.Pass},
			subject{name + ", new flows", d.Program(), freshFrames[kind], xdplink.Pass})
	}
	figures, err := perPacketNs(ctx, subjects, runs)
	if err != nil {
		return row, err
	}
	row.empty, row.tx = figures[0], figures[1]
	for kind := range trafficTypes {
		row.steady = append(row.steady, figures[2+2*kind])
		row.fresh = append(row.fresh, figures[3+2*kind])
	}
	// Apart from the rest, so that the two classifiers' flow caches do
	// not compete for the CPU's caches.
	subjects = []subject{{"XDP_TX", b.tx, steadyFrames[0], xdplink.TX}}
	for kind, name := range trafficTypes {
		subjects = append(subjects, subject{name + ", new flows, ordered priorities", ordered.Program(), freshFrames[kind], xdplink.Pass})
	}
	if figures, err = perPacketNs(ctx, subjects, runs); err != nil {
		return row, err
	}
	row.orderedTX, row.ordered = figures[0], figures[1:]
	return row, nil
}

// measureInsertion adds rules one call at a time, and times single adds
// made apart from each other: the time until packets see the rule.
func measureInsertion() (singles time.Duration, enforce []time.Duration, err error) {
	d, err := classifyxdp.OpenDatapath(classifyxdp.Config{MaxMasks: benchMasks})
	if err != nil {
		return 0, nil, err
	}
	defer d.Close()
	rules := benchRules(singleRules+enforceSamples, false)
	start := time.Now()
	for _, r := range rules[:singleRules] {
		if err := d.Add(r); err != nil {
			return 0, nil, err
		}
	}
	singles = time.Since(start)
	for _, r := range rules[singleRules:] {
		time.Sleep(2 * classifyxdp.DefaultGrace) // the previous change's grace is over
		t := time.Now()
		if err := d.Add(r); err != nil {
			return 0, nil, err
		}
		enforce = append(enforce, time.Since(t))
	}
	return singles, enforce, nil
}

func reportClassify(w io.Writer, args []string, cfg config, res classifyResult) {
	p := linesTo(w)
	p("%s", headline(args, res.elapsed))
	p("\n### Classification: per-packet cost by BPF_PROG_TEST_RUN (ns/packet)\n")
	p("xdp_classify on frames of each traffic type (%s octets: %v), every frame matching one rule of each", strings.Join(trafficTypes, ", "), res.frameLens)
	p("of the %d masks when rules are installed (action pass, so that the verdict is XDP_PASS and one rule decides). One flow: the same frame", benchMasks)
	p("every run, its verdict in the flow cache. New flows: %d flows in turn, more than the flow cache holds, so every packet", freshFlows)
	p("misses the cache; every mask holds rules of higher priority than the frame's, so every packet is looked up in every")
	p("mask. Ordered: the same with the rules' priorities rising with their mask's (see benchRules), so that the first mask")
	p("probed holds the winner and the lookup stops there. Each run is a test run of its own, the mean of %d runs without", runsPerRound)
	p("outliers per round, the median of %d rounds with the programs interleaved; ratios to XDP_TX are the median of the", cfg.runs)
	p("rounds' ratios.\n")
	head := "| Rules | Masks | Install | Empty | XDP_TX |"
	rule := "|---:|---:|---:|---:|---:|"
	for _, t := range trafficTypes {
		head += fmt.Sprintf(" %s, one flow | ×TX | new flows | ×TX | ordered | ×TX |", t)
		rule += "---:|---:|---:|---:|---:|---:|"
	}
	p("%s\n%s", head, rule)
	for _, r := range res.rows {
		line := fmt.Sprintf("| %d | %d | %.3f s | %.1f | %.1f |", r.rules, r.masks, r.install.Seconds(), r.empty.median(), r.tx.median())
		for kind := range trafficTypes {
			line += fmt.Sprintf(" %.1f | %.2f | %.1f | %.2f | %.1f | %.2f |", r.steady[kind].median(), r.steady[kind].per(r.tx),
				r.fresh[kind].median(), r.fresh[kind].per(r.tx), r.ordered[kind].median(), r.ordered[kind].per(r.orderedTX))
		}
		p("%s", line)
	}
	reportSteerCost(w, res.steering)
	p("\n### Rule insertion\n")
	p("%d rules added one call each: %.0f rules/s (a change waits for the grace period of the one before, %s). Batches:", singleRules,
		singleRules/res.singles.Seconds(), classifyxdp.DefaultGrace)
	for _, r := range res.rows {
		if r.rules > 0 {
			p("%d rules in one call in %.3f s (%.0f rules/s).", r.rules, r.install.Seconds(), float64(r.rules)/r.install.Seconds())
		}
	}
	slices.Sort(res.enforce)
	p("\nFrom the call to packets seeing the rule (a single rule added while the previous change's grace is over, %d times):", len(res.enforce))
	p("p50 %s, p99 %s, max %s.", res.enforce[len(res.enforce)/2], res.enforce[len(res.enforce)*99/100], res.enforce[len(res.enforce)-1])

	p("\n### Targets\n")
	one, most := rowWith(res.rows, 1), rowWith(res.rows, classifyxdp.MaxRules)
	if one != nil && most != nil {
		for kind, t := range trafficTypes {
			for _, c := range []struct {
				regime    string
				with1, at rounds
			}{{"one flow", one.steady[kind], most.steady[kind]}, {"new flows", one.fresh[kind], most.fresh[kind]},
				{"new flows, ordered priorities", one.ordered[kind], most.ordered[kind]}} {
				ratio := c.at.per(c.with1)
				p("- %s, %s: %d rules cost %.2f× 1 rule (target ≤ %g×): %s", t, c.regime, most.rules, ratio, targetRuleGrowth,
					verdict[ratio <= targetRuleGrowth])
			}
		}
	}
	p99 := res.enforce[len(res.enforce)*99/100]
	p("- call to enforcement p99: %s (target < %s): %s", p99, targetEnforce, verdict[p99 < targetEnforce])
	reportVideo(w, res.video)
}

func rowWith(rows []classifyRow, rules int) *classifyRow {
	for i := range rows {
		if rows[i].rules == rules {
			return &rows[i]
		}
	}
	return nil
}
