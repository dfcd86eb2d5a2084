// Package config reads and validates the daemon's YAML configuration file.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/fielderr"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/ran/cuup"
	"github.com/xdp5g/xdp5g/internal/ran/cuupxdp"
	"github.com/xdp5g/xdp5g/internal/upf/buffer"
	"github.com/xdp5g/xdp5g/internal/upf/gtpu"
	"github.com/xdp5g/xdp5g/internal/upf/ippool"
	"github.com/xdp5g/xdp5g/internal/upf/n4"
	"github.com/xdp5g/xdp5g/internal/upf/pfcp"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// Defaults of the settings a file may leave out.
const (
	DefaultListen      = "127.0.0.1:9880"
	DefaultMaxSessions = upfxdp.DefaultMaxSessions
	DefaultStateFile   = "/var/lib/xdp5g/sessions.json"
	// DefaultErrorIndicationRate answers the stale tunnels of a few gNBs
	// at once, and costs next to nothing under a flood of random TEIDs.
	DefaultErrorIndicationRate = 100
	// DefaultReportInterval is how often the classifier reports.
	DefaultReportInterval = 10 * time.Second
)

const (
	// maxSessionsLimit keeps the map sizes (four rules per session) well
	// inside uint32.
	maxSessionsLimit = 1 << 24
	maxIfName        = 15 // IFNAMSIZ less the NUL
	maxN1            = 10
)

// Config is a validated configuration.
type Config struct {
	// Interfaces are the UPF's; empty when the daemon runs no UPF (a file
	// with a cuup or a classify section may leave out interfaces and
	// n3_addresses to run a CU-UP or a classifier without a UPF). See UPF.
	Interfaces []Interface
	// N3Addresses are the UPF's GTP-U addresses towards gNBs, IPv4 and
	// IPv6; the first of a family is the source of tunnels to peers of that
	// family towards access. Empty without a UPF.
	N3Addresses []netip.Addr
	// N9Addresses are the UPF's GTP-U addresses towards other UPFs (N9),
	// IPv4 and IPv6: an I-UPF's and a PSA's. May be empty.
	N9Addresses []netip.Addr
	// XDPMode is the mode of every XDP program the daemon attaches: the
	// UPF's, the classifier's and the CU-UP's.
	XDPMode xdplink.Mode
	// Netns names a namespace under /run/netns that holds the interfaces
	// (the UPF's, the classifier's and the CU-UP's); empty for the
	// daemon's own.
	Netns string
	API   API
	// Datapath places the pinned maps and links (the UPF's and the
	// classifier's) and sizes the UPF's.
	Datapath Datapath
	// Buffering and StateFile are the UPF's; StateFile also places the
	// classifier's default rules file.
	Buffering Buffering
	StateFile string
	// PFCP is nil when the file has no pfcp section: the daemon then
	// serves no N4 interface. It needs the UPF.
	PFCP *PFCP
	// Classify is nil when the file has no classify section: the daemon
	// then runs no classifier.
	Classify *Classify
	// CUUP is nil when the file has no cuup section: the daemon then runs
	// no CU-UP.
	CUUP *CUUP
}

// UPF tells whether the daemon runs the UPF.
func (c *Config) UPF() bool { return len(c.Interfaces) > 0 }

// CUUP runs a CU-UP's user plane (package cuup) between the UPF (N3) and
// the DUs (F1-U). With IO CUUPAFXDP an XDP program runs on each of its
// interfaces, which are then neither the UPF's nor the classifier's (an
// interface runs one XDP program) nor each other's (one per role).
type CUUP struct {
	N3, F1U CUUPInterface
	IO      CUUPIO
	// Queues are the receive queues the AF_XDP path serves, a socket and
	// a worker each; Frames are the UMEM frames of each queue; BusyPoll
	// spins on the rings instead of sleeping in poll(2). AF_XDP only.
	Queues   []int
	Frames   int
	BusyPoll bool
	// CryptoWorkers are the goroutines of the crypto pool (none: every
	// DRB's PDCP security runs on the worker that carries it), and
	// CryptoPlacement where a new DRB's runs; the REST API moves one.
	CryptoWorkers   int
	CryptoPlacement cuup.Placement
}

// CUUPInterface is where the CU-UP meets its peers (the UPF on N3, the
// DUs on F1-U): an interface, and the CU-UP's address on it, the endpoint
// of the tunnels it hands out.
type CUUPInterface struct {
	Interface string
	Address   netip.Addr
}

// CUUPIO is how the CU-UP moves its packets.
type CUUPIO string

// The CU-UP's I/O paths.
const (
	// CUUPAFXDP: an XDP classifier sends the CU-UP's G-PDUs to AF_XDP
	// sockets; the socket path carries what it leaves to the kernel
	// (GTP-U echoes, G-PDUs of queues without a socket).
	CUUPAFXDP CUUPIO = "afxdp"
	// CUUPSockets: a UDP socket per address, read and written in batches
	// (recvmmsg, sendmmsg).
	CUUPSockets CUUPIO = "sockets"
)

// Classify runs the classifier on interfaces of its own (an interface
// runs one XDP program: the UPF's or the classifier's).
type Classify struct {
	Interfaces []string
	MaxMasks   int
	// OrphanFragments is what becomes of a fragment whose first fragment
	// was not seen: classifyxdp.ActionPass or classifyxdp.ActionDrop.
	OrphanFragments classifyxdp.ActionKind
	// RulesFile keeps the rules across restarts; by default rules.json
	// next to the state file.
	RulesFile string
	// ReportInterval is how often the figures of intents, slices and CPUs
	// go to the Webhooks (URLs, JSON POST) and refresh /metrics.
	ReportInterval time.Duration
	Webhooks       []string
}

// Interface is a network interface the data path attaches to.
type Interface struct {
	Name  string
	Roles upfxdp.Role
	// Stages run on it in this order (StageNames): the UPF last, alone
	// by default.
	Stages []string
	Slice  uint32 // the slice the steer stage sends packets to
}

// Stages of an interface, in the order they run in.
const (
	StageClassify = "classify"
	StageSteer    = "steer"
	StageUPF      = "upf"
)

// StageNames are the stages an interface may run, in the order they run in.
var StageNames = []string{StageClassify, StageSteer, StageUPF}

