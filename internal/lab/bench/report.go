package bench

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/platform/gcpace"
	"github.com/xdp5g/xdp5g/internal/upf/pfcp"
)

// The papers the reports cite, by title.
const (
	smartNIC   = `"XDP-Based SmartNIC Hardware Performance Acceleration for Next-Generation Networks"`
	edgeToCore = `"Towards an FPGA-Accelerated Programmable Data Path for Edge-to-Core Communications in 5G Networks"`
	pranavam   = `"Towards an eBPF+XDP based Framework for Open, Programmable and Scalable NextG RANs"`
)

// Targets of the UPF: per-packet cost as a multiple of the XDP_TX
// baseline with one session and with a million, testbed rate as a share of
// the redirect baseline's.
const (
	targetOneSession = 2.5
	targetMillion    = 3
	targetN9Relay    = 2.5 // with one session and with a million
	targetBranching  = 1.3 // of the single PDR the branch stands for
	targetRate       = 0.85
	targetAttached   = 2.0 // bpf_stats of the attached program, one session, over the XDP_TX baseline's
	targetFloor      = 1.3 // own cost over the two-read floor's, frames over targetFloorFlows of a million
	targetFloorFlows = 65536

	targetEstablishRate = 20_000 // sessions/s
	targetPersistRatio  = 0.85   // of the establishment rate without persistence
	targetRestart       = 10 * time.Second
	targetPacedP99      = time.Millisecond
	targetPacedRate     = 1000 // requests/s the p99 target holds at
)

// results are everything a run measured.
type results struct {
	costs     []costRow
	live      []liveRow
	frameLens [2]int // uplink, downlink, as the UPF receives them
	pfcp      pfcpResult
	elapsed   elapsed
}

// printer writes a line of the report.
type printer func(format string, a ...any)

func linesTo(w io.Writer) printer {
	return func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
}

var verdict = map[bool]string{true: "met", false: "**not met**"}

func report(w io.Writer, args []string, cfg config, res results) {
	p := linesTo(w)
	header(p, args, cfg, res)
	costTables(p, cfg, res.costs)
	n9Table(p, res.costs)

	live := res.live
	p("\n### Attached programs under live traffic, by bpf_stats (ns/packet)\n")
	p("run_time_ns / run_cnt of the program on the interface the traffic enters the UPF namespace by, one session installed;")
	p("median of %d rounds of %d packets, the UPF, the XDP_TX baseline (the UPF's frames sent back where they came from)", cfg.runs, statsPackets(cfg.packets))
	p("and the redirect baseline interleaved; ratios the median of the rounds' ratios.\n")
	p("| Direction | Interface | xdp5g | XDP_TX | Redirect baseline | ×XDP_TX | ×Redirect |")
	p("|---|---|---:|---:|---:|---:|---:|")
	for _, r := range live {
		p("| %s | %s | %.1f | %.1f | %.1f | %.2f | %.2f |", r.direction, r.iface, r.upf.ns.median(), r.tx.median(),
			r.baseline.ns.median(), r.upf.ns.per(r.tx), r.upf.ns.per(r.baseline.ns))
	}

	p("\n### Packet rate through the testbed\n")
	p("gNB → UPF → DN (uplink) and DN → UPF → gNB (downlink), one session; packets delivered per second while the generator")
	p("sends %d packets as fast as it can, median of %d rounds, the UPF and the redirect baseline interleaved;", cfg.packets, cfg.runs)
	p("then the UPF paced at %.0f%% of its rate for %s.\n", pacedShare*100, cfg.paced)
	p("| Direction | xdp5g Mpps | Loss | Redirect baseline Mpps | Loss | Ratio | Paced Mpps | Sent | Delivered | Lost |")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range live {
		p("| %s | %.2f | %.1f%% | %.2f | %.1f%% | %.2f | %.2f | %d | %d | %d |", r.direction, r.upf.rate.median()/1e6,
			r.upf.loss.median()*100, r.baseline.rate.median()/1e6, r.baseline.loss.median()*100, r.upf.rate.per(r.baseline.rate),
			float64(r.pacedRate)/1e6,
			r.pacedSent, r.pacedDelivered, r.pacedSent-r.pacedDelivered)
	}

	liveInstalledTable(p, cfg, res.costs)

	p("\n### Targets\n")
	costTargets(p, res.costs)
	liveTargets(p, live)
}

