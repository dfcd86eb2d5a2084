package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
)

// pacedShare is the fraction of the measured rate the paced run offers.
const pacedShare = 0.5

// direction is one way through the testbed and the UPF interface it
// enters by.
type direction struct {
	demo.Direction
	iface string
}

// traffic is what a direction's end sends: copies of frame, whose fields
// spread.FlowOffset and spread.FlowOffset2 take spread.Flows values, if
// more than 1, from one packet to the next.
type traffic struct {
	frame  []byte
	spread trafficgen.Options
}

// forwarder is what runs in the UPF namespace between N3 and N6, and the
// traffic each direction's end sends it (index as in directions): sets
// of it measured in turn while the forwarder is attached.
type forwarder struct {
	name           string
	attach, detach func() error
	traffic        [][2]traffic
	// timedOnly: measured by bpf_stats alone, as it sends the packets
	// nowhere the sinks count them (XDP_TX).
	timedOnly bool
}

// liveResult is one forwarder in one direction: the attached program's run
// time per packet by bpf_stats, the packets per second that arrived when
// sending as fast as possible, and the share of the packets sent that did
// not.
type liveResult struct {
	ns, rate, loss rounds
}

// liveRow is one direction for the UPF, the redirect baseline and the
// XDP_TX baseline (by bpf_stats alone), and the UPF's paced run.
type liveRow struct {
	direction, iface string
	upf, baseline    liveResult
	tx               rounds
	pacedRate        uint64
	pacedSent        uint64
	pacedDelivered   uint64
}

// measureLive runs traffic through the testbed with one session installed,
// with the UPF and, in its place, the redirect baselines and (by bpf_stats
// alone) XDP_TX, interleaved round by round.
func measureLive(ctx context.Context, tb *demo.Testbed, b *baselines, packets uint64, nRounds int, paced time.Duration) (rows []liveRow, err error) {
	u, err := tb.OpenUPF(1)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, u.Close()) }()
	if _, err := install(ctx, u, 1); err != nil {
		return nil, err
	}
	gen, err := trafficgen.NewGenerator()
	if err != nil {
		return nil, err
	}
	defer gen.Close()

	dirs := liveDirections(tb)
	upfTraffic := [2]traffic{{frame: uplinkFrame(tb, teid(0), 0)}, {frame: downlinkFrame(tb, 0)}}
	fwds := []forwarder{{name: "xdp5g", attach: u.Attach, detach: u.Detach, traffic: [][2]traffic{upfTraffic}}, b.forwarder(tb),
		b.txForwarder(tb, upfTraffic)}
	results, err := measureAttached(ctx, tb, gen, fwds, dirs, packets, nRounds)
	if err != nil {
		return nil, err
	}
	for d := range dirs {
		rows = append(rows, liveRow{direction: dirs[d].Name, iface: dirs[d].iface, upf: results[0][0][d], baseline: results[1][0][d],
			tx: results[2][0][d].ns})
	}

	progress("paced: xdp5g at %.0f%% of its rate", pacedShare*100)
	if err := u.Attach(); err != nil { // u.Close detaches
		return nil, err
	}
	for d := range rows {
		row := &rows[d]
		row.pacedRate = uint64(pacedShare * row.upf.rate.median())
		row.pacedSent = uint64(float64(row.pacedRate) * paced.Seconds())
		if row.pacedDelivered, _, err = deliver(gen, dirs[d], upfTraffic[d], row.pacedSent, row.pacedRate); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// liveDirections are the testbed's two ways, uplink first.
func liveDirections(tb *demo.Testbed) []direction {
	return []direction{{tb.Uplink(), demo.N3}, {tb.Downlink(), demo.N6}}
}

// measureAttached measures every forwarder's every set of traffic in both
// directions, by bpf_stats, then by rate, each round every forwarder
// attached in its turn, forwarders and sets in orders that rotate from
// round to round: results[forwarder][set][direction].
func measureAttached(ctx context.Context, tb *demo.Testbed, gen *trafficgen.Generator, fwds []forwarder, dirs []direction,
	packets uint64, nRounds int) ([][][2]liveResult, error) {
	results := make([][][2]liveResult, len(fwds))
	for f := range fwds {
		results[f] = make([][2]liveResult, len(fwds[f].traffic))
	}
	each := func(what string, timed bool, measure func(f, t, d int) error) error {
		for r := range nRounds {
			for k := range fwds {
				f := (k + r) % len(fwds)
				if fwds[f].timedOnly && !timed {
					continue
				}
				progress("%s: %s, round %d of %d", what, fwds[f].name, r+1, nRounds)
				if err := ctx.Err(); err != nil {
					return err
				}
				if err := fwds[f].attach(); err != nil {
					return errors.Join(err, fwds[f].detach())
				}
				for j := range fwds[f].traffic {
					t := (j + r) % len(fwds[f].traffic)
					for d := range dirs {
						if err := measure(f, t, d); err != nil {
							err = fmt.Errorf("%s, %s, %s: %w", what, fwds[f].name, dirs[d].Name, err)
							return errors.Join(err, fwds[f].detach())
						}
					}
				}
				if err := fwds[f].detach(); err != nil {
					return err
				}
			}
		}
		return nil
	}

	// Statistics cost every program some time, so they are on only for
	// their own rounds. The kernel keeps them on while any holder of such
	// a file descriptor lives: closing ours restores whatever was before.
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return nil, fmt.Errorf("enabling bpf_stats: %w", err)
	}
	err = each("bpf_stats", true, func(f, t, d int) error {
		ns, err := attachedCost(tb, gen, dirs[d], fwds[f].traffic[t][d], statsPackets(packets))
		results[f][t][d].ns = append(results[f][t][d].ns, ns)
		return err
	})
	if err := errors.Join(err, stats.Close()); err != nil {
		return nil, err
	}
	err = each("rate", false, func(f, t, d int) error {
		delivered, elapsed, err := deliver(gen, dirs[d], fwds[f].traffic[t][d], packets, 0)
		s := &results[f][t][d]
		s.rate = append(s.rate, float64(delivered)/elapsed.Seconds())
		s.loss = append(s.loss, 1-float64(delivered)/float64(packets))
		return err
	})
	return results, err
}

