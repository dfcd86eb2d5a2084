package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/lab/pfcptest"
	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/testsupport"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// doc is a session whose gNB is the peer namespace's end of the veth,
// resolved through the kernel's ARP.
const doc = `{"seid": 7,
 "pdrs": [{"pdrId": 1, "farId": 1, "outerHeaderRemoval": "OUTER_HEADER_REMOVAL_GTPU_UDP_IPV4",
           "pdi": {"teid": 700, "sourceInterface": "INTERFACE_VALUE_ACCESS", "ueIPAddress": "10.60.0.7"}},
          {"pdrId": 2, "farId": 2, "pdi": {"sourceInterface": "INTERFACE_VALUE_CORE", "ueIPAddress": "10.60.0.7"}}],
 "fars": [{"farId": 1, "destinationInterface": "INTERFACE_VALUE_CORE"},
          {"farId": 2, "forwardingParameters": {"outerHeaderCreation": {"outerHeaderCreationDescription": "OUTER_HEADER_CREATION_GTPU_UDP_IPV4", "ipv4Address": "10.1.3.2", "teid": 701}}, "destinationInterface": "INTERFACE_VALUE_ACCESS"}]}`

const ue = "10.60.0.7"

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// env is a UPF namespace with two interfaces, n3n6 and spare, wired to a
// peer namespace (the gNB and the data network), and the files of a
// configuration.
type env struct {
	upf, peer *namespace.Netns
	dir, pin  string
	listen    string
	// pfcp and classify are the sections config writes, as YAML flow
	// mappings; none when empty.
	pfcp, classify string
	// noUPF leaves the UPF's interfaces and N3 addresses out of config.
	noUPF bool
	// stages are n3n6's, as a YAML flow sequence; none when empty.
	stages string
	// n3 are N3 addresses besides 10.1.2.1.
	n3 []string
	// api are settings of the api section besides its listen, "key: value"
	// each.
	api []string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	testsupport.NeedRoot(t, "network namespaces and XDP")
	e := &env{dir: t.TempDir(), pin: testsupport.PinDir(t), upf: testsupport.Netns(t, "dmn-"), peer: testsupport.Netns(t, "dmn-")}
	must(t, namespace.Veth(e.upf, "n3n6", e.peer, "gnb"))
	must(t, namespace.Veth(e.upf, "spare", e.peer, "spare"))
	must(t, e.upf.AddAddr("n3n6", "10.1.3.1/24"))
	must(t, e.peer.AddAddr("gnb", "10.1.3.2/24"))
	must(t, e.peer.AddRoute("10.60.0.0/16", "10.1.3.1", "gnb"))

	e.listen = testsupport.FreeAddr(t, "tcp")
	return e
}

// config writes and loads a configuration attaching to the interfaces.
func (e *env) config(t *testing.T, ifaces ...string) *config.Config {
	t.Helper()
	var yaml strings.Builder
	if !e.noUPF {
		stages := ""
		if e.stages != "" {
			stages = ", stages: " + e.stages
		}
		fmt.Fprintf(&yaml, "interfaces:\n  - {name: n3n6, roles: [access, core]%s}\n", stages)
		for _, name := range ifaces {
			fmt.Fprintf(&yaml, "  - {name: %s, roles: [core]}\n", name)
		}
		fmt.Fprintf(&yaml, "n3_addresses: [%s]\n", strings.Join(append([]string{"10.1.2.1"}, e.n3...), ", "))
	}
	fmt.Fprintf(&yaml, "xdp_mode: native\nnetns: %s\napi: {%s}\n", e.upf.Name,
		strings.Join(append([]string{fmt.Sprintf("listen: %q", e.listen)}, e.api...), ", "))
	fmt.Fprintf(&yaml, "datapath: {pin_path: %s, max_sessions: 1024}\nstate_file: %s\n", e.pin, filepath.Join(e.dir, "state", "sessions.json"))
	if e.pfcp != "" {
		fmt.Fprintf(&yaml, "pfcp: %s\n", e.pfcp)
	}
	if e.classify != "" {
		fmt.Fprintf(&yaml, "classify: %s\n", e.classify)
	}
	path := filepath.Join(e.dir, "xdp5g.yaml")
	must(t, os.WriteFile(path, []byte(yaml.String()), 0o600))
	cfg, err := config.Load(path)
	must(t, err)
	return cfg
}

// runDaemon starts the daemon and waits until it is ready; the returned
// function stops it and returns what Run returned.
func runDaemon(t *testing.T, cfg *config.Config) (client *api.Client, stop func() error) {
	t.Helper()
	client = &api.Client{URL: "http://" + cfg.API.Listen}
	return client, runDaemonWith(t, cfg, client)
}

// runDaemonWith is runDaemon with the client of the test's choice.
func runDaemonWith(t *testing.T, cfg *config.Config, client *api.Client) (stop func() error) {
	t.Helper()
	return runDaemonLogging(t, cfg, client, t.Output())
}