// liveTargets are the targets of the attached programs and the testbed rate, one session installed.
func liveTargets(p printer, live []liveRow) {
	for _, r := range live {
		attached := r.upf.ns.per(r.tx)
		p("- %s attached with 1 installed, by bpf_stats: %.3f× the XDP_TX baseline, %.3f× the redirect baseline (target ≤ %g× XDP_TX): %s",
			r.direction, attached, r.upf.ns.per(r.baseline.ns), targetAttached, verdict[attached <= targetAttached])
		ratio := r.upf.rate.per(r.baseline.rate)
		p("- %s testbed rate: %.3f× the redirect baseline (target ≥ %g×): %s", r.direction, ratio, targetRate, verdict[ratio >= targetRate])
		p("- %s paced at %.2f Mpps: %d of %d packets lost (target 0): %s", r.direction, float64(r.pacedRate)/1e6,
			r.pacedSent-r.pacedDelivered, r.pacedSent, verdict[r.pacedDelivered == r.pacedSent])
	}
}

// liveInstalledTable is the attached UPF under live traffic with each
// row's sessions installed, of the rows that measured it.
func liveInstalledTable(p printer, cfg config, costs []costRow) {
	if !slices.ContainsFunc(costs, func(r costRow) bool { return r.live != nil }) {
		return
	}
	p("\n### Attached program under live traffic with the sessions installed\n")
	p("The two measurements above, bpf_stats (ns/packet) and the testbed rate, with each row's sessions installed (the UPF")
	p("of the per-packet cost, after its rounds), on the frames of the last session installed (1 session) and spread over")
	p("min(sessions, --flows) sessions: the generator sets the low 16 bits of the uplink G-PDU's TEID and of the UE address")
	p("inside, and of the downlink packet's destination, the UE address, so each packet is another session's. They are")
	p("consecutive sessions, the last installed whose TEIDs share their upper 16 bits, taken in steps of about 5/8 of their")
	p("count, each once a cycle, rather than in turn: the rules of sessions installed one after another lie side by side, and")
	p("taken in turn their lines came in address order, as subscribers' packets do not. Reached: of the spread's sessions,")
	p("those whose uplink (downlink) PDR counted packets. Median of %d", cfg.runs)
	p("rounds of %d packets (bpf_stats) and %d (rate), the UPF's sets of frames and the redirect baseline interleaved;", statsPackets(cfg.packets), cfg.packets)
	p("×Redirect: to the redirect baseline of the same rounds, ×1 session: to the UPF's one-session figure of the same row;")
	p("the median of the rounds' ratios.\n")
	p("| Sessions | Direction | Frames of | ns/packet | ×Redirect | ×1 session | Mpps | Loss | Mpps ×Redirect | Mpps ×1 session | Reached |")
	p("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range costs {
		l := r.live
		if l == nil {
			continue
		}
		for d, name := range []string{"uplink", "downlink"} {
			base, one := l.baseline[d], l.upf[0][d]
			p("| %d | %s | redirect baseline | %.1f | | | %.2f | %.1f%% | | | |", r.sessions, name, base.ns.median(),
				base.rate.median()/1e6, base.loss.median()*100)
			p("| %d | %s | 1 session | %.1f | %.2f | | %.2f | %.1f%% | %.2f | | |", r.sessions, name, one.ns.median(),
				one.ns.per(base.ns), one.rate.median()/1e6, one.loss.median()*100, one.rate.per(base.rate))
			for s, k := range l.flows {
				sp := l.upf[s+1][d]
				p("| %d | %s | %d sessions | %.1f | %.2f | %.2f | %.2f | %.1f%% | %.2f | %.2f | %d |", r.sessions, name, k,
					sp.ns.median(), sp.ns.per(base.ns), sp.ns.per(one.ns), sp.rate.median()/1e6, sp.loss.median()*100,
					sp.rate.per(base.rate), sp.rate.per(one.rate), l.reached[s][d])
			}
		}
	}
	p("\nThe spreads' sessions (session i has TEID i+1 both ways and UE address 100.64.0.0 + i+1):")
	for _, r := range costs {
		l := r.live
		if l == nil {
			continue
		}
		for s, k := range l.flows {
			p("- %d installed, over %d: sessions %d to %d", r.sessions, k, l.first[s], l.first[s]+k-1)
		}
		for _, count := range cfg.flows {
			if k := min(r.sessions, count); k > 1 && !slices.Contains(l.flows, k) {
				p("- %d installed, over %d: not measured, no %d consecutive sessions' TEIDs share their upper 16 bits", r.sessions, k, k)
			}
		}
	}
}