// API is where the REST API listens, and how it is protected.
type API struct {
	Listen string
	// TokenFile holds the bearer token every request of the API needs
	// but those of its health (/healthz, /readyz); "" for none, which only
	// a loopback Listen may have.
	TokenFile string
	// TLS is nil for plain HTTP.
	TLS *TLS
}

// TLS is the REST API's certificate (with its chain) and key, PEM files.
type TLS struct {
	CertFile, KeyFile string
}

// PFCP is the N4 interface to SMFs.
type PFCP struct {
	// Listen is the UDP address to serve, by default the Node ID's on
	// port 8805 when the Node ID is an address (it is then the UPF's one
	// PFCP address), and port 8805 on all addresses for an FQDN.
	Listen string
	// NodeID is the UPF's Node ID: an IP address or an FQDN.
	NodeID string
	// Peers are the SMFs the UPF sets up associations with, as host:port.
	Peers []string
	// AllowedPeers are where PFCP messages are taken from, besides the
	// addresses of Peers: DefaultAllowedPeers unless the file says.
	AllowedPeers      []netip.Prefix
	HeartbeatInterval time.Duration
	T1                time.Duration
	N1                int
	// TrafficStopAfter is the silence after which a URR's traffic has
	// stopped (the Stop of Traffic trigger).
	TrafficStopAfter time.Duration
	// GTPUEchoInterval is the time between GTP-U Echo Requests towards each
	// gNB a session tunnels to, and how long each has to be answered; after
	// GTPUEchoRetries unanswered in a row the path has failed and the SMFs
	// get a User Plane Path Failure Report.
	GTPUEchoInterval time.Duration
	GTPUEchoRetries  int
	// UEPool is the IPv4 prefix the UPF takes UE addresses from when an
	// SMF leaves the choice to it (CHV4); not valid when unset, and such
	// requests are then refused.
	UEPool netip.Prefix
	// UEPools are the UE address pools of network instances (DNNs) that
	// have their own, by the name SMFs give in a PDI's Network Instance;
	// UEPool serves the others. No two pools overlap.
	UEPools map[string]netip.Prefix
	// N9NetworkInstances are the network instances whose F-TEIDs are on
	// N9: a PDR whose PDI names one is a PDR of G-PDUs from other UPFs,
	// whatever its source interface (a PSA's uplink from the I-UPF).
	N9NetworkInstances []string
	// ForwardingPolicies are the next hops of traffic steering (TRST), by
	// the Forwarding Policy identifiers SMFs name in FARs.
	ForwardingPolicies map[string]netip.Addr
	// StateDir is where the PFCP state (associations, sessions, usage) is
	// kept across restarts; StateSync flushes it to the disk before what
	// it records is answered, so that it survives a power loss too.
	StateDir  string
	StateSync bool
}

// SEIDAddress is the address SMFs reach the UPF's PFCP at, for the UP
// F-SEIDs: Listen's when it names one, else the Node ID when it is an
// address; unset when neither says (an FQDN served on every address).
func (p *PFCP) SEIDAddress() netip.Addr {
	if ap, err := netip.ParseAddrPort(p.Listen); err == nil && !ap.Addr().IsUnspecified() {
		return ap.Addr().Unmap()
	}
	if a, err := netip.ParseAddr(p.NodeID); err == nil {
		return a.Unmap()
	}
	return netip.Addr{}
}

// Buffering limits the downlink packets buffering FARs hold: per session
// (unless its BAR suggests another count) and in all.
type Buffering struct {
	SessionPackets, TotalPackets int
}

// Datapath places and sizes the pinned maps.
type Datapath struct {
	PinPath     string
	MaxSessions uint32
	// Ephemeral lets the data path die with the daemon: without it the
	// daemon refuses a pin path whose bpf filesystem would not outlive it
	// (see upfxdp.PinsOutlive).
	Ephemeral bool
	// ErrorIndicationRate is how many GTP-U Error Indications a second, at
	// most, answer G-PDUs to TEIDs no session has (TS 29.281 7.3.1); each
	// CPU passes up at most as many such G-PDUs, and drops the rest. 0:
	// none, all dropped.
	ErrorIndicationRate uint32
}

// CoreInterfaces names the interfaces with the core role.
func (c *Config) CoreInterfaces() []string {
	var names []string
	for _, i := range c.Interfaces {
		if i.Roles&upfxdp.RoleCore != 0 {
			names = append(names, i.Name)
		}
	}
	return names
}

// invalid names the setting that is wrong, by its path in the file.
func invalid(field, format string, args ...any) error { return fielderr.New(field, format, args...) }

// file is the YAML as written; parse turns it into a Config.
type file struct {
	Interfaces  []ifaceSettings   `yaml:"interfaces"`
	N3Addresses []string          `yaml:"n3_addresses"`
	N9Addresses []string          `yaml:"n9_addresses"`
	XDPMode     string            `yaml:"xdp_mode"`
	Netns       string            `yaml:"netns"`
	API         apiSettings       `yaml:"api"`
	Datapath    datapathSettings  `yaml:"datapath"`
	Buffering   bufferingSettings `yaml:"buffering"`
	StateFile   string            `yaml:"state_file"`
	PFCP        *pfcpSettings     `yaml:"pfcp"`
	Classify    *classifySettings `yaml:"classify"`
	CUUP        *cuupSettings     `yaml:"cuup"`
}

// upf tells whether the file asks for the UPF: it does unless it has a
// cuup or a classify section and gives neither interfaces nor N3
// addresses (a CU-UP or a classifier alone).
func (f *file) upf() bool {
	return f.CUUP == nil && f.Classify == nil || len(f.Interfaces) > 0 || len(f.N3Addresses) > 0
}

type cuupSettings struct {
	N3       cuupInterfaceSettings `yaml:"n3"`
	F1U      cuupInterfaceSettings `yaml:"f1u"`
	IO       string                `yaml:"io"`
	Queues   []int                 `yaml:"queues"`
	Frames   *int                  `yaml:"frames"`
	BusyPoll *bool                 `yaml:"busy_poll"`
	Crypto   struct {
		Workers   int    `yaml:"workers"`
		Placement string `yaml:"placement"`
	} `yaml:"crypto"`
}

