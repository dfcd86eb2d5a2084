package e2e

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/daemon"
	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/testbed"
	"github.com/xdp5g/xdp5g/internal/trafficgen"
)

// The traffic lasts trafficTime; the daemon restarts every restartEvery
// while it flows.
const (
	trafficTime  = 5 // seconds: restarts take about half a second each
	restarts     = 3
	restartEvery = 500 * time.Millisecond
)

// sessionDocument is the demo's IPv4 session as the REST API takes it.
var sessionDocument = fmt.Sprintf(`{"seid": %d,
 "pdrs": [{"pdrId": 1, "farId": 1, "outerHeaderRemoval": "OUTER_HEADER_REMOVAL_GTPU_UDP_IPV4",
           "pdi": {"teid": %d, "sourceInterface": "INTERFACE_VALUE_ACCESS", "ueIPAddress": %q, "qfi": %d}},
          {"pdrId": 2, "farId": 2, "pdi": {"sourceInterface": "INTERFACE_VALUE_CORE", "ueIPAddress": %[3]q, "qfi": %[4]d}}],
 "fars": [{"farId": 1, "applyAction": "FORW", "destinationInterface": "INTERFACE_VALUE_CORE"},
          {"farId": 2, "applyAction": "FORW", "destinationInterface": "INTERFACE_VALUE_ACCESS",
           "forwardingParameters": {"outerHeaderCreation": {"outerHeaderCreationDescription": "OUTER_HEADER_CREATION_GTPU_UDP_IPV4",
                                                            "ipv4Address": %q, "teid": %d}}}]}`,
	demo.SEID, demo.UplinkTEID, demo.UEAddr, demo.QFI, demo.GNBAddr, demo.DownlinkTEID)

// The daemon keeps forwarding through restarts: the XDP programs stay
// attached through their pinned links and each run replaces them
// atomically, so traffic in both directions loses no packet.
func TestDaemonRestartLosesNothing(t *testing.T) {
	tb := newTestbed(t)
	cfg := daemonConfig(t, tb, "")
	t.Cleanup(func() {
		if err := daemon.Detach(cfg); err != nil {
			t.Error(err)
		}
	})
	client, stop := startDaemon(t, cfg)
	if _, err := client.Create(t.Context(), []byte(sessionDocument)); err != nil {
		t.Fatal(err)
	}

	type outcome struct {
		sent uint64
		err  error
	}
	var dirs []demo.Direction
	var outcomes []chan outcome
	for _, uplink := range []bool{true, false} {
		dir, frame := flow(tb, uplink, demo.UEPacket(demo.UEAddr, demo.DNAddr, uplink, demo.UETTL))
		gen := newGenerator(t)
		done := make(chan outcome, 1)
		go func() {
			sent, _, err := dir.Send(gen, frame, rate*trafficTime, trafficgen.Options{Rate: rate})
			done <- outcome{sent, err}
		}()
		dirs, outcomes = append(dirs, dir), append(outcomes, done)
	}
	for i := range restarts {
		time.Sleep(restartEvery)
		began := time.Now()
		if err := stop(); err != nil {
			t.Errorf("run %d: %v", i+1, err)
		}
		client, stop = startDaemon(t, cfg)
		t.Logf("restart %d took %v", i+1, time.Since(began))
	}
	for _, done := range outcomes {
		if len(done) > 0 {
			t.Fatal("the traffic ended before the last restart: nothing tested")
		}
	}

	for i, dir := range dirs {
		o := <-outcomes[i]
		if o.err != nil {
			t.Fatal(o.err)
		}
		delivered, err := dir.Delivered(o.sent)
		if err != nil {
			t.Fatal(err)
		}
		lost := int64(o.sent) - int64(delivered)
		t.Logf("%s through %d restarts: sent %d, delivered %d, lost %d", dir.Name, restarts, o.sent, delivered, lost)
		switch {
		case lost > 0:
			t.Errorf("%s lost %d of %d packets", dir.Name, lost, o.sent)
		case lost < 0:
			t.Errorf("%s delivered %d packets more than the generator reported sending", dir.Name, -lost)
		}
	}
	stats, err := client.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	stats.WriteTable(&table)
	t.Logf("data path counters:\n%s", &table)
	if err := stop(); err != nil {
		t.Error(err)
	}
}

// daemonConfig writes and loads the configuration of a daemon that drives
// the testbed's UPF namespace, with maps pinned in a directory of its own,
// and the pfcp section given as a YAML flow mapping, if any.
func daemonConfig(t *testing.T, tb *demo.Testbed, pfcp string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := l.Addr().String()
	l.Close()
	yaml := fmt.Sprintf(`interfaces:
  - {name: %s, roles: [access]}
  - {name: %s, roles: [core]}
n3_addresses: [%s]
xdp_mode: native
netns: %s
api: {listen: %q}
datapath: {pin_path: %s, max_sessions: 16}
state_file: %s
`, demo.N3, demo.N6, demo.N3Addr, tb.UPF.Name, listen,
		filepath.Join("/sys/fs/bpf", testbed.UniqueName("xdp5g-e2e-")), filepath.Join(dir, "sessions.json"))
	if pfcp != "" {
		yaml += "pfcp: " + pfcp + "\n"
	}
	path := filepath.Join(dir, "xdp5g.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// startDaemon runs the daemon in-process until its API answers. stop
// cancels it and returns what Run returned; the test's cleanup stops it too.
func startDaemon(t *testing.T, cfg *config.Config) (client *api.Client, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- daemon.Run(ctx, cfg, slog.New(slog.NewTextHandler(t.Output(), nil))) }()
	stop = sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	t.Cleanup(func() { stop() })
	// Without a timeout, a request accepted by whatever else holds the
	// port would wait forever.
	client = &api.Client{URL: "http://" + cfg.API.Listen, HTTP: &http.Client{Timeout: 5 * time.Second}}
	// Run serves the API only once the data path is attached.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := client.Stats(ctx); err == nil {
			return client, stop
		}
		if len(done) > 0 || time.Now().After(deadline) {
			t.Fatalf("the daemon did not start: %v", stop())
		}
	}
}
