package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/lab/restarts"
	"github.com/xdp5g/xdp5g/internal/platform/version"
)

// runRestarts restarts xdp5g, the binary next to this one, cfg.restarts
// times (see the restarts package) and reports what it saw.
func runRestarts(ctx context.Context, w io.Writer, args []string, tb *demo.Testbed, cfg config, since func() elapsed) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	xdp5g := filepath.Join(filepath.Dir(self), "xdp5g")
	if err := sameBuild(xdp5g); err != nil {
		return fmt.Errorf("--restarts runs %s, which `make build` builds with this one: %w", xdp5g, err)
	}
	res, err := restarts.Run(ctx, tb, restarts.Config{Restarts: cfg.restarts, Rate: cfg.restartsRate, Progress: progress,
		Daemon: func(file string) *exec.Cmd { return exec.Command(xdp5g, "run", "--config", file) }})
	if err != nil {
		return fmt.Errorf("%w (the daemon's log: %s)", err, res.Log)
	}
	reportRestarts(w, args, since(), res)
	if !res.OK() {
		return fmt.Errorf("%d problems; the daemon's log: %s", len(res.Problems), res.Log)
	}
	return res.Remove()
}

// sameBuild checks that the binary at path is of this binary's build: a
// daemon of another build would measure something else.
func sameBuild(path string) error {
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return err
	}
	got := strings.TrimSpace(string(out))
	if want := "xdp5g version " + version.String(); got != want {
		return fmt.Errorf("it says %q, this lab is version %s", got, version.String())
	}
	return nil
}

func reportRestarts(w io.Writer, args []string, e elapsed, res restarts.Result) {
	p := linesTo(w)
	p("%s", headline(args, e))
	p("\n### Restarts under traffic\n")
	p("xdp5g runs the demo testbed's UPF with an SMF of the bench's own (its PFCP messages encoded by hand, not by go-pfcp);")
	p("traffic flows both ways through one of its sessions, whose URR reports on a volume threshold and periodically, while")
	p("the SMF establishes sessions that buffer their downlink, moves them to forward, queries their usage and deletes them,")
	p("one after another. The daemon is stopped at random instants, every other time with SIGKILL, else SIGTERM, and")
	p("started again. Nothing may be lost: every packet arrives, every request is answered, the Heartbeat Responses keep the")
	p("Recovery Time Stamp, the usage reports add up to the octets sent, none counted twice, the session's PDR counters")
	p("never go back and end at the packets sent, and no session is left over.\n")
	took := slices.Sorted(slices.Values(res.Took))
	p("| | |")
	p("|---|---|")
	p("| Restarts | %d (%d with SIGKILL) |", res.Restarts, res.Killed)
	if len(took) > 0 {
		p("| Restart to a Heartbeat Response, median / max | %s / %s |", took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
	}
	p("| Packets sent, uplink / downlink | %d / %d |", res.Sent[0], res.Sent[1])
	p("| Lost | %d / %d |", res.Sent[0]-res.Delivered[0], res.Sent[1]-res.Delivered[1])
	p("| Octets sent / reported by the URR | %d / %d |", res.Octets, res.Reported)
	p("| Session Report Requests counted / received again (a restart resending one unanswered) | %d / %d |", res.Reports, res.Resent)
	p("| Sessions established, moved, queried and deleted meanwhile | %d |", res.Cycles)
	p("| Sessions the daemon installed again (the data path had a request the state had not recorded) | %d |", res.Repaired)
	p("\n- 0 sessions lost and 0 packets of established sessions lost across %d restarts, %d of them SIGKILL, under traffic: %s",
		res.Restarts, res.Killed, verdict[res.OK()])
	for _, problem := range res.Problems {
		p("  - %s", problem)
	}
}