type cuupInterfaceSettings struct {
	Interface string `yaml:"interface"`
	Address   string `yaml:"address"`
}

type classifySettings struct {
	Interfaces      []string `yaml:"interfaces"`
	MaxMasks        *int     `yaml:"max_masks"`
	OrphanFragments string   `yaml:"orphan_fragments"`
	RulesFile       string   `yaml:"rules_file"`
	Reports         struct {
		Interval *time.Duration `yaml:"interval"`
		Webhooks []string       `yaml:"webhooks"`
	} `yaml:"reports"`
}

type ifaceSettings struct {
	Name   string   `yaml:"name"`
	Roles  []string `yaml:"roles"`
	Stages []string `yaml:"stages"`
	Slice  uint32   `yaml:"slice"`
}

type apiSettings struct {
	Listen    string `yaml:"listen"`
	TokenFile string `yaml:"token_file"`
	TLS       struct {
		CertFile string `yaml:"cert_file"`
		KeyFile  string `yaml:"key_file"`
	} `yaml:"tls"`
}

type pfcpSettings struct {
	Listen             string            `yaml:"listen"`
	NodeID             string            `yaml:"node_id"`
	Peers              []string          `yaml:"peers"`
	AllowedPeers       []string          `yaml:"allowed_peers"`
	HeartbeatInterval  *time.Duration    `yaml:"heartbeat_interval"`
	T1                 *time.Duration    `yaml:"t1"`
	N1                 *int              `yaml:"n1"`
	TrafficStopAfter   *time.Duration    `yaml:"traffic_stop_after"`
	GTPUEchoInterval   *time.Duration    `yaml:"gtpu_echo_interval"`
	GTPUEchoRetries    *int              `yaml:"gtpu_echo_retries"`
	UEPool             string            `yaml:"ue_pool"`
	UEPools            map[string]string `yaml:"ue_pools"`
	N9NetworkInstances []string          `yaml:"n9_network_instances"`
	ForwardingPolicies map[string]string `yaml:"forwarding_policies"`
	StateDir           string            `yaml:"state_dir"`
	StateSync          bool              `yaml:"state_sync"`
}

type bufferingSettings struct {
	SessionPackets *int `yaml:"session_packets"`
	TotalPackets   *int `yaml:"total_packets"`
}

type datapathSettings struct {
	PinPath     string  `yaml:"pin_path"`
	MaxSessions *uint32 `yaml:"max_sessions"`
	Ephemeral   bool    `yaml:"ephemeral"`

	ErrorIndicationRate *uint32 `yaml:"error_indication_rate"`
}

// Load reads and validates a configuration file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

func parse(data []byte) (*Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f file
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, nameTheKey(data, err)
	}
	if err := dec.Decode(new(yaml.Node)); !errors.Is(err, io.EOF) {
		return nil, errors.New("a configuration is one YAML document")
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, err
	}
	if err := checkWholeNumbers(&root, reflect.TypeFor[file](), ""); err != nil {
		return nil, err
	}
	cfg := &Config{
		XDPMode:   xdplink.ModeNative,
		API:       API{Listen: DefaultListen},
		Datapath:  Datapath{PinPath: upfxdp.DefaultPinPath, MaxSessions: DefaultMaxSessions, ErrorIndicationRate: DefaultErrorIndicationRate},
		Buffering: Buffering{SessionPackets: buffer.DefaultSessionPackets, TotalPackets: buffer.DefaultTotalPackets},
		StateFile: DefaultStateFile,
	}
	steps := []func(*file, *Config) error{parseInterfaces, parseN3Addresses, parseXDPMode, parseNetns, parseAPI, parseDatapath, parseBuffering, parseStateFile, parsePFCP, parseClassify, checkStages, parseCUUP}
	for _, step := range steps {
		if err := step(&f, cfg); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// yamlProblem is how yaml.v3 words an unknown key or a value of the wrong
// type: "line 6: field port not found in type config.apiSettings",
// a key set twice: "line 7: mapping key \"api\" already defined at line 3",
// "line 6: cannot unmarshal !!str `lots` into uint32", "line 6: cannot
// unmarshal !!seq into map[string]string".
var yamlProblem = regexp.MustCompile("^line ([0-9]+): (?:field (\\S+) not found in type|mapping key \"(\\S+)\" already defined at line ([0-9]+)|cannot unmarshal (!!\\w+)(?: `(.*)`)? into (\\S+))")

// nameTheKey turns yaml.v3's first type error into one that names the key
// at fault, as every other error of the configuration does; other errors
// (syntax) it returns as they are.
func nameTheKey(data []byte, err error) error {
	var te *yaml.TypeError
	var root yaml.Node
	if !errors.As(err, &te) || len(te.Errors) == 0 || yaml.Unmarshal(data, &root) != nil {
		return err
	}
	m := yamlProblem.FindStringSubmatch(te.Errors[0])
	if m == nil {
		return err
	}
	line, _ := strconv.Atoi(m[1])
	twice, first := m[3], m[4]
	unknown, tag, value := m[2]+twice, m[5], strings.TrimSuffix(m[6], "...")
	var found string
	foundAt := false // found may be "", the file's top
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				if !foundAt && unknown != "" && k.Line == line && k.Value == unknown {
					found, foundAt = p, true
				}
				walk(v, p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i))
			}
		}
		if !foundAt && unknown == "" && n.Line == line && n.ShortTag() == tag && strings.HasPrefix(n.Value, value) {
			found, foundAt = path, true
		}
	}
	walk(&root, "")
	switch {
	case !foundAt:
		return err
	case twice != "":
		return invalid(found, "line %d: set twice (first at line %s)", line, first)
	case unknown != "":
		return invalid(found, "line %d: unknown key", line)
	default:
		what, ok := map[string]string{"!!seq": "a list", "!!map": "a mapping"}[tag]
		if !ok {
			what = strconv.Quote(value)
		}
		return invalid(found, "line %d: %s is not %s", line, what, yamlKind(m[7]))
	}
}

