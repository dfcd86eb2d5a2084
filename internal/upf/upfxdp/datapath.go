// Package upfxdp loads the UPF's XDP program (bpf/upf/upf.c), attaches it
// to interfaces and gives typed access to its pinned maps.
package upfxdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cilium/ebpf"

	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
)

// DefaultPinPath is where the maps and XDP links live between daemon runs.
const DefaultPinPath = "/sys/fs/bpf/xdp5g"

// Limits and defaults of Options.
const (
	DefaultMaxSessions = 65536
	// MaxGTPUAddresses bounds the N3 and N9 addresses together, of both
	// families: those xdp_upf compares a destination with.
	MaxGTPUAddresses = int(upfLimitsMAX_GTPU_ADDRS)
)

// Slots per session that the rule tables (PDRs, QERs, URRs) reserve.
const rulesPerSession = 4

// replacementSpare is how many sessions' worth of rule slots the tables
// hold beyond maxSessions. A modification writes a session's new rules
// before it frees the old ones, and a freed slot waits a second before it
// is used again (no packet may still hold it), so a full data path could
// otherwise change no session at all. An eighth, at least 1024, lets that
// many sessions change every second.
func replacementSpare(maxSessions uint32) uint32 { return max(maxSessions/8, 1024) }

// Slots per session that sdf_sets reserves: only PDRs with filters take one,
// and filters that match every packet ("permit out ip from any to
// assigned", which SMFs give default PDRs) are left out.
const sdfSetsPerSession = 1

// Types shared with the BPF program.
type (
	PDR     = upfPdr
	QER     = upfQer
	PDRSet  = upfPdrSet
	FAR     = upfFar
	Nexthop = upfNexthop
	Counter = upfCounter
	// SDFSet holds a PDR's SDF filters, SDFFilter one of them: see
	// bpf/upf/structs.h for how they match.
	SDFSet    = upfSdfSet
	SDFFilter = upfSdfFilter
)

// Sizes shared with the BPF program, from the types bpf2go generates.
const (
	PDRsPerKey  = len(PDRSet{}.Pdr)
	QERsPerPDR  = len(PDR{}.Qer)
	URRsPerPDR  = len(PDR{}.Urr)
	SDFPerPDR   = len(SDFSet{}.Filter)
	maxIfaces   = uint32(upfLimitsMAX_IFACES)
	reasonCount = int(upfReasonREASON_COUNT)
)

// Bits of SDFFilter.Flags (enum sdf_flags).
const (
	SDFIPv4  = uint8(upfSdfFlagsSDF_IPV4)
	SDFIPv6  = uint8(upfSdfFlagsSDF_IPV6)
	SDFPorts = uint8(upfSdfFlagsSDF_PORTS)
)

// Bits of PDR.Flags (enum pdr_flags).
const (
	MatchUEv4    = uint8(upfPdrFlagsPDR_MATCH_UE_V4)
	MatchUEv6    = uint8(upfPdrFlagsPDR_MATCH_UE_V6)
	MatchQFI     = uint8(upfPdrFlagsPDR_MATCH_QFI)
	MarkQFI      = uint8(upfPdrFlagsPDR_MARK_QFI)
	MarkRQI      = uint8(upfPdrFlagsPDR_MARK_RQI)
	ToUE         = uint8(upfPdrFlagsPDR_TO_UE)
	URRBeforeQoS = uint8(upfPdrFlagsPDR_URR_BEFORE_QOS) // << n: the PDR's URR n measures before QoS enforcement
)

// FAR.Action (enum far_action) and the bits of FAR.Flags (enum far_flags).
const (
	FARDrop    = uint8(upfFarActionFAR_DROP)
	FARForward = uint8(upfFarActionFAR_FORWARD)
	FARBuffer  = uint8(upfFarActionFAR_BUFFER)
	FARGTPUv4  = uint8(upfFarFlagsFAR_GTPU_IPV4)
	// FARGTPUv6: the tunnel's endpoints are the Tunnel6 at the FAR's
	// next-hop slot (PutTunnel6).
	FARGTPUv6 = uint8(upfFarFlagsFAR_GTPU_IPV6)
	// FARToCPFunction: the tunnel goes to the CP function (N4-u), and a
	// relayed packet's QFI is not kept in it as it is towards a gNB or
	// another UPF.
	FARToCPFunction = uint8(upfFarFlagsFAR_TO_CP_FUNCTION)
)