// runDaemonLogging is runDaemonWith logging to log.
func runDaemonLogging(t *testing.T, cfg *config.Config, client *api.Client, log io.Writer) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, slog.New(slog.NewTextHandler(log, nil))) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if client.Ready(ctx) == nil {
			break
		}
		select {
		case err := <-done:
			cancel()
			t.Fatalf("Run returned early: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("the daemon did not get ready")
		}
	}
	return func() error {
		cancel()
		return <-done
	}
}

// sendDownlink sends packets to the UE from the data network until the data
// path has forwarded one more, and fails the test if it does not.
func (e *env) sendDownlink(t *testing.T, dp *upfxdp.Datapath) {
	t.Helper()
	var conn net.PacketConn
	must(t, e.peer.Do(func() (err error) {
		conn, err = net.ListenPacket("udp4", ":0")
		return err
	}))
	defer conn.Close()
	before := forwarded(t, dp)
	// The first packets may find the gNB's MAC address unresolved.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		_, err := conn.WriteTo([]byte("hello"), &net.UDPAddr{IP: net.ParseIP(ue), Port: 9})
		must(t, err)
		if forwarded(t, dp) > before {
			return
		}
	}
	t.Fatal("no downlink packet was forwarded")
}

func forwarded(t *testing.T, dp *upfxdp.Datapath) uint64 {
	t.Helper()
	ifaces, err := dp.Counters()
	must(t, err)
	for _, i := range ifaces {
		if i.Name == "n3n6" {
			return i.Reasons["downlink_forward"].Packets
		}
	}
	t.Fatal("n3n6 has no counters")
	return 0
}

// withoutCounters decodes a session document and drops its live counters.
func withoutCounters(t *testing.T, doc []byte) any {
	t.Helper()
	var d map[string]any
	must(t, json.Unmarshal(doc, &d))
	for _, p := range d["pdrs"].([]any) {
		delete(p.(map[string]any), "counters")
	}
	return d
}

func TestSessionsAndTrafficSurviveRestarts(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	first := e.config(t, "spare")
	client, stop := runDaemon(t, first)
	created, err := client.Create(ctx, []byte(doc))
	must(t, err)
	// A second handle on the pinned maps, to look at them between runs.
	dp, err := upfxdp.Open(upfxdp.Options{PinPath: e.pin, MaxSessions: 1024, N3Addresses: first.N3Addresses})
	must(t, err)
	defer dp.Close()
	if set, err := dp.Uplink(upfxdp.FTEID{Addr: first.N3Addresses[0], TEID: 700}); err != nil || set.Count != 1 {
		t.Fatalf("TEID 700: %+v, %v", set, err)
	}
	e.sendDownlink(t, dp)
	must(t, stop())

	// Between runs: the session is saved, and the data path still works.
	data, err := os.ReadFile(first.StateFile)
	must(t, err)
	var saved struct{ Sessions []struct{ SEID uint64 } }
	if err := json.Unmarshal(data, &saved); err != nil || len(saved.Sessions) != 1 || saved.Sessions[0].SEID != 7 {
		t.Fatalf("state file: %s (%v)", data, err)
	}
	for _, name := range []string{"n3n6", "spare"} {
		if !testsupport.XDPAttached(t, e.upf, name) {
			t.Errorf("%s lost its XDP program when the daemon stopped", name)
		}
	}
	e.sendDownlink(t, dp)

	// The second run takes over the session and drops spare.
	second := e.config(t)
	client, stop = runDaemon(t, second)
	got, err := client.Session(ctx, 7)
	must(t, err)
	if !reflect.DeepEqual(withoutCounters(t, got), withoutCounters(t, created)) {
		t.Errorf("restored session:\n%s\nwant\n%s", got, created)
	}
	if !testsupport.XDPAttached(t, e.upf, "n3n6") || testsupport.XDPAttached(t, e.upf, "spare") {
		t.Errorf("XDP attached after the restart: n3n6 %v, spare %v; want only n3n6", testsupport.XDPAttached(t, e.upf, "n3n6"), testsupport.XDPAttached(t, e.upf, "spare"))
	}
	e.sendDownlink(t, dp)
	must(t, stop())

	must(t, Detach(second))
	if testsupport.XDPAttached(t, e.upf, "n3n6") {
		t.Error("n3n6 keeps its XDP program after Detach")
	}
	if _, err := os.Stat(e.pin); !os.IsNotExist(err) {
		t.Errorf("pin directory after Detach: %v", err)
	}
	must(t, Detach(second)) // nothing left to detach
}

