package upfxdp

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
)

// Chain is what runs before the UPF on an interface, each stage a program
// of the classifier's (classifyxdp.Datapath.Stages): nil for a stage the
// interface does not run. The zero Chain is the UPF alone, whose program
// is then the interface's own, as without chains.
type Chain struct {
	Classify *ebpf.Program // the classify stage
	// Steer is the steer stage behind the classify stage, SteerFirst the
	// same first in the chain: it parses the packet itself.
	Steer, SteerFirst *ebpf.Program
	Slice             uint32 // the slice Steer sends packets to
	// Mirror goes at TC ingress with the classify stage: it makes the
	// copies of the mirrored packets passed to the kernel, which the UPF
	// stage does not send.
	Mirror *ebpf.Program
	// queues are where the steered packets wait for their CPUs: nil for
	// a Chain not of NewChain.
	queues Stages
}

// Stages is what has the classify and steer stages, and the mirror
// program: classifyxdp.Datapath.
type Stages interface {
	Stages() (classify, steer, steerFirst *ebpf.Program)
	MirrorProgram() *ebpf.Program
	// AwaitSteered waits until the packets steered to CPUs so far have
	// left the CPUs' queues, for at most timeout, or returns at once when
	// it cannot tell.
	AwaitSteered(timeout time.Duration)
}

// NewChain is the chain of the stages of s that classify and steer name,
// the steer stage sending packets to slice.
func NewChain(s Stages, classify, steer bool, slice uint32) Chain {
	c := Chain{queues: s}
	classifyStage, steerStage, steerFirst := s.Stages()
	if classify {
		c.Classify, c.Mirror = classifyStage, s.MirrorProgram()
	}
	if steer {
		c.Steer, c.SteerFirst, c.Slice = steerStage, steerFirst, slice
	}
	return c
}

func (c Chain) alone() bool { return c.Classify == nil && c.Steer == nil }

// entry is the program attached to the interface: the first stage.
func (c Chain) entry(upf *ebpf.Program) *ebpf.Program {
	switch {
	case c.Classify != nil:
		return c.Classify
	case c.Steer != nil:
		return c.SteerFirst
	}
	return upf
}

// Stages of a chain (enum chain_stage): their places in chain_stages.
const (
	stageClassify = uint32(upfChainStageSTAGE_CLASSIFY)
	stageSteer    = uint32(upfChainStageSTAGE_STEER)
	stageUPF      = uint32(upfChainStageSTAGE_UPF)
	stageCount    = uint32(upfChainStageSTAGE_COUNT)
)

// chainPlaces are the places of chain_ifaces: an interface's is its index
// modulo their number.
const chainPlaces = uint32(upfChainLimitsCHAIN_PLACES)

// When steering goes, the UPF stage behind the CPU map stays until the
// packets queued for the CPUs are through: steerEnds after the steering
// stage is out of the chain, for a packet still in it to be queued (a
// program runs to its end without yielding its CPU), then for as long as
// the queues take, queueDrain at most. A queue's kernel thread waits its
// turn on a busy CPU: hundreds of milliseconds on a loaded host.
const (
	steerEnds  = 10 * time.Millisecond
	queueDrain = 5 * time.Second
)

// ChainParseMap is the chain map through which the classify stage hands
// its parse of a packet to the UPF stage: a classifier loaded without it
// keeps its parse, and the UPF parses the packet again.
const ChainParseMap = upfMapChainHandoffs

// ChainMaps are the maps the stages of the classifier share with the UPF's
// (classifyxdp.Config.Chain).
func (d *Datapath) ChainMaps() map[string]*ebpf.Map {
	return map[string]*ebpf.Map{upfMapChainStages: d.maps.ChainStages, upfMapChainCpuStages: d.maps.ChainCpuStages,
		upfMapChainIfaces: d.maps.ChainIfaces, upfMapChainHandoffs: d.maps.ChainHandoffs}
}

// setChain puts the stages of the interface in slot, a chain of more than
// the UPF, with the UPF's stage last (xdp_upf_stage, and xdp_upf_cpu
// behind steering). Later stages are in place before earlier ones
// lead to them; a stage that goes is deleted once the one before it no
// longer leads to it, so that no packet meets a half-built chain.
func (d *Datapath) setChain(ifindex, slot uint32, c Chain, upf chainPrograms) error {
	place := ifindex & (chainPlaces - 1)
	var held upfChainIface
	if err := d.maps.ChainIfaces.Lookup(place, &held); err != nil {
		return err
	}
	if held.Ifindex != 0 && held.Ifindex != ifindex {
		return fmt.Errorf("interface %d runs a chain already at the place of interface %d (its index modulo %d): "+
			"one of them can run the UPF alone", held.Ifindex, ifindex, chainPlaces)
	}
	if err := d.maps.ChainIfaces.Put(place, upfChainIface{Ifindex: ifindex, Slot: slot, Slice: c.Slice}); err != nil {
		return err
	}
	if err := d.maps.ChainCpuStages.Put(slot, upf.CPU); err != nil {
		return err
	}
	for _, s := range []struct {
		stage uint32
		prog  *ebpf.Program
	}{{stageUPF, upf.Stage}, {stageSteer, c.Steer}, {stageClassify, c.Classify}} {
		if err := d.putStage(slot*stageCount+s.stage, s.prog); err != nil {
			return err
		}
	}
	return nil
}