// checkWholeNumbers refuses a number with a fraction where the file takes a
// whole one (of type t, at path), which yaml.v3 would cut to its whole part:
// max_sessions: 1.5 as 1.
func checkWholeNumbers(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case n.Kind == yaml.DocumentNode && len(n.Content) == 1:
		return checkWholeNumbers(n.Content[0], t, path)
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, at := n.Content[i].Value, n.Content[i].Value
			if path != "" {
				at = path + "." + key
			}
			for f := range t.Fields() {
				if f.Tag.Get("yaml") == key {
					if err := checkWholeNumbers(n.Content[i+1], f.Type, at); err != nil {
						return err
					}
				}
			}
		}
	case n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice:
		for i, c := range n.Content {
			if err := checkWholeNumbers(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!float" && t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		var f float64
		if n.Decode(&f) == nil && f != math.Trunc(f) {
			return invalid(path, "line %d: %q is not %s", n.Line, n.Value, yamlKind(t.String()))
		}
	}
	return nil
}

// yamlKind says in words what a setting of the Go type goType takes.
func yamlKind(goType string) string {
	switch {
	case goType == "time.Duration":
		return "a duration such as 10s"
	case goType == "bool":
		return "true or false"
	case goType == "int":
		return "a whole number"
	case strings.HasPrefix(goType, "uint"):
		return "a whole number from 0 on"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case goType == "string":
		return "a string"
	}
	return "a mapping of keys"
}

var roleNames = map[string]upfxdp.Role{"access": upfxdp.RoleAccess, "core": upfxdp.RoleCore, "copies": upfxdp.RoleCopies}

func parseInterfaces(f *file, cfg *Config) error {
	if !f.upf() {
		return nil
	}
	if len(f.Interfaces) == 0 {
		return invalid("interfaces", "at least one interface is needed")
	}
	seen := map[string]bool{}
	var all upfxdp.Role
	for i, in := range f.Interfaces {
		field := fmt.Sprintf("interfaces[%d]", i)
		if err := checkIfName(in.Name); err != nil {
			return invalid(field+".name", "%v", err)
		}
		if seen[in.Name] {
			return invalid(field+".name", "%s is listed twice", in.Name)
		}
		seen[in.Name] = true
		if len(in.Roles) == 0 {
			return invalid(field+".roles", "give access, core or both, or copies")
		}
		var roles upfxdp.Role
		for j, name := range in.Roles {
			role, ok := roleNames[name]
			switch {
			case !ok:
				return invalid(fmt.Sprintf("%s.roles[%d]", field, j), "unknown role %q (access, core or copies)", name)
			case slices.Contains(in.Roles[:j], name):
				return invalid(fmt.Sprintf("%s.roles[%d]", field, j), "%s is listed twice", name)
			case len(in.Roles) > 1 && role == upfxdp.RoleCopies:
				return invalid(fmt.Sprintf("%s.roles[%d]", field, j), "copies is an interface's only role: it takes no traffic")
			}
			roles |= role
		}
		all |= roles
		stages, err := CheckStages(field+".", roles, in.Stages, in.Slice)
		if err != nil {
			return err
		}
		cfg.Interfaces = append(cfg.Interfaces, Interface{Name: in.Name, Roles: roles, Stages: stages, Slice: in.Slice})
	}
	if all != upfxdp.RoleAccess|upfxdp.RoleCore {
		return invalid("interfaces", "a UPF needs an access (N3) and a core (N6) interface; one interface may have both roles")
	}
	return nil
}

// checkIfName applies the kernel's rules for interface names, which also
// keep the name usable as a file name under the pin path.
func checkIfName(name string) error {
	switch {
	case name == "":
		return errors.New("must not be empty")
	case len(name) > maxIfName:
		return fmt.Errorf("%q is longer than %d characters", name, maxIfName)
	case name == "." || name == ".." || strings.ContainsAny(name, "/: \t\n"):
		return fmt.Errorf("%q is not a valid interface name", name)
	}
	return nil
}

func parseN3Addresses(f *file, cfg *Config) error {
	if !f.upf() {
		if len(f.N9Addresses) > 0 {
			return invalid("n9_addresses", "are the UPF's: give the UPF's interfaces and n3_addresses too")
		}
		return nil
	}
	if len(f.N3Addresses) == 0 {
		return invalid("n3_addresses", "at least one N3 (GTP-U) address is needed")
	}
	if n := len(f.N3Addresses) + len(f.N9Addresses); n > upfxdp.MaxGTPUAddresses {
		field := "n9_addresses"
		if len(f.N9Addresses) == 0 {
			field = "n3_addresses"
		}
		return invalid(field, "at most %d N3 and N9 addresses in all, got %d", upfxdp.MaxGTPUAddresses, n)
	}
	var err error
	if cfg.N3Addresses, err = gtpuAddresses("n3_addresses", f.N3Addresses, nil); err != nil {
		return err
	}
	cfg.N9Addresses, err = gtpuAddresses("n9_addresses", f.N9Addresses, cfg.N3Addresses)
	return err
}

// gtpuAddresses reads the GTP-U addresses of key, IPv4 or IPv6, none of
// them twice nor one of taken.
func gtpuAddresses(key string, in []string, taken []netip.Addr) ([]netip.Addr, error) {
	var out []netip.Addr
	for i, s := range in {
		field := fmt.Sprintf("%s[%d]", key, i)
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" || a.Is4In6() || a.IsUnspecified() || a.IsMulticast() ||
			a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
			return nil, invalid(field, "%q is not a unicast IPv4 or IPv6 address", s)
		}
		if slices.Contains(out, a) || slices.Contains(taken, a) {
			return nil, invalid(field, "%s is listed twice", a)
		}
		out = append(out, a)
	}
	return out, nil
}

func parseXDPMode(f *file, cfg *Config) error {
	switch m := xdplink.Mode(f.XDPMode); m {
	case "":
	case xdplink.ModeNative, xdplink.ModeGeneric, xdplink.ModeOffload:
		cfg.XDPMode = m
	default:
		return invalid("xdp_mode", "unknown mode %q (native, generic or offload)", f.XDPMode)
	}
	return nil
}

func parseNetns(f *file, cfg *Config) error {
	if n := f.Netns; n == "." || n == ".." || strings.Contains(n, "/") {
		return invalid("netns", "%q is not a namespace name (a file name under /run/netns)", n)
	}
	cfg.Netns = f.Netns
	return nil
}

