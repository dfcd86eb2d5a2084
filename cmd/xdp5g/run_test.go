package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/daemon"
	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// runUnderNetns is what xdp5g runs as under `ip netns exec`: its
// configuration file, in the environment of the test binary run again.
const runUnderNetns = "XDP5G_TEST_RUN_CONFIG"

// daemonUnderNetns is `xdp5g run` started by `ip netns exec`, which gives
// it a mount namespace of its own with a fresh /sys: the test binary, run
// again as xdp5g.
type daemonUnderNetns struct {
	cmd   *exec.Cmd
	lines chan string // its log, line by line, closed when it ends
	log   []string    // the lines read so far
}

func startUnderNetns(t *testing.T, ns *namespace.Netns, configFile string) *daemonUnderNetns {
	t.Helper()
	d := &daemonUnderNetns{cmd: exec.Command("ip", "netns", "exec", ns.Name, os.Args[0], "-test.run=^TestUnderIPNetnsExec$"),
		lines: make(chan string, 64)}
	d.cmd.Env = append(os.Environ(), runUnderNetns+"="+configFile)
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(d.lines)
		for s := bufio.NewScanner(stderr); s.Scan(); {
			d.lines <- s.Text()
		}
	}()
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			d.cmd.Process.Signal(syscall.SIGTERM)
			d.wait(t)
		}
	})
	return d
}

// await returns the first log line that contains s, failing the test if
// the daemon ends first.
func (d *daemonUnderNetns) await(t *testing.T, s string) string {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case line, ok := <-d.lines:
			if !ok {
				t.Fatalf("the daemon ended before logging %q:\n%s", s, strings.Join(d.log, "\n"))
			}
			d.log = append(d.log, line)
			if strings.Contains(line, s) {
				return line
			}
		case <-timeout:
			t.Fatalf("the daemon did not log %q:\n%s", s, strings.Join(d.log, "\n"))
		}
	}
}

// wait waits for the daemon's end, killing it after a while, and returns
// its exit status and its whole log.
func (d *daemonUnderNetns) wait(t *testing.T) (status int, log string) {
	t.Helper()
	kill := time.AfterFunc(20*time.Second, func() { d.cmd.Process.Kill() })
	for line := range d.lines {
		d.log = append(d.log, line)
	}
	err := d.cmd.Wait()
	if !kill.Stop() {
		t.Errorf("the daemon did not end: killed")
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return d.cmd.ProcessState.ExitCode(), strings.Join(d.log, "\n")
}

// Under `ip netns exec` the daemon's pins would live on a bpffs of its own
// mount namespace and die with it: it refuses to start and says how to run
// it, unless datapath.ephemeral lets the data path die with it (and the log
// says so at stop); on a bpffs the host mounted, its programs stay attached.
func TestUnderIPNetnsExec(t *testing.T) {
	if configFile := os.Getenv(runUnderNetns); configFile != "" {
		os.Args = []string{"xdp5g", "run", "--config", configFile}
		main()
	}
	testsupport.NeedRoot(t, "network namespaces, mounts and XDP")
	upf, peer := testsupport.Netns(t, "pin-"), testsupport.Netns(t, "pin-")
	if err := namespace.Veth(upf, "n3n6", peer, "gnb"); err != nil {
		t.Fatal(err)
	}
	// A bpffs mounted in the host's mount namespace, out of /sys, which
	// `ip netns exec` keeps.
	shared := testsupport.BPFFS(t)
	hostPins := testsupport.PinDir(t)

	configure := func(t *testing.T, datapath string) string {
		dir := t.TempDir()
		path := filepath.Join(dir, "xdp5g.yaml")
		yaml := fmt.Sprintf("interfaces: [{name: n3n6, roles: [access, core]}]\nn3_addresses: [10.1.2.1]\n"+
			"datapath: {%s, max_sessions: 64}\nstate_file: %s\n", datapath, filepath.Join(dir, "sessions.json"))
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}

	t.Run("refused", func(t *testing.T) {
		d := startUnderNetns(t, upf, configure(t, "pin_path: "+hostPins))
		status, log := d.wait(t)
		for _, want := range []string{"datapath.pin_path: no bpf filesystem is mounted at /sys/fs/bpf",
			"private to this process's mount namespace", "the netns setting", "ip netns exec", "mount -t bpf",
			"datapath.ephemeral: true"} {
			if !strings.Contains(log, want) {
				t.Errorf("the refusal does not say %q:\n%s", want, log)
			}
		}
		if status != 1 || testsupport.XDPAttached(t, upf, "n3n6") {
			t.Errorf("exit status %d, XDP attached %v; want 1, nothing attached", status, testsupport.XDPAttached(t, upf, "n3n6"))
		}
	})
	t.Run("ephemeral", func(t *testing.T) {
		d := startUnderNetns(t, upf, configure(t, "pin_path: "+hostPins+", ephemeral: true"))
		d.await(t, "msg=ready")
		if !testsupport.XDPAttached(t, upf, "n3n6") {
			t.Fatal("no XDP program on n3n6 while the daemon runs")
		}
		d.cmd.Process.Signal(syscall.SIGTERM)
		status, log := d.wait(t)
		if status != 0 || !strings.Contains(log, "the XDP programs of the UPF and the classifier are detached with the process") {
			t.Errorf("exit status %d, log:\n%s\nwant 0, and the programs said to go with the process", status, log)
		}
		// The kernel lets go of the namespace's mounts, and with them of
		// the links, just after the process.
		for deadline := time.Now().Add(5 * time.Second); testsupport.XDPAttached(t, upf, "n3n6"); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("n3n6 keeps its XDP program after the ephemeral data path's daemon stopped")
			}
		}
		if _, err := os.Stat(hostPins); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the ephemeral data path pinned in the host's bpffs: %v", err)
		}
	})
	t.Run("shared bpffs", func(t *testing.T) {
		configFile := configure(t, "pin_path: "+filepath.Join(shared, "xdp5g"))
		d := startUnderNetns(t, upf, configFile)
		d.await(t, "msg=ready")
		// SIGHUP, which has no reload to do, stops it as SIGTERM does.
		d.cmd.Process.Signal(syscall.SIGHUP)
		status, log := d.wait(t)
		if status != 0 || !strings.Contains(log, "the XDP programs of the UPF and the classifier stay attached") {
			t.Errorf("exit status %d, log:\n%s\nwant 0, and the programs said to stay", status, log)
		}
		if !testsupport.XDPAttached(t, upf, "n3n6") {
			t.Error("n3n6 lost its XDP program when the daemon stopped")
		}
		cfg, err := config.Load(configFile)
		if err != nil {
			t.Fatal(err)
		}
		if err := daemon.Detach(cfg); err != nil {
			t.Fatal(err)
		}
		if testsupport.XDPAttached(t, upf, "n3n6") {
			t.Error("n3n6 keeps its XDP program after detach")
		}
	})
}
