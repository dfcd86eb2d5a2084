package config

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
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
		Interfaces:  []Interface{{Name: "eth0", Roles: upfxdp.RoleAccess | upfxdp.RoleCore, Stages: []string{StageUPF}}},
		N3Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.1")},
		XDPMode:     xdplink.ModeNative,
		API:         API{Listen: "127.0.0.1:9880"},
		Datapath:    Datapath{PinPath: "/sys/fs/bpf/xdp5g", MaxSessions: 65536, ErrorIndicationRate: 100},
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
    stages: [classify, steer, upf]
    slice: 3
  - name: n6
    roles: [core]
    stages: [classify, upf]
n3_addresses: [192.0.2.1, 198.51.100.1, "2001:db8:3::1"]
n9_addresses: [192.0.2.9]
xdp_mode: generic
netns: upf
api:
  listen: "[2001:db8::1]:8080"
  token_file: /etc/xdp5g/token
  tls: {cert_file: /etc/xdp5g/api.crt, key_file: /etc/xdp5g/api.key}
datapath:
  pin_path: /sys/fs/bpf/upf2/
  max_sessions: 1024
  ephemeral: true
  error_indication_rate: 0
buffering:
  session_packets: 64
  total_packets: 1000
state_file: /tmp/upf2/state.json
pfcp:
  listen: "[::]:8806"
  node_id: upf.example
  peers: [smf1.example, "192.0.2.20:8806", "2001:db8::20"]
  allowed_peers: [192.0.2.0/24, "2001:db8::21", "::ffff:198.51.100.7"]
  heartbeat_interval: 5s
  t1: 1500ms
  n1: 5
  traffic_stop_after: 30s
  gtpu_echo_interval: 20s
  gtpu_echo_retries: 5
  ue_pool: 10.45.0.0/16
  ue_pools: {ims: 10.46.0.0/16, internet.mnc001: 10.47.0.0/24}
  n9_network_instances: [n9, roaming.mnc001]
  forwarding_policies: {to-firewall: 198.51.100.9, "video optimiser": "2001:db8:6::9"}
  state_dir: /tmp/upf2/n4/
  state_sync: true
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
		Interfaces: []Interface{{Name: "n3", Roles: upfxdp.RoleAccess, Stages: []string{StageClassify, StageSteer, StageUPF}, Slice: 3},
			{Name: "n6", Roles: upfxdp.RoleCore, Stages: []string{StageClassify, StageUPF}}},
		N3Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("2001:db8:3::1")},
		N9Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.9")},
		XDPMode:     xdplink.ModeGeneric,
		Netns:       "upf",
		API: API{Listen: "[2001:db8::1]:8080", TokenFile: "/etc/xdp5g/token",
			TLS: &TLS{CertFile: "/etc/xdp5g/api.crt", KeyFile: "/etc/xdp5g/api.key"}},
		Datapath:  Datapath{PinPath: "/sys/fs/bpf/upf2", MaxSessions: 1024, Ephemeral: true},
		Buffering: Buffering{SessionPackets: 64, TotalPackets: 1000},
		StateFile: "/tmp/upf2/state.json",
		PFCP: &PFCP{
			Listen: "[::]:8806",
			NodeID: "upf.example",
			Peers:  []string{"smf1.example:8805", "192.0.2.20:8806", "[2001:db8::20]:8805"},
			AllowedPeers: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8::21/128"),
				netip.MustParsePrefix("198.51.100.7/32")},
			HeartbeatInterval: 5 * time.Second,
			T1:                1500 * time.Millisecond,
			N1:                5,
			TrafficStopAfter:  30 * time.Second,
			GTPUEchoInterval:  20 * time.Second,
			GTPUEchoRetries:   5,
			UEPool:            netip.MustParsePrefix("10.45.0.0/16"),
			UEPools: map[string]netip.Prefix{"ims": netip.MustParsePrefix("10.46.0.0/16"),
				"internet.mnc001": netip.MustParsePrefix("10.47.0.0/24")},
			N9NetworkInstances: []string{"n9", "roaming.mnc001"},
			ForwardingPolicies: map[string]netip.Addr{"to-firewall": netip.MustParseAddr("198.51.100.9"),
				"video optimiser": netip.MustParseAddr("2001:db8:6::9")},
			StateDir:  "/tmp/upf2/n4",
			StateSync: true,
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