// Next-hop slots that name no next hop (enum nexthop_slot): KernelSlot is
// never valid, so a route pointing at it leaves the packet to the kernel;
// a FAR with NexthopRoute looks the destination up in the routes.
const (
	KernelSlot   = uint32(upfNexthopSlotKERNEL_SLOT)
	NexthopRoute = uint32(upfNexthopSlotNEXTHOP_ROUTE)
)

// A QER's directions (enum qer_dir): its bits in QER.GateClosed, the
// indexes of QER.Bucket.
const (
	QERUplink   = int(upfQerDirQER_UL)
	QERDownlink = int(upfQerDirQER_DL)
)

const (
	linksDirName       = "links"
	mirrorLinksDirName = "tc-mirror" // the TC links of chains' mirror programs
	ifaceNameSize      = len(upfIface{}.Name)
)

// Role says which traffic an interface carries.
type Role uint32

const (
	RoleAccess = Role(upfIfaceRoleROLE_ACCESS) // GTP-U in: N3 from gNBs, N9 from other UPFs
	RoleCore   = Role(upfIfaceRoleROLE_CORE)   // N6: plain IP from the data network
	// RoleCopies is neither: the interface only sends the copies of
	// duplicated packets (DUPL) out, towards an LI collector; the program
	// passes whatever comes in to the kernel.
	RoleCopies Role = 0
)

// Options size and place the data path.
type Options struct {
	PinPath     string // bpffs directory; DefaultPinPath when empty
	MaxSessions uint32 // DefaultMaxSessions when 0
	// N3Addresses and N9Addresses are the GTP-U addresses, IPv4 or IPv6,
	// at most MaxGTPUAddresses in all: the data path takes G-PDUs to them on
	// interfaces of the access role.
	N3Addresses []netip.Addr
	N9Addresses []netip.Addr
	// ErrorIndicationRate is how many G-PDUs to an unknown TEID each CPU
	// passes to the kernel a second, for the GTP-U endpoint to answer with
	// an Error Indication (TS 29.281 7.3.1); the others are dropped. 0
	// drops them all.
	ErrorIndicationRate uint32
}

// gtpuAddresses are the N3 then the N9 addresses: the index of one is the
// one the data path looks a G-PDU sent to it up with.
func (o *Options) gtpuAddresses() []netip.Addr {
	return append(slices.Clip(o.N3Addresses), o.N9Addresses...)
}

// Datapath is the loaded set of pinned maps; programs are loaded per
// interface by Attach.
type Datapath struct {
	opts   Options
	gtpu   []netip.Addr // opts.gtpuAddresses()
	maps   upfMaps
	routes routeTables
	sets   pdrSets
	// The arrays written through mmap: the rules of a session are
	// installed without a system call per rule.
	pdrs mapped[PDR]
	// pdrCounters is a row of pdrs.len() counters per possible CPU.
	pdrCounters mapped[Counter]
	sdfSets     mapped[SDFSet]
	urrs        mapped[upfUrr]
	// usageLines and urrCounts are a row of as many QER and URR slots per
	// possible CPU.
	usageLines   mapped[upfUsageLine]
	urrCountRows mapped[upfUrrCount]
	// urrMu keeps readers of a URR's usage out while shareURR moves its
	// rows' counts into its shared counters.
	urrMu   sync.RWMutex
	buffers mapped[upfBuffer]
	release releasers
	staged  stagedIfaces
	copy    struct {
		mu   sync.Mutex
		prog *ebpf.Program // copyProgram's; nil until then
	}
	// fanoutSpec is the spec of the devmaps in dupl_fanouts.
	fanoutSpec *ebpf.MapSpec
	// created: Open created the maps, none was pinned by a previous run;
	// pdrWritten: a PDR has been written since.
	created    bool
	pdrWritten atomic.Bool
}

// retiredMaps are maps earlier builds pinned that this one no longer has:
// the usage lines took over the QERs' per-CPU credits, and the chain's
// handoff the GTP-U parse. An upgrade removes their pins, so the directory
// holds only maps something reads.
var retiredMaps = []string{"qer_credits", "chain_parses", "tunnels6"}

func removeRetiredMaps(dir string) error {
	for _, name := range retiredMaps {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing the pin of %s, a map this version no longer has: %w", name, err)
		}
	}
	return nil
}