var yesNo = map[bool]string{false: "no", true: "yes"}

// perSession is a size per session.
func perSession(bytes int64, sessions int) string {
	if sessions == 0 {
		return "–"
	}
	return fmt.Sprintf("%d B", bytes/int64(sessions))
}

// reportPFCP is the report of `xdp5g-lab bench --pfcp`.
func reportPFCP(w io.Writer, args []string, cfg config, res results) {
	p := linesTo(w)
	header(p, args, cfg, res)
	r := res.pfcp
	n := r.cost.sessions
	p("\n### PFCP session establishment\n")
	p("A pfcp.Server with the n4 handler over the session store, on 127.0.0.1, the data path sized for %d sessions; an SMF", r.maxSessions)
	p("(pfcptest) on another socket sends %d Session Establishment Requests shaped as Open5GS's (uplink PDR with F-TEID CHOOSE", n)
	p("and the UE address given, downlink PDR, a FAR to the core, a FAR tunnelling to the gNB, and the SMF's own: a PDR from the")
	p("CP function on an F-TEID of its own, a PDR of router solicitations before the uplink's, a FAR tunnelling to the SMF),")
	p("%d unanswered at most; each", r.window)
	p("round over a fresh data path and server, first keeping no state, then keeping it on disk as the daemon does (the")
	p("journal of pfcp.state_dir, in a directory of %s; state_sync off). The tenths' rates follow the order of the", os.TempDir())
	p("responses; a response time runs from sending the request to reading its response, the wait behind the window's")
	p("other requests included. The Go collector")
	settings, _ := collector()
	p("runs as in the daemon: %s. Stolen: %s. State: the journal's files after the round, then after a compaction", settings, stolenMeaning)
	p("(a snapshot of the sessions alone), per session.\n")
	p("| Round | State kept | Time | Stolen | Sessions/s | Slowest tenth | Median tenth | Fastest tenth | Response p50 | p99 | Max | State | Compacted |")
	p("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for i, e := range r.rounds {
		state, compacted := "–", "–"
		if e.persist {
			state, compacted = perSession(e.stateBytes, len(e.rts)), perSession(e.snapshotBytes, len(e.rts))
		}
		p("| %d | %s | %.2f s | %.2f s | %.0f | %.0f | %.0f | %.0f | %s | %s | %s | %s | %s |", i/2+1, yesNo[e.persist], e.took.Seconds(),
			e.stolen.Seconds(), e.rate(), slices.Min(e.tenths), median(e.tenths), slices.Max(e.tenths), ms(percentile(e.rts, 50)),
			ms(percentile(e.rts, 99)), ms(percentile(e.rts, 100)), state, compacted)
	}
	rate, bare := r.medianRate(true), r.medianRate(false)
	p("\nMedians of the rounds: %.0f sessions/s keeping the state, %.0f without (%.3f×).", rate, bare, rate/bare)
	rs := r.restart
	p("\n### PFCP restart\n")
	p("The last round's UPF stopped, its store dropped and the heap collected, then started again from the state on disk")
	p("(%.1f MB, %s): reading and replaying it took %.2f s, the store's taking over the sessions in the data path %.2f s;",
		float64(rs.stateBytes)/1e6, perSession(rs.stateBytes, rs.sessions), rs.read.Seconds(), rs.takeOver.Seconds())
	p("PFCP was served %.2f s after the start, with %d of the %d sessions taken over in place and %d installed again, the",
		rs.took.Seconds(), rs.kept, rs.sessions, rs.repaired)
	p("Recovery Time Stamp %s. The daemon adds its own start and the attachment of the data path.", map[bool]string{true: "kept", false: "**changed**"}[rs.sameRecovery])

	costTables(p, cfg, []costRow{r.cost})
	p("\nThe sessions are those the last round established over PFCP (Install: its time), with the TEIDs the UPF chose.")

	p("\n### PFCP requests paced at %d/s\n", r.rate)
	p("Over the sessions above, requests take turns: establishing a new session, moving the downlink tunnel of one")
	p("established above to another TEID (Update FAR with new Outer Header Creation), deleting that session. The requests go")
	p("out %s apart whatever the responses (%d unanswered at most); response times as above. Three runs: first Heartbeat",
		time.Second/time.Duration(r.rate), r.window)
	p("Requests alone for %s a round, the least a request can ask through the same socket, parser, server and encoder: the", cfg.paced)
	p("floor that the host and the process set under every request. Then two, each on sessions of its own: one as the")
	p("process comes for %s a round, which the latency target judges (at this rate a million sessions' heap needs a", cfg.steady)
	p("collection about every ten minutes), and one for %s a round forcing a collection as its requests start, which marks", cfg.paced)
	p("every session the process holds, for seconds at a million sessions, on the CPUs the requests need too. The three")
	p("take turns for %d rounds; the table has the rounds' requests together (times, collections and Stolen, as above,", cfg.pacedRounds)
	p("added up). Slowed: the share of the 5 ms ticks of the runs in which a fixed loop of about 20 µs took over %d times", slowOver)
	p("its median, the host having slowed the CPUs down or taken them away, which Stolen mostly misses.\n")
	p("| Run | Took | Stolen | Slowed | Collections finished | Request | Count | p50 | p99 | Max |")
	p("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|")
	var pooled [len(pacedRuns)]pacedRun
	for i, rounds := range r.paced {
		pooled[i] = pool(rounds)
		run := pooled[i]
		row := func(kind string, rts []time.Duration) {
			p("| %s | %.2f s | %.2f s | %.1f%% | %d | %s | %d | %s | %s | %s |", pacedRuns[i].name, run.took.Seconds(),
				run.stolen.Seconds(), run.share(), run.collections, kind, len(rts),
				ms(percentile(rts, 50)), ms(percentile(rts, 99)), ms(percentile(rts, 100)))
		}
		for _, kind := range pacedRuns[i].kinds {
			row(kind, run.rts[kind])
		}
		if len(pacedRuns[i].kinds) > 1 {
			row("all", run.all())
		}
	}
	p("\nThe UPF's own handling of the same requests, from reading a request off its socket to sending the response (parsing,")
	p("the wait for the worker if requests were queued, the handling, the encoding; pfcp.Stats.Handling, whose buckets are")
	p("5.9%% wide: each figure is its bucket's upper bound). The response times above add the SMF's side: the loopback and")
	p("its own goroutines, which share the process, its collections and the two CPUs with the UPF. A host that stalls the")
	p("machine for tens of milliseconds now and then puts the p99 of a round of seconds far off the others'. The targets")
	p("take the p99 of the rounds' requests together, minutes of them as the process comes, in which such a stall delays")
	p("a few dozen of a hundred thousand and more.\n")
	p("| Run | p50 | p99 | p99 of each round | Max |")
	p("|---|---:|---:|---|---:|")
	var handlingP99s, p99s [len(pacedRuns)]time.Duration
	for i, rounds := range r.paced {
		run := pooled[i]
		handlingP99s[i], p99s[i] = pfcp.HandlingPercentile(run.handling, 99), percentile(run.all(), 99)
		var each []string
		for _, round := range rounds {
			each = append(each, "≤ "+ms(pfcp.HandlingPercentile(round.handling, 99)))
		}
		p("| %s | ≤ %s | ≤ %s | %s | ≤ %s |", pacedRuns[i].name, ms(pfcp.HandlingPercentile(run.handling, 50)), ms(handlingP99s[i]),
			strings.Join(each, ", "), ms(pfcp.HandlingPercentile(run.handling, 100)))
	}

	p("\n### Targets\n")
	p("- establishment rate over PFCP keeping the state, %d sessions, median of %d rounds: %.0f sessions/s (target ≥ %d/s): %s",
		n, len(r.rounds)/2, rate, targetEstablishRate, verdict[rate >= targetEstablishRate])
	p("- the same against the rate keeping none, %.0f sessions/s: %.3f× (target ≥ %g×): %s", bare, rate/bare,
		targetPersistRatio, verdict[rate/bare >= targetPersistRatio])
	p("- restart to PFCP served with %d sessions: %.2f s (target < %s): %s", rs.sessions, rs.took.Seconds(), targetRestart,
		verdict[rs.took < targetRestart && rs.kept+rs.repaired == rs.sessions && rs.sameRecovery])
	costTargets(p, []costRow{r.cost})
	for i, run := range pacedRuns {
		if !run.overSessions() {
			p("- p99 of the UPF's handling of heartbeats alone at %d requests/s, %s, the floor under the targets below: ≤ %s; "+
				"at the SMF %s", r.rate, together(cfg, run, len(r.paced[i])), ms(handlingP99s[i]), ms(p99s[i]))
		}
	}
	_, paced := collector()
	for i, run := range pacedRuns {
		if !run.overSessions() {
			continue
		}
		line := fmt.Sprintf("- p99 of the UPF's handling at %d requests/s, %s, %s: ≤ %s", r.rate, run.name,
			together(cfg, run, len(r.paced[i])), ms(handlingP99s[i]))
		if run.collect && paced {
			p("%s, the window a collection marks in; no target, as its requests are under 1%% of those over the minutes "+
				"between collections; at the SMF %s", line, ms(p99s[i]))
			continue
		}
		p("%s (target < %s at %d/s): %s; at the SMF %s (the bench's own, in the same process, no target)", line,
			ms(targetPacedP99), targetPacedRate, verdict[handlingP99s[i] < targetPacedP99 && r.rate >= targetPacedRate], ms(p99s[i]))
	}
}