func parseAPI(f *file, cfg *Config) error {
	a := f.API
	if a.Listen != "" {
		if err := checkListen("api.listen", a.Listen); err != nil {
			return err
		}
		cfg.API.Listen = a.Listen
	}
	for _, p := range []struct{ field, path string }{
		{"api.token_file", a.TokenFile}, {"api.tls.cert_file", a.TLS.CertFile}, {"api.tls.key_file", a.TLS.KeyFile},
	} {
		if p.path != "" && !filepath.IsAbs(p.path) {
			return invalid(p.field, "%q must be an absolute file path", p.path)
		}
	}
	cfg.API.TokenFile = a.TokenFile
	if a.TokenFile == "" && !loopback(cfg.API.Listen) {
		return invalid("api.token_file", "the REST API listens on %s, not a loopback address: give it a bearer token", cfg.API.Listen)
	}
	switch {
	case a.TLS.CertFile != "" && a.TLS.KeyFile != "":
		cfg.API.TLS = &TLS{CertFile: a.TLS.CertFile, KeyFile: a.TLS.KeyFile}
	case a.TLS.CertFile != "":
		return invalid("api.tls.key_file", "the key of api.tls.cert_file is needed")
	case a.TLS.KeyFile != "":
		return invalid("api.tls.cert_file", "the certificate of api.tls.key_file is needed")
	}
	return nil
}

// loopback says whether a listen address reaches the machine's own
// processes only; "" and wildcard hosts listen on every address.
func loopback(listen string) bool {
	host, _, _ := net.SplitHostPort(listen)
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

func checkListen(field, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return invalid(field, "%q is not HOST:PORT", addr)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		// Port 0 would be one the kernel picks, which no client knows.
		return invalid(field, "%q is not a port number from 1 to 65535", port)
	}
	return nil
}

func parseDatapath(f *file, cfg *Config) error {
	if p := f.Datapath.PinPath; p != "" {
		// Detach removes this directory: never a mount point itself.
		if !filepath.IsAbs(p) || filepath.Dir(filepath.Clean(p)) == "/" || filepath.Clean(p) == "/sys/fs/bpf" {
			return invalid("datapath.pin_path", "%q must be a directory of its own below a bpffs mount, such as %s", p, upfxdp.DefaultPinPath)
		}
		cfg.Datapath.PinPath = filepath.Clean(p)
	}
	if n := f.Datapath.MaxSessions; n != nil {
		if *n == 0 || *n > maxSessionsLimit {
			return invalid("datapath.max_sessions", "must be from 1 to %d", maxSessionsLimit)
		}
		cfg.Datapath.MaxSessions = *n
	}
	cfg.Datapath.Ephemeral = f.Datapath.Ephemeral
	if n := f.Datapath.ErrorIndicationRate; n != nil {
		if *n > maxErrorIndicationRate {
			return invalid("datapath.error_indication_rate", "must be from 0 (none) to %d a second", maxErrorIndicationRate)
		}
		cfg.Datapath.ErrorIndicationRate = *n
	}
	return nil
}

// maxErrorIndicationRate bounds datapath.error_indication_rate: past it
// the UPF would serve as a reflector.
const maxErrorIndicationRate = 100000

// maxBufferedPackets bounds what buffers may take: about 1.5 GiB of
// full-size frames.
const maxBufferedPackets = 1 << 20

func parseBuffering(f *file, cfg *Config) error {
	for _, b := range []struct {
		field string
		value *int
		to    *int
	}{
		{"buffering.session_packets", f.Buffering.SessionPackets, &cfg.Buffering.SessionPackets},
		{"buffering.total_packets", f.Buffering.TotalPackets, &cfg.Buffering.TotalPackets},
	} {
		if b.value == nil {
			continue
		}
		if *b.value < 1 || *b.value > maxBufferedPackets {
			return invalid(b.field, "must be from 1 to %d", maxBufferedPackets)
		}
		*b.to = *b.value
	}
	return nil
}

func parseStateFile(f *file, cfg *Config) error {
	if p := f.StateFile; p != "" {
		if !filepath.IsAbs(p) || strings.HasSuffix(p, "/") {
			return invalid("state_file", "%q must be an absolute file path", p)
		}
		cfg.StateFile = filepath.Clean(p)
	}
	return nil
}

// CheckStages checks the stages and slice of an interface of roles, as
// the configuration gives them or the REST API changes them, and returns
// its stages; prefix comes before the fields' names.
func CheckStages(prefix string, roles upfxdp.Role, names []string, slice uint32) ([]string, error) {
	stages, err := parseStages(prefix+"stages", names)
	if err != nil {
		return nil, err
	}
	if roles == upfxdp.RoleCopies && len(stages) > 1 {
		return nil, invalid(prefix+"stages", "an interface of the copies role takes no traffic: it runs the UPF alone")
	}
	if slice >= classifyxdp.MaxSlices {
		return nil, invalid(prefix+"slice", "slices are numbered 0 to %d", classifyxdp.MaxSlices-1)
	}
	return stages, nil
}

// parseStages checks an interface's stages: known ones, in their order,
// the UPF last.
func parseStages(field string, names []string) ([]string, error) {
	if len(names) == 0 {
		return []string{StageUPF}, nil
	}
	last := -1
	for j, name := range names {
		i := slices.Index(StageNames, name)
		switch {
		case i < 0:
			return nil, invalid(fmt.Sprintf("%s[%d]", field, j), "unknown stage %q (%s)", name, strings.Join(StageNames, ", "))
		case i == last:
			return nil, invalid(fmt.Sprintf("%s[%d]", field, j), "%s is named twice", name)
		case i < last:
			return nil, invalid(fmt.Sprintf("%s[%d]", field, j), "%s must come before %s (%s)", name, names[j-1],
				strings.Join(StageNames, ", "))
		}
		last = i
	}
	if names[len(names)-1] != StageUPF {
		return nil, invalid(field, "the UPF is the last stage")
	}
	return slices.Clone(names), nil
}

// checkStages refuses the classify and steer stages without the
// classifier, which runs them.
func checkStages(_ *file, cfg *Config) error {
	for i, in := range cfg.Interfaces {
		if cfg.Classify == nil && len(in.Stages) > 1 {
			return invalid(fmt.Sprintf("interfaces[%d].stages", i), "%s needs the classify section", in.Stages[0])
		}
	}
	return nil
}