// Open creates the maps, or reuses the ones a previous run pinned.
func Open(opts Options) (*Datapath, error) {
	if opts.PinPath == "" {
		opts.PinPath = DefaultPinPath
	}
	if opts.MaxSessions == 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	addrs := opts.gtpuAddresses()
	if len(addrs) > MaxGTPUAddresses {
		return nil, fmt.Errorf("at most %d N3 and N9 addresses in all, got %d", MaxGTPUAddresses, len(addrs))
	}
	for i, a := range addrs {
		if !a.IsValid() || a.Is4In6() || a.Zone() != "" {
			return nil, fmt.Errorf("GTP-U address %s: neither IPv4 nor IPv6", a)
		}
		if slices.Contains(addrs[:i], a) {
			return nil, fmt.Errorf("GTP-U address %s is given twice", a)
		}
	}
	if err := ensureBPFFS(opts.PinPath); err != nil {
		return nil, err
	}
	spec, specs, err := sizedSpec(opts.MaxSessions)
	if err != nil {
		return nil, err
	}
	_, err = os.Stat(filepath.Join(opts.PinPath, specs.PdrCounters.Name))
	d := &Datapath{opts: opts, gtpu: addrs, created: errors.Is(err, fs.ErrNotExist), fanoutSpec: specs.DuplFanouts.InnerMap.Copy()}
	err = spec.LoadAndAssign(&d.maps, &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: opts.PinPath}})
	if errors.Is(err, ebpf.ErrMapIncompatible) {
		return nil, fmt.Errorf("maps pinned in %s were made for another size or version (datapath.max_sessions changed, or an upgrade changed their layout); xdp5g detach --config FILE takes them and the data path away, to start afresh: %w", opts.PinPath, err)
	}
	if err != nil {
		return nil, fmt.Errorf("loading maps: %w", err)
	}
	if err := removeRetiredMaps(opts.PinPath); err != nil {
		return nil, errors.Join(err, d.Close())
	}
	if err := d.routes.open(&d.maps); err != nil {
		return nil, errors.Join(err, d.Close())
	}
	if d.pdrs, err = mapArray[PDR](d.maps.Pdrs); err != nil {
		return nil, errors.Join(err, d.Close())
	}
	if d.sdfSets, err = mapArray[SDFSet](d.maps.SdfSets); err != nil {
		return nil, errors.Join(err, d.Close())
	}
	if err := d.sets.open(&d.maps, d.pdrs, d.sdfSets); err != nil {
		return nil, errors.Join(err, d.Close())
	}
	d.sets.startSettler()
	if err := d.dropForeignTEIDs(); err != nil {
		return nil, errors.Join(err, d.Close())
	}
	if d.pdrCounters, err = mapArray[Counter](d.maps.PdrCounters); err != nil {
		return nil, errors.Join(err, d.Close())
	}
	if d.urrs, err = mapArray[upfUrr](d.maps.Urrs); err != nil {
		return nil, errors.Join(err, d.Close())
	}
	if d.usageLines, err = mapArray[upfUsageLine](d.maps.UsageLines); err != nil {
		return nil, errors.Join(err, d.Close())
	}
	if d.urrCountRows, err = mapArray[upfUrrCount](d.maps.UrrCounts); err != nil {
		return nil, errors.Join(err, d.Close())
	}
	if d.buffers, err = mapArray[upfBuffer](d.maps.Buffers); err != nil {
		return nil, errors.Join(err, d.Close())
	}
	return d, nil
}

// dropForeignTEIDs deletes the F-TEIDs a previous run with more GTP-U
// addresses left at the addresses this run lacks: no packet finds them.
func (d *Datapath) dropForeignTEIDs() error {
	n := uint64(len(d.gtpu))
	for _, k := range d.sets.keys(upfSetKindSET_TEID) {
		if k>>32 >= n {
			if err := d.sets.delete(setKey{upfSetKindSET_TEID, k}); err != nil {
				return err
			}
		}
	}
	return nil
}

