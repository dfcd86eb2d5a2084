package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/upf/session"
)

// duplTEID is the TEID of the copies' tunnels to the collector.
const duplTEID = 0xd0d0

// duplicating is session i with both FARs duplicating (DUPL) into a GTP-U
// tunnel to the collector.
func duplicating(i int) session.Session {
	s := benchSession(i)
	for j := range s.FARs {
		s.FARs[j].Duplicating = &session.Forwarding{DestinationInterface: session.InterfaceLIFunction,
			OuterHeaderCreation: &session.OuterHeaderCreation{TEID: duplTEID, Peer: demo.CollectorAddr}}
	}
	return s
}

// duplVariant is one way through the UPF with the FARs plain or
// duplicating: its per-packet cost by test run, by bpf_stats under
// traffic, and the rates at which the packets and their copies arrived
// when sent as fast as possible.
type duplVariant struct {
	testRun, stats, rate, copyRate rounds
}

// duplRow is one direction: its frames plain and duplicating.
type duplRow struct {
	direction   string
	plain, dupl duplVariant
}

type duplResult struct {
	empty, tx rounds
	rows      [2]duplRow
	elapsed   elapsed
}

// measureDupl installs session 0 plain and session 1 duplicating, with the
// collector behind its own link, and measures both directions of each
// interleaved, next to XDP_TX.
func measureDupl(ctx context.Context, tb *demo.Testbed, b *baselines, cfg config) (res duplResult, err error) {
	u, err := tb.OpenUPF(2)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, u.Close()) }()
	c, err := tb.NewCollector()
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, c.Close()) }()
	for _, s := range []session.Session{benchSession(0), duplicating(1)} {
		if err := u.Store.Create(s); err != nil {
			return res, err
		}
	}
	runtime.GC()
	if err := errors.Join(u.Attach(), u.AttachCollector()); err != nil {
		return res, err
	}
	copies, err := c.Copies()
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, copies.Sink.Close()) }()

	dirs := liveDirections(tb)
	frames := [2][2][]byte{{uplinkFrame(tb, teid(0), 0), uplinkFrame(tb, teid(1), 1)},
		{downlinkFrame(tb, 0), downlinkFrame(tb, 1)}}
	var subjects []subject
	for d, dir := range dirs {
		prog, err := attachedProgram(tb.UPF, dir.iface)
		if err != nil {
			return res, err
		}
		defer prog.Close()
		subjects = append(subjects, subject{dir.Name, prog, frames[d][:1], xdplink.Redirect},
			subject{dir.Name + ", DUPL", prog, frames[d][1:], xdplink.Redirect})
	}
	subjects = append(subjects, subject{"empty program", b.pass, frames[1][:1], xdplink.Pass},
		subject{"XDP_TX baseline", b.tx, frames[1][:1], xdplink.TX})
	progress("duplication: per-packet cost by test run")
	ns, err := perPacketNs(ctx, subjects, cfg.runs)
	if err != nil {
		return res, err
	}
	res.empty, res.tx = ns[4], ns[5]
	for d := range dirs {
		res.rows[d] = duplRow{direction: dirs[d].Name}
		res.rows[d].plain.testRun, res.rows[d].dupl.testRun = ns[2*d], ns[2*d+1]
	}

	gen, err := trafficgen.NewGenerator()
	if err != nil {
		return res, err
	}
	defer gen.Close()
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return res, fmt.Errorf("enabling bpf_stats: %w", err)
	}
	defer stats.Close()
	for r := range cfg.runs {
		for k := range 4 {
			d, v := (k+r)%4/2, (k+r)%2
			progress("duplication: %s, variant %d, round %d of %d", dirs[d].Name, v, r+1, cfg.runs)
			if err := ctx.Err(); err != nil {
				return res, err
			}
			variant := &res.rows[d].plain
			if v == 1 {
				variant = &res.rows[d].dupl
			}
			cost, err := attachedCost(tb, gen, dirs[d], traffic{frame: frames[d][v]}, statsPackets(cfg.packets))
			if err != nil {
				return res, err
			}
			before, err := copies.Sink.Counts()
			if err != nil {
				return res, err
			}
			delivered, elapsed, err := deliver(gen, dirs[d], traffic{frame: frames[d][v]}, cfg.packets, 0)
			if err != nil {
				return res, err
			}
			// The copies come by a link of their own, after the packets
			// may: waited for, as many as the packets that arrived.
			copied := before.MatchPackets
			if v == 1 {
				if copied, err = copies.Delivered(before.MatchPackets + delivered); err != nil {
					return res, err
				}
			}
			variant.stats = append(variant.stats, cost)
			variant.rate = append(variant.rate, float64(delivered)/elapsed.Seconds())
			variant.copyRate = append(variant.copyRate, float64(copied-before.MatchPackets)/elapsed.Seconds())
		}
	}
	return res, nil
}

func reportDupl(w io.Writer, args []string, cfg config, res duplResult) {
	p := linesTo(w)
	p("%s", headline(args, res.elapsed))
	p("\nSession 0's FARs forward; session 1's, the same, also duplicate (DUPL) every packet into a GTP-U/UDP/IPv4 tunnel to")
	p("an LI collector behind a link of its own. The same frames as the per-packet cost's, one session each.\n")
	p("### Per-packet cost by BPF_PROG_TEST_RUN (ns/packet)\n")
	p("The program alone, as in the per-packet cost: a test run does not redirect, so the copy the devmap broadcast makes")
	p("after the program returns is not in these figures. Median of %d rounds, ratios the median of the rounds' ratios;", cfg.runs)
	p("empty program %.1f, XDP_TX %.1f.\n", res.empty.median(), res.tx.median())
	p("| Direction | FAR | ns | ×XDP_TX | DUPL ×plain |")
	p("|---|---|---:|---:|---:|")
	for _, r := range res.rows {
		p("| %s | plain | %.1f | %.2f | |", r.direction, r.plain.testRun.median(), r.plain.testRun.per(res.tx))
		p("| %s | DUPL | %.1f | %.2f | %.2f |", r.direction, r.dupl.testRun.median(), r.dupl.testRun.per(res.tx), r.dupl.testRun.per(r.plain.testRun))
	}
	p("\n### Under live traffic\n")
	p("bpf_stats: run time per run of the program the traffic enters by (the copy's devmap program and the broadcast not")
	p("included); rates: what arrived per second while %d packets were sent as fast as possible, the packets themselves", cfg.packets)
	p("and their copies at the collector, which take the same CPU. Median of %d rounds, the four cases interleaved.\n", cfg.runs)
	p("| Direction | FAR | bpf_stats ns | Packets Mpps | Copies Mpps | DUPL rate ×plain | ns/packet from the rate | DUPL ×plain |")
	p("|---|---|---:|---:|---:|---:|---:|---:|")
	for _, r := range res.rows {
		p("| %s | plain | %.1f | %.2f | %.2f | | %.0f | |", r.direction, r.plain.stats.median(), r.plain.rate.median()/1e6,
			r.plain.copyRate.median()/1e6, 1e9/r.plain.rate.median())
		p("| %s | DUPL | %.1f | %.2f | %.2f | %.2f | %.0f | %.2f |", r.direction, r.dupl.stats.median(), r.dupl.rate.median()/1e6,
			r.dupl.copyRate.median()/1e6, r.dupl.rate.per(r.plain.rate), 1e9/r.dupl.rate.median(), r.plain.rate.per(r.dupl.rate))
	}
}
