// Package config reads and validates the daemon's YAML configuration file.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/xdp5g/xdp5g/internal/datapath"
)

// Defaults of the settings a file may leave out.
const (
	DefaultListen      = "127.0.0.1:9880"
	DefaultMaxSessions = 65536
	DefaultStateFile   = "/var/lib/xdp5g/sessions.json"
)

const (
	maxN3Addresses = 4 // what the XDP program compares against
	// maxSessionsLimit keeps the map sizes (four rules per session) well
	// inside uint32.
	maxSessionsLimit = 1 << 24
	maxIfName        = 15 // IFNAMSIZ less the NUL
)

// Config is a validated configuration.
type Config struct {
	Interfaces []Interface
	// N3Addresses are the UPF's GTP-U addresses; the first is the source
	// of downlink tunnels.
	N3Addresses []netip.Addr
	XDPMode     datapath.Mode
	// Netns names a namespace under /run/netns that holds the interfaces;
	// empty for the daemon's own.
	Netns     string
	API       API
	Datapath  Datapath
	StateFile string
}

// Interface is a network interface the data path attaches to.
type Interface struct {
	Name  string
	Roles datapath.Role
}

// API is where the REST API listens.
type API struct {
	Listen string
}

// Datapath places and sizes the pinned maps.
type Datapath struct {
	PinPath     string
	MaxSessions uint32
}

// CoreInterfaces names the interfaces with the core role.
func (c *Config) CoreInterfaces() []string {
	var names []string
	for _, i := range c.Interfaces {
		if i.Roles&datapath.RoleCore != 0 {
			names = append(names, i.Name)
		}
	}
	return names
}

// FieldError names the setting that is wrong, by its path in the file.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

func invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// file is the YAML as written; parse turns it into a Config.
type file struct {
	Interfaces  []ifaceSettings  `yaml:"interfaces"`
	N3Addresses []string         `yaml:"n3_addresses"`
	XDPMode     string           `yaml:"xdp_mode"`
	Netns       string           `yaml:"netns"`
	API         apiSettings      `yaml:"api"`
	Datapath    datapathSettings `yaml:"datapath"`
	StateFile   string           `yaml:"state_file"`
}

type ifaceSettings struct {
	Name  string   `yaml:"name"`
	Roles []string `yaml:"roles"`
}

type apiSettings struct {
	Listen string `yaml:"listen"`
}

type datapathSettings struct {
	PinPath     string  `yaml:"pin_path"`
	MaxSessions *uint32 `yaml:"max_sessions"`
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
		return nil, err
	}
	if err := dec.Decode(new(yaml.Node)); !errors.Is(err, io.EOF) {
		return nil, errors.New("a configuration is one YAML document")
	}
	cfg := &Config{
		XDPMode:   datapath.ModeNative,
		API:       API{Listen: DefaultListen},
		Datapath:  Datapath{PinPath: datapath.DefaultPinPath, MaxSessions: DefaultMaxSessions},
		StateFile: DefaultStateFile,
	}
	steps := []func(*file, *Config) error{parseInterfaces, parseN3Addresses, parseXDPMode, parseNetns, parseListen, parseDatapath, parseStateFile}
	for _, step := range steps {
		if err := step(&f, cfg); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

var roleNames = map[string]datapath.Role{"access": datapath.RoleAccess, "core": datapath.RoleCore}

func parseInterfaces(f *file, cfg *Config) error {
	if len(f.Interfaces) == 0 {
		return invalid("interfaces", "at least one interface is needed")
	}
	seen := map[string]bool{}
	var all datapath.Role
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
			return invalid(field+".roles", "give access, core or both")
		}
		var roles datapath.Role
		for j, name := range in.Roles {
			role, ok := roleNames[name]
			if !ok {
				return invalid(fmt.Sprintf("%s.roles[%d]", field, j), "unknown role %q (access or core)", name)
			}
			if roles&role != 0 {
				return invalid(fmt.Sprintf("%s.roles[%d]", field, j), "%s is listed twice", name)
			}
			roles |= role
		}
		all |= roles
		cfg.Interfaces = append(cfg.Interfaces, Interface{Name: in.Name, Roles: roles})
	}
	if all != datapath.RoleAccess|datapath.RoleCore {
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
	switch n := len(f.N3Addresses); {
	case n == 0:
		return invalid("n3_addresses", "at least one N3 (GTP-U) address is needed")
	case n > maxN3Addresses:
		return invalid("n3_addresses", "at most %d addresses, got %d", maxN3Addresses, n)
	}
	for i, s := range f.N3Addresses {
		field := fmt.Sprintf("n3_addresses[%d]", i)
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() || a.IsUnspecified() || a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
			return invalid(field, "%q is not a unicast IPv4 address", s)
		}
		for _, prev := range cfg.N3Addresses {
			if prev == a {
				return invalid(field, "%s is listed twice", a)
			}
		}
		cfg.N3Addresses = append(cfg.N3Addresses, a)
	}
	return nil
}

func parseXDPMode(f *file, cfg *Config) error {
	switch m := datapath.Mode(f.XDPMode); m {
	case "":
	case datapath.ModeNative, datapath.ModeGeneric, datapath.ModeOffload:
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

func parseListen(f *file, cfg *Config) error {
	if f.API.Listen == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(f.API.Listen)
	if err != nil {
		return invalid("api.listen", "%q is not HOST:PORT", f.API.Listen)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return invalid("api.listen", "%q is not a port number", port)
	}
	cfg.API.Listen = f.API.Listen
	return nil
}

func parseDatapath(f *file, cfg *Config) error {
	if p := f.Datapath.PinPath; p != "" {
		// Detach removes this directory: never a mount point itself.
		if !filepath.IsAbs(p) || filepath.Dir(filepath.Clean(p)) == "/" || filepath.Clean(p) == "/sys/fs/bpf" {
			return invalid("datapath.pin_path", "%q must be a directory of its own below a bpffs mount, such as %s", p, datapath.DefaultPinPath)
		}
		cfg.Datapath.PinPath = filepath.Clean(p)
	}
	if n := f.Datapath.MaxSessions; n != nil {
		if *n == 0 || *n > maxSessionsLimit {
			return invalid("datapath.max_sessions", "must be from 1 to %d", maxSessionsLimit)
		}
		cfg.Datapath.MaxSessions = *n
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