// sizedSpec is the program's spec with the maps sized for maxSessions, and
// its parts by name.
func sizedSpec(maxSessions uint32) (*ebpf.CollectionSpec, *upfSpecs, error) {
	spec, err := loadUpf()
	if err != nil {
		return nil, nil, err
	}
	var specs upfSpecs
	if err := spec.Assign(&specs); err != nil {
		return nil, nil, err
	}
	ruled := maxSessions + replacementSpare(maxSessions) // sessions' worth of rule slots
	rules := ruled * rulesPerSession
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, nil, err
	}
	if counters := uint64(rules) * uint64(cpus); counters > math.MaxUint32 {
		return nil, nil, fmt.Errorf("%d sessions need %d PDR counters (%d slots on each of %d possible CPUs), more than a map holds; "+
			"configure fewer sessions", maxSessions, counters, rules, cpus)
	}
	sets := maxSessions*setsPerSession + 1 + spareSets
	specs.PdrSets.MaxEntries = sets
	specs.SetIndex.MaxEntries = 1 << indexBits(sets)
	specs.SetOverflow.MaxEntries = sets
	if b := recordBucketBits(maxSessions); b > 0 {
		specs.SetRecords.MaxEntries = uint32(setWays) << b
		specs.RecordHints.MaxEntries = 1 << (b - 1) // a pair of buckets each
		specs.PlaceCounts.MaxEntries = specs.RecordHints.MaxEntries * uint32(cpus)
	}
	specs.FoldedCounts.MaxEntries = rules
	specs.Pdrs.MaxEntries = rules
	specs.PdrCounters.MaxEntries = rules * uint32(cpus)
	specs.Qers.MaxEntries = rules
	specs.Urrs.MaxEntries = rules
	specs.UsageLines.MaxEntries = rules * uint32(cpus)
	specs.UrrCounts.MaxEntries = rules * uint32(cpus)
	specs.SdfSets.MaxEntries = ruled*sdfSetsPerSession + 1 // slot 0 stands for none
	specs.Buffers.MaxEntries = ruled + 1                   // one buffering FAR per session, and none
	specs.Dupls.MaxEntries = rules
	return spec, &specs, nil
}

// Unused says no PDR has been written into the maps: Open created them,
// rather than finding them pinned by a previous run, and no PDR was put
// since. Every counter in them is zero.
func (d *Datapath) Unused() bool { return d.created && !d.pdrWritten.Load() }

// Close releases this process's handles; pinned maps and links stay, so
// traffic keeps flowing.
func (d *Datapath) Close() error {
	d.sets.stopSettler()
	d.release.close()
	d.staged.close()
	if d.copy.prog != nil {
		d.copy.prog.Close()
	}
	return errors.Join(d.routes.close(), d.sets.close(), d.pdrs.close(), d.pdrCounters.close(), d.sdfSets.close(),
		d.urrs.close(), d.usageLines.close(), d.urrCountRows.close(), d.buffers.close(), d.maps.Close())
}

// N3Addresses and N9Addresses are the GTP-U addresses the data path was
// opened with.
func (d *Datapath) N3Addresses() []netip.Addr { return slices.Clip(d.opts.N3Addresses) }
func (d *Datapath) N9Addresses() []netip.Addr { return slices.Clip(d.opts.N9Addresses) }

// PinPath is the bpffs directory of this data path.
func (d *Datapath) PinPath() string { return d.opts.PinPath }

// MaxSessions is the number of sessions the data path is sized for.
func (d *Datapath) MaxSessions() uint32 { return d.opts.MaxSessions }

// PDRSets are the PDR sets in use, each an uplink TEID's or a downlink UE
// address's, and how many the data path holds.
func (d *Datapath) PDRSets() (inUse, capacity int) { return d.sets.inUse(), d.sets.maxKeys }

// PDRCapacity is the number of PDR slots.
func (d *Datapath) PDRCapacity() uint32 { return d.maps.Pdrs.MaxEntries() }

// Attach loads the program for one interface of the calling thread's network
// namespace and attaches it, or atomically replaces the program of an
// attachment a previous run left pinned (so a restart drops nothing).
func (d *Datapath) Attach(ifname string, roles Role, mode xdplink.Mode) error {
	return d.AttachChain(ifname, roles, mode, Chain{})
}