// statsPackets is how many packets a bpf_stats run sends: run times need
// fewer than rates do, where each Send's ~25 ms on top of its packets
// counts.
func statsPackets(packets uint64) uint64 { return max(packets/4, 1) }

// attachedCost sends packets through d and returns the run time per run
// of the program attached where they enter the UPF, by bpf_stats, once it
// has run for every packet sent (or stood still for a while: what it
// dropped on the way in never ran it).
func attachedCost(tb *demo.Testbed, gen *trafficgen.Generator, d direction, t traffic, packets uint64) (float64, error) {
	prog, err := attachedProgram(tb.UPF, d.iface)
	if err != nil {
		return 0, err
	}
	defer prog.Close()
	before, err := prog.Stats()
	if err != nil {
		return 0, err
	}
	sent, _, err := d.Send(gen, t.frame, packets, t.spread)
	if err != nil {
		return 0, err
	}
	const poll, quiet = 10 * time.Millisecond, 300 * time.Millisecond
	var runs, runtime uint64
	for still := time.Duration(0); still < quiet; still += poll {
		after, err := prog.Stats()
		if err != nil {
			return 0, err
		}
		if n := after.RunCount - before.RunCount; n != runs {
			runs, runtime, still = n, uint64(after.Runtime-before.Runtime), 0
		}
		if runs >= sent {
			break
		}
		time.Sleep(poll)
	}
	if runs == 0 {
		return 0, errors.New("bpf_stats counted no runs")
	}
	return float64(runtime) / float64(runs), nil
}

// deliver sends count packets of t through d at rate packets per second
// (0: as fast as possible) and returns how many arrived and how long the
// sending took.
func deliver(gen *trafficgen.Generator, d direction, t traffic, count, rate uint64) (uint64, time.Duration, error) {
	before, err := d.Sink.Counts()
	if err != nil {
		return 0, 0, err
	}
	opts := t.spread
	opts.Rate = rate
	sent, elapsed, err := d.Send(gen, t.frame, count, opts)
	if err != nil {
		return 0, 0, err
	}
	// Above what the path forwards packets are lost: waiting long for them
	// would only lengthen the rounds.
	got, err := d.DeliveredQuiet(before.MatchPackets+sent, 300*time.Millisecond)
	return got - before.MatchPackets, elapsed, err
}
