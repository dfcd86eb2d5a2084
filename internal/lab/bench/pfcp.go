package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"time"

	"github.com/wmnsk/go-pfcp/message"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/lab/pfcptest"
	"github.com/xdp5g/xdp5g/internal/upf/n4"
	"github.com/xdp5g/xdp5g/internal/upf/pfcp"
	"github.com/xdp5g/xdp5g/internal/upf/session"
)

// The kinds of requests of a paced run over sessions, in the order they
// take turns.
var sessionKinds = []string{"establishment", "modification", "deletion"}

// pfcpResult is what `xdp5g-lab bench --pfcp` measured: rounds of
// establishing cost.sessions sessions over PFCP, each over a fresh data
// path, then with those of the last round the per-packet cost and the
// response times of paced requests by kind, in rounds of the runs of
// pacedRuns: paced[i][round].
type pfcpResult struct {
	maxSessions int // the data path's size
	window      int
	rounds      []establishRound
	cost        costRow // install is the time the last round took
	rate        int
	paced       [len(pacedRuns)][]pacedRun
}

// The paced runs. The first sends Heartbeat Requests alone, the least a
// request can ask through the UPF's socket, parser, server and encoder:
// its times are the floor that the host and the process set under every
// request's. Then two over sessions: one as the process comes, for
// minutes, which the latency target judges (at a thousand requests a
// second a million sessions' heap needs a garbage collection about every
// ten minutes, gcpace forcing none), and one that forces a collection as
// its requests start. A collection marks every session the process holds,
// for seconds at a million sessions, on the CPUs the requests need too.
var pacedRuns = [...]pacedRunSpec{
	{"heartbeats", []string{"heartbeat"}, false, false},
	{"as it comes", sessionKinds, false, true},
	{"collection forced", sessionKinds, true, false},
}

type pacedRunSpec struct {
	name    string
	kinds   []string // of the requests, taking turns
	collect bool     // force a garbage collection as the requests start
	steady  bool     // lasts --pfcp-steady, else --paced
}

// length is how long a round of the run sends requests.
func (r pacedRunSpec) length(cfg config) time.Duration {
	if r.steady {
		return cfg.steady
	}
	return cfg.paced
}

// requests is how many requests a round of the run sends.
func (r pacedRunSpec) requests(cfg config) int {
	return int(r.length(cfg).Seconds() * float64(cfg.rate))
}

// overSessions says the run's requests establish, move and delete
// sessions; else it is the heartbeats' floor.
func (r pacedRunSpec) overSessions() bool { return slices.Contains(r.kinds, "establishment") }

// sessions is how many sessions a round of a paced run establishes, and
// how many of those established before it moves or deletes at most: a
// request of each kind in turn, from an establishment.
func (r pacedRunSpec) sessions(cfg config) int {
	if !r.overSessions() {
		return 0
	}
	return (r.requests(cfg) + len(r.kinds) - 1) / len(r.kinds)
}

// pacedSessions is how many sessions the paced runs establish, and how
// many of those established before they move or delete at most.
func pacedSessions(cfg config) (n int) {
	for _, r := range pacedRuns {
		n += r.sessions(cfg)
	}
	return n * cfg.pacedRounds
}

// pacedRun is what a paced run measured: response times by kind, sorted;
// the UPF's handling times, from reading a request to sending its
// response; the time from the first request to the last response, and the
// CPU time stolen meanwhile; the collections the Go runtime finished
// meanwhile; what a starvation probe saw meanwhile.
type pacedRun struct {
	rts      map[string][]time.Duration
	handling [pfcp.HandlingBuckets]uint64
	elapsed
	collections uint64
	slowed
}

// all is the response times of all kinds, sorted.
func (r pacedRun) all() []time.Duration {
	var all []time.Duration
	for _, rts := range r.rts {
		all = append(all, rts...)
	}
	slices.Sort(all)
	return all
}

// pool is the rounds of a paced run as one: their requests together, their
// times, collections and stolen times added up.
func pool(rounds []pacedRun) pacedRun {
	sum := pacedRun{rts: map[string][]time.Duration{}}
	for _, r := range rounds {
		for kind, rts := range r.rts {
			sum.rts[kind] = append(sum.rts[kind], rts...)
		}
		for i, n := range r.handling {
			sum.handling[i] += n
		}
		sum.took += r.took
		sum.collections += r.collections
		sum.stolen += r.stolen
		sum.slowed = sum.plus(r.slowed)
	}
	for _, rts := range sum.rts {
		slices.Sort(rts)
	}
	return sum
}

