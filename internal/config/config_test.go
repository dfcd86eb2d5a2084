package config

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/fielderr"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/ran/cuup"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

const minimal = `
interfaces:
  - name: eth0
    roles: [access, core]
n3_addresses: [192.0.2.1]
`

func TestDefaults(t *testing.T) {
	cfg, err := parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Interfaces:  []Interface{{Name: "eth0", Roles: upfxdp.RoleAccess | upfxdp.RoleCore}},
		N3Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.1")},
		XDPMode:     xdplink.ModeNative,
		API:         API{Listen: "127.0.0.1:9880"},
		Datapath:    Datapath{PinPath: "/sys/fs/bpf/xdp5g", MaxSessions: 65536},
		Buffering:   Buffering{SessionPackets: 256, TotalPackets: 32768},
		StateFile:   "/var/lib/xdp5g/sessions.json",
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got %+v\nwant %+v", cfg, want)
	}
}

func TestLoadEverySetting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "xdp5g.yaml")
	err := os.WriteFile(path, []byte(`
interfaces:
  - name: n3
    roles: [access]
  - name: n6
    roles: [core]
n3_addresses: [192.0.2.1, 198.51.100.1]
xdp_mode: generic
netns: upf
api:
  listen: "[::1]:8080"
datapath:
  pin_path: /sys/fs/bpf/upf2/
  max_sessions: 1024
buffering:
  session_packets: 64
  total_packets: 1000
state_file: /tmp/upf2/state.json
pfcp:
  listen: "[::]:8806"
  node_id: upf.example
  peers: [smf1.example, "192.0.2.20:8806", "2001:db8::20"]
  heartbeat_interval: 5s
  t1: 1500ms
  n1: 5
  traffic_stop_after: 30s
  gtpu_echo_interval: 20s
  gtpu_echo_retries: 5
  ue_pool: 10.45.0.0/16
  ue_pools: {ims: 10.46.0.0/16, internet.mnc001: 10.47.0.0/24}
  forwarding_policies: {to-firewall: 198.51.100.9, "video optimiser": "2001:db8:6::9"}
classify:
  interfaces: [edge0, edge1]
  max_masks: 24
  orphan_fragments: drop
  rules_file: /tmp/upf2/rules.json
  reports: {interval: 2s, webhooks: ["http://collector.example:8080/xdp5g"]}
cuup:
  n3: {interface: cu-n3, address: 10.61.0.2}
  f1u: {interface: cu-f1u, address: "2001:db8:62::2"}
  io: afxdp
  queues: [1, 0]
  frames: 4096
  busy_poll: true
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Interfaces:  []Interface{{Name: "n3", Roles: upfxdp.RoleAccess}, {Name: "n6", Roles: upfxdp.RoleCore}},
		N3Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("198.51.100.1")},
		XDPMode:     xdplink.ModeGeneric,
		Netns:       "upf",
		API:         API{Listen: "[::1]:8080"},
		Datapath:    Datapath{PinPath: "/sys/fs/bpf/upf2", MaxSessions: 1024},
		Buffering:   Buffering{SessionPackets: 64, TotalPackets: 1000},
		StateFile:   "/tmp/upf2/state.json",
		PFCP: &PFCP{
			Listen:            "[::]:8806",
			NodeID:            "upf.example",
			Peers:             []string{"smf1.example:8805", "192.0.2.20:8806", "[2001:db8::20]:8805"},
			HeartbeatInterval: 5 * time.Second,
			T1:                1500 * time.Millisecond,
			N1:                5,
			TrafficStopAfter:  30 * time.Second,
			GTPUEchoInterval:  20 * time.Second,
			GTPUEchoRetries:   5,
			UEPool:            netip.MustParsePrefix("10.45.0.0/16"),
			UEPools: map[string]netip.Prefix{"ims": netip.MustParsePrefix("10.46.0.0/16"),
				"internet.mnc001": netip.MustParsePrefix("10.47.0.0/24")},
			ForwardingPolicies: map[string]netip.Addr{"to-firewall": netip.MustParseAddr("198.51.100.9"),
				"video optimiser": netip.MustParseAddr("2001:db8:6::9")},
		},
		Classify: &Classify{Interfaces: []string{"edge0", "edge1"}, MaxMasks: 24, OrphanFragments: classifyxdp.ActionDrop,
			RulesFile: "/tmp/upf2/rules.json", ReportInterval: 2 * time.Second, Webhooks: []string{"http://collector.example:8080/xdp5g"}},
		CUUP: &CUUP{N3: CUUPInterface{Interface: "cu-n3", Address: netip.MustParseAddr("10.61.0.2")},
			F1U: CUUPInterface{Interface: "cu-f1u", Address: netip.MustParseAddr("2001:db8:62::2")},
			IO:  CUUPAFXDP, Queues: []int{1, 0}, Frames: 4096, BusyPoll: true},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got %+v\nwant %+v", cfg, want)
	}
	if !reflect.DeepEqual(cfg.PFCP, want.PFCP) {
		t.Errorf("got %+v\nwant %+v", cfg.PFCP, want.PFCP)
	}
	if got := cfg.CoreInterfaces(); !reflect.DeepEqual(got, []string{"n6"}) {
		t.Errorf("CoreInterfaces() = %v", got)
	}
	if !cfg.UPF() {
		t.Error("UPF() = false with the UPF's interfaces")
	}
}

// cuupOnly is a configuration of a CU-UP alone.
const cuupOnly = `
cuup:
  n3: {interface: n3, address: 10.61.0.2}
  f1u: {interface: f1u, address: 10.62.0.2}
`

// A daemon may run a CU-UP without a UPF; the AF_XDP path is the default.
func TestCUUPAlone(t *testing.T) {
	cfg, err := parse([]byte(cuupOnly))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		XDPMode:   xdplink.ModeNative,
		API:       API{Listen: "127.0.0.1:9880"},
		Datapath:  Datapath{PinPath: "/sys/fs/bpf/xdp5g", MaxSessions: 65536},
		Buffering: Buffering{SessionPackets: 256, TotalPackets: 32768},
		StateFile: "/var/lib/xdp5g/sessions.json",
		CUUP: &CUUP{N3: CUUPInterface{Interface: "n3", Address: netip.MustParseAddr("10.61.0.2")},
			F1U: CUUPInterface{Interface: "f1u", Address: netip.MustParseAddr("10.62.0.2")},
			IO:  CUUPAFXDP, Queues: []int{0}, Frames: 8192},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got %+v\nwant %+v", cfg, want)
	}
	if cfg.UPF() {
		t.Error("UPF() = true without the UPF's interfaces")
	}
}

// The socket path has no AF_XDP settings, and its interfaces may be
// shared: it attaches no XDP program.
func TestCUUPSockets(t *testing.T) {
	cfg, err := parse([]byte(minimal + "classify: {interfaces: [edge0]}\n" +
		"cuup: {n3: {interface: eth0, address: 10.61.0.2}, f1u: {interface: edge0, address: 10.62.0.2}, io: sockets,\n" +
		"  crypto: {workers: 2, placement: pool}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := &CUUP{N3: CUUPInterface{Interface: "eth0", Address: netip.MustParseAddr("10.61.0.2")},
		F1U: CUUPInterface{Interface: "edge0", Address: netip.MustParseAddr("10.62.0.2")}, IO: CUUPSockets,
		CryptoWorkers: 2, CryptoPlacement: cuup.Pool}
	if !reflect.DeepEqual(cfg.CUUP, want) {
		t.Errorf("got %+v\nwant %+v", cfg.CUUP, want)
	}
	if !cfg.UPF() {
		t.Error("UPF() = false with the UPF's interfaces")
	}
}

func TestInvalidCUUPSettingsNameTheField(t *testing.T) {
	const (
		n3  = "n3: {interface: n3, address: 10.61.0.2}"
		f1u = "f1u: {interface: f1u, address: 10.62.0.2}"
	)
	section := func(settings ...string) string { return "cuup: {" + strings.Join(settings, ", ") + "}\n" }
	tests := []struct {
		name, yaml, field string
	}{
		{"no N3 interface", section("n3: {address: 10.61.0.2}", f1u), "cuup.n3.interface"},
		{"no N3 section", section(f1u), "cuup.n3.interface"},
		{"long F1-U interface", section(n3, "f1u: {interface: abcdefghijklmnop, address: 10.62.0.2}"), "cuup.f1u.interface"},
		{"no F1-U address", section(n3, "f1u: {interface: f1u}"), "cuup.f1u.address"},
		{"garbage N3 address", section("n3: {interface: n3, address: 10.61.0}", f1u), "cuup.n3.address"},
		{"unspecified N3 address", section("n3: {interface: n3, address: 0.0.0.0}", f1u), "cuup.n3.address"},
		{"loopback N3 address", section("n3: {interface: n3, address: 127.0.0.1}", f1u), "cuup.n3.address"},
		{"multicast F1-U address", section(n3, "f1u: {interface: f1u, address: 224.0.0.5}"), "cuup.f1u.address"},
		{"broadcast F1-U address", section(n3, "f1u: {interface: f1u, address: 255.255.255.255}"), "cuup.f1u.address"},
		{"link-local F1-U address", section(n3, "f1u: {interface: f1u, address: 'fe80::1%f1u'}"), "cuup.f1u.address"},
		{"mapped F1-U address", section(n3, "f1u: {interface: f1u, address: '::ffff:10.62.0.2'}"), "cuup.f1u.address"},
		{"one address for both", section(n3, "f1u: {interface: f1u, address: 10.61.0.2}"), "cuup.f1u.address"},
		{"the UPF's N3 address", minimal + section("n3: {interface: n3, address: 192.0.2.1}", f1u), "cuup.n3.address"},
		{"unknown I/O", section(n3, f1u, "io: dpdk"), "cuup.io"},
		{"one interface for both", section(n3, "f1u: {interface: n3, address: 10.62.0.2}"), "cuup.f1u.interface"},
		{"on the UPF's interface", minimal + section("n3: {interface: eth0, address: 10.61.0.2}", f1u), "cuup.n3.interface"},
		{"on the classifier's interface", minimal + "classify: {interfaces: [f1u]}\n" + section(n3, f1u), "cuup.f1u.interface"},
		{"in offload mode", "xdp_mode: offload\n" + section(n3, f1u), "xdp_mode"},
		{"no queues", section(n3, f1u, "queues: []"), "cuup.queues"},
		{"negative queue", section(n3, f1u, "queues: [-1]"), "cuup.queues[0]"},
		{"queue 64", section(n3, f1u, "queues: [0, 64]"), "cuup.queues[1]"},
		{"queue twice", section(n3, f1u, "queues: [1, 1]"), "cuup.queues[1]"},
		{"few frames", section(n3, f1u, "frames: 64"), "cuup.frames"},
		{"negative crypto workers", section(n3, f1u, "crypto: {workers: -1}"), "cuup.crypto.workers"},
		{"unknown placement", section(n3, f1u, "crypto: {workers: 2, placement: fpga}"), "cuup.crypto.placement"},
		{"pool without workers", section(n3, f1u, "crypto: {placement: pool}"), "cuup.crypto.placement"},
		{"huge frames", section(n3, f1u, "frames: 2000000"), "cuup.frames"},
		{"sockets with queues", section(n3, f1u, "io: sockets", "queues: [0]"), "cuup.queues"},
		{"sockets with frames", section(n3, f1u, "io: sockets", "frames: 8192"), "cuup.frames"},
		{"sockets with busy polling", section(n3, f1u, "io: sockets", "busy_poll: false"), "cuup.busy_poll"},
		// Without the UPF there are no sessions for SMFs.
		{"PFCP without the UPF", "pfcp: {node_id: upf.example}\n" + section(n3, f1u), "pfcp"},
		// The UPF's settings are checked whenever one of them is given.
		{"UPF interfaces without N3 addresses", "interfaces: [{name: eth0, roles: [access, core]}]\n" + section(n3, f1u), "n3_addresses"},
		{"N3 addresses without UPF interfaces", "n3_addresses: [192.0.2.1]\n" + section(n3, f1u), "interfaces"},
		{"neither UPF nor CU-UP", "api: {listen: '127.0.0.1:1'}", "interfaces"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse([]byte(tt.yaml))
			var fe *fielderr.Error
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Fatalf("error %v, want one naming %s", err, tt.field)
			}
		})
	}
}

func TestPFCPDefaults(t *testing.T) {
	tests := map[string]string{
		// An address Node ID is the UPF's one PFCP address.
		"192.0.2.10":  "192.0.2.10:8805",
		"2001:db8::a": "[2001:db8::a]:8805",
		"upf.example": ":8805",
	}
	for nodeID, listen := range tests {
		cfg, err := parse([]byte(minimal + "pfcp: {node_id: '" + nodeID + "'}\n"))
		if err != nil {
			t.Fatal(err)
		}
		want := &PFCP{Listen: listen, NodeID: nodeID, HeartbeatInterval: 10 * time.Second, T1: 3 * time.Second, N1: 3,
			TrafficStopAfter: 10 * time.Second, GTPUEchoInterval: time.Minute, GTPUEchoRetries: 3}
		if !reflect.DeepEqual(cfg.PFCP, want) {
			t.Errorf("got %+v\nwant %+v", cfg.PFCP, want)
		}
	}
}

func TestClassifyDefaults(t *testing.T) {
	cfg, err := parse([]byte(minimal + "state_file: /srv/upf/state.json\nclassify: {interfaces: [edge0]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := &Classify{Interfaces: []string{"edge0"}, MaxMasks: classifyxdp.DefaultMaxMasks, OrphanFragments: classifyxdp.ActionPass,
		RulesFile: "/srv/upf/rules.json", ReportInterval: 10 * time.Second}
	if !reflect.DeepEqual(cfg.Classify, want) {
		t.Errorf("got %+v\nwant %+v", cfg.Classify, want)
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("xdp_mode: turbo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.HasPrefix(err.Error(), path+": ") {
		t.Errorf("Load = %v, want an error starting with the path", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file = %v", err)
	}
}

func TestInvalidSettingsNameTheField(t *testing.T) {
	tests := []struct {
		name, yaml, field string
	}{
		{"no interfaces", "interfaces: []", "interfaces"},
		{"empty name", "interfaces: [{name: '', roles: [core]}]", "interfaces[0].name"},
		{"long name", "interfaces: [{name: abcdefghijklmnop, roles: [core]}]", "interfaces[0].name"},
		{"slash in name", "interfaces: [{name: ../x, roles: [core]}]", "interfaces[0].name"},
		{"same name twice", "interfaces: [{name: a, roles: [access]}, {name: a, roles: [core]}]", "interfaces[1].name"},
		{"no roles", "interfaces: [{name: a}]", "interfaces[0].roles"},
		{"unknown role", "interfaces: [{name: a, roles: [access, n9]}]", "interfaces[0].roles[1]"},
		{"role twice", "interfaces: [{name: a, roles: [core, core]}]", "interfaces[0].roles[1]"},
		{"no access role", "interfaces: [{name: a, roles: [core]}]\nn3_addresses: [192.0.2.1]", "interfaces"},
		{"no N3 address", "n3_addresses: []", "n3_addresses"},
		{"five N3 addresses", "n3_addresses: [192.0.2.1, 192.0.2.2, 192.0.2.3, 192.0.2.4, 192.0.2.5]", "n3_addresses"},
		{"IPv6 N3 address", "n3_addresses: [192.0.2.1, '2001:db8::1']", "n3_addresses[1]"},
		{"unspecified N3 address", "n3_addresses: [0.0.0.0]", "n3_addresses[0]"},
		{"garbage N3 address", "n3_addresses: [192.0.2]", "n3_addresses[0]"},
		{"N3 address twice", "n3_addresses: [192.0.2.1, 192.0.2.1]", "n3_addresses[1]"},
		{"xdp mode", "xdp_mode: skb", "xdp_mode"},
		{"netns path", "netns: /run/netns/upf", "netns"},
		{"listen without port", "api: {listen: 127.0.0.1}", "api.listen"},
		{"listen named port", "api: {listen: 'localhost:http'}", "api.listen"},
		{"relative pin path", "datapath: {pin_path: xdp5g}", "upfxdp.pin_path"},
		{"root pin path", "datapath: {pin_path: /}", "upfxdp.pin_path"},
		{"bpffs root as pin path", "datapath: {pin_path: /sys/fs/bpf}", "upfxdp.pin_path"},
		{"zero sessions", "datapath: {max_sessions: 0}", "upfxdp.max_sessions"},
		{"huge sessions", "datapath: {max_sessions: 4000000000}", "upfxdp.max_sessions"},
		{"no buffering", "buffering: {session_packets: 0}", "buffering.session_packets"},
		{"huge buffers", "buffering: {total_packets: 2000000}", "buffering.total_packets"},
		{"relative state file", "state_file: sessions.json", "state_file"},
		{"PFCP without node ID", "pfcp: {listen: ':8805'}", "pfcp.node_id"},
		{"PFCP node ID", "pfcp: {node_id: 'upf_1.example'}", "pfcp.node_id"},
		{"PFCP node ID with zone", "pfcp: {node_id: 'fe80::1%eth0'}", "pfcp.node_id"},
		{"PFCP listen without port", "pfcp: {node_id: upf.example, listen: 192.0.2.1}", "pfcp.listen"},
		{"PFCP peer port", "pfcp: {node_id: upf.example, peers: ['smf.example:0']}", "pfcp.peers[0]"},
		{"PFCP peer host", "pfcp: {node_id: upf.example, peers: ['smf.example', 'smf..example']}", "pfcp.peers[1]"},
		{"PFCP peer twice", "pfcp: {node_id: upf.example, peers: [192.0.2.2, '192.0.2.2:8805']}", "pfcp.peers[1]"},
		{"PFCP zero heartbeat", "pfcp: {node_id: upf.example, heartbeat_interval: 0s}", "pfcp.heartbeat_interval"},
		{"PFCP negative stop of traffic", "pfcp: {node_id: upf.example, traffic_stop_after: -1s}", "pfcp.traffic_stop_after"},
		{"PFCP zero GTP-U echo interval", "pfcp: {node_id: upf.example, gtpu_echo_interval: 0s}", "pfcp.gtpu_echo_interval"},
		{"PFCP no GTP-U echo retries", "pfcp: {node_id: upf.example, gtpu_echo_retries: 0}", "pfcp.gtpu_echo_retries"},
		{"PFCP negative T1", "pfcp: {node_id: upf.example, t1: -1s}", "pfcp.t1"},
		{"PFCP N1 0", "pfcp: {node_id: upf.example, n1: 0}", "pfcp.n1"},
		{"PFCP N1 11", "pfcp: {node_id: upf.example, n1: 11}", "pfcp.n1"},
		{"UE pool without length", "pfcp: {node_id: upf.example, ue_pool: 10.45.0.0}", "pfcp.ue_pool"},
		{"IPv6 UE pool", "pfcp: {node_id: upf.example, ue_pool: '2001:db8::/48'}", "pfcp.ue_pool"},
		{"UE pool with host bits", "pfcp: {node_id: upf.example, ue_pool: 10.45.0.1/16}", "pfcp.ue_pool"},
		{"UE pool over 2^24", "pfcp: {node_id: upf.example, ue_pool: 10.0.0.0/7}", "pfcp.ue_pool"},
		{"UE pool holding N3", "pfcp: {node_id: upf.example, ue_pool: 192.0.2.0/24}", "pfcp.ue_pool"},
		{"instance's UE pool with host bits", "pfcp: {node_id: upf.example, ue_pools: {ims: 10.46.0.1/16}}", `pfcp.ue_pools["ims"]`},
		{"instance's UE pool in the default", "pfcp: {node_id: upf.example, ue_pool: 10.45.0.0/16, ue_pools: {ims: 10.45.128.0/17}}", `pfcp.ue_pools["ims"]`},
		{"instances' UE pools overlapping", "pfcp: {node_id: upf.example, ue_pools: {a: 10.46.0.0/16, b: 10.46.9.0/24}}", `pfcp.ue_pools["b"]`},
		{"UE pool of no instance", `pfcp: {node_id: upf.example, ue_pools: {"": 10.46.0.0/16}}`, `pfcp.ue_pools[""]`},
		{"forwarding policy to a name", "pfcp: {node_id: upf.example, forwarding_policies: {fw: gw.example}}", `pfcp.forwarding_policies["fw"]`},
		{"forwarding policy to multicast", "pfcp: {node_id: upf.example, forwarding_policies: {fw: 224.0.0.9}}", `pfcp.forwarding_policies["fw"]`},
		{"empty forwarding policy identifier", `pfcp: {node_id: upf.example, forwarding_policies: {"": 192.0.2.9}}`, `pfcp.forwarding_policies[""]`},
		{"classify without interfaces", "classify: {max_masks: 4}", "classifyxdp.interfaces"},
		{"classify interface name", "classify: {interfaces: [edge0, 'a/b']}", "classifyxdp.interfaces[1]"},
		{"classify interface twice", "classify: {interfaces: [edge0, edge0]}", "classifyxdp.interfaces[1]"},
		{"classify on the UPF's interface", "classify: {interfaces: [eth0]}", "classifyxdp.interfaces[0]"},
		{"classify zero masks", "classify: {interfaces: [edge0], max_masks: 0}", "classifyxdp.max_masks"},
		{"classify too many masks", "classify: {interfaces: [edge0], max_masks: 33}", "classifyxdp.max_masks"},
		{"classify orphan fragments", "classify: {interfaces: [edge0], orphan_fragments: mirror}", "classifyxdp.orphan_fragments"},
		{"classify relative rules file", "classify: {interfaces: [edge0], rules_file: rules.json}", "classifyxdp.rules_file"},
		{"classify reports too often", "classify: {interfaces: [edge0], reports: {interval: 1ms}}", "classifyxdp.reports.interval"},
		{"classify webhook not a URL", "classify: {interfaces: [edge0], reports: {webhooks: ['http://a/', 'collector:80']}}", "classifyxdp.reports.webhooks[1]"},
		{"classify rules in the state file", "state_file: /srv/s.json\nclassify: {interfaces: [edge0], rules_file: /srv/s.json}", "classifyxdp.rules_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Later keys override minimal's, so each case breaks one thing.
			doc := tt.yaml
			if !regexp.MustCompile(`(?m)^interfaces:`).MatchString(doc) {
				doc += "\ninterfaces: [{name: eth0, roles: [access, core]}]"
			}
			if !strings.Contains(doc, "n3_addresses:") {
				doc += "\nn3_addresses: [192.0.2.1]"
			}
			_, err := parse([]byte(doc))
			var fe *fielderr.Error
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Fatalf("error %v, want one naming %s", err, tt.field)
			}
		})
	}
}

func TestMalformedFilesAreRejected(t *testing.T) {
	tests := map[string]struct{ yaml, want string }{
		"unknown field":  {minimal + "listen: 127.0.0.1:1\n", "listen"},
		"unknown nested": {minimal + "api: {port: 1}\n", "port"},
		"wrong type":     {minimal + "datapath: {max_sessions: lots}\n", "line 6"},
		"negative":       {minimal + "datapath: {max_sessions: -1}\n", "-1"},
		"two documents":  {minimal + "---\n" + minimal, "one YAML document"},
		"unknown PFCP":   {minimal + "pfcp: {node_id: upf.example, port: 1}\n", "port"},
		"unknown CU-UP":  {cuupOnly + "  mode: native\n", "mode"},
		"T1 in numbers":  {minimal + "pfcp: {node_id: upf.example, t1: 3}\n", "line 6"},
		"syntax":         {"interfaces: [\n", "line"},
		// yaml.v3 places type errors by line.
		"roles not a list": {"interfaces:\n  - name: a\n    roles: access\n", "line 3"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := parse([]byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}