// together names the requests of a paced run's rounds taken together.
func together(cfg config, run pacedRunSpec, rounds int) string {
	return fmt.Sprintf("%d rounds of %s together (%d requests)", rounds, run.length(cfg), rounds*run.requests(cfg))
}

// collector describes the garbage collector's settings, and says whether
// gcpace paces it: then a collection comes about every ten minutes at a
// thousand requests a second, and the window a forced one marks in holds
// under 1% of the requests.
func collector() (settings string, paced bool) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(s)
	gogc, limit := s[0].Value.Uint64(), s[1].Value.Uint64()
	gib := float64(limit) / (1 << 30)
	switch {
	case gogc == math.MaxUint64: // off
		return fmt.Sprintf("GOGC off, and a soft memory limit that gcpace sets after each collection to what GOGC %d "+
			"would let the heap reach (now %.1f GiB)", gcpace.Percent, gib), true
	case limit == math.MaxInt64:
		return fmt.Sprintf("GOGC %d, no memory limit", gogc), false
	}
	return fmt.Sprintf("GOGC %d, a soft memory limit of %.1f GiB", gogc, gib), false
}

// elapsed is how long a benchmark took, and the CPU time the hypervisor
// took from the machine's CPUs meanwhile, all together.
type elapsed struct{ took, stolen time.Duration }