// dropCPUStage deletes the UPF stage behind the CPU map of the interface
// in slot, if there is one, once the packets queued for it in queues are
// through; with no queues known (steering by another process), after
// steerEnds.
func (d *Datapath) dropCPUStage(slot uint32, queues Stages) error {
	var id uint32
	if d.maps.ChainCpuStages.Lookup(slot, &id) != nil {
		return nil
	}
	time.Sleep(steerEnds)
	if queues != nil {
		queues.AwaitSteered(queueDrain)
	}
	return deleteStage(d.maps.ChainCpuStages, slot)
}

// putStage writes a stage's place, or deletes it for nil.
func (d *Datapath) putStage(place uint32, prog *ebpf.Program) error {
	if prog == nil {
		return deleteStage(d.maps.ChainStages, place)
	}
	return d.maps.ChainStages.Put(place, prog)
}

func deleteStage(m *ebpf.Map, place uint32) error {
	if err := m.Delete(place); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return err
	}
	return nil
}

// clearChain removes every stage of the interface in slot: it runs the
// UPF's program alone, attached already.
func (d *Datapath) clearChain(ifindex, slot uint32, queues Stages) error {
	var errs []error
	for s := range stageCount {
		errs = append(errs, deleteStage(d.maps.ChainStages, slot*stageCount+s))
	}
	place := ifindex & (chainPlaces - 1)
	var held upfChainIface
	if err := d.maps.ChainIfaces.Lookup(place, &held); err != nil {
		errs = append(errs, err)
	} else if held.Ifindex == ifindex {
		errs = append(errs, d.maps.ChainIfaces.Put(place, upfChainIface{}))
	}
	return errors.Join(append(errs, d.dropCPUStage(slot, queues))...)
}

// stagedIface is an interface this process attached, with the programs
// its chain runs as the UPF's stage.
type stagedIface struct {
	name          string
	ifindex, slot uint32
	roles         Role
	mode          xdplink.Mode
	upf           *ebpf.Program
	stage         *chainPrograms // loaded with the first chain of more than the UPF
	queues        Stages         // of the last chain that had them
}

func (s *stagedIface) close() {
	s.upf.Close()
	if s.stage != nil {
		s.stage.close()
	}
}

// stagedIfaces are the interfaces this process attached, by name.
type stagedIfaces struct {
	mu     sync.Mutex
	ifaces map[string]*stagedIface
}

// set records an interface, in place of what it ran before.
func (s *stagedIfaces) set(i *stagedIface) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.ifaces[i.name]; old != nil {
		old.close()
	}
	if s.ifaces == nil {
		s.ifaces = map[string]*stagedIface{}
	}
	s.ifaces[i.name] = i
}

// rolesOf are the roles of the interface ifindex, if this process attached it.
func (s *stagedIfaces) rolesOf(ifindex uint32) (Role, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, i := range s.ifaces {
		if i.ifindex == ifindex {
			return i.roles, true
		}
	}
	return 0, false
}

// remove forgets an interface and returns the queues its chain steered
// to, if any.
func (s *stagedIfaces) remove(name string) Stages {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.ifaces[name]
	if old == nil {
		return nil
	}
	old.close()
	delete(s.ifaces, name)
	return old.queues
}

func (s *stagedIfaces) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, i := range s.ifaces {
		i.close()
	}
	s.ifaces = nil
}

// SetStages changes the stages before the UPF on an interface this process
// attached, leaving its UPF's program as it is: each stage added or
// removed is one atomic update, the other stages stay, and no packet sees
// a half-built chain. Only the interface's first chain of more than the
// UPF loads programs: the UPF's stage, which takes what the classify
// stage parsed, and its variant behind the CPU map, where the steer stage
// and the classify stage's steering rules send packets.
func (d *Datapath) SetStages(ifname string, c Chain) error {
	d.staged.mu.Lock()
	defer d.staged.mu.Unlock()
	i := d.staged.ifaces[ifname]
	if i == nil {
		return fmt.Errorf("%s: not attached by this process", ifname)
	}
	return d.stage(i, c)
}

// stage runs chain c on the interface i: its mirror program, its stages'
// places, then its XDP program (the first stage); for the UPF alone, its
// program, then the places cleared. A mirror program c does not have goes
// last, once no packet gets the metadata it reads.
func (d *Datapath) stage(i *stagedIface, c Chain) error {
	attach := func() error { return xdplink.XDP(d.linkPin(i.name), c.entry(i.upf), i.name, i.mode) }
	if c.queues != nil {
		i.queues = c.queues
	}
	if c.Mirror != nil {
		if err := xdplink.TCIngress(d.mirrorPin(i.name), c.Mirror, i.name); err != nil {
			return err
		}
	}
	if c.alone() {
		if err := attach(); err != nil {
			return err
		}
		return errors.Join(d.clearChain(i.ifindex, i.slot, i.queues), d.detachMirror(i.name))
	}
	// A steering rule of the classify stage steers too.
	if i.stage == nil {
		var stage chainPrograms
		if err := d.loadPrograms(i.slot, i.roles, &stage); err != nil {
			return err
		}
		i.stage = &stage
	}
	if err := d.setChain(i.ifindex, i.slot, c, *i.stage); err != nil {
		return err
	}
	if err := attach(); err != nil || c.Mirror != nil {
		return err
	}
	return d.detachMirror(i.name)
}

// mirrorPin is the pin of the TC link of the mirror program of an
// interface's chain.
func (d *Datapath) mirrorPin(ifname string) string {
	return filepath.Join(d.opts.PinPath, mirrorLinksDirName, ifname)
}

// detachMirror removes the mirror program of an interface's chain, if it
// has one.
func (d *Datapath) detachMirror(ifname string) error {
	if _, err := os.Stat(d.mirrorPin(ifname)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return xdplink.Detach(d.mirrorPin(ifname))
}
