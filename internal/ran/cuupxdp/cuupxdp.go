// Package cuupxdp loads the CU-UP's XDP classifier (bpf/cuup/cuup.c), attaches
// it to the N3 and F1-U interfaces, programs the CU-UP's tunnels and the
// AF_XDP sockets of each receive queue, and reads what the classifier
// leaves before each packet it redirects (Meta) and what it counted.
//
// The G-PDUs of the tunnels in the table go, with their Meta, to the
// socket of the queue they arrived on, or to the kernel when that queue
// has none; malformed ones are dropped. Everything else goes to the kernel,
// except frames without a valid Ethernet header, which are dropped.
package cuupxdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/platform/afxdp"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
)

// Role is the interface a tunnel's packets arrive on; N3 and F1-U TEIDs are
// separate spaces.
type Role uint8

const (
	N3  Role = Role(cuupCuupRoleCUUP_ROLE_N3)  // from the UPF: downlink, PDU Session Container of type DL
	F1U Role = Role(cuupCuupRoleCUUP_ROLE_F1U) // from the DU: uplink, maybe an NR RAN Container
)

// roles is the number of roles, numbered from 1: role r has index r-1 of
// the per-role arrays.
const roles = int(cuupCuupRoleCUUP_ROLES)

func (r Role) String() string {
	switch r {
	case N3:
		return "N3"
	case F1U:
		return "F1-U"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

func (r Role) check() error {
	if r != N3 && r != F1U {
		return fmt.Errorf("cuupxdp: unknown role %d (N3 is %d, F1-U %d)", uint8(r), N3, F1U)
	}
	return nil
}

// Defaults of Config.
const (
	DefaultMaxTunnels = 65536
	DefaultQueues     = 64
)

// Config sizes the maps.
type Config struct {
	MaxTunnels int // both roles together; DefaultMaxTunnels when 0
	// Queues is how many receive queues (0 to Queues-1) may have a
	// socket; DefaultQueues when 0.
	Queues int
}

// ErrNoTunnel is returned for a tunnel the table does not have.
var ErrNoTunnel = errors.New("cuupxdp: no such tunnel")

// Datapath is the loaded classifier: one program per role, with a map of
// the sockets of each receive queue per role and the tunnels and counters
// shared. A role's program serves one interface: a socket takes the
// packets of its own interface only. A Datapath is safe for concurrent
// use except Attach and Close.
type Datapath struct {
	cfg      Config
	tunnels  *ebpf.Map
	counters *ebpf.Map
	xsks     [roles]*ebpf.Map     // by role - 1
	progs    [roles]*ebpf.Program // by role - 1
	links    []link.Link
}

// Open loads the maps and both roles' programs.
func Open(cfg Config) (*Datapath, error) {
	if cfg.MaxTunnels == 0 {
		cfg.MaxTunnels = DefaultMaxTunnels
	}
	if cfg.Queues == 0 {
		cfg.Queues = DefaultQueues
	}
	if cfg.MaxTunnels < 0 || cfg.MaxTunnels > 1<<24 || cfg.Queues < 0 || cfg.Queues > 1024 {
		return nil, fmt.Errorf("cuupxdp: %d tunnels, %d queues: want up to %d and %d", cfg.MaxTunnels, cfg.Queues, 1<<24, 1024)
	}
	spec, err := loadCuup()
	if err != nil {
		return nil, err
	}
	var specs cuupSpecs
	if err := spec.Assign(&specs); err != nil {
		return nil, err
	}
	specs.CuupTunnels.MaxEntries = uint32(cfg.MaxTunnels)
	specs.CuupXsks.MaxEntries = uint32(cfg.Queues)
	d := &Datapath{cfg: cfg}
	if d.tunnels, err = ebpf.NewMap(specs.CuupTunnels); err != nil {
		return nil, fmt.Errorf("cuupxdp: creating the tunnel map: %w", err)
	}
	if d.counters, err = ebpf.NewMap(specs.CuupCounters); err != nil {
		return nil, errors.Join(fmt.Errorf("cuupxdp: creating the counters: %w", err), d.Close())
	}
	for _, role := range []Role{N3, F1U} {
		xsks, err := ebpf.NewMap(specs.CuupXsks)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("cuupxdp: creating the %v socket map: %w", role, err), d.Close())
		}
		d.xsks[role-1] = xsks
		if err := specs.Role.Set(uint32(role)); err != nil {
			return nil, errors.Join(err, d.Close())
		}
		var progs cuupPrograms
		replace := map[string]*ebpf.Map{specs.CuupTunnels.Name: d.tunnels, specs.CuupCounters.Name: d.counters,
			specs.CuupXsks.Name: xsks}
		if err := spec.LoadAndAssign(&progs, &ebpf.CollectionOptions{MapReplacements: replace}); err != nil {
			return nil, errors.Join(fmt.Errorf("cuupxdp: loading the %v program: %w", role, err), d.Close())
		}
		d.progs[role-1] = progs.XdpCuup
	}
	return d, nil
}

