package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/lab/baseline"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
)

// runsPerRound is how many test runs of one program make up a round.
const runsPerRound = 8192

// subject is a program under test, the frames it is given (in an order
// of its own: schedule) and the verdict every run must return.
type subject struct {
	name    string
	prog    *ebpf.Program
	frames  [][]byte
	verdict xdplink.Action
}

// costRow is the per-packet cost of every program, in nanoseconds, with a
// number of sessions installed: the UPF's with the frames of one session,
// and with frames cycling over many (spread), which adds cache and TLB
// misses; next to each, the memory floor's with the same frames.
type costRow struct {
	sessions                              int
	install                               time.Duration
	keys, records, unrecorded             int    // PDR sets installed, those with a record, those put to take none
	floorLines                            uint32 // of the floor's table: the UPF's PDR table's, in whole pages
	empty, tx, redirect, uplink, downlink rounds
	floor                                 floorCost
	spread                                []spreadCost   // by --flows
	n9                                    *n9Cost        // nil: not measured
	live                                  *liveInstalled // nil: not measured
}

// spreadCost is the per-packet cost with frames cycling over flows
// sessions spread evenly over those installed.
type spreadCost struct {
	flows            int
	uplink, downlink rounds
	floor            floorCost
}

// floorCost is the memory floor's (baseline.Floor) over a table of the
// UPF's PDR table's size: one read, two, and measured with spread frames
// only, two in one page, two with a count per line and CPU, and two over
// a table without BPF_F_MMAPABLE.
type floorCost struct {
	one, two, twoNear, twoCount, twoPlain rounds
}

// rounds are a measurement's figures, one per round; the figures compared
// with each other come from the same rounds.
type rounds []float64

func (r rounds) median() float64 { return median(r) }

// per is the median of the round by round ratios to base, which cancels
// the drift between rounds.
func (r rounds) per(base rounds) float64 {
	ratios := make([]float64, len(r))
	for i := range r {
		ratios[i] = r[i] / base[i]
	}
	return median(ratios)
}

// minus is r less base, round by round.
func (r rounds) minus(base rounds) rounds {
	out := make(rounds, len(r))
	for i := range r {
		out[i] = r[i] - base[i]
	}
	return out
}

// measureCost installs n sessions into a fresh data path and measures their
// per-packet cost (measureInstalled), with the N9 sessions if withN9: their
// branches are compared with sessions of their own shape, two PDRs; then,
// if livePackets is not 0, the same sessions under live traffic
// (measureLiveInstalled), that many packets a round.
func measureCost(ctx context.Context, tb *demo.Testbed, b *baselines, n int, flows []int, nRounds int, withN9 bool,
	livePackets uint64) (row costRow, err error) {
	row.sessions = n
	k := 0
	if withN9 {
		k = n9Count(n, flows)
	}
	u, err := tb.OpenUPF(uint32(n + 2*k))
	if err != nil {
		return row, err
	}
	defer func() { err = errors.Join(err, u.Close()) }()
	if row.install, err = install(ctx, u, n); err != nil {
		return row, err
	}
	row.keys, _ = u.Datapath.PDRSets()
	row.records, row.unrecorded = u.Datapath.Records(), u.Datapath.UnrecordedKeys()
	var n9 *n9Frames
	if withN9 {
		frames, err := installN9(ctx, tb, u, n, k)
		if err != nil {
			return row, err
		}
		n9 = &frames
	}
	if err := measureInstalled(ctx, tb, b, u, &row, teid, flows, nRounds, n9); err != nil || livePackets == 0 {
		return row, err
	}
	row.live, err = measureLiveInstalled(ctx, tb, b, u, n, flows, livePackets, nRounds)
	return row, err
}

// n9Count is how many sessions of each N9 kind a row installs: as many
// as the fewest frames spread over.
func n9Count(n int, flows []int) int { return min(n, slices.Min(flows)) }