// clock starts timing a benchmark: what it returns says what has elapsed
// since.
func clock() func() elapsed {
	start, stolenBefore := time.Now(), stolen()
	return func() elapsed { return elapsed{time.Since(start), stolen() - stolenBefore} }
}

// headline is a report's first line: the command, the machine, and what
// the run took.
func headline(args []string, e elapsed) string {
	return fmt.Sprintf("`xdp5g-lab bench %s` on %s; took %s, %.2f s of CPU time stolen by the hypervisor meanwhile.",
		strings.Join(args, " "), machine(), e.took.Round(time.Second), e.stolen.Seconds())
}

// stolenMeaning says what the Stolen columns are.
const stolenMeaning = "the CPU time the hypervisor took from this machine's CPUs meanwhile, all together, in 10 ms ticks " +
	"(steal in /proc/stat; 0 where the hypervisor does not say)"

// stolen is the CPU time the hypervisor has taken from the machine's CPUs
// since it started, all together (0 where it does not say).
func stolen() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	// cpu user nice system idle iowait irq softirq steal ..., in USER_HZ
	// ticks, 100 a second.
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0
	}
	ticks, _ := strconv.ParseUint(fields[8], 10, 64)
	return time.Duration(ticks) * 10 * time.Millisecond
}

// ms formats a duration in milliseconds.
func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", d.Seconds()*1e3) }