// establishRound is one round of establishments: how long they took and
// the CPU time stolen meanwhile, the rates of each tenth of them in the
// order they were answered (per second), and their response times, sorted.
type establishRound struct {
	elapsed
	tenths []float64
	rts    []time.Duration
}

func (r establishRound) rate() float64 { return float64(len(r.rts)) / r.took.Seconds() }

// medianRate is the median of the rounds' establishment rates.
func (res pfcpResult) medianRate() float64 {
	var rates []float64
	for _, r := range res.rounds {
		rates = append(rates, r.rate())
	}
	return median(rates)
}

// measurePFCP runs cfg.pfcpRounds rounds of pfcpRound.
func measurePFCP(ctx context.Context, tb *demo.Testbed, b *baselines, cfg config) (res pfcpResult, err error) {
	res.window, res.rate, res.cost.sessions = cfg.window, cfg.rate, cfg.pfcpSessions
	// The paced runs establish a session before they delete another, a
	// window of requests at most ahead. The data path keeps spare rule
	// slots for those that requests free and the store rests for a second.
	res.maxSessions = cfg.pfcpSessions + cfg.window
	for r := range cfg.pfcpRounds {
		// Every round fills a heap the previous one gave back, as a daemon
		// that starts does: a reused heap saves the page faults.
		debug.FreeOSMemory()
		progress("PFCP round %d of %d: establishing %d sessions, %d requests unanswered at most", r+1, cfg.pfcpRounds,
			cfg.pfcpSessions, cfg.window)
		if err := pfcpRound(ctx, tb, b, cfg, &res, r == cfg.pfcpRounds-1); err != nil {
			return res, err
		}
	}
	return res, nil
}

// pfcpRound serves PFCP on loopback over a fresh data path and establishes
// cfg.pfcpSessions sessions through it; the last round then measures their
// per-packet cost and paces establishments, modifications and deletions.
func pfcpRound(ctx context.Context, tb *demo.Testbed, b *baselines, cfg config, res *pfcpResult, last bool) (err error) {
	n := cfg.pfcpSessions
	u, err := tb.OpenUPF(uint32(res.maxSessions))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, u.Close()) }()
	smf, srv, stop, err := servePFCP(u.Store)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stop()) }()
	establishments, err := smf.Establishments(demo.GNBAddr, demo.QFI)
	if err != nil {
		return err
	}
	establishment := func(i int, b []byte) ([]byte, error) {
		return establishments.Append(b, cpSEID(i), ueAddr(i), teid(i)), nil
	}

	ups := make([]pfcptest.Session, n) // what the UPF chose for each
	round := establishRound{rts: make([]time.Duration, 0, n)}
	answeredAt := make([]time.Duration, 0, n)
	since, start := clock(), time.Now()
	err = smf.Pipeline(ctx, n, cfg.window, 0, establishment, func(i int, resp []byte, rt time.Duration) (err error) {
		answeredAt = append(answeredAt, time.Since(start))
		round.rts = append(round.rts, rt)
		ups[i], err = pfcptest.ParseEstablished(cpSEID(i), resp)
		return err
	})
	if err != nil {
		return fmt.Errorf("establishing sessions: %w", err)
	}
	round.elapsed = since()
	round.tenths = tenthRates(answeredAt)
	slices.Sort(round.rts)
	res.rounds = append(res.rounds, round)
	if u.Store.Len() != n {
		return fmt.Errorf("%d sessions established, %d in the store", n, u.Store.Len())
	}
	progress("PFCP: %d sessions in %s: %.0f/s", n, round.took.Round(time.Millisecond), round.rate())
	if !last {
		return nil
	}

	progress("per-packet cost with %d sessions established over PFCP", n)
	res.cost.install = round.took
	if err := measureInstalled(ctx, tb, b, u, &res.cost, func(i int) uint32 { return ups[i].TEID }, cfg.flows, cfg.runs); err != nil {
		return err
	}
	from := 0 // each run its own sessions
	for round := range cfg.pacedRounds {
		for i, run := range pacedRuns {
			progress("PFCP: requests at %d/s for %s, %s, round %d of %d", cfg.rate, run.length(cfg), run.name, round+1, cfg.pacedRounds)
			r, err := paced(ctx, smf, srv, cfg, run, ups[from:], len(ups)+from, establishment)
			if err != nil {
				return fmt.Errorf("paced requests %s: %w", run.name, err)
			}
			res.paced[i] = append(res.paced[i], r)
			from += run.sessions(cfg)
		}
	}
	return nil
}