// measureInstalled attaches the UPF with row.sessions sessions installed,
// session i's uplink TEID teidOf(i), and measures its programs next to the
// baselines and the memory floor, with the frames of the last session
// installed, and cycling over each count of flows sessions spread evenly
// over the installed ones; and the N9 sessions' frames, if any.
func measureInstalled(ctx context.Context, tb *demo.Testbed, b *baselines, u *demo.UPF, row *costRow,
	teidOf func(int) uint32, flows []int, nRounds int, n9 *n9Frames) error {
	// The floor's table is the size of the UPF's PDR table, whose lines
	// are PDRs, in whole pages, and mapped as it is; two reads over the
	// same without BPF_F_MMAPABLE say what that choice costs.
	floor, err := baseline.LoadFloor(u.Datapath.PDRCapacity(), true, false)
	if err != nil {
		return err
	}
	defer floor.Close()
	row.floorLines = floor.Lines()
	plain, err := baseline.LoadFloor(row.floorLines, false, true)
	if err != nil {
		return err
	}
	defer plain.Close()
	// Installing a million sessions leaves a collection due, which marks
	// their heap for seconds on the other CPU and evicts the data path's
	// tables from the cache the CPUs share: with one running, uplink 3.2-3.4
	// times XDP_TX, against 2.5-2.6 with it done before. The data path is
	// measured without the bench's own collector.
	runtime.GC()
	if err := u.Attach(); err != nil {
		return err
	}
	var progs [2]*ebpf.Program // uplink on N3, downlink on N6
	for i, iface := range demo.Interfaces {
		var err error
		if progs[i], err = attachedProgram(tb.UPF, iface.Name); err != nil {
			return err
		}
		defer progs[i].Close()
	}
	n := row.sessions
	ulOne, dlOne := [][]byte{uplinkFrame(tb, teidOf(n-1), n-1)}, [][]byte{downlinkFrame(tb, n-1)}
	subjects := []subject{
		{"empty program", b.pass, dlOne, xdplink.Pass},
		{"XDP_TX baseline", b.tx, dlOne, xdplink.TX},
		{"redirect baseline", b.toDN, dlOne, xdplink.Redirect},
		{"uplink", progs[0], ulOne, xdplink.Redirect},
		{"downlink", progs[1], dlOne, xdplink.Redirect},
		{"floor, one read", floor.One, dlOne, xdplink.TX},
		{"floor, two reads", floor.Two, dlOne, xdplink.TX},
	}
	// The floor's frames are the downlink's: its first line follows from
	// the UE address.
	var spreads []int // distinct counts of sessions the frames cycle over
	for _, count := range flows {
		if k := min(n, count); !slices.Contains(spreads, k) {
			spreads = append(spreads, k)
		}
	}
	spreadAt := make([]int, len(spreads))
	for f, k := range spreads {
		// A random sample of the sessions in random order, as subscribers
		// come. Sessions evenly spaced, taken in the order of their slots,
		// walk every table in address order, the next frame's page-table
		// entries and lines often fetched already: at a million sessions
		// they cost half what these do.
		var ul, dl [][]byte
		for _, i := range rand.New(rand.NewPCG(uint64(n), uint64(k))).Perm(n)[:k] {
			ul = append(ul, uplinkFrame(tb, teidOf(i), i))
			dl = append(dl, downlinkFrame(tb, i))
		}
		spreadAt[f] = len(subjects)
		name := fmt.Sprintf(", spread over %d", k)
		subjects = append(subjects,
			subject{"uplink" + name, progs[0], ul, xdplink.Redirect},
			subject{"downlink" + name, progs[1], dl, xdplink.Redirect},
			subject{"floor, one read" + name, floor.One, dl, xdplink.TX},
			subject{"floor, two reads" + name, floor.Two, dl, xdplink.TX},
			subject{"floor, two reads in a page" + name, floor.TwoNear, dl, xdplink.TX},
			subject{"floor, two reads counted" + name, floor.TwoCount, dl, xdplink.TX},
			subject{"floor, two reads, not mmapable" + name, plain.Two, dl, xdplink.TX})
	}
	n9At := len(subjects)
	if n9 != nil {
		subjects = append(subjects,
			subject{"N9 relay", progs[0], n9.relayOne, xdplink.Redirect},
			subject{"N9 relay, spread", progs[0], n9.relay, xdplink.Redirect},
			subject{"branching, local", progs[0], n9.branchLocal, xdplink.Redirect},
			subject{"branching, over N9", progs[0], n9.branchCentral, xdplink.Redirect})
	}
	ns, err := perPacketNs(ctx, subjects, nRounds)
	if err != nil {
		return err
	}
	row.empty, row.tx, row.redirect, row.uplink, row.downlink = ns[0], ns[1], ns[2], ns[3], ns[4]
	row.floor = floorCost{one: ns[5], two: ns[6]}
	for f, k := range spreads {
		at := ns[spreadAt[f]:]
		row.spread = append(row.spread, spreadCost{flows: k, uplink: at[0], downlink: at[1],
			floor: floorCost{one: at[2], two: at[3], twoNear: at[4], twoCount: at[5], twoPlain: at[6]}})
	}
	if n9 != nil {
		at := ns[n9At:]
		row.n9 = &n9Cost{relay: at[0], relaySpread: at[1], branchLocal: at[2], branchCentral: at[3]}
	}
	return nil
}