// withoutUPF is the configuration of a file with no UPF and no section:
// every setting at its default.
func withoutUPF() *Config {
	return &Config{
		XDPMode:   xdplink.ModeNative,
		API:       API{Listen: "127.0.0.1:9880"},
		Datapath:  Datapath{PinPath: "/sys/fs/bpf/xdp5g", MaxSessions: 65536, ErrorIndicationRate: 100},
		Buffering: Buffering{SessionPackets: 256, TotalPackets: 32768},
		StateFile: "/var/lib/xdp5g/sessions.json",
	}
}

// A daemon may run a CU-UP without a UPF; the AF_XDP path is the default.
func TestCUUPAlone(t *testing.T) {
	cfg, err := parse([]byte(cuupOnly))
	if err != nil {
		t.Fatal(err)
	}
	want := withoutUPF()
	want.CUUP = &CUUP{N3: CUUPInterface{Interface: "n3", Address: netip.MustParseAddr("10.61.0.2")},
		F1U: CUUPInterface{Interface: "f1u", Address: netip.MustParseAddr("10.62.0.2")},
		IO:  CUUPAFXDP, Queues: []int{0}, Frames: 8192}
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
		{name: "no N3 interface", yaml: section("n3: {address: 10.61.0.2}", f1u), field: "cuup.n3.interface"},
		{name: "no N3 section", yaml: section(f1u), field: "cuup.n3.interface"},
		{name: "long F1-U interface", yaml: section(n3, "f1u: {interface: abcdefghijklmnop, address: 10.62.0.2}"), field: "cuup.f1u.interface"},
		{name: "no F1-U address", yaml: section(n3, "f1u: {interface: f1u}"), field: "cuup.f1u.address"},
		{name: "garbage N3 address", yaml: section("n3: {interface: n3, address: 10.61.0}", f1u), field: "cuup.n3.address"},
		{name: "unspecified N3 address", yaml: section("n3: {interface: n3, address: 0.0.0.0}", f1u), field: "cuup.n3.address"},
		{name: "loopback N3 address", yaml: section("n3: {interface: n3, address: 127.0.0.1}", f1u), field: "cuup.n3.address"},
		{name: "multicast F1-U address", yaml: section(n3, "f1u: {interface: f1u, address: 224.0.0.5}"), field: "cuup.f1u.address"},
		{name: "broadcast F1-U address", yaml: section(n3, "f1u: {interface: f1u, address: 255.255.255.255}"), field: "cuup.f1u.address"},
		{name: "link-local F1-U address", yaml: section(n3, "f1u: {interface: f1u, address: 'fe80::1%f1u'}"), field: "cuup.f1u.address"},
		{name: "mapped F1-U address", yaml: section(n3, "f1u: {interface: f1u, address: '::ffff:10.62.0.2'}"), field: "cuup.f1u.address"},
		{name: "one address for both", yaml: section(n3, "f1u: {interface: f1u, address: 10.61.0.2}"), field: "cuup.f1u.address"},
		{name: "the UPF's N3 address", yaml: minimal + section("n3: {interface: n3, address: 192.0.2.1}", f1u), field: "cuup.n3.address"},
		{name: "unknown I/O", yaml: section(n3, f1u, "io: dpdk"), field: "cuup.io"},
		{name: "one interface for both", yaml: section(n3, "f1u: {interface: n3, address: 10.62.0.2}"), field: "cuup.f1u.interface"},
		{name: "on the UPF's interface", yaml: minimal + section("n3: {interface: eth0, address: 10.61.0.2}", f1u), field: "cuup.n3.interface"},
		{name: "on the classifier's interface", yaml: minimal + "classify: {interfaces: [f1u]}\n" + section(n3, f1u), field: "cuup.f1u.interface"},
		{name: "in offload mode", yaml: "xdp_mode: offload\n" + section(n3, f1u), field: "xdp_mode"},
		{name: "no queues", yaml: section(n3, f1u, "queues: []"), field: "cuup.queues"},
		{name: "negative queue", yaml: section(n3, f1u, "queues: [-1]"), field: "cuup.queues[0]"},
		{name: "queue 64", yaml: section(n3, f1u, "queues: [0, 64]"), field: "cuup.queues[1]"},
		{name: "queue twice", yaml: section(n3, f1u, "queues: [1, 1]"), field: "cuup.queues[1]"},
		{name: "few frames", yaml: section(n3, f1u, "frames: 64"), field: "cuup.frames"},
		{name: "negative crypto workers", yaml: section(n3, f1u, "crypto: {workers: -1}"), field: "cuup.crypto.workers"},
		{name: "unknown placement", yaml: section(n3, f1u, "crypto: {workers: 2, placement: fpga}"), field: "cuup.crypto.placement"},
		{name: "pool without workers", yaml: section(n3, f1u, "crypto: {placement: pool}"), field: "cuup.crypto.placement"},
		{name: "huge frames", yaml: section(n3, f1u, "frames: 2000000"), field: "cuup.frames"},
		{name: "sockets with queues", yaml: section(n3, f1u, "io: sockets", "queues: [0]"), field: "cuup.queues"},
		{name: "sockets with frames", yaml: section(n3, f1u, "io: sockets", "frames: 8192"), field: "cuup.frames"},
		{name: "sockets with busy polling", yaml: section(n3, f1u, "io: sockets", "busy_poll: false"), field: "cuup.busy_poll"},
		// Without the UPF there are no sessions for SMFs.
		{name: "PFCP without the UPF", yaml: "pfcp: {node_id: upf.example}\n" + section(n3, f1u), field: "pfcp"},
		// The UPF's settings are checked whenever one of them is given.
		{name: "UPF interfaces without N3 addresses", yaml: "interfaces: [{name: eth0, roles: [access, core]}]\n" + section(n3, f1u), field: "n3_addresses"},
		{name: "N3 addresses without UPF interfaces", yaml: "n3_addresses: [192.0.2.1]\n" + section(n3, f1u), field: "interfaces"},
		{name: "neither UPF nor CU-UP", yaml: "api: {listen: '127.0.0.1:1'}", field: "interfaces"},
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
		want := &PFCP{Listen: listen, NodeID: nodeID, AllowedPeers: DefaultAllowedPeers, HeartbeatInterval: 10 * time.Second, T1: 3 * time.Second, N1: 3,
			TrafficStopAfter: 10 * time.Second, GTPUEchoInterval: time.Minute, GTPUEchoRetries: 3,
			StateDir: "/var/lib/xdp5g/pfcp"} // next to the default state_file
		if !reflect.DeepEqual(cfg.PFCP, want) {
			t.Errorf("got %+v\nwant %+v", cfg.PFCP, want)
		}
	}
}