// AttachChain is Attach with the stages of c before the UPF's (see
// SetStages).
func (d *Datapath) AttachChain(ifname string, roles Role, mode xdplink.Mode, c Chain) error {
	iface, err := net.InterfaceByName(ifname)
	if err != nil {
		return err
	}
	slot, err := d.claimSlot(uint32(iface.Index), ifname)
	if err != nil {
		return err
	}
	var progs ifacePrograms
	if err := d.loadPrograms(slot, roles, &progs); err != nil {
		return err
	}
	copier, err := d.copyProgram()
	if err == nil {
		err = d.setFanouts(uint32(iface.Index), roles, copier)
	}
	if err != nil {
		progs.UPF.Close()
		return err
	}
	staged := &stagedIface{name: ifname, ifindex: uint32(iface.Index), slot: slot, roles: roles, mode: mode, upf: progs.UPF}
	if err := d.stage(staged, c); err != nil {
		staged.close()
		return err
	}
	// Kept to release the interface's buffered frames: loading a program
	// when paging ends would hold the first release for a verifier run.
	release, err := progs.UPF.Clone()
	if err != nil {
		staged.close()
		return err
	}
	d.release.set(slot, release)
	d.staged.set(staged)
	return nil
}

func (d *Datapath) linkPin(ifname string) string {
	return filepath.Join(d.opts.PinPath, linksDirName, ifname)
}

// ifacePrograms is the program loaded for one interface.
type ifacePrograms struct {
	UPF *ebpf.Program `ebpf:"xdp_upf"`
}

// copyPrograms is xdp_dupl_copy, which makes the copies of duplicated
// packets in every fanout: it reads none of an interface's constants.
type copyPrograms struct {
	Copy *ebpf.Program `ebpf:"xdp_dupl_copy"`
}

// copyProgram is the copy program of the fanouts, loaded with the first
// attachment.
func (d *Datapath) copyProgram() (*ebpf.Program, error) {
	d.copy.mu.Lock()
	defer d.copy.mu.Unlock()
	if d.copy.prog == nil {
		var progs copyPrograms
		if err := d.loadPrograms(0, 0, &progs); err != nil {
			return nil, err
		}
		d.copy.prog = progs.Copy
	}
	return d.copy.prog, nil
}

// chainPrograms are the UPF's stage of a chain of more than the UPF: by a
// tail call, where it takes what the classify stage handed on, and behind
// the CPU map, which a chain that steers runs.
type chainPrograms struct {
	Stage *ebpf.Program `ebpf:"xdp_upf_stage"`
	CPU   *ebpf.Program `ebpf:"xdp_upf_cpu"`
}

func (p chainPrograms) close() {
	p.Stage.Close()
	p.CPU.Close()
}

// loadPrograms loads the programs that into (ifacePrograms, chainPrograms)
// names with the interface's constants over the shared maps.
func (d *Datapath) loadPrograms(slot uint32, roles Role, into any) error {
	spec, specs, err := sizedSpec(d.opts.MaxSessions)
	if err != nil {
		return err
	}
	// One index per address, whichever its family: the other family's
	// place stays zero.
	var addrs [MaxGTPUAddresses]uint32
	var addrs6 [MaxGTPUAddresses][4]uint32
	var set6 uint32
	for i, a := range d.gtpu {
		if a.Is4() {
			addrs[i] = networkOrder(a.As4())
		} else {
			addrs6[i] = words(a)
			set6 |= 1 << i
		}
	}
	if err := errors.Join(specs.IfaceSlot.Set(slot), specs.IfaceRoles.Set(uint32(roles)), specs.GtpuAddrs.Set(addrs),
		specs.GtpuAddrs6.Set(addrs6), specs.GtpuAddrs6Set.Set(set6),
		specs.IndexBits.Set(uint32(d.sets.bits)), specs.SetSlotBits.Set(uint32(d.sets.slotBits)),
		specs.RecordBits.Set(uint32(d.sets.records.bits)), specs.ReadAhead.Set(readsAhead(d.sets.records.bits)),
		specs.PdrSlots.Set(d.pdrs.len()), specs.ErrorIndicationRate.Set(d.opts.ErrorIndicationRate)); err != nil {
		return fmt.Errorf("setting the program's constants: %w", err)
	}
	// Every map is pinned by name: the program gets the shared ones.
	if err := spec.LoadAndAssign(into, &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: d.opts.PinPath}}); err != nil {
		return fmt.Errorf("loading the XDP program: %w", err)
	}
	return nil
}