var orphanFragmentActions = map[string]classifyxdp.ActionKind{"pass": classifyxdp.ActionPass, "drop": classifyxdp.ActionDrop}

func parseClassify(f *file, cfg *Config) error {
	c := f.Classify
	if c == nil {
		return nil
	}
	out := &Classify{MaxMasks: classifyxdp.DefaultMaxMasks, OrphanFragments: classifyxdp.ActionPass,
		RulesFile: filepath.Join(filepath.Dir(cfg.StateFile), "rules.json"), ReportInterval: DefaultReportInterval}
	runsStages := slices.ContainsFunc(cfg.Interfaces, func(i Interface) bool { return len(i.Stages) > 1 })
	if len(c.Interfaces) == 0 && !runsStages {
		return invalid("classify.interfaces", "at least one interface is needed, unless a UPF interface runs the classify or steer stage")
	}
	for i, name := range c.Interfaces {
		field := fmt.Sprintf("classify.interfaces[%d]", i)
		if err := checkIfName(name); err != nil {
			return invalid(field, "%v", err)
		}
		if slices.Contains(out.Interfaces, name) {
			return invalid(field, "%s is listed twice", name)
		}
		if slices.ContainsFunc(cfg.Interfaces, func(i Interface) bool { return i.Name == name }) {
			return invalid(field, "%s runs the UPF, and an interface runs one XDP program: give it the classify stage (stages) instead", name)
		}
		out.Interfaces = append(out.Interfaces, name)
	}
	if n := c.MaxMasks; n != nil {
		if *n < 1 || *n > classifyxdp.MaxMasks {
			return invalid("classify.max_masks", "must be from 1 to %d", classifyxdp.MaxMasks)
		}
		out.MaxMasks = *n
	}
	if c.OrphanFragments != "" {
		a, ok := orphanFragmentActions[c.OrphanFragments]
		if !ok {
			return invalid("classify.orphan_fragments", "unknown action %q (pass or drop)", c.OrphanFragments)
		}
		out.OrphanFragments = a
	}
	if p := c.RulesFile; p != "" {
		if !filepath.IsAbs(p) || strings.HasSuffix(p, "/") {
			return invalid("classify.rules_file", "%q must be an absolute file path", p)
		}
		out.RulesFile = filepath.Clean(p)
	}
	if out.RulesFile == cfg.StateFile {
		return invalid("classify.rules_file", "%s is the state file", out.RulesFile)
	}
	if d := c.Reports.Interval; d != nil {
		if *d < 10*time.Millisecond {
			return invalid("classify.reports.interval", "must be 10ms or more")
		}
		out.ReportInterval = *d
	}
	for i, hook := range c.Reports.Webhooks {
		u, err := url.Parse(hook)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return invalid(fmt.Sprintf("classify.reports.webhooks[%d]", i), "%q is not an http or https URL", hook)
		}
		out.Webhooks = append(out.Webhooks, hook)
	}
	cfg.Classify = out
	return nil
}

func parsePFCP(f *file, cfg *Config) error {
	p := f.PFCP
	if p == nil {
		return nil
	}
	if !cfg.UPF() {
		return invalid("pfcp", "serves the UPF's sessions: give the UPF's interfaces and n3_addresses too")
	}
	if p.NodeID == "" {
		return invalid("pfcp.node_id", "the UPF's Node ID (an IP address or an FQDN) is required")
	}
	if err := pfcp.CheckNodeID(p.NodeID); err != nil {
		return invalid("pfcp.node_id", "%v", err)
	}
	out := &PFCP{
		Listen:            pfcp.DefaultListen,
		NodeID:            p.NodeID,
		HeartbeatInterval: pfcp.DefaultHeartbeatInterval,
		T1:                pfcp.DefaultT1,
		N1:                pfcp.DefaultN1,
		TrafficStopAfter:  n4.DefaultTrafficStopAfter,
		GTPUEchoInterval:  gtpu.DefaultEchoInterval,
		GTPUEchoRetries:   gtpu.DefaultEchoRetries,
	}
	if ip, err := netip.ParseAddr(p.NodeID); err == nil {
		out.Listen = netip.AddrPortFrom(ip, pfcp.DefaultPort).String()
	}
	if p.Listen != "" {
		if err := checkListen("pfcp.listen", p.Listen); err != nil {
			return err
		}
		out.Listen = p.Listen
	}
	for i, s := range p.Peers {
		field := fmt.Sprintf("pfcp.peers[%d]", i)
		peer, err := peerAddress(s)
		if err != nil {
			return invalid(field, "%v", err)
		}
		if slices.Contains(out.Peers, peer) {
			return invalid(field, "%s is listed twice", peer)
		}
		out.Peers = append(out.Peers, peer)
	}
	if err := parseAllowedPeers(p.AllowedPeers, out); err != nil {
		return err
	}
	if err := parsePFCPTimers(p, out); err != nil {
		return err
	}
	if err := parseUEPools(p, slices.Concat(cfg.N3Addresses, cfg.N9Addresses), out); err != nil {
		return err
	}
	if err := parseN9NetworkInstances(p.N9NetworkInstances, len(cfg.N9Addresses) > 0, out); err != nil {
		return err
	}
	if err := parseForwardingPolicies(p.ForwardingPolicies, out); err != nil {
		return err
	}
	out.StateDir, out.StateSync = filepath.Join(filepath.Dir(cfg.StateFile), "pfcp"), p.StateSync
	if d := p.StateDir; d != "" {
		if !filepath.IsAbs(d) {
			return invalid("pfcp.state_dir", "%q must be an absolute directory path", d)
		}
		out.StateDir = filepath.Clean(d)
	}
	if out.StateDir == cfg.StateFile {
		return invalid("pfcp.state_dir", "%s is the state file", out.StateDir)
	}
	cfg.PFCP = out
	return nil
}

