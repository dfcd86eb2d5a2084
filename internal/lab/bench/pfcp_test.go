package bench

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/xdp5g/xdp5g/internal/demo/demotest"
	"github.com/xdp5g/xdp5g/internal/platform/gcpace"
)

// TestPFCPBench runs `xdp5g-lab bench --pfcp` at a tiny size: every session is
// established, every paced request answered, and the figures are sane.
func TestPFCPBench(t *testing.T) {
	tb := demotest.Testbed(t)
	const sessions = 300
	// Two rounds of paced runs: 150 heartbeats, 100 requests of each kind
	// over sessions as they come, 50 of each with a collection forced.
	args := []string{"--pfcp", "--pfcp-sessions", "300", "--pfcp-rounds", "2", "--pfcp-paced-rounds", "2", "--paced", "150ms",
		"--pfcp-steady", "300ms", "--runs", "1", "--flows", "16"}
	cfg, err := parseFlags(args)
	if err != nil {
		t.Fatal(err)
	}
	b, err := loadBaselines(tb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })

	var res results
	if res.pfcp, err = measurePFCP(context.Background(), tb, b, cfg); err != nil {
		t.Fatal(err)
	}
	r := res.pfcp
	if len(r.rounds) != 4 {
		t.Fatalf("%d rounds, want 2 without persistence and 2 with", len(r.rounds))
	}
	for i, e := range r.rounds {
		if len(e.rts) != sessions || e.rts[0] <= 0 || e.took <= 0 {
			t.Errorf("%d establishments answered, all in %v; want %d, each in more than 0", len(e.rts), e.took, sessions)
		}
		if len(e.tenths) != 10 || slices.Min(e.tenths) <= 0 {
			t.Errorf("rates of the tenths %v, want 10 positive", e.tenths)
		}
		if e.persist != (i%2 == 1) || e.persist != (e.stateBytes > 0 && e.snapshotBytes > 0) {
			t.Errorf("round %d: persistence %v, state %d bytes, %d compacted; want it every other round, measured", i, e.persist,
				e.stateBytes, e.snapshotBytes)
		}
	}
	if r.cost.install != r.rounds[3].took {
		t.Errorf("the per-packet cost's install time is %v, not the last round's %v", r.cost.install, r.rounds[3].took)
	}
	if rs := r.restart; rs.sessions < sessions || rs.kept != rs.sessions || rs.repaired != 0 || !rs.sameRecovery ||
		rs.took <= 0 || rs.read <= 0 || rs.takeOver <= 0 || rs.stateBytes <= 0 {
		t.Errorf("restart %+v; want every session taken over in place, the Recovery Time Stamp kept, times and size measured", rs)
	}
	if len(r.cost.uplink) != 1 || r.cost.uplink[0] <= 0 || r.cost.downlink[0] <= 0 {
		t.Errorf("per-packet cost uplink %v, downlink %v: want one positive round each", r.cost.uplink, r.cost.downlink)
	}
	for i, rounds := range r.paced {
		if len(rounds) != 2 {
			t.Fatalf("%s: %d rounds, want 2", pacedRuns[i].name, len(rounds))
		}
		requests := pacedRuns[i].requests(cfg)
		for _, run := range rounds {
			for _, kind := range pacedRuns[i].kinds {
				want := requests / len(pacedRuns[i].kinds)
				if rts := run.rts[kind]; len(rts) != want || rts[0] <= 0 {
					t.Errorf("%s: %d paced %ss answered; want %d, each in more than 0", pacedRuns[i].name, len(rts), kind, want)
				}
			}
			// The last responses may reach the SMF before their handling
			// is counted: a run may miss a few of its own and count a few
			// of the run before it.
			var handled uint64
			for _, n := range run.handling {
				handled += n
			}
			if handled < uint64(requests)-10 || handled > uint64(requests)+10 {
				t.Errorf("%s: %d requests in the UPF's handling times, want the %d of the run", pacedRuns[i].name, handled, requests)
			}
		}
	}
	for i, rounds := range r.paced {
		for _, run := range rounds {
			// At least half the ticks of the shortest run, 150 ms.
			if run.loops < int(pacedRuns[i].length(cfg)/probeEvery/2) || run.slow > run.loops {
				t.Errorf("%s: the starvation probe ran %d loops, %d slow", pacedRuns[i].name, run.loops, run.slow)
			}
		}
	}
	for _, run := range r.paced[2] {
		if run.collections == 0 {
			t.Errorf("no garbage collection finished during a run that starts one")
		}
	}

	// Without gcpace the window with a collection forced is judged too.
	var unpaced bytes.Buffer
	reportPFCP(&unpaced, args, cfg, res)
	if want := "collection forced, 2 rounds of 150ms together (300 requests): ≤ "; !strings.Contains(unpaced.String(), want) ||
		strings.Contains(unpaced.String(), "no target, as its requests") {
		t.Errorf("without gcpace, the report lacks a verdict on the window with a collection forced:\n%s", unpaced.String())
	}
	stop := gcpace.Start(1 << 40) // as the bench runs
	defer stop()
	var out bytes.Buffer
	reportPFCP(&out, args, cfg, res)
	for _, want := range []string{"| Slowed |", "| heartbeat | 300 |", "| all | 300 |", "| all | 600 |", "| Round | State kept | Time | Stolen |",
		"- establishment rate over PFCP keeping the state, 300 sessions, median of 2 rounds: ",
		"- the same against the rate keeping none, ", "- restart to PFCP served with ", "| 2 | yes | ", "| 2 | no | ",
		"- p99 of the UPF's handling of heartbeats alone at 1000 requests/s, 2 rounds of 150ms together (300 requests)",
		"- p99 of the UPF's handling at 1000 requests/s, as it comes, 2 rounds of 300ms together (600 requests): ",
		"(target < 1.000 ms at 1000/s)",
		"- p99 of the UPF's handling at 1000 requests/s, collection forced, 2 rounds of 150ms together (300 requests): ",
		"the window a collection marks in; no target"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
}

// A paced run over sessions starts and ends with an establishment: of
// 2,000 requests (as they come, --pfcp-steady 2s) 667 sessions, of 1,000
// (collection forced, --paced 1s) 334, so the two runs need 1,001
// established before, each run its own, and three rounds of them 3,003;
// the heartbeats need none.
func TestPacedSessions(t *testing.T) {
	for sessions, ok := range map[string]bool{"3002": false, "3003": true} {
		cfg, err := parseFlags([]string{"--pfcp", "--pfcp-sessions", sessions, "--paced", "1s", "--pfcp-steady", "2s", "--pfcp-paced-rounds", "3"})
		if (err == nil) != ok {
			t.Errorf("--pfcp-sessions %s with --paced 1s, --pfcp-steady 2s in 3 rounds: %v, want accepted %v", sessions, err, ok)
		}
		if err == nil && (pacedRuns[0].sessions(cfg) != 0 || pacedRuns[1].sessions(cfg) != 667 || pacedRuns[2].sessions(cfg) != 334) {
			t.Errorf("the paced runs establish %d, %d and %d sessions, want 0, 667 and 334",
				pacedRuns[0].sessions(cfg), pacedRuns[1].sessions(cfg), pacedRuns[2].sessions(cfg))
		}
	}
}
