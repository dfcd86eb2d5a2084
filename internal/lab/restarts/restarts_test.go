package restarts

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"

	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/daemon"
	"github.com/xdp5g/xdp5g/internal/demo/demotest"
	"github.com/xdp5g/xdp5g/internal/platform/gcpace"
)

// daemonEnv names the configuration the test binary runs the daemon with
// when it stands in for `xdp5g run`: a process of its own to kill.
const daemonEnv = "XDP5G_RESTARTS_DAEMON"

func TestMain(m *testing.M) {
	if file := os.Getenv(daemonEnv); file != "" {
		os.Exit(runDaemon(file))
	}
	os.Exit(m.Run())
}

// runDaemon does what `xdp5g run --config file` does.
func runDaemon(file string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg, err := config.Load(file)
	if err == nil {
		gcpace.Tune()
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err = daemon.Run(ctx, cfg, log)
	}
	if err != nil {
		log.Error("the daemon stopped", "err", err)
		return 1
	}
	return 0
}

// A daemon killed or stopped at random instants, under traffic and while
// its SMF establishes, moves, queries and deletes sessions, loses nothing:
// the four restarts here, two of them SIGKILL, are the hundred of
// `xdp5g-lab bench --restarts 100` in short.
func TestRestartsLoseNothing(t *testing.T) {
	tb := demotest.Testbed(t)
	res, err := Run(t.Context(), tb, Config{Restarts: 4, Rate: 2000, Progress: t.Logf,
		Daemon: func(file string) *exec.Cmd {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), daemonEnv+"="+file)
			return cmd
		}})
	if err != nil {
		t.Fatalf("%v (the daemon's log: %s)", err, res.Log)
	}
	t.Logf("%d restarts, %d of them SIGKILL, each %v; %d packets uplink, %d downlink; %d sessions besides; %d reports, %d received again; %d sessions installed again",
		res.Restarts, res.Killed, res.Took, res.Sent[0], res.Sent[1], res.Cycles, res.Reports, res.Resent, res.Repaired)
	if res.Restarts != 4 || res.Killed != 2 || res.Cycles == 0 || res.Reports == 0 || res.Sent[0] == 0 || res.Sent[1] == 0 {
		t.Errorf("nothing much tested: %+v", res)
	}
	for _, p := range res.Problems {
		t.Error(p)
	}
	if t.Failed() {
		t.Logf("the daemon's log: %s", res.Log)
		return
	}
	if err := res.Remove(); err != nil {
		t.Error(err)
	}
}