// header is the report's first lines: the command, the machine and the
// frames.
func header(p printer, args []string, cfg config, res results) {
	p("%s", headline(args, res.elapsed))
	p("\nUplink frames are G-PDUs with an UL PDU Session Container around a UDP/IPv4 packet (%d bytes), downlink frames", res.frameLens[0])
	p("that UDP/IPv4 packet (%d bytes); every session has one uplink PDR (TEID, UE address, QFI) and one downlink PDR", res.frameLens[1])
	p("(UE address, marks the QFI), uplink forwarded by the route to the DN, downlink tunnelled to the gNB.")
	if cfg.open5gs {
		p("The sessions have Open5GS's whole shape (--open5gs): those two PDRs at precedence 65535 under a QER (the session's")
		p("AMBR, 10 Gbit/s) and a URR (volume, no limits), and the SMF's own: a PDR from the CP function on an F-TEID of its own,")
		p("and one of router solicitations on the uplink F-TEID (an SDF filter, precedence 255), tunnelled to the SMF.")
	}
}

// costTables are the per-packet costs with the sessions of each row
// installed.
func costTables(p printer, cfg config, costs []costRow) {
	p("\n### Per-packet cost by BPF_PROG_TEST_RUN (ns/packet)\n")
	p("Each run is a test run of its own on a fresh frame, timed by the kernel; the mean of %d runs without outliers per round,", runsPerRound)
	p("the median of %d rounds with the programs interleaved, ratios the median of the rounds' ratios. The UPF's frames are", cfg.runs)
	p("those of the last session installed; the empty program (XDP_PASS) shows what the test run itself costs, in every figure.")
	p("The rounds start after a forced garbage collection, so that the bench's collector does not mark the installed sessions")
	p("on the other CPU meanwhile.\n")
	p("| Sessions | Install | Sessions/s | Empty | XDP_TX | Redirect | Uplink | ×TX | ×Redirect | Downlink | ×TX | ×Redirect |")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range costs {
		p("| %d | %.2f s | %.0f | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.1f | %.2f | %.2f |", r.sessions,
			r.install.Seconds(), float64(r.sessions)/r.install.Seconds(), r.empty.median(), r.tx.median(), r.redirect.median(),
			r.uplink.median(), r.uplink.per(r.tx), r.uplink.per(r.redirect),
			r.downlink.median(), r.downlink.per(r.tx), r.downlink.per(r.redirect))
	}
	p("\nThe keys (TEIDs and UE addresses) without a record, whose packets all take their PDR set (the CP function's")
	p("F-TEIDs take none, their places left to subscribers' traffic):")
	for _, r := range costs {
		cp := ""
		if r.unrecorded > 0 {
			cp = fmt.Sprintf(", and the CP function's %d", r.unrecorded)
		}
		p("- %d of the %d keys with %d installed%s", r.keys-r.records-r.unrecorded, r.keys-r.unrecorded, r.sessions, cp)
	}
	p("\nThe same rounds with the UPF's frames cycling over min(sessions, --flows) sessions, a random sample of those installed in")
	p("random order:")
	p("every packet another session, so the figures add the cache and TLB misses of the session tables. ×1 miss and ×2 misses:")
	p("the ratio to the memory floor's one and two dependent reads over a table of the UPF's PDR table's size, with the")
	p("downlink's frames (below).\n")
	p("| Sessions | Flows | Uplink | ×TX | ×1 miss | ×2 misses | Downlink | ×TX | ×1 miss | ×2 misses |")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range costs {
		for _, sp := range r.spread {
			p("| %d | %d | %.1f | %.2f | %.2f | %.2f | %.1f | %.2f | %.2f | %.2f |", r.sessions, sp.flows,
				sp.uplink.median(), sp.uplink.per(r.tx), sp.uplink.per(sp.floor.one), sp.uplink.per(sp.floor.two),
				sp.downlink.median(), sp.downlink.per(r.tx), sp.downlink.per(sp.floor.one), sp.downlink.per(sp.floor.two))
		}
	}
	p("\nThe same less the empty program: what the programs themselves cost. XDP_TX is within the noise of the empty")
	p("program here, so ratios to it would mean nothing; the spread figures' ratios are to the one-session figure.\n")
	p("| Sessions | XDP_TX | Redirect | Uplink | ×Redirect | Downlink | ×Redirect | Flows | Uplink, spread | ×1 session | Downlink, spread | ×1 session |")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range costs {
		rd, ul, dl := r.redirect.minus(r.empty), r.uplink.minus(r.empty), r.downlink.minus(r.empty)
		for i, sp := range r.spread {
			first := fmt.Sprintf("| %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f", r.sessions, r.tx.minus(r.empty).median(), rd.median(),
				ul.median(), ul.per(rd), dl.median(), dl.per(rd))
			if i > 0 {
				first = "| | | | | | |"
			}
			sul, sdl := sp.uplink.minus(r.empty), sp.downlink.minus(r.empty)
			p("%s | %d | %.1f | %.2f | %.1f | %.2f |", first, sp.flows, sul.median(), sul.per(ul), sdl.median(), sdl.per(dl))
		}
	}
	floorTable(p, costs)
}