// paced sends cfg.rate requests a second for the run's length, of its kinds
// in turn, forcing a garbage collection as they start if the run says so.
// With ups sessions established before, request j establishes session
// next+m, moves the downlink tunnel of ups[m], or deletes ups[m], m = j
// divided by the number of kinds: the count of sessions stays put.
func paced(ctx context.Context, smf *pfcptest.SMF, srv *pfcp.Server, cfg config, spec pacedRunSpec, ups []pfcptest.Session,
	next int, establishment func(i int, b []byte) ([]byte, error)) (pacedRun, error) {
	run := pacedRun{rts: map[string][]time.Duration{}}
	collections := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	before, handledBefore, since, probe := collections(), srv.Stats().Handling, clock(), probeStarvation()
	if spec.collect {
		go runtime.GC()
	}
	err := smf.Pipeline(ctx, spec.requests(cfg), cfg.window, time.Second/time.Duration(cfg.rate),
		func(j int, b []byte) ([]byte, error) {
			m := j / len(spec.kinds)
			switch spec.kinds[j%len(spec.kinds)] {
			case "heartbeat":
				return pfcptest.AppendMessage(b, smf.HeartbeatRequest())
			case "establishment":
				return establishment(next+m, b)
			case "modification": // to another TEID of the same gNB
				return pfcptest.AppendMessage(b, pfcptest.HandoverRequest(ups[m].SEID, demo.GNBAddr, teid(m)|1<<31))
			default:
				return pfcptest.AppendMessage(b, pfcptest.DeletionRequest(ups[m].SEID))
			}
		},
		func(j int, resp []byte, rt time.Duration) error {
			kind := spec.kinds[j%len(spec.kinds)]
			run.rts[kind] = append(run.rts[kind], rt)
			if kind == "establishment" {
				_, err := pfcptest.ParseEstablished(cpSEID(next+j/len(spec.kinds)), resp)
				return err
			}
			return accepted(resp)
		})
	run.elapsed, run.slowed = since(), probe.end()
	run.collections = collections() - before
	for i, n := range srv.Stats().Handling {
		run.handling[i] = n - handledBefore[i]
	}
	for _, d := range run.rts {
		slices.Sort(d)
	}
	return run, err
}

// servePFCP serves N4 on a loopback port over store, as the daemon does
// (without a UE pool: the SMF gives the addresses), and returns an SMF
// associated with it.
func servePFCP(store *session.Store) (_ *pfcptest.SMF, _ *pfcp.Server, stop func() error, err error) {
	handler := n4.New(n4.Config{Store: store, N3: []netip.Addr{demo.N3Addr}})
	// No heartbeats: they would go to port 8805 of the SMF's host, where
	// the bench does not listen.
	srv, err := pfcp.New(pfcp.Config{Listen: "127.0.0.1:0", NodeID: "upf.xdp5g.bench", Features: []pfcp.UPFeature{pfcp.FeatureFTUP},
		HeartbeatInterval: time.Hour, Handler: handler})
	if err != nil {
		return nil, nil, nil, err
	}
	smf, err := pfcptest.NewSMF("smf.xdp5g.bench", srv.Addr())
	if err != nil {
		return nil, nil, nil, errors.Join(err, srv.Close())
	}
	stop = func() error { return errors.Join(smf.Close(), srv.Close()) }
	if _, err := smf.Associate(); err != nil {
		return nil, nil, nil, errors.Join(err, stop())
	}
	return smf, srv, stop, nil
}

// cpSEID is the SMF's SEID of session i.
func cpSEID(i int) uint64 { return uint64(i) + 1 }

// accepted fails unless resp answers a heartbeat, or accepts a
// modification or a deletion.
func accepted(b []byte) error {
	resp, err := message.Parse(b)
	if err != nil {
		return err
	}
	switch r := resp.(type) {
	case *message.HeartbeatResponse:
		return nil
	case *message.SessionModificationResponse:
		return pfcptest.Accepted("session modification", r.Cause)
	case *message.SessionDeletionResponse:
		return pfcptest.Accepted("session deletion", r.Cause)
	}
	return fmt.Errorf("unexpected %s", resp.MessageTypeName())
}

// tenthRates splits the times responses arrived at into ten runs of
// responses and returns the rate of each.
func tenthRates(at []time.Duration) []float64 {
	var rates []float64
	var from time.Duration
	for t := 1; t <= 10; t++ {
		lo, hi := (t-1)*len(at)/10, t*len(at)/10
		if hi == lo {
			continue
		}
		rates = append(rates, float64(hi-lo)/(at[hi-1]-from).Seconds())
		from = at[hi-1]
	}
	return rates
}

// percentile is the p-th percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(k, 0)]
}
