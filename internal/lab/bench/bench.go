// Package bench is `xdp5g-lab bench`: what the UPF data path costs per packet
// and how many packets it forwards, each next to minimal XDP forwarders
// measured in the same run, as a markdown report.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/spf13/pflag"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/lab/baseline"
)

type config struct {
	sessions []int
	runs     int
	flows    []int
	packets  uint64
	paced    time.Duration // of the testbed rate, or with pfcp of the heartbeats and the forced collection

	ipv6Transport bool // GTP-U over IPv6 between the gNB and the UPF
	open5gs       bool // sessions of Open5GS's whole shape
	dupl          bool // measure duplication (DUPL) instead

	classify      bool // measure the classifier instead
	classifyRules []int

	chain bool // measure the UPF's chains of stages instead

	slicing bool   // measure slicing, steering and offload instead
	charts  string // directory for the charts of --slicing; none if empty
	// measure priority and offload with GTP-U through the UPF instead
	slicingUPF bool

	cuup        bool // measure the CU-UP instead
	cuupFlows   []int
	cuupPackets uint64
	cuupRounds  int
	cuupSize    int

	restarts     int    // restart the daemon this many times under traffic instead
	restartsRate uint64 // packets per second each way meanwhile

	pfcp         bool // measure PFCP session handling instead
	pfcpSessions int
	pfcpRounds   int
	pacedRounds  int           // of the paced PFCP runs
	steady       time.Duration // of each round of the paced PFCP run as the requests come
	window       int
	rate         int
}

// quickValues replace the defaults of the flags not given with --quick.
var quickValues = map[string]string{"sessions": "1,1000,100000", "runs": "5", "packets": "2000000", "paced": "1s",
	"pfcp-sessions": "100000", "pfcp-paced-rounds": "1", "pfcp-steady": "5s", "cuup-packets": "2000000", "cuup-rounds": "2"}

// Flags are the flags of `xdp5g-lab bench`, declared on a flag set by
// AddFlags; Run measures as they were given.
type Flags struct {
	fs                             *pflag.FlagSet
	cfg                            config
	sessions, flows, classifyRules string
	cuupFlows                      string
	quick                          bool
}