// Close detaches the programs from the interfaces Attach attached them to
// and unloads everything.
func (d *Datapath) Close() error {
	var errs []error
	for _, l := range d.links {
		errs = append(errs, l.Close())
	}
	d.links = nil
	for _, p := range d.progs {
		if p != nil {
			errs = append(errs, p.Close())
		}
	}
	for _, m := range []*ebpf.Map{d.xsks[0], d.xsks[1], d.tunnels, d.counters} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	return errors.Join(errs...)
}

// Program is a role's XDP program.
func (d *Datapath) Program(role Role) (*ebpf.Program, error) {
	if err := role.check(); err != nil {
		return nil, err
	}
	return d.progs[role-1], nil
}

// Attach runs a role's program on an interface of the calling thread's
// network namespace, in native or generic mode. The link is not pinned:
// the sockets the program feeds die with the process, and so does it.
// Closing the result, or the Datapath, detaches it.
func (d *Datapath) Attach(ifname string, role Role, mode xdplink.Mode) (io.Closer, error) {
	prog, err := d.Program(role)
	if err != nil {
		return nil, err
	}
	var flags link.XDPAttachFlags
	switch mode {
	case xdplink.ModeNative, "":
		flags = link.XDPDriverMode
	case xdplink.ModeGeneric:
		flags = link.XDPGenericMode
	default:
		return nil, fmt.Errorf("cuupxdp: XDP mode %q: native or generic (AF_XDP needs the host)", mode)
	}
	iface, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("cuupxdp: %w", err)
	}
	l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: iface.Index, Flags: flags})
	if err != nil {
		return nil, fmt.Errorf("cuupxdp: attaching the %v program to %s (%s): %w", role, ifname, mode, err)
	}
	d.links = append(d.links, l)
	return l, nil
}

// AddTunnel makes the G-PDUs of a CU-UP TEID on a role's interfaces come
// to user space with bearer in their Meta.
func (d *Datapath) AddTunnel(teid uint32, role Role, bearer uint32) error {
	if err := role.check(); err != nil {
		return err
	}
	if teid == 0 {
		return errors.New("cuupxdp: TEID 0 names no tunnel (TS 29.281 5.1)")
	}
	err := d.tunnels.Update(tunnelKey(teid, role), cuupCuupTunnel{Bearer: bearer}, ebpf.UpdateNoExist)
	switch {
	case errors.Is(err, ebpf.ErrKeyExist):
		return fmt.Errorf("cuupxdp: %v tunnel %#x exists already", role, teid)
	case errors.Is(err, unix.E2BIG):
		return fmt.Errorf("cuupxdp: the tunnel table is full (%d)", d.cfg.MaxTunnels)
	case err != nil:
		return fmt.Errorf("cuupxdp: adding %v tunnel %#x: %w", role, teid, err)
	}
	return nil
}

// DeleteTunnel removes a tunnel: its packets go to the kernel again.
func (d *Datapath) DeleteTunnel(teid uint32, role Role) error {
	if err := role.check(); err != nil {
		return err
	}
	err := d.tunnels.Delete(tunnelKey(teid, role))
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("%w: %v TEID %#x", ErrNoTunnel, role, teid)
	}
	return err
}

func tunnelKey(teid uint32, role Role) cuupCuupTunnelKey {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], teid)
	return cuupCuupTunnelKey{Teid: binary.NativeEndian.Uint32(b[:]), Role: uint32(role)}
}

// RegisterSocket sends the packets of tunnels of a role that arrive on
// receive queue queue of the role's interface to s, a socket bound to that
// queue. Closing s unregisters it.
func (d *Datapath) RegisterSocket(role Role, queue int, s *afxdp.Socket) error {
	xsks, err := d.socketMap(role, queue)
	if err != nil {
		return err
	}
	if err := xsks.Update(uint32(queue), uint32(s.FD()), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("cuupxdp: registering the %v socket of queue %d: %w", role, queue, err)
	}
	return nil
}

func (d *Datapath) socketMap(role Role, queue int) (*ebpf.Map, error) {
	if err := role.check(); err != nil {
		return nil, err
	}
	if queue < 0 || queue >= d.cfg.Queues {
		return nil, fmt.Errorf("cuupxdp: queue %d: the socket maps have queues 0 to %d", queue, d.cfg.Queues-1)
	}
	return d.xsks[role-1], nil
}
