package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"sync"
	"time"

	"github.com/wmnsk/go-pfcp/message"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/lab/pfcptest"
	"github.com/xdp5g/xdp5g/internal/platform/gcpace"
	"github.com/xdp5g/xdp5g/internal/upf/n4"
	"github.com/xdp5g/xdp5g/internal/upf/n4state"
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
	rounds      []establishRound // without and with persistence in turn
	cost        costRow          // install is the time the last round took
	rate        int
	paced       [len(pacedRuns)][]pacedRun
	restart     restartRun // of the last round's UPF
}

// restartRun is a restart of the last round's UPF, with its sessions: the
// state on disk it started from, how long it took to read it, to take the
// sessions over, and in all until PFCP was served, and what it found.
type restartRun struct {
	stateBytes               int64
	read, takeOver, took     time.Duration
	sessions, kept, repaired int
	sameRecovery             bool
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

// establishRound is one round of establishments: whether the UPF kept
// its PFCP state on disk, how long they took and the CPU time stolen
// meanwhile, the rates of each tenth of them in the order they were
// answered (per second), and their response times, sorted; with
// persistence, the bytes of the state after the round, and after a
// compaction.
type establishRound struct {
	persist bool
	elapsed
	tenths                    []float64
	rts                       []time.Duration
	stateBytes, snapshotBytes int64
}

func (r establishRound) rate() float64 { return float64(len(r.rts)) / r.took.Seconds() }

// medianRate is the median of the establishment rates of the rounds with
// persistence, or without.
func (res pfcpResult) medianRate(persist bool) float64 {
	var rates []float64
	for _, r := range res.rounds {
		if r.persist == persist {
			rates = append(rates, r.rate())
		}
	}
	return median(rates)
}

// measurePFCP runs cfg.pfcpRounds rounds of pfcpRound, each without then
// with persistence.
func measurePFCP(ctx context.Context, tb *demo.Testbed, b *baselines, cfg config) (res pfcpResult, err error) {
	res.window, res.rate, res.cost.sessions = cfg.window, cfg.rate, cfg.pfcpSessions
	// The paced runs establish a session before they delete another, a
	// window of requests at most ahead. The data path keeps spare rule
	// slots for those that requests free and the store rests for a second.
	res.maxSessions = cfg.pfcpSessions + cfg.window
	for r := range cfg.pfcpRounds {
		for _, persist := range []bool{false, true} {
			// Every round fills a heap the previous one gave back, as a
			// daemon that starts does: a reused heap saves the page faults.
			debug.FreeOSMemory()
			progress("PFCP round %d of %d: establishing %d sessions, %d requests unanswered at most, %s", r+1, cfg.pfcpRounds,
				cfg.pfcpSessions, cfg.window, persistence[persist])
			if err := pfcpRound(ctx, tb, b, cfg, &res, persist, r == cfg.pfcpRounds-1 && persist); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

var persistence = map[bool]string{false: "keeping no state", true: "keeping the state on disk"}

// pfcpRound serves PFCP on loopback over a fresh data path, keeping its
// state on disk if persist says so, and establishes cfg.pfcpSessions
// sessions through it; the last round then measures their per-packet
// cost, paces establishments, modifications and deletions, and restarts
// the UPF.
func pfcpRound(ctx context.Context, tb *demo.Testbed, b *baselines, cfg config, res *pfcpResult, persist, last bool) (err error) {
	n := cfg.pfcpSessions
	u, err := tb.OpenUPF(uint32(res.maxSessions))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, u.Close()) }()
	var dir string
	if persist {
		if dir, err = os.MkdirTemp("", "xdp5g-bench-pfcp-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	sv, err := servePFCP(u.Store, dir, nil, nil)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, sv.stop()) }()
	smf, srv := sv.smf, sv.srv
	establishments, err := smf.Establishments(demo.GNBAddr, demo.QFI)
	if err != nil {
		return err
	}
	establishment := func(i int, b []byte) ([]byte, error) {
		return establishments.Append(b, cpSEID(i), ueAddr(i), teid(i)), nil
	}

	ups := make([]pfcptest.Session, n) // what the UPF chose for each
	round := establishRound{persist: persist, rts: make([]time.Duration, 0, n)}
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
	if u.Store.Len() != n {
		return fmt.Errorf("%d sessions established, %d in the store", n, u.Store.Len())
	}
	progress("PFCP: %d sessions in %s: %.0f/s", n, round.took.Round(time.Millisecond), round.rate())
	if persist {
		round.stateBytes = sv.log.Size()
		sv.log.CompactNow()
		round.snapshotBytes = sv.log.Size()
	}
	res.rounds = append(res.rounds, round)
	if !last {
		return nil
	}

	progress("per-packet cost with %d sessions established over PFCP", n)
	res.cost.install = round.took
	if err := measureInstalled(ctx, tb, b, u, &res.cost, func(i int) uint32 { return ups[i].TEID }, cfg.flows, cfg.runs, nil); err != nil {
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
	progress("PFCP: restarting the UPF with its %d sessions", u.Store.Len())
	res.restart, err = restart(u, dir, sv)
	return err
}

// restart stops the PFCP server and its handler, drops the store, and
// measures a restart from the state on disk: reading it, the store taking
// the sessions over, the handler and the server starting with them, until
// PFCP is served (as a daemon restarting does, but for the process's start
// and the attachment of the data path, which the pinned links make quick).
func restart(u *demo.UPF, dir string, old *served) (run restartRun, err error) {
	run.sessions = u.Store.Len()
	recovery := old.srv.Recovery()
	if err := old.stop(); err != nil {
		return run, err
	}
	u.Store = nil // what the new process does not have
	runtime.GC()
	debug.FreeOSMemory()

	defer gcpace.Pause()() // as the daemon restores
	began := time.Now()
	st, saved := pfcp.NewState(), n4.NewSaved()
	l, rec, err := n4state.Open(n4state.Options{Dir: dir}, func(kind byte, value []byte) error {
		if ok, err := st.Replay(kind, value); ok {
			return err
		}
		_, err := saved.Replay(kind, value)
		return err
	})
	if err != nil {
		return run, err
	}
	if err := saved.Finish(); err != nil || !rec.Restored {
		return run, errors.Join(fmt.Errorf("the state was not restored: %s", rec.Reason), err, l.Close())
	}
	run.stateBytes, run.read = rec.Bytes, time.Since(began)
	u.Store = session.NewStore(u.Datapath, u.Resolver, nil)
	restored, err := u.Store.Restore(nil, saved.Kept())
	if err != nil {
		return run, errors.Join(err, l.Close())
	}
	run.takeOver = time.Since(began) - run.read
	sv, err := servePFCP(u.Store, "", l, &restoredState{st, saved})
	if err != nil {
		return run, errors.Join(err, l.Close())
	}
	run.took = time.Since(began)
	run.kept, run.repaired = restored.Kept, len(restored.Repaired)
	run.sameRecovery = sv.srv.Recovery().Equal(recovery)
	progress("PFCP: restarted in %s: %d of %d sessions taken over in place, %d installed again",
		run.took.Round(time.Millisecond), run.kept, run.sessions, run.repaired)
	return run, sv.stop()
}

// restoredState is what a restart takes up.
type restoredState struct {
	server   *pfcp.State
	sessions *n4.Saved
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

// served is PFCP served over a store, with an SMF associated, and the
// journal of its state (nil without).
type served struct {
	smf     *pfcptest.SMF
	srv     *pfcp.Server
	log     *n4state.Log
	stopped sync.Once
}

// stop stops it all, the first time.
func (s *served) stop() (err error) {
	s.stopped.Do(func() {
		err = s.srv.Close()
		if s.smf != nil {
			err = errors.Join(err, s.smf.Close())
		}
		err = errors.Join(err, s.log.Close())
	})
	return err
}

// servePFCP serves N4 on a loopback port over store, as the daemon does
// (without a UE pool: the SMF gives the addresses), keeping its state in
// dir ("": none), and associates an SMF with it. A restart gives the
// journal it read (log) and what it restored instead, and gets no SMF.
func servePFCP(store *session.Store, dir string, log *n4state.Log, restored *restoredState) (*served, error) {
	if dir != "" {
		var err error
		if log, _, err = n4state.Open(n4state.Options{Dir: dir}, nil); err != nil {
			return nil, err
		}
	}
	sv := &served{log: log}
	ncfg, pcfg := n4.Config{Store: store, N3: []netip.Addr{demo.N3Addr}, Journal: log}, pfcp.Config{Journal: log}
	if restored != nil {
		ncfg.Restored, pcfg.Restored = restored.sessions, restored.server
	}
	handler := n4.New(ncfg)
	// No heartbeats: they would go to port 8805 of the SMF's host, where
	// the bench does not listen.
	pcfg.Listen, pcfg.NodeID, pcfg.Features = "127.0.0.1:0", "upf.xdp5g.bench", []pfcp.UPFeature{pfcp.FeatureFTUP}
	pcfg.HeartbeatInterval, pcfg.Handler = time.Hour, handler
	var err error
	if sv.srv, err = pfcp.New(pcfg); err != nil {
		return nil, errors.Join(err, log.Close())
	}
	log.Compact(sv.srv.Snapshot, handler.Snapshot)
	if restored != nil {
		return sv, nil
	}
	if sv.smf, err = pfcptest.NewSMF("smf.xdp5g.bench", sv.srv.Addr()); err != nil {
		return nil, errors.Join(err, sv.stop())
	}
	if _, err := sv.smf.Associate(); err != nil {
		return nil, errors.Join(err, sv.stop())
	}
	return sv, nil
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