// AddFlags declares the flags of `xdp5g-lab bench` on fs.
func AddFlags(fs *pflag.FlagSet) *Flags {
	f := &Flags{fs: fs}
	fs.SortFlags = false // the help lists them by suite, as declared here
	cfg := &f.cfg
	fs.StringVar(&f.sessions, "sessions", "1,1000,100000,1000000", "installed `counts` of sessions to measure the per-packet cost with, and the attached program and the testbed rate under live traffic")
	fs.IntVar(&cfg.runs, "runs", 9, "interleaved rounds of every measurement; the median is reported")
	fs.StringVar(&f.flows, "flows", "4096,65536", "`counts` of sessions the per-packet cost's frames cycle over, and the live traffic's (consecutive sessions whose TEIDs share their upper 16 bits)")
	fs.Uint64Var(&cfg.packets, "packets", 4_000_000, "packets per direction and round of the testbed rate, one session installed and with each count of --sessions")
	fs.DurationVar(&cfg.paced, "paced", 3*time.Second, "length of the paced run below saturation (of packets, or with --pfcp of each round of heartbeats and of requests with a collection forced)")
	fs.BoolVar(&cfg.ipv6Transport, "ipv6-transport", false, "tunnel over IPv6 between the gNB and the UPF in the per-packet cost and the rate (the UPF's N3 address and the gNB's IPv6)")
	fs.BoolVar(&cfg.open5gs, "open5gs", false, "install sessions of Open5GS's whole shape in the per-packet cost and the rate: 4 PDRs (2 of the SMF's own), 3 FARs, a QER and a URR (and no N9 sessions)")
	fs.BoolVar(&cfg.pfcp, "pfcp", false, "measure PFCP session handling instead: establishment rate, per-packet cost, paced request latency")
	fs.IntVar(&cfg.pfcpSessions, "pfcp-sessions", 1_000_000, "sessions established over PFCP with --pfcp")
	fs.IntVar(&cfg.pfcpRounds, "pfcp-rounds", 3, "rounds of establishing the sessions, each over a fresh data path; the median rate is reported")
	fs.IntVar(&cfg.window, "pfcp-window", 64, "PFCP requests sent and not yet answered, at most")
	fs.IntVar(&cfg.rate, "pfcp-rate", 1000, "PFCP requests per second of the paced run")
	fs.IntVar(&cfg.pacedRounds, "pfcp-paced-rounds", 3, "interleaved rounds of the paced PFCP runs; the p99 of their requests together is reported")
	fs.DurationVar(&cfg.steady, "pfcp-steady", time.Minute, "length of each round of the paced PFCP run as the requests come, which the latency target judges; the other paced runs last --paced")
	fs.IntVar(&cfg.restarts, "restarts", 0, "restart the daemon (bin/xdp5g, next to xdp5g-lab) this many times instead, half of them with SIGKILL, under traffic and PFCP requests, and check that nothing is lost")
	fs.Uint64Var(&cfg.restartsRate, "restarts-rate", 10_000, "packets per second each way through a session during --restarts")
	fs.BoolVar(&cfg.dupl, "dupl", false, "measure duplication (DUPL) instead: per-packet cost and rate of FARs that copy every packet to an LI collector, against the same FARs without")
	fs.BoolVar(&cfg.classify, "classify", false, "measure the classifier instead: per-packet cost by traffic type and rule count, rule insertion")
	fs.StringVar(&f.classifyRules, "classify-rules", "0,1,512,8192,65536", "installed `counts` of rules to measure the classifier with")
	fs.BoolVar(&cfg.chain, "chain", false, "measure the UPF's chains of stages instead: the classifier and the steer stage in front of the UPF per packet (with --classify-rules), and the balance of one tunnel's inner flows over the CPUs")
	fs.BoolVar(&cfg.slicing, "slicing", false, "measure slicing instead: priority and offload under load, delay and jitter per slice")
	fs.BoolVar(&cfg.slicingUPF, "slicing-upf", false, "measure priority and offload with GTP-U through the UPF instead: the UPF on the receiving interface with the stages classify, steer, upf, one session per service")
	fs.StringVar(&cfg.charts, "charts", "", "existing `directory` to write the charts of --slicing to, as SVG")
	fs.BoolVar(&cfg.cuup, "cuup", false, "measure the CU-UP instead: downlink throughput of its AF_XDP and socket paths, CPU per packet and Gbit/s per core with NEA2 and NIA2")
	fs.StringVar(&f.cuupFlows, "cuup-flows", "1,2,4,8", "`counts` of parallel flows of one UE the CU-UP's paths are compared with")
	fs.Uint64Var(&cfg.cuupPackets, "cuup-packets", 6_000_000, "packets per measurement of --cuup through a path; an eighth of it through the stack alone")
	fs.IntVar(&cfg.cuupRounds, "cuup-rounds", 5, "interleaved rounds of --cuup; the median is reported")
	fs.IntVar(&cfg.cuupSize, "cuup-size", 1400, "octets of the user packets of --cuup, IP header included")
	var quickArgs []string
	for _, name := range slices.Sorted(maps.Keys(quickValues)) {
		quickArgs = append(quickArgs, "--"+name+" "+quickValues[name])
	}
	fs.BoolVar(&f.quick, "quick", false, "a short run: "+strings.Join(quickArgs, " ")+" unless given")
	return f
}

// given is the flags in the order they were given, a command line that
// repeats the run.
func (f *Flags) given() []string {
	var args []string
	f.fs.Visit(func(fl *pflag.Flag) {
		switch {
		case fl.Value.Type() != "bool":
			args = append(args, "--"+fl.Name, fl.Value.String())
		case fl.Value.String() == "true":
			args = append(args, "--"+fl.Name)
		default:
			args = append(args, "--"+fl.Name+"="+fl.Value.String())
		}
	})
	return args
}