// The daemon answers PFCP on its configured address and advertises exactly
// the UP features it has: FTUP, MNOP, VTIME, DDND and BUCP always, EMPU
// with a GTP-U socket (its N3 address, on no interface here, binds all
// the same), UEIP with a UE pool, TRST with forwarding policies.
func TestPFCPHeartbeatAndAssociation(t *testing.T) {
	for _, c := range []struct {
		name, pool string
		features   []byte // UP Function Features, octets 5 on
	}{
		{name: "without a UE pool", pool: "", features: []byte{0x13, 0x01, 0x10, 0x04}},                                             // BUCP, DDND, EMPU, FTUP, MNOP, VTIME
		{name: "with a UE pool", pool: ", ue_pool: 10.60.0.0/16", features: []byte{0x13, 0x01, 0x14, 0x04}},                         // and UEIP
		{name: "with an instance's UE pool", pool: ", ue_pools: {ims: 10.61.0.0/16}", features: []byte{0x13, 0x01, 0x14, 0x04}},     // and UEIP
		{name: "with forwarding policies", pool: ", forwarding_policies: {fw: 10.1.2.9}", features: []byte{0x1b, 0x01, 0x10, 0x04}}, // and TRST
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			listen := testsupport.FreeAddr(t, "udp")
			// No heartbeats during the test: they would go to port 8805.
			e.pfcp = fmt.Sprintf("{listen: %q, node_id: upf.xdp5g.test, heartbeat_interval: 1h%s}", listen, c.pool)
			client, stop := runDaemon(t, e.config(t))
			defer func() { must(t, stop()) }()
			smf, err := pfcptest.NewSMF("smf.xdp5g.test", netip.MustParseAddrPort(listen))
			must(t, err)
			defer smf.Close()

			hb, err := smf.Heartbeat()
			must(t, err)
			if _, err := hb.RecoveryTimeStamp.RecoveryTimeStamp(); err != nil {
				t.Errorf("heartbeat response without a recovery time stamp: %v", err)
			}
			resp, err := smf.Associate()
			must(t, err)
			if id, err := resp.NodeID.NodeID(); err != nil || id != "upf.xdp5g.test" {
				t.Errorf("node ID %q, %v", id, err)
			}
			if f, err := resp.UPFunctionFeatures.UPFunctionFeatures(); err != nil || !bytes.Equal(f, c.features) {
				t.Errorf("UP function features % x, %v; want % x", f, err, c.features)
			}
			assocs, err := client.Associations(context.Background())
			must(t, err)
			if len(assocs.Associations) != 1 || assocs.Associations[0].NodeID != "smf.xdp5g.test" {
				t.Errorf("associations: %+v", assocs)
			}
		})
	}
}

func TestBusyPFCPPortStopsTheStart(t *testing.T) {
	e := newEnv(t)
	busy, err := net.ListenPacket("udp", "127.0.0.1:0")
	must(t, err)
	defer busy.Close()
	e.pfcp = fmt.Sprintf("{listen: %q, node_id: upf.xdp5g.test}", busy.LocalAddr())
	err = Run(context.Background(), e.config(t), slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "pfcp.listen") {
		t.Fatalf("Run = %v, want an error naming pfcp.listen", err)
	}
	if _, err := os.Stat(e.pin); !os.IsNotExist(err) {
		t.Errorf("Run opened the data path before failing: %v", err)
	}
}

// A configured interface that does not exist stops the start, named by its
// key, before the data path is touched (the interfaces listed before it are
// not attached).
func TestMissingInterfaceStopsTheStart(t *testing.T) {
	e := newEnv(t)
	upfMissing := e.config(t, "nosuch0")
	e.classify = "{interfaces: [spare, nosuch1]}"
	for _, tt := range []struct {
		cfg  *config.Config
		want string
	}{
		{cfg: upfMissing, want: "interfaces[1].name: there is no interface nosuch0 in netns " + e.upf.Name},
		{cfg: e.config(t), want: "classify.interfaces[1]: there is no interface nosuch1 in netns " + e.upf.Name},
		{cfg: func() *config.Config {
			cfg := e.config(t)
			cfg.Netns = "xdp5g-nosuch"
			return cfg
		}(), want: "netns: there is no network namespace xdp5g-nosuch under /run/netns"},
	} {
		err := Run(context.Background(), tt.cfg, slog.New(slog.DiscardHandler))
		if err == nil || err.Error() != tt.want {
			t.Fatalf("Run = %v, want %q", err, tt.want)
		}
		if _, err := os.Stat(e.pin); !os.IsNotExist(err) {
			t.Errorf("Run opened the data path before failing: %v", err)
		}
	}
}

func TestCorruptStateFileStopsTheStart(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t)
	must(t, os.MkdirAll(filepath.Dir(cfg.StateFile), 0o755))
	corrupt := []byte(`{"sessions": [{"SEID": 1,`)
	must(t, os.WriteFile(cfg.StateFile, corrupt, 0o600))

	err := Run(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), cfg.StateFile) {
		t.Fatalf("Run = %v, want an error naming %s", err, cfg.StateFile)
	}
	if data, _ := os.ReadFile(cfg.StateFile); !bytes.Equal(data, corrupt) {
		t.Errorf("the state file was overwritten: %s", data)
	}
	// Stopped before touching the data path of a running predecessor.
	if _, err := os.Stat(e.pin); !os.IsNotExist(err) {
		t.Errorf("Run opened the data path before failing: %v", err)
	}
}