// DefaultAllowedPeers are where PFCP messages are taken from, besides the
// configured peers, when the file does not say: the loopback.
var DefaultAllowedPeers = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// parseAllowedPeers reads the addresses and prefixes PFCP messages are
// taken from; nil (the key left out) for the default.
func parseAllowedPeers(in []string, out *PFCP) error {
	if in == nil {
		out.AllowedPeers = DefaultAllowedPeers
		return nil
	}
	out.AllowedPeers = []netip.Prefix{}
	for i, s := range in {
		field := fmt.Sprintf("pfcp.allowed_peers[%d]", i)
		p, err := netip.ParsePrefix(s)
		if a, aerr := netip.ParseAddr(s); aerr == nil && a.Zone() == "" {
			p, err = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
		}
		switch {
		case err != nil:
			return invalid(field, "%q is not an IP address or prefix such as 10.100.4.0/24", s)
		case p != p.Masked():
			return invalid(field, "%q has host bits set; the prefix is %v", s, p.Masked())
		}
		out.AllowedPeers = append(out.AllowedPeers, p)
	}
	return nil
}

// parseForwardingPolicies reads the next hop of each Forwarding Policy
// identifier (TS 29.244 §8.2.23: 1 to 255 octets).
func parseForwardingPolicies(in map[string]string, out *PFCP) error {
	for _, id := range slices.Sorted(maps.Keys(in)) {
		field := fmt.Sprintf("pfcp.forwarding_policies[%q]", id)
		if len(id) == 0 || len(id) > 255 {
			return invalid(field, "an identifier has 1 to 255 octets")
		}
		hop, err := netip.ParseAddr(in[id])
		if err != nil || hop.IsUnspecified() || hop.IsMulticast() || hop.Zone() != "" {
			return invalid(field, "%q is not a unicast IP address", in[id])
		}
		if out.ForwardingPolicies == nil {
			out.ForwardingPolicies = map[string]netip.Addr{}
		}
		out.ForwardingPolicies[id] = hop
	}
	return nil
}

func parsePFCPTimers(p *pfcpSettings, out *PFCP) error {
	for _, d := range []struct {
		field string
		set   *time.Duration
		out   *time.Duration
	}{
		{"pfcp.heartbeat_interval", p.HeartbeatInterval, &out.HeartbeatInterval},
		{"pfcp.t1", p.T1, &out.T1},
		{"pfcp.traffic_stop_after", p.TrafficStopAfter, &out.TrafficStopAfter},
		{"pfcp.gtpu_echo_interval", p.GTPUEchoInterval, &out.GTPUEchoInterval},
	} {
		if d.set == nil {
			continue
		}
		if *d.set <= 0 {
			return invalid(d.field, "must be a positive duration, such as 3s")
		}
		*d.out = *d.set
	}
	if n := p.N1; n != nil {
		if *n < 1 || *n > maxN1 {
			return invalid("pfcp.n1", "must be from 1 to %d", maxN1)
		}
		out.N1 = *n
	}
	if n := p.GTPUEchoRetries; n != nil {
		if *n < 1 {
			return invalid("pfcp.gtpu_echo_retries", "must be 1 or more")
		}
		out.GTPUEchoRetries = *n
	}
	return nil
}

// parseUEPools reads the default UE pool and those of network instances,
// which must not overlap: an address is given back to the pool holding it.
func parseUEPools(p *pfcpSettings, gtpu []netip.Addr, out *PFCP) error {
	var fields []string
	var pools []netip.Prefix
	add := func(field, s string) (netip.Prefix, error) {
		pool, err := uePool(s, gtpu)
		if err != nil {
			return pool, invalid(field, "%v", err)
		}
		for i, other := range pools {
			if other.Overlaps(pool) {
				return pool, invalid(field, "%v overlaps %s (%v)", pool, fields[i], other)
			}
		}
		fields, pools = append(fields, field), append(pools, pool)
		return pool, nil
	}
	if p.UEPool != "" {
		pool, err := add("pfcp.ue_pool", p.UEPool)
		if err != nil {
			return err
		}
		out.UEPool = pool
	}
	for _, name := range slices.Sorted(maps.Keys(p.UEPools)) {
		field := fmt.Sprintf("pfcp.ue_pools[%q]", name)
		if len(name) == 0 || len(name) > maxNetworkInstance {
			return invalid(field, "a network instance has 1 to %d octets", maxNetworkInstance)
		}
		pool, err := add(field, p.UEPools[name])
		if err != nil {
			return err
		}
		if out.UEPools == nil {
			out.UEPools = map[string]netip.Prefix{}
		}
		out.UEPools[name] = pool
	}
	return nil
}

// parseN9NetworkInstances reads the network instances whose F-TEIDs are
// on N9, which needs N9 addresses.
func parseN9NetworkInstances(names []string, n9 bool, out *PFCP) error {
	for i, name := range names {
		field := fmt.Sprintf("pfcp.n9_network_instances[%d]", i)
		switch {
		case !n9:
			return invalid(field, "puts F-TEIDs on N9: give n9_addresses too")
		case len(name) == 0 || len(name) > maxNetworkInstance:
			return invalid(field, "a network instance has 1 to %d octets", maxNetworkInstance)
		case slices.Contains(names[:i], name):
			return invalid(field, "%q is listed twice", name)
		}
	}
	if len(names) > 0 {
		out.N9NetworkInstances = names
	}
	return nil
}

// maxNetworkInstance bounds a network instance's name, a DNN or APN: at
// most 100 octets (TS 23.003 §9.1).
const maxNetworkInstance = 100

// uePool checks the prefix of a UE address pool.
func uePool(s string, gtpu []netip.Addr) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	switch {
	case err != nil || !p.Addr().Is4():
		return p, fmt.Errorf("%q is not an IPv4 prefix such as 10.45.0.0/16", s)
	case p != p.Masked():
		return p, fmt.Errorf("%q has host bits set; the prefix is %v", s, p.Masked())
	}
	if _, err := ippool.New(p); err != nil { // too large
		return p, err
	}
	// A UE given the UPF's own GTP-U address would take its traffic.
	for _, a := range gtpu {
		if p.Contains(a) {
			return p, fmt.Errorf("%v holds the UPF's GTP-U address %v", p, a)
		}
	}
	return p, nil
}

// peerAddress checks an SMF's address, host or host:port, and gives it the
// PFCP port if it has none.
func peerAddress(s string) (string, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		host, port = s, strconv.Itoa(pfcp.DefaultPort)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return "", fmt.Errorf("%q is not a port number", port)
	}
	if err := pfcp.CheckNodeID(host); err != nil {
		return "", fmt.Errorf("%q is not HOST[:PORT]: %v", s, err)
	}
	return net.JoinHostPort(host, port), nil
}