// The UP F-SEIDs carry the address SMFs reach PFCP at: pfcp.listen's,
// else an address Node ID; none for an FQDN served on every address.
func TestPFCPSEIDAddress(t *testing.T) {
	tests := []struct{ pfcp, want string }{
		{"{node_id: 192.0.2.10}", "192.0.2.10"},
		{"{node_id: '2001:db8::a'}", "2001:db8::a"},
		{"{node_id: upf.example, listen: '198.51.100.4:8805'}", "198.51.100.4"},
		{"{node_id: 192.0.2.10, listen: '127.0.0.1:18805'}", "127.0.0.1"},
		{"{node_id: 192.0.2.10, listen: ':8805'}", "192.0.2.10"},
		{"{node_id: upf.example}", "invalid IP"},
	}
	for _, tt := range tests {
		cfg, err := parse([]byte(minimal + "pfcp: " + tt.pfcp + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.PFCP.SEIDAddress().String(); got != tt.want {
			t.Errorf("pfcp %s: UP F-SEID address %s, want %s", tt.pfcp, got, tt.want)
		}
	}
}

// A loopback REST API needs no token; allowed_peers given empty takes
// PFCP messages from the configured peers only.
func TestLoopbackAndPeersOnly(t *testing.T) {
	for _, listen := range []string{"127.0.0.2:9880", "[::1]:9880", "localhost:9880"} {
		if _, err := parse([]byte(minimal + "api: {listen: '" + listen + "'}\n")); err != nil {
			t.Errorf("api.listen %s without a token: %v", listen, err)
		}
	}
	cfg, err := parse([]byte(minimal + "pfcp: {node_id: upf.example, allowed_peers: []}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PFCP.AllowedPeers == nil || len(cfg.PFCP.AllowedPeers) != 0 {
		t.Errorf("allowed_peers: [] gave %v, want none", cfg.PFCP.AllowedPeers)
	}
}

// An interface of the role copies has no role of the data path's.
func TestCopiesRole(t *testing.T) {
	cfg, err := parse([]byte("interfaces: [{name: eth0, roles: [access, core]}, {name: li, roles: [copies]}]\nn3_addresses: [192.0.2.1]\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Interface{{Name: "eth0", Roles: upfxdp.RoleAccess | upfxdp.RoleCore, Stages: []string{StageUPF}},
		{Name: "li", Roles: upfxdp.RoleCopies, Stages: []string{StageUPF}}}
	if !reflect.DeepEqual(cfg.Interfaces, want) || !slices.Equal(cfg.CoreInterfaces(), []string{"eth0"}) {
		t.Errorf("interfaces %+v, core %v; want %+v, [eth0]", cfg.Interfaces, cfg.CoreInterfaces(), want)
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

// A daemon may run the classifier without a UPF: no interfaces, N3
// addresses nor PFCP; a UPF's or PFCP's settings then ask for the UPF.
func TestClassifyAlone(t *testing.T) {
	cfg, err := parse([]byte("api: {listen: '127.0.0.1:9881'}\nclassify: {interfaces: [edge0]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := withoutUPF()
	want.API.Listen = "127.0.0.1:9881"
	want.Classify = &Classify{Interfaces: []string{"edge0"}, MaxMasks: classifyxdp.DefaultMaxMasks, OrphanFragments: classifyxdp.ActionPass,
		RulesFile: "/var/lib/xdp5g/rules.json", ReportInterval: 10 * time.Second}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got %+v\nwant %+v", cfg, want)
	}
	if cfg.UPF() {
		t.Error("UPF() = true without the UPF's interfaces")
	}
	for _, c := range []struct{ name, yaml, field string }{
		{name: "PFCP", yaml: "pfcp: {node_id: upf.example}", field: "pfcp"},
		{name: "N9 addresses", yaml: "n9_addresses: [192.0.2.9]", field: "n9_addresses"},
		{name: "interfaces without N3 addresses", yaml: "interfaces: [{name: eth0, roles: [access, core]}]", field: "n3_addresses"},
		{name: "N3 addresses without interfaces", yaml: "n3_addresses: [192.0.2.1]", field: "interfaces"},
		{name: "no classifier interfaces", yaml: "classify: {interfaces: []}", field: "classify.interfaces"},
	} {
		doc := "classify: {interfaces: [edge0]}\n" + c.yaml
		if strings.HasPrefix(c.yaml, "classify:") {
			doc = c.yaml
		}
		var fe *fielderr.Error
		if _, err := parse([]byte(doc)); !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: error %v, want one naming %s", c.name, err, c.field)
		}
	}
}

// The classifier may run only as the UPF's interfaces' stages: the classify
// section then needs no interface of its own.
func TestClassifyOnlyAsStages(t *testing.T) {
	cfg, err := parse([]byte("interfaces: [{name: n3, roles: [access], stages: [classify, steer, upf]}, {name: n6, roles: [core]}]\n" +
		"n3_addresses: [192.0.2.1]\nclassify: {max_masks: 4}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Classify == nil || len(cfg.Classify.Interfaces) != 0 || cfg.Classify.MaxMasks != 4 {
		t.Errorf("classify %+v, want no interfaces of its own and max_masks 4", cfg.Classify)
	}
}

// A refused order of stages says which stage goes first.
func TestStagesOrderMessage(t *testing.T) {
	for stages, want := range map[string]string{
		"[steer, classify, upf]":    "interfaces[0].stages[1]: classify must come before steer (classify, steer, upf)",
		"[upf, classify]":           "interfaces[0].stages[1]: classify must come before upf (classify, steer, upf)",
		"[classify, classify, upf]": "interfaces[0].stages[1]: classify is named twice",
	} {
		_, err := parse([]byte("interfaces: [{name: a, roles: [access, core], stages: " + stages + "}]\nn3_addresses: [192.0.2.1]\nclassify: {}\n"))
		if err == nil || err.Error() != want {
			t.Errorf("stages %s: error %v, want %q", stages, err, want)
		}
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
		{name: "no interfaces", yaml: "interfaces: []", field: "interfaces"},
		{name: "empty name", yaml: "interfaces: [{name: '', roles: [core]}]", field: "interfaces[0].name"},
		{name: "long name", yaml: "interfaces: [{name: abcdefghijklmnop, roles: [core]}]", field: "interfaces[0].name"},
		{name: "slash in name", yaml: "interfaces: [{name: ../x, roles: [core]}]", field: "interfaces[0].name"},
		{name: "same name twice", yaml: "interfaces: [{name: a, roles: [access]}, {name: a, roles: [core]}]", field: "interfaces[1].name"},
		{name: "no roles", yaml: "interfaces: [{name: a}]", field: "interfaces[0].roles"},
		{name: "unknown role", yaml: "interfaces: [{name: a, roles: [access, n9]}]", field: "interfaces[0].roles[1]"},
		{name: "role twice", yaml: "interfaces: [{name: a, roles: [core, core]}]", field: "interfaces[0].roles[1]"},
		{name: "unknown stage", yaml: "interfaces: [{name: a, roles: [access, core], stages: [police, upf]}]", field: "interfaces[0].stages[0]"},
		{name: "stages out of order", yaml: "interfaces: [{name: a, roles: [access, core], stages: [steer, classify, upf]}]", field: "interfaces[0].stages[1]"},
		{name: "stage twice", yaml: "interfaces: [{name: a, roles: [access, core], stages: [classify, classify, upf]}]", field: "interfaces[0].stages[1]"},
		{name: "UPF not last", yaml: "interfaces: [{name: a, roles: [access, core], stages: [classify]}]", field: "interfaces[0].stages"},
		{name: "classify stage without the classifier", yaml: "interfaces: [{name: a, roles: [access, core], stages: [classify, upf]}]", field: "interfaces[0].stages"},
		{name: "copies and another role", yaml: "interfaces: [{name: a, roles: [access, core]}, {name: li, roles: [core, copies]}]", field: "interfaces[1].roles[1]"},
		{name: "slice beyond the last", yaml: "interfaces: [{name: a, roles: [access, core], stages: [steer, upf], slice: 256}]", field: "interfaces[0].slice"},
		{name: "stages on copies", yaml: "interfaces: [{name: a, roles: [access, core]}, {name: li, roles: [copies], stages: [steer, upf]}]", field: "interfaces[1].stages"},
		{name: "copies alone", yaml: "interfaces: [{name: li, roles: [copies]}]", field: "interfaces"},
		{name: "no access role", yaml: "interfaces: [{name: a, roles: [core]}]\nn3_addresses: [192.0.2.1]", field: "interfaces"},
		{name: "no N3 address", yaml: "n3_addresses: []", field: "n3_addresses"},
		{name: "nine N3 addresses", yaml: "n3_addresses: [192.0.2.1, 192.0.2.2, 192.0.2.3, 192.0.2.4, 192.0.2.5, 192.0.2.6, 192.0.2.7, 192.0.2.8, 192.0.2.9]", field: "n3_addresses"},
		{name: "nine N3 addresses of both families", yaml: "n3_addresses: [192.0.2.1, '2001:db8::1', '2001:db8::2', '2001:db8::3', '2001:db8::4', '2001:db8::5', '2001:db8::6', '2001:db8::7', '2001:db8::8']", field: "n3_addresses"},
		{name: "nine N3 and N9 addresses", yaml: "n3_addresses: [192.0.2.1, 192.0.2.2, 192.0.2.3, 192.0.2.4, 192.0.2.5]\nn9_addresses: [192.0.2.6, 192.0.2.7, '2001:db8::8', 192.0.2.9]", field: "n9_addresses"},
		{name: "N9 address that is an N3 one", yaml: "n3_addresses: [192.0.2.1]\nn9_addresses: [192.0.2.1]", field: "n9_addresses[0]"},
		{name: "IPv6 N9 address that is an N3 one", yaml: "n3_addresses: ['2001:db8::1']\nn9_addresses: ['2001:db8::1']", field: "n9_addresses[0]"},
		{name: "multicast IPv6 N3 address", yaml: "n3_addresses: [192.0.2.1, 'ff02::1']", field: "n3_addresses[1]"},
		{name: "multicast IPv6 N9 address", yaml: "n3_addresses: [192.0.2.1]\nn9_addresses: ['ff02::1']", field: "n9_addresses[0]"},
		{name: "IPv4-mapped N3 address", yaml: "n3_addresses: ['::ffff:192.0.2.1']", field: "n3_addresses[0]"},
		{name: "N3 address with a zone", yaml: "n3_addresses: ['fe80::1%eth0']", field: "n3_addresses[0]"},
		{name: "unspecified N3 address", yaml: "n3_addresses: [0.0.0.0]", field: "n3_addresses[0]"},
		{name: "garbage N3 address", yaml: "n3_addresses: [192.0.2]", field: "n3_addresses[0]"},
		{name: "N3 address twice", yaml: "n3_addresses: [192.0.2.1, 192.0.2.1]", field: "n3_addresses[1]"},
		{name: "xdp mode", yaml: "xdp_mode: skb", field: "xdp_mode"},
		{name: "netns path", yaml: "netns: /run/netns/upf", field: "netns"},
		{name: "listen without port", yaml: "api: {listen: 127.0.0.1}", field: "api.listen"},
		{name: "listen named port", yaml: "api: {listen: 'localhost:http'}", field: "api.listen"},
		{name: "listen on a port the kernel picks", yaml: "api: {listen: '127.0.0.1:0'}", field: "api.listen"},
		{name: "listen on every address without a token", yaml: "api: {listen: ':9880'}", field: "api.token_file"},
		{name: "listen on an address without a token", yaml: "api: {listen: '192.0.2.1:9880'}", field: "api.token_file"},
		{name: "listen on a name without a token", yaml: "api: {listen: 'upf.example:9880'}", field: "api.token_file"},
		{name: "relative token file", yaml: "api: {token_file: token}", field: "api.token_file"},
		{name: "certificate without its key", yaml: "api: {tls: {cert_file: /etc/api.crt}}", field: "api.tls.key_file"},
		{name: "key without its certificate", yaml: "api: {tls: {key_file: /etc/api.key}}", field: "api.tls.cert_file"},
		{name: "relative key file", yaml: "api: {tls: {cert_file: /etc/api.crt, key_file: api.key}}", field: "api.tls.key_file"},
		{name: "relative pin path", yaml: "datapath: {pin_path: xdp5g}", field: "datapath.pin_path"},
		{name: "root pin path", yaml: "datapath: {pin_path: /}", field: "datapath.pin_path"},
		{name: "bpffs root as pin path", yaml: "datapath: {pin_path: /sys/fs/bpf}", field: "datapath.pin_path"},
		{name: "zero sessions", yaml: "datapath: {max_sessions: 0}", field: "datapath.max_sessions"},
		{name: "huge sessions", yaml: "datapath: {max_sessions: 4000000000}", field: "datapath.max_sessions"},
		{name: "reflector's Error Indication rate", yaml: "datapath: {error_indication_rate: 1000000}", field: "datapath.error_indication_rate"},
		{name: "no buffering", yaml: "buffering: {session_packets: 0}", field: "buffering.session_packets"},
		{name: "huge buffers", yaml: "buffering: {total_packets: 2000000}", field: "buffering.total_packets"},
		{name: "relative state file", yaml: "state_file: sessions.json", field: "state_file"},
		{name: "PFCP without node ID", yaml: "pfcp: {listen: ':8805'}", field: "pfcp.node_id"},
		{name: "PFCP node ID", yaml: "pfcp: {node_id: 'upf_1.example'}", field: "pfcp.node_id"},
		{name: "PFCP node ID with zone", yaml: "pfcp: {node_id: 'fe80::1%eth0'}", field: "pfcp.node_id"},
		{name: "PFCP listen without port", yaml: "pfcp: {node_id: upf.example, listen: 192.0.2.1}", field: "pfcp.listen"},
		{name: "PFCP listen on a port the kernel picks", yaml: "pfcp: {node_id: upf.example, listen: ':0'}", field: "pfcp.listen"},
		{name: "PFCP peer port", yaml: "pfcp: {node_id: upf.example, peers: ['smf.example:0']}", field: "pfcp.peers[0]"},
		{name: "PFCP peer host", yaml: "pfcp: {node_id: upf.example, peers: ['smf.example', 'smf..example']}", field: "pfcp.peers[1]"},
		{name: "PFCP allowed peer name", yaml: "pfcp: {node_id: upf.example, allowed_peers: [smf.example]}", field: "pfcp.allowed_peers[0]"},
		{name: "PFCP allowed prefix with host bits", yaml: "pfcp: {node_id: upf.example, allowed_peers: [192.0.2.0/24, 10.0.0.1/8]}", field: "pfcp.allowed_peers[1]"},
		{name: "PFCP peer twice", yaml: "pfcp: {node_id: upf.example, peers: [192.0.2.2, '192.0.2.2:8805']}", field: "pfcp.peers[1]"},
		{name: "PFCP zero heartbeat", yaml: "pfcp: {node_id: upf.example, heartbeat_interval: 0s}", field: "pfcp.heartbeat_interval"},
		{name: "PFCP negative stop of traffic", yaml: "pfcp: {node_id: upf.example, traffic_stop_after: -1s}", field: "pfcp.traffic_stop_after"},
		{name: "PFCP zero GTP-U echo interval", yaml: "pfcp: {node_id: upf.example, gtpu_echo_interval: 0s}", field: "pfcp.gtpu_echo_interval"},
		{name: "PFCP no GTP-U echo retries", yaml: "pfcp: {node_id: upf.example, gtpu_echo_retries: 0}", field: "pfcp.gtpu_echo_retries"},
		{name: "PFCP negative T1", yaml: "pfcp: {node_id: upf.example, t1: -1s}", field: "pfcp.t1"},
		{name: "PFCP N1 0", yaml: "pfcp: {node_id: upf.example, n1: 0}", field: "pfcp.n1"},
		{name: "PFCP N1 11", yaml: "pfcp: {node_id: upf.example, n1: 11}", field: "pfcp.n1"},
		{name: "UE pool without length", yaml: "pfcp: {node_id: upf.example, ue_pool: 10.45.0.0}", field: "pfcp.ue_pool"},
		{name: "IPv6 UE pool", yaml: "pfcp: {node_id: upf.example, ue_pool: '2001:db8::/48'}", field: "pfcp.ue_pool"},
		{name: "UE pool with host bits", yaml: "pfcp: {node_id: upf.example, ue_pool: 10.45.0.1/16}", field: "pfcp.ue_pool"},
		{name: "UE pool over 2^24", yaml: "pfcp: {node_id: upf.example, ue_pool: 10.0.0.0/7}", field: "pfcp.ue_pool"},
		{name: "UE pool holding N3", yaml: "pfcp: {node_id: upf.example, ue_pool: 192.0.2.0/24}", field: "pfcp.ue_pool"},
		{name: "instance's UE pool with host bits", yaml: "pfcp: {node_id: upf.example, ue_pools: {ims: 10.46.0.1/16}}", field: `pfcp.ue_pools["ims"]`},
		{name: "instance's UE pool in the default", yaml: "pfcp: {node_id: upf.example, ue_pool: 10.45.0.0/16, ue_pools: {ims: 10.45.128.0/17}}", field: `pfcp.ue_pools["ims"]`},
		{name: "instances' UE pools overlapping", yaml: "pfcp: {node_id: upf.example, ue_pools: {a: 10.46.0.0/16, b: 10.46.9.0/24}}", field: `pfcp.ue_pools["b"]`},
		{name: "UE pool of no instance", yaml: `pfcp: {node_id: upf.example, ue_pools: {"": 10.46.0.0/16}}`, field: `pfcp.ue_pools[""]`},
		{name: "N9 instance without N9 addresses", yaml: "pfcp: {node_id: upf.example, n9_network_instances: [n9]}", field: "pfcp.n9_network_instances[0]"},
		{name: "empty N9 instance", yaml: "n9_addresses: [192.0.2.9]\npfcp: {node_id: upf.example, n9_network_instances: ['']}", field: "pfcp.n9_network_instances[0]"},
		{name: "N9 instance twice", yaml: "n9_addresses: [192.0.2.9]\npfcp: {node_id: upf.example, n9_network_instances: [n9, n9]}", field: "pfcp.n9_network_instances[1]"},
		{name: "forwarding policy to a name", yaml: "pfcp: {node_id: upf.example, forwarding_policies: {fw: gw.example}}", field: `pfcp.forwarding_policies["fw"]`},
		{name: "forwarding policy to multicast", yaml: "pfcp: {node_id: upf.example, forwarding_policies: {fw: 224.0.0.9}}", field: `pfcp.forwarding_policies["fw"]`},
		{name: "empty forwarding policy identifier", yaml: `pfcp: {node_id: upf.example, forwarding_policies: {"": 192.0.2.9}}`, field: `pfcp.forwarding_policies[""]`},
		{name: "relative PFCP state directory", yaml: "pfcp: {node_id: upf.example, state_dir: pfcp}", field: "pfcp.state_dir"},
		{name: "PFCP state in the state file", yaml: "state_file: /tmp/s\npfcp: {node_id: upf.example, state_dir: /tmp/s}", field: "pfcp.state_dir"},
		{name: "classify without interfaces", yaml: "classify: {max_masks: 4}", field: "classify.interfaces"},
		{name: "classify interface name", yaml: "classify: {interfaces: [edge0, 'a/b']}", field: "classify.interfaces[1]"},
		{name: "classify interface twice", yaml: "classify: {interfaces: [edge0, edge0]}", field: "classify.interfaces[1]"},
		{name: "classify on the UPF's interface", yaml: "classify: {interfaces: [eth0]}", field: "classify.interfaces[0]"},
		{name: "classify zero masks", yaml: "classify: {interfaces: [edge0], max_masks: 0}", field: "classify.max_masks"},
		{name: "classify too many masks", yaml: "classify: {interfaces: [edge0], max_masks: 33}", field: "classify.max_masks"},
		{name: "classify orphan fragments", yaml: "classify: {interfaces: [edge0], orphan_fragments: mirror}", field: "classify.orphan_fragments"},
		{name: "classify relative rules file", yaml: "classify: {interfaces: [edge0], rules_file: rules.json}", field: "classify.rules_file"},
		{name: "classify reports too often", yaml: "classify: {interfaces: [edge0], reports: {interval: 1ms}}", field: "classify.reports.interval"},
		{name: "classify webhook not a URL", yaml: "classify: {interfaces: [edge0], reports: {webhooks: ['http://a/', 'collector:80']}}", field: "classify.reports.webhooks[1]"},
		{name: "classify rules in the state file", yaml: "state_file: /srv/s.json\nclassify: {interfaces: [edge0], rules_file: /srv/s.json}", field: "classify.rules_file"},
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
		"unknown field":      {yaml: minimal + "listen: 127.0.0.1:1\n", want: "listen: line 6: unknown key"},
		"unknown nested":     {yaml: minimal + "api: {port: 1}\n", want: "api.port: line 6: unknown key"},
		"wrong type":         {yaml: minimal + "datapath: {max_sessions: lots}\n", want: `datapath.max_sessions: line 6: "lots" is not a whole number from 0 on`},
		"negative":           {yaml: minimal + "datapath: {max_sessions: -1}\n", want: `datapath.max_sessions: line 6: "-1" is not a whole number from 0 on`},
		"two documents":      {yaml: minimal + "---\n" + minimal, want: "one YAML document"},
		"unknown PFCP":       {yaml: minimal + "pfcp: {node_id: upf.example, port: 1}\n", want: "pfcp.port: line 6: unknown key"},
		"unknown CU-UP":      {yaml: cuupOnly + "  mode: native\n", want: "cuup.mode: line 5: unknown key"},
		"T1 in numbers":      {yaml: minimal + "pfcp: {node_id: upf.example, t1: 3}\n", want: `pfcp.t1: line 6: "3" is not a duration such as 10s`},
		"syntax":             {yaml: "interfaces: [\n", want: "line"},
		"roles not a list":   {yaml: "interfaces:\n  - name: a\n    roles: access\n", want: `interfaces[0].roles: line 3: "access" is not a list`},
		"second list item":   {yaml: "interfaces: [{name: a, roles: [access]}, {name: b, mtu: 9000}]\n", want: "interfaces[1].mtu: line 1: unknown key"},
		"list for a mapping": {yaml: minimal + "pfcp: {node_id: upf.example, ue_pools: [ims]}\n", want: "pfcp.ue_pools: line 6: a list is not a mapping of keys"},
		"list for the file":  {yaml: "- interfaces\n", want: "line 1: a list is not a mapping of keys"},
		"mapping for a list": {yaml: minimal + "n9_addresses: {a: 1}\n", want: "n9_addresses: line 6: a mapping is not a list"},
		"fraction":           {yaml: minimal + "datapath: {max_sessions: 1.5}\n", want: `datapath.max_sessions: line 6: "1.5" is not a whole number from 0 on`},
		"fraction in a list": {yaml: cuupOnly + "  queues: [0, 1.5]\n", want: `cuup.queues[1]: line 5: "1.5" is not a whole number`},
		"empty number":       {yaml: minimal + "buffering: {total_packets: ''}\n", want: `buffering.total_packets: line 6: "" is not a whole number`},
		"key twice":          {yaml: minimal + "api: {listen: 127.0.0.1:1}\napi: {}\n", want: "api: line 7: set twice (first at line 6)"},
		"nested key twice":   {yaml: minimal + "api: {listen: 127.0.0.1:1, listen: 127.0.0.1:2}\n", want: "api.listen: line 6: set twice (first at line 6)"},
		"flag not a boolean": {yaml: minimal + "datapath:\n  ephemeral: sometimes\n", want: `datapath.ephemeral: line 7: "sometimes" is not true or false`},
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