// Detach removes the program from an interface of the calling thread's
// namespace and frees its counter slot.
func (d *Datapath) Detach(ifname string) error {
	if err := xdplink.Detach(d.linkPin(ifname)); err != nil {
		return fmt.Errorf("%s: %w", ifname, err)
	}
	queues := d.staged.remove(ifname)
	if err := d.detachMirror(ifname); err != nil {
		return fmt.Errorf("%s: %w", ifname, err)
	}
	slot, ifindex, err := d.slotOf(ifname)
	if err != nil || ifindex == 0 {
		return err
	}
	return errors.Join(d.deleteFanouts(ifindex), d.clearChain(ifindex, slot, queues), d.releaseSlot(slot))
}

// DetachAll removes every attachment pinned under pinPath without opening
// the maps, so it works for maps of another size or version too.
func DetachAll(pinPath string) error {
	return errors.Join(xdplink.DetachAll(filepath.Join(pinPath, linksDirName)),
		xdplink.DetachAll(filepath.Join(pinPath, mirrorLinksDirName)))
}

// Attached lists the interfaces with a pinned attachment.
func (d *Datapath) Attached() ([]string, error) {
	return xdplink.Pinned(filepath.Join(d.opts.PinPath, linksDirName))
}

// words is an IPv6 address as four words in network order.
func words(a netip.Addr) (w [4]uint32) {
	b := a.As16()
	for i := range w {
		w[i] = networkOrder([4]byte(b[4*i:]))
	}
	return w
}

// networkOrder returns the uint32 whose in-memory bytes are b, the way the
// BPF program reads addresses and TEIDs from packets.
func networkOrder(b [4]byte) uint32 { return binary.NativeEndian.Uint32(b[:]) }

// NetworkOrder32 is networkOrder for a host-order value such as a TEID.
func NetworkOrder32(v uint32) uint32 {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return networkOrder(b)
}

// AddrKey is the in-memory form of an IPv4 address in the maps.
func AddrKey(a netip.Addr) uint32 { return networkOrder(a.As4()) }

// PDRUE is how an uplink PDR holds the UE addresses its packets must come
// from (PDR.Ue), one per family, and the flags that ask for them: an IPv4
// address in word 0, the /64 of an IPv6 prefix in words 0 and 1, or in
// words 2 and 3 behind a dual-stack UE's IPv4 address. The single-family
// places are those of the builds before dual-stack UEs, whose PDRs a
// restarted daemon finds pinned. Invalid prefixes are none.
func PDRUE(ues ...netip.Prefix) (ue [4]uint32, flags uint8) {
	var v6 []uint32
	for _, p := range ues {
		switch a := p.Addr(); {
		case !p.IsValid():
		case a.Is4():
			ue[0], flags = AddrKey(a), flags|MatchUEv4
		default:
			b := a.As16()
			v6, flags = []uint32{networkOrder([4]byte(b[0:4])), networkOrder([4]byte(b[4:8]))}, flags|MatchUEv6
		}
	}
	if flags&MatchUEv4 != 0 {
		copy(ue[2:], v6)
	} else {
		copy(ue[:], v6)
	}
	return ue, flags
}

// SDFPrefix is a prefix as an SDF filter holds it: address and mask words
// in network order (IPv4 in word 0) and the family's flag, SDFIPv4 or
// SDFIPv6. The zero Prefix, any address, is all zeros.
func SDFPrefix(p netip.Prefix) (addr, mask [4]uint32, family uint8) {
	if !p.IsValid() {
		return addr, mask, 0
	}
	a := p.Masked().Addr().AsSlice()
	m := net.CIDRMask(p.Bits(), p.Addr().BitLen())
	for i := 0; i < len(a)/4; i++ {
		addr[i] = networkOrder([4]byte(a[4*i:]))
		mask[i] = networkOrder([4]byte(m[4*i:]))
	}
	if p.Addr().Is4() {
		return addr, mask, SDFIPv4
	}
	return addr, mask, SDFIPv6
}

// Prefix64Key is the downlink key of an IPv6 UE prefix.
func Prefix64Key(a netip.Addr) uint64 {
	b := a.As16()
	return binary.NativeEndian.Uint64(b[:8])
}

func nativeEndianPut32(b []byte, v uint32) { binary.NativeEndian.PutUint32(b, v) }
func nativeEndianPut64(b []byte, v uint64) { binary.NativeEndian.PutUint64(b, v) }