// Limits of the UMEM frames of an AF_XDP queue.
const (
	// minCUUPFrames leaves frames for the fill rings of both interfaces
	// while the worker holds a batch and the TX rings hold others.
	minCUUPFrames = 1024
	maxCUUPFrames = 1 << 20 // afxdp's limit: 4 GiB of UMEM per queue
)

func parseCUUP(f *file, cfg *Config) error {
	c := f.CUUP
	if c == nil {
		return nil
	}
	out := &CUUP{IO: CUUPAFXDP}
	switch io := CUUPIO(c.IO); io {
	case "":
	case CUUPAFXDP, CUUPSockets:
		out.IO = io
	default:
		return invalid("cuup.io", "unknown I/O %q (afxdp or sockets)", c.IO)
	}
	for _, side := range []struct {
		key string
		in  cuupInterfaceSettings
		out *CUUPInterface
	}{{"cuup.n3", c.N3, &out.N3}, {"cuup.f1u", c.F1U, &out.F1U}} {
		if err := checkIfName(side.in.Interface); err != nil {
			return invalid(side.key+".interface", "%v", err)
		}
		a, err := netip.ParseAddr(side.in.Address)
		if err != nil || !a.IsGlobalUnicast() || a.Is4In6() || a.Zone() != "" {
			return invalid(side.key+".address", "%q is not a unicast IPv4 or IPv6 address that peers reach (not loopback nor link-local)", side.in.Address)
		}
		if slices.Contains(cfg.N3Addresses, a) || slices.Contains(cfg.N9Addresses, a) {
			return invalid(side.key+".address", "%v is one of the UPF's n3_addresses or n9_addresses", a)
		}
		*side.out = CUUPInterface{Interface: side.in.Interface, Address: a}
	}
	if err := parseCUUPCrypto(c, out); err != nil {
		return err
	}
	// Each role has a GTP-U socket of its own on its address.
	if out.F1U.Address == out.N3.Address {
		return invalid("cuup.f1u.address", "%v is cuup.n3.address too; N3 and F1-U need an address each", out.F1U.Address)
	}
	if out.IO == CUUPSockets {
		for _, given := range []struct {
			key string
			set bool
		}{{"cuup.queues", c.Queues != nil}, {"cuup.frames", c.Frames != nil}, {"cuup.busy_poll", c.BusyPoll != nil}} {
			if given.set {
				return invalid(given.key, "applies to io: afxdp only")
			}
		}
		cfg.CUUP = out
		return nil
	}
	if err := checkCUUPInterfaces(out, cfg); err != nil {
		return err
	}
	if err := parseCUUPQueues(c, out); err != nil {
		return err
	}
	if c.BusyPoll != nil {
		out.BusyPoll = *c.BusyPoll
	}
	cfg.CUUP = out
	return nil
}

// maxCryptoWorkers bounds the crypto pool: goroutines beyond the CPUs only
// queue.
const maxCryptoWorkers = 1024

func parseCUUPCrypto(c *cuupSettings, out *CUUP) error {
	if c.Crypto.Workers < 0 || c.Crypto.Workers > maxCryptoWorkers {
		return invalid("cuup.crypto.workers", "%d is not 0 to %d", c.Crypto.Workers, maxCryptoWorkers)
	}
	out.CryptoWorkers = c.Crypto.Workers
	if c.Crypto.Placement != "" {
		if err := out.CryptoPlacement.UnmarshalText([]byte(c.Crypto.Placement)); err != nil {
			return invalid("cuup.crypto.placement", "%v", err)
		}
	}
	if out.CryptoPlacement == cuup.Pool && out.CryptoWorkers == 0 {
		return invalid("cuup.crypto.placement", "pool needs cuup.crypto.workers")
	}
	return nil
}

// checkCUUPInterfaces checks that the AF_XDP path's XDP programs, one per
// role, have their interfaces to themselves, and can run in the mode.
func checkCUUPInterfaces(out *CUUP, cfg *Config) error {
	if out.F1U.Interface == out.N3.Interface {
		return invalid("cuup.f1u.interface", "%s is cuup.n3.interface too; with io afxdp each role's XDP program runs on an interface of its own",
			out.F1U.Interface)
	}
	for _, side := range []struct{ key, name string }{{"cuup.n3.interface", out.N3.Interface}, {"cuup.f1u.interface", out.F1U.Interface}} {
		if slices.ContainsFunc(cfg.Interfaces, func(i Interface) bool { return i.Name == side.name }) {
			return invalid(side.key, "%s runs the UPF, and an interface runs one XDP program", side.name)
		}
		if cfg.Classify != nil && slices.Contains(cfg.Classify.Interfaces, side.name) {
			return invalid(side.key, "%s runs the classifier, and an interface runs one XDP program", side.name)
		}
	}
	if cfg.XDPMode == xdplink.ModeOffload {
		return invalid("xdp_mode", "the CU-UP's AF_XDP path (cuup.io afxdp) runs in native or generic mode, not %s", cfg.XDPMode)
	}
	return nil
}

func parseCUUPQueues(c *cuupSettings, out *CUUP) error {
	out.Queues = []int{0}
	if c.Queues != nil {
		if len(c.Queues) == 0 {
			return invalid("cuup.queues", "at least one receive queue is needed")
		}
		out.Queues = nil
		for i, q := range c.Queues {
			field := fmt.Sprintf("cuup.queues[%d]", i)
			if q < 0 || q >= cuupxdp.DefaultQueues {
				return invalid(field, "%d is not a receive queue from 0 to %d", q, cuupxdp.DefaultQueues-1)
			}
			if slices.Contains(out.Queues, q) {
				return invalid(field, "%d is listed twice", q)
			}
			out.Queues = append(out.Queues, q)
		}
	}
	out.Frames = cuup.DefaultFrames
	if n := c.Frames; n != nil {
		if *n < minCUUPFrames || *n > maxCUUPFrames {
			return invalid("cuup.frames", "must be from %d to %d", minCUUPFrames, maxCUUPFrames)
		}
		out.Frames = *n
	}
	return nil
}