// config applies --quick to the flags not given and checks the values.
func (f *Flags) config() (cfg config, err error) {
	if f.quick {
		for name, v := range quickValues {
			if !f.fs.Changed(name) {
				if err := f.fs.Set(name, v); err != nil {
					return cfg, err
				}
			}
		}
	}
	cfg = f.cfg
	if cfg.sessions, err = counts("sessions", f.sessions, 1); err != nil {
		return cfg, err
	}
	if cfg.flows, err = counts("flows", f.flows, 1); err != nil {
		return cfg, err
	}
	if cfg.classifyRules, err = counts("classify-rules", f.classifyRules, 0); err != nil {
		return cfg, err
	}
	if cfg.cuupFlows, err = counts("cuup-flows", f.cuupFlows, 1); err != nil {
		return cfg, err
	}
	if slices.Max(cfg.cuupFlows) > maxCUUPFlows {
		return cfg, fmt.Errorf("--cuup-flows: %d flows at most", maxCUUPFlows)
	}
	if cfg.cuupSize < 28 || cfg.cuupSize > maxCUUPSize {
		return cfg, fmt.Errorf("--cuup-size: %d octets, want 28 (IPv4 and UDP headers) to %d (F1-U's G-PDU within the MTU)", cfg.cuupSize, maxCUUPSize)
	}
	if cfg.cuupPackets < 1 || cfg.cuupRounds < 1 {
		return cfg, errors.New("--cuup-packets and --cuup-rounds must be positive")
	}
	var suites []string
	for _, s := range []struct {
		flag  string
		given bool
	}{{"--pfcp", cfg.pfcp}, {"--restarts", cfg.restarts > 0}, {"--dupl", cfg.dupl}, {"--classify", cfg.classify}, {"--chain", cfg.chain},
		{"--slicing", cfg.slicing}, {"--slicing-upf", cfg.slicingUPF}, {"--cuup", cfg.cuup}} {
		if s.given {
			suites = append(suites, s.flag)
		}
	}
	if len(suites) > 1 {
		return cfg, fmt.Errorf("%s: one suite a run", strings.Join(suites, ", "))
	}
	// Checked before a run whose charts come at its end.
	if cfg.charts != "" {
		if !cfg.slicing {
			return cfg, errors.New("--charts applies to --slicing alone")
		}
		if st, err := os.Stat(cfg.charts); err != nil || !st.IsDir() {
			return cfg, fmt.Errorf("--charts: %s is not a directory", cfg.charts)
		}
	}
	if (cfg.ipv6Transport || cfg.open5gs) && (cfg.pfcp || cfg.classify || cfg.chain || cfg.slicing || cfg.slicingUPF || cfg.cuup || cfg.restarts > 0) ||
		cfg.open5gs && cfg.dupl {
		return cfg, errors.New("--ipv6-transport and --open5gs apply to the per-packet cost and the rate alone")
	}
	if cfg.restarts < 0 || cfg.restartsRate < 1 {
		return cfg, errors.New("--restarts must not be negative, --restarts-rate must be positive")
	}
	if cfg.runs < 1 || cfg.packets < 1 {
		return cfg, errors.New("--runs and --packets must be positive")
	}
	if cfg.pfcpSessions < 1 || cfg.pfcpRounds < 1 || cfg.pacedRounds < 1 || cfg.window < 1 || cfg.rate < 1 || cfg.steady <= 0 {
		return cfg, errors.New("--pfcp-sessions, --pfcp-rounds, --pfcp-paced-rounds, --pfcp-window, --pfcp-rate and --pfcp-steady must be positive")
	}
	// The paced PFCP runs modify and delete sessions established before.
	if sessions := pacedSessions(cfg); cfg.pfcp && sessions > cfg.pfcpSessions {
		return cfg, fmt.Errorf("--paced %s and --pfcp-steady %s at --pfcp-rate %d in %d rounds need --pfcp-sessions %d at least",
			cfg.paced, cfg.steady, cfg.rate, cfg.pacedRounds, sessions)
	}
	return cfg, nil
}

// counts reads a flag's comma-separated counts of least each.
func counts(flag, list string, least int) ([]int, error) {
	var out []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < least {
			return nil, fmt.Errorf("--%s: %q is not a count of %d or more", flag, s, least)
		}
		out = append(out, n)
	}
	return out, nil
}

// Run measures as the flags say and writes the report to w, progress to
// stderr. It builds the demo's testbed and removes everything it built
// before returning.
func (f *Flags) Run(ctx context.Context, w io.Writer) (err error) {
	args := f.given()
	cfg, err := f.config()
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("the benchmarks need root: they create network namespaces and load XDP programs")
	}
	if cfg.cuup {
		return runCUUP(ctx, w, args, cfg)
	}
	since := clock()
	tb, err := demo.NewTestbed()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, tb.Close()) }()
	if cfg.ipv6Transport {
		if err := tb.EnableIPv6(); err != nil {
			return err
		}
		overIPv6 = true
	}
	if cfg.open5gs {
		shape = open5gsSession
	}
	if cfg.restarts > 0 {
		return runRestarts(ctx, w, args, tb, cfg, since)
	}
	b, err := loadBaselines(tb)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, b.Close()) }()

	res := results{frameLens: [2]int{len(uplinkFrame(tb, teid(0), 0)), len(downlinkFrame(tb, 0))}}
	if cfg.slicing {
		points, err := measurePrio("priority and offload", classifierRouter)
		if err != nil {
			return err
		}
		delays, err := measureDelays()
		if err != nil {
			return err
		}
		reactions, err := measureReactions()
		if err != nil {
			return err
		}
		fmt.Fprintln(w, headline(args, since()))
		reportPrio(w, points, classifierText)
		reportDelays(w, delays)
		reportReactions(w, reactions)
		if cfg.charts != "" {
			names, err := writeSlicingCharts(cfg.charts, points, delays)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "\nCharts: %s in %s.\n", strings.Join(names, ", "), cfg.charts)
		}
		return nil
	}
	if cfg.slicingUPF {
		load := loadAvg()
		points, err := measurePrio("priority and offload through the UPF", upfRouter)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, headline(args, since()))
		fmt.Fprintf(w, "\nLoad average (1, 5, 15 min) before: %s; after: %s.\n", load, loadAvg())
		reportPrio(w, points, upfText)
		return nil
	}
	if cfg.dupl {
		d, err := measureDupl(ctx, tb, b, cfg)
		if err != nil {
			return err
		}
		d.elapsed = since()
		reportDupl(w, args, cfg, d)
		return nil
	}
	if cfg.chain {
		c, err := measureChain(ctx, tb, b, cfg)
		if err != nil {
			return err
		}
		c.elapsed = since()
		reportChain(w, args, cfg, c)
		return nil
	}
	if cfg.classify {
		c, err := measureClassify(ctx, b, cfg)
		if err != nil {
			return err
		}
		c.elapsed = since()
		reportClassify(w, args, cfg, c)
		return nil
	}
	if cfg.pfcp {
		if res.pfcp, err = measurePFCP(ctx, tb, b, cfg); err != nil {
			return err
		}
		res.elapsed = since()
		reportPFCP(w, args, cfg, res)
		return nil
	}
	if res.live, err = measureLive(ctx, tb, b, cfg.packets, cfg.runs, cfg.paced); err != nil {
		return err
	}
	for _, n := range cfg.sessions {
		progress("per-packet cost with %d sessions", n)
		row, err := measureCost(ctx, tb, b, n, cfg.flows, cfg.runs, !cfg.open5gs, cfg.packets)
		if err != nil {
			return fmt.Errorf("%d sessions: %w", n, err)
		}
		res.costs = append(res.costs, row)
	}
	res.elapsed = since()
	report(w, args, cfg, res)
	return nil
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

