package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Targets of the issue: per-packet cost as a multiple of the XDP_TX
// baseline with one session and with a million, testbed rate as a share of
// the redirect baseline's.
const (
	targetOneSession = 2.5
	targetMillion    = 3
	targetRate       = 0.85
)

// results are everything a run measured.
type results struct {
	costs     []costRow
	live      []liveRow
	frameLens [2]int // uplink, downlink, as the UPF receives them
	took      time.Duration
}

func report(w io.Writer, args []string, cfg config, res results) {
	costs, live := res.costs, res.live
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	p("`xdp5g bench %s` on %s; took %s.", strings.Join(args, " "), machine(), res.took.Round(time.Second))
	p("\nUplink frames are G-PDUs with an UL PDU Session Container around a UDP/IPv4 packet (%d bytes), downlink frames", res.frameLens[0])
	p("that UDP/IPv4 packet (%d bytes); every session has one uplink PDR (TEID, UE address, QFI) and one downlink PDR", res.frameLens[1])
	p("(UE address, marks the QFI), uplink forwarded by the route to the DN, downlink tunnelled to the gNB.")

	p("\n### Per-packet cost by BPF_PROG_TEST_RUN (ns/packet)\n")
	p("Each run is a test run of its own on a fresh frame, timed by the kernel; the mean of %d runs without outliers per round,", runsPerRound)
	p("the median of %d rounds with the programs interleaved, ratios the median of the rounds' ratios. The UPF's frames are", cfg.runs)
	p("those of the last session installed; the empty program (XDP_PASS) shows what the test run itself costs, in every figure.\n")
	p("| Sessions | Install | Sessions/s | Empty | XDP_TX | Redirect | Uplink | ×TX | ×Redirect | Downlink | ×TX | ×Redirect |")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range costs {
		p("| %d | %.2f s | %.0f | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.1f | %.2f | %.2f |", r.sessions,
			r.install.Seconds(), float64(r.sessions)/r.install.Seconds(), r.empty.median(), r.tx.median(), r.redirect.median(),
			r.uplink.median(), r.uplink.per(r.tx), r.uplink.per(r.redirect),
			r.downlink.median(), r.downlink.per(r.tx), r.downlink.per(r.redirect))
	}
	p("\nThe same rounds with the UPF's frames cycling over min(sessions, %d) sessions spread evenly over those installed:", cfg.flows)
	p("every packet another session, so the figures add the cache and TLB misses of the session tables.\n")
	p("| Sessions | Uplink | ×TX | ×Redirect | Downlink | ×TX | ×Redirect |")
	p("|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range costs {
		p("| %d | %.1f | %.2f | %.2f | %.1f | %.2f | %.2f |", r.sessions,
			r.uplinkSpread.median(), r.uplinkSpread.per(r.tx), r.uplinkSpread.per(r.redirect),
			r.downlinkSpread.median(), r.downlinkSpread.per(r.tx), r.downlinkSpread.per(r.redirect))
	}
	p("\nThe same less the empty program: what the programs themselves cost. XDP_TX is within the noise of the empty")
	p("program here, so ratios to it would mean nothing.\n")
	p("| Sessions | XDP_TX | Redirect | Uplink | ×Redirect | Downlink | ×Redirect | Uplink, spread | Downlink, spread |")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range costs {
		rd, ul, dl := r.redirect.minus(r.empty), r.uplink.minus(r.empty), r.downlink.minus(r.empty)
		p("| %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |", r.sessions, r.tx.minus(r.empty).median(), rd.median(),
			ul.median(), ul.per(rd), dl.median(), dl.per(rd),
			r.uplinkSpread.minus(r.empty).median(), r.downlinkSpread.minus(r.empty).median())
	}
	p("\n### Attached programs under live traffic, by bpf_stats (ns/packet)\n")
	p("run_time_ns / run_cnt of the program on the interface the traffic enters the UPF namespace by, one session installed;")
	p("median of %d rounds of %d packets, the UPF and the redirect baseline interleaved.\n", cfg.runs, statsPackets(cfg.packets))
	p("| Direction | Interface | xdp5g | Redirect baseline | Ratio |")
	p("|---|---|---:|---:|---:|")
	for _, r := range live {
		p("| %s | %s | %.1f | %.1f | %.2f |", r.direction, r.iface, r.upf.ns.median(), r.baseline.ns.median(), r.upf.ns.per(r.baseline.ns))
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

	p("\n### Targets\n")
	verdict := map[bool]string{true: "met", false: "**not met**"}
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
	for _, r := range live {
		ratio := r.upf.rate.per(r.baseline.rate)
		p("- %s testbed rate: %.3f× the redirect baseline (target ≥ %g×): %s", r.direction, ratio, targetRate, verdict[ratio >= targetRate])
		p("- %s paced at %.2f Mpps: %d of %d packets lost (target 0): %s", r.direction, float64(r.pacedRate)/1e6,
			r.pacedSent-r.pacedDelivered, r.pacedSent, verdict[r.pacedDelivered == r.pacedSent])
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