// floorTable is the memory floor of every row, less the empty program.
func floorTable(p printer, costs []costRow) {
	p("\n### The memory floor (ns/packet, less the empty program)\n")
	p("XDP_TX after a chain of dependent reads of 64-byte lines of an array as large as the UPF's PDR table (Lines), the first")
	p("line chosen by the frame's UE address, each next by the value the one before returned: the least a lookup of one or two")
	p("reads can cost. With one session's frame every read hits the cache; spread over many sessions, each misses it, and")
	p("once the table outgrows what the TLB maps, each walks the page table too. Two in a page: the second read in the first's")
	p("4 KiB page, another cache line but no second page walk. Counted: the two reads, then a packet and byte count in the")
	p("second line's row of the CPU's, as the UPF counts per PDR. Not mmapable: the two reads over the same table created")
	p("without BPF_F_MMAPABLE (the UPF's lookup tables have it).\n")
	p("| Sessions | Lines | Flows | XDP_TX | One read | Two reads | Two in a page | Two, counted | Two, not mmapable |")
	p("|---:|---:|---|---:|---:|---:|---:|---:|---:|")
	for _, r := range costs {
		own := func(x rounds) string {
			if len(x) == 0 {
				return "–"
			}
			return fmt.Sprintf("%.1f", x.minus(r.empty).median())
		}
		tx := own(r.tx)
		p("| %d | %d | 1 session | %s | %s | %s | – | – | – |", r.sessions, r.floorLines, tx, own(r.floor.one), own(r.floor.two))
		for _, sp := range r.spread {
			p("| %d | %d | %d | %s | %s | %s | %s | %s | %s |", r.sessions, r.floorLines, sp.flows, tx, own(sp.floor.one),
				own(sp.floor.two), own(sp.floor.twoNear), own(sp.floor.twoCount), own(sp.floor.twoPlain))
		}
	}
}