// perPacketNs returns each subject's cost per packet in nanoseconds.
//
// BPF_PROG_TEST_RUN with a repeat count runs the program again on the frame
// the previous run left (decapsulated, encapsulated, moved), so every run
// here is a test run of its own on a fresh copy of a frame, and the time is
// the one the kernel measured around that single run. A round runs every
// subject runsPerRound times, in the order schedule draws; the round's
// figure for a subject is the mean of its runs without outliers
// (interrupts). A warm-up round goes first.
func perPacketNs(ctx context.Context, subjects []subject, n int) ([]rounds, error) {
	figures := make([]rounds, len(subjects))
	order := newSchedule(subjects, uint64(n))
	runs := make([]float64, runsPerRound)
	for r := -1; r < n; r++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for _, i := range order.round() {
			s := subjects[i]
			for j := range runs {
				verdict, d, err := s.prog.Benchmark(s.frames[order.frame(i)], 1, nil)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", s.name, err)
				}
				if xdplink.Action(verdict) != s.verdict {
					return nil, fmt.Errorf("%s: verdict %d, want %d", s.name, verdict, s.verdict)
				}
				runs[j] = float64(d)
			}
			if r >= 0 {
				figures[i] = append(figures[i], meanWithoutOutliers(runs))
			}
		}
	}
	return figures, nil
}

// schedule is the order of the test runs: each round the subjects in an
// order drawn anew, and each subject's frames in an order of its own, in
// turn across rounds, so that no subject runs always after the same one
// or over the sessions another has just read into the cache. Seeded, so
// that a run can be repeated.
type schedule struct {
	random *rand.Rand
	frames [][]int // by subject, the order it takes its frames in
	next   []int   // by subject, its next frame in that order
}

func newSchedule(subjects []subject, seed uint64) *schedule {
	s := &schedule{random: rand.New(rand.NewPCG(seed, uint64(len(subjects)))), next: make([]int, len(subjects))}
	for _, sub := range subjects {
		s.frames = append(s.frames, s.random.Perm(len(sub.frames)))
	}
	return s
}

// round is the order of the subjects in the next round.
func (s *schedule) round() []int { return s.random.Perm(len(s.frames)) }

// frame is subject i's next frame.
func (s *schedule) frame(i int) int {
	f := s.frames[i][s.next[i]]
	s.next[i] = (s.next[i] + 1) % len(s.frames[i])
	return f
}

// meanWithoutOutliers averages the values up to twice the median. The
// kernel's clock here ticks in steps of about 10 ns, so a mean, not a
// median, resolves differences smaller than a tick.
func meanWithoutOutliers(xs []float64) float64 {
	limit := 2 * median(xs)
	var sum float64
	var n int
	for _, x := range xs {
		if x <= limit {
			sum += x
			n++
		}
	}
	return sum / float64(n)
}

func median[T float64 | time.Duration](xs []T) T {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