// baselines are the programs of the baseline package set up for the
// testbed: toDN forwards from the UPF's N3 to the DN, toGNB from its N6 to
// the gNB.
type baselines struct {
	pass, tx, toDN, toGNB *ebpf.Program
}

func loadBaselines(tb *demo.Testbed) (b *baselines, err error) {
	b = &baselines{}
	defer func() {
		if err != nil {
			err = errors.Join(err, b.Close())
		}
	}()
	if b.pass, err = baseline.LoadPass(); err != nil {
		return nil, err
	}
	if b.tx, err = baseline.LoadTX(); err != nil {
		return nil, err
	}
	n3, _, err := tb.UPF.Link(demo.N3)
	if err != nil {
		return nil, err
	}
	n6, _, err := tb.UPF.Link(demo.N6)
	if err != nil {
		return nil, err
	}
	if b.toDN, err = baseline.LoadRedirect(n6, tb.DNMAC, tb.N6MAC); err != nil {
		return nil, err
	}
	if b.toGNB, err = baseline.LoadRedirect(n3, tb.GNBMAC, tb.N3MAC); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *baselines) Close() error {
	var errs []error
	for _, p := range []*ebpf.Program{b.pass, b.tx, b.toDN, b.toGNB} {
		if p != nil {
			errs = append(errs, p.Close())
		}
	}
	return errors.Join(errs...)
}

// forwarder puts the redirect baselines where the UPF runs. They get what
// the UPF delivers, so that the sinks match the same packets: the UE's
// packet in the DN, a G-PDU at the gNB (which way its addresses point does
// not matter to a MAC rewrite).
func (b *baselines) forwarder(tb *demo.Testbed) forwarder {
	ue := ueAddr(0)
	f := attachedAs(tb, "redirect baseline", b.toDN, b.toGNB)
	f.traffic = [][2]traffic{{
		{frame: demo.Ethernet(tb.N3MAC, tb.GNBMAC, demo.UEPacket(ue, demo.DNAddr, true, demo.UETTL))},
		{frame: tb.UplinkFrame(teid(0), demo.QFI, demo.UEPacket(ue, demo.DNAddr, false, demo.UETTL))},
	}}
	return f
}

// txForwarder puts the XDP_TX baseline where the UPF runs, timed by
// bpf_stats on the traffic t: it sends it back where it came from.
func (b *baselines) txForwarder(tb *demo.Testbed, t [2]traffic) forwarder {
	f := attachedAs(tb, "XDP_TX baseline", b.tx, b.tx)
	f.traffic = [][2]traffic{t}
	f.timedOnly = true
	return f
}

// attachedAs is a forwarder that attaches toDN on the UPF's N3 and toGNB
// on its N6.
func attachedAs(tb *demo.Testbed, name string, toDN, toGNB *ebpf.Program) forwarder {
	var links []io.Closer
	return forwarder{
		name: name,
		attach: func() error {
			for _, a := range []struct {
				iface string
				prog  *ebpf.Program
			}{{demo.N3, toDN}, {demo.N6, toGNB}} {
				l, err := tb.UPF.AttachXDP(a.iface, a.prog, false)
				if err != nil {
					return err
				}
				links = append(links, l)
			}
			return nil
		},
		detach: func() error {
			var err error
			for _, l := range links {
				err = errors.Join(err, l.Close())
			}
			links = nil
			return err
		},
	}
}