// n9Table is the per-packet cost of the N9 sessions, of the rows that
// measured it.
func n9Table(p printer, costs []costRow) {
	if !slices.ContainsFunc(costs, func(r costRow) bool { return r.n9 != nil }) {
		return
	}
	p("\n### Per-packet cost of the N9 sessions, by BPF_PROG_TEST_RUN (ns/packet)\n")
	p("The same rounds, with min(sessions, the fewest of --flows) sessions of two more kinds installed after the others: an I-UPF's, whose")
	p("uplink is relayed over N9 (GTP-U in, GTP-U out, in an UL PDU Session Container), and a branching point's, whose")
	p("uplink F-TEID has two PDRs, the first (precedence 30, an SDF filter of the local destination) out of N6, the second")
	p("over N9. The relay is compared with XDP_TX; each branch with the single PDR doing the same: the local one with the")
	p("uplink, the one past the filter with the relay.\n")
	p("| Sessions | XDP_TX | N9 relay | ×TX | Relay, spread | ×TX | Branch, local | ×Uplink | Branch, over N9 | ×Relay |")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range costs {
		if n := r.n9; n != nil {
			p("| %d | %.1f | %.1f | %.2f | %.1f | %.2f | %.1f | %.2f | %.1f | %.2f |", r.sessions, r.tx.median(),
				n.relay.median(), n.relay.per(r.tx), n.relaySpread.median(), n.relaySpread.per(r.tx),
				n.branchLocal.median(), n.branchLocal.per(r.uplink), n.branchCentral.median(), n.branchCentral.per(n.relay))
		}
	}
	p("\nThe same less the empty program: what the programs themselves cost, next to the plain uplink's.\n")
	p("| Sessions | Uplink | N9 relay | Relay, spread | Branch, local | Branch, over N9 |")
	p("|---:|---:|---:|---:|---:|---:|")
	for _, r := range costs {
		if n := r.n9; n != nil {
			p("| %d | %.1f | %.1f | %.1f | %.1f | %.1f |", r.sessions, r.uplink.minus(r.empty).median(), n.relay.minus(r.empty).median(),
				n.relaySpread.minus(r.empty).median(), n.branchLocal.minus(r.empty).median(), n.branchCentral.minus(r.empty).median())
		}
	}
}

// costTargets are the per-packet cost targets of the rows they concern.
func costTargets(p printer, costs []costRow) {
	for _, r := range costs {
		if n := r.n9; n != nil && (r.sessions == 1 || r.sessions == 1_000_000) {
			ratio := n.relay.per(r.tx)
			p("- N9 relay with %d installed: %.3f× XDP_TX (target ≤ %g×): %s", r.sessions, ratio, targetN9Relay, verdict[ratio <= targetN9Relay])
		}
		if n := r.n9; n != nil {
			for _, b := range []struct {
				name       string
				ns, single rounds
			}{{"local", n.branchLocal, r.uplink}, {"over N9", n.branchCentral, n.relay}} {
				ratio := b.ns.per(b.single)
				p("- branching PDRs, %s, with %d installed: %.3f× the single PDR (target ≤ %g×): %s", b.name, r.sessions, ratio,
					targetBranching, verdict[ratio <= targetBranching])
			}
		}
	}
	for _, r := range costs {
		target := map[int]float64{1: targetOneSession, 1_000_000: targetMillion}[r.sessions]
		if target == 0 {
			continue
		}
		for _, d := range []struct {
			name string
			ns   rounds
		}{{"uplink", r.uplink}, {"downlink", r.downlink}} {
			ratio := d.ns.per(r.tx)
			p("- %s with %d installed: %.3f× XDP_TX (target ≤ %g×): %s", d.name, r.sessions, ratio, target, verdict[ratio <= target])
		}
	}
	for _, r := range costs {
		for _, sp := range r.spread {
			if r.sessions != 1_000_000 || sp.flows != targetFloorFlows {
				continue
			}
			floor := sp.floor.two.minus(r.empty)
			for _, d := range []struct {
				name string
				ns   rounds
			}{{"uplink", sp.uplink}, {"downlink", sp.downlink}} {
				ratio := d.ns.minus(r.empty).per(floor)
				p("- %s over %d of %d installed, less the empty program: %.3f× the two-read floor (target ≤ %g×): %s", d.name,
					sp.flows, r.sessions, ratio, targetFloor, verdict[ratio <= targetFloor])
			}
		}
	}
}

// machine describes the CPUs and the kernel.
func machine() string {
	var u unix.Utsname
	unix.Uname(&u)
	model := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		for s := bufio.NewScanner(f); s.Scan(); {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%d × %s, Linux %s", runtime.NumCPU(), model, unix.ByteSliceToString(u.Release[:]))
}
