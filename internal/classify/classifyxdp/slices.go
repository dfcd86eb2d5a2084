package classifyxdp

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/xdp5g/xdp5g/internal/platform/percpu"
)

// steerQueue is the length of a CPU's queue of steered packets.
const steerQueue = 2048

// OffloadBacklog is the fill of a CPU's queue at which non-prioritised
// flows leave for an alternative node.
const OffloadBacklog = steerQueue * 3 / 4

// MaxSlices is how many slices there are, numbered from 0.
const MaxSlices = uint32(classifyClassifyLimitsCLASSIFY_MAX_SLICES)

// Slice is a set of CPUs that rules steer packets to: the innermost flow
// and the tunnel ids of a packet pick one of them, the same for every
// packet of a flow while the set stays. When a CPU's queue fills, flows
// go to an alternative node (SetAlternatives): a prioritised slice's only
// when even they cannot be served.
type Slice struct {
	ID          uint32
	CPUs        []int
	Prioritised bool
	// Rate, if not 0, is the bits per second of the slice each CPU that
	// receives it lets through (a token bucket per CPU, no lock: traffic
	// arriving on n CPUs may reach n × Rate); the rest is dropped and
	// counted (SliceStats). Burst is the bucket's size in bytes:
	// DefaultBurst for 0.
	Rate, Burst uint64
}

// MinBurst is the smallest burst CheckRate takes: an Ethernet frame of the
// least size (without its FCS), as XDP counts it. A bucket smaller than a
// frame never lets it through.
const MinBurst = 60

// DefaultBurst is a rate-limited slice's bucket size when none is given:
// 10 ms of its rate, and a full-size frame at least.
func DefaultBurst(rate uint64) uint64 { return max(rate/8/100, 1518) }

// CheckRate refuses a slice's rate and burst that cannot mean what a user
// wrote: a rate under a byte a second (the bucket fills by the byte), a
// burst without a rate, and a burst smaller than any frame. SetSlice does
// not call it, so that a rules file an earlier version wrote still loads;
// what users set now goes through it.
func CheckRate(rate, burst uint64) error {
	switch {
	case rate > 0 && rate < 8:
		return invalid("rate", "%d bits per second is under a byte a second: 0 (no limit) or at least 8", rate)
	case rate == 0 && burst > 0:
		return invalid("burst", "a burst needs a rate")
	case burst > 0 && burst < MinBurst:
		return invalid("burst", "%d octets hold no frame: a frame larger than the burst is always dropped; give %d at least", burst, MinBurst)
	}
	return nil
}

// DefaultOffloadHold is how long a flow sent to an alternative node stays
// away at least, so that flows do not flap between nodes.
const DefaultOffloadHold = 100 * time.Millisecond

// setBacklogs sets the queue fills at which flows leave for an
// alternative node and come back: non-prioritised ones leave at three
// quarters of a queue, prioritised ones a NAPI batch short of full, and
// both come back at a quarter, after the hold.
func setBacklogs(vars *classifyVariableSpecs, hold time.Duration) error {
	if hold == 0 {
		hold = DefaultOffloadHold
	}
	return errors.Join(vars.BacklogHigh.Set(uint64(OffloadBacklog)), vars.BacklogFull.Set(uint64(steerQueue-64)),
		vars.BacklogLow.Set(uint64(steerQueue/4)), vars.OffloadHoldNs.Set(uint64(hold.Nanoseconds())))
}

// watchQueueDrops tells slice_queue_drops the CPU map's ID and attaches it
// to the CPU map's enqueue tracepoint.
func (d *Datapath) watchQueueDrops() error {
	info, err := d.objs.SliceCpus.Info()
	if err != nil {
		return err
	}
	id, _ := info.ID()
	if err := d.objs.SliceCpusId.Put(uint32(0), uint32(id)); err != nil {
		return err
	}
	d.queueDrops, err = link.AttachRawTracepoint(link.RawTracepointOptions{Name: "xdp_cpumap_enqueue", Program: d.objs.SliceQueueDrops})
	return err
}

// Alternative is a node that takes the flows the host cannot: packets go
// to it with their outer destination MAC and address rewritten, out of the
// port they came in on (Ifindex 0) or out of another. It takes the packets
// whose outer header is of its address's family; the others stay.
type Alternative struct {
	MAC     net.HardwareAddr
	Addr    netip.Addr
	Ifindex int
}

// SetAlternatives replaces the alternative nodes; a flow's hash picks one.
// None: flows stay on the host whatever its load.
func (d *Datapath) SetAlternatives(alts []Alternative) error {
	var table classifyAltNodes
	if len(alts) > len(table.Node) {
		return invalid("alternatives", "%d alternatives, the data path takes %d", len(alts), len(table.Node))
	}
	for i, a := range alts {
		field := fmt.Sprintf("alternatives[%d]", i)
		if len(a.MAC) != 6 {
			return invalid(field+".mac", "%v is not an Ethernet address", a.MAC)
		}
		if !a.Addr.IsValid() || a.Addr.Zone() != "" || a.Addr.Is4In6() {
			return invalid(field+".addr", "%v is not an IPv4 or IPv6 address", a.Addr)
		}
		if a.Ifindex < 0 {
			return invalid(field+".ifindex", "%d is not an interface index", a.Ifindex)
		}
		node := classifyAltNode{Mac: [6]byte(a.MAC), Ifindex: uint32(a.Ifindex)}
		copy(node.Addr[:], a.Addr.AsSlice())
		if a.Addr.Is6() {
			node.Ipv6 = 1
		}
		table.Node[i] = node
	}
	table.N = uint32(len(alts))
	return d.objs.Alternatives.Put(uint32(0), &table)
}

// Alternatives are the alternative nodes, in order.
func (d *Datapath) Alternatives() ([]Alternative, error) {
	var table classifyAltNodes
	if err := d.objs.Alternatives.Lookup(uint32(0), &table); err != nil {
		return nil, err
	}
	out := make([]Alternative, table.N)
	for i := range out {
		n := table.Node[i]
		addr := netip.AddrFrom16(n.Addr)
		if n.Ipv6 == 0 {
			addr = netip.AddrFrom4([4]byte(n.Addr[:4]))
		}
		out[i] = Alternative{MAC: net.HardwareAddr(n.Mac[:]), Addr: addr, Ifindex: int(n.Ifindex)}
	}
	return out, nil
}

// CPULoad is a CPU's queue of steered packets: packets sent to it, taken
// off it, and dropped because it was full.
type CPULoad = classifyCpuLoad

// Backlog is the packets in the queue.
func (l CPULoad) Backlog() uint64 {
	out := l.Dequeued + l.Dropped
	return l.Enqueued - min(l.Enqueued, out)
}

// CPULoads are the queues of the CPUs, by CPU number.
func (d *Datapath) CPULoads() ([]CPULoad, error) {
	out := make([]CPULoad, d.objs.CpuLoads.MaxEntries())
	for cpu := range out {
		if err := d.objs.CpuLoads.Lookup(uint32(cpu), &out[cpu]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// AwaitSteered waits until the packets steered to CPUs before the call
// have left their queues, taken or dropped, for at most timeout: then the
// ones still queued meet what is behind the CPU map then. It returns at
// once when it cannot read the queues (the datapath closed).
func (d *Datapath) AwaitSteered(timeout time.Duration) {
	marks, err := d.CPULoads()
	for deadline := time.Now().Add(timeout); err == nil && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		var now []CPULoad
		if now, err = d.CPULoads(); err == nil && drained(marks, now) {
			return
		}
	}
}

// drained says whether the queues, now, are through with what they were
// given until marks.
func drained(marks, now []CPULoad) bool {
	for cpu, m := range marks {
		if now[cpu].Dequeued+now[cpu].Dropped < m.Enqueued {
			return false
		}
	}
	return true
}

// SliceStats are what became of a slice's packets.
type SliceStats struct {
	Local     Counter // taken by its CPUs
	Offloaded Counter // sent to alternative nodes
	Policed   Counter // dropped by its rate
	// QueueDrops are the packets the queues of its CPUs dropped, full,
	// whatever their slice.
	QueueDrops uint64
}

// SliceStats reads a slice's figures.
func (d *Datapath) SliceStats(s Slice) (st SliceStats, err error) {
	if st.Local, err = percpu.Sum[Counter](d.objs.SliceCpuCounters, s.ID); err != nil {
		return st, err
	}
	if st.Offloaded, err = percpu.Sum[Counter](d.objs.SliceOffloaded, s.ID); err != nil {
		return st, err
	}
	if st.Policed, err = percpu.Sum[Counter](d.objs.SlicePoliced, s.ID); err != nil {
		return st, err
	}
	loads, err := d.CPULoads()
	for _, cpu := range s.CPUs {
		if cpu < len(loads) {
			st.QueueDrops += loads[cpu].Dropped
		}
	}
	return st, err
}

// Counter is packets and octets.
type Counter = classifyCounter

// SetSlice creates a slice or changes its CPUs. A flow whose bucket moves
// to another CPU goes on there; none is lost.
func (d *Datapath) SetSlice(s Slice) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n := d.objs.Slices.MaxEntries(); s.ID >= n {
		return invalid("id", "slices are numbered 0 to %d", n-1)
	}
	if len(s.CPUs) == 0 {
		return invalid("cpus", "a slice needs a CPU")
	}
	var table classifySlice
	for i, cpu := range s.CPUs {
		if err := d.checkCPU(fmt.Sprintf("cpus[%d]", i), cpu); err != nil {
			return err
		}
		if slices.Contains(s.CPUs[:i], cpu) {
			return invalid(fmt.Sprintf("cpus[%d]", i), "CPU %d is listed twice", cpu)
		}
	}
	for _, cpu := range s.CPUs {
		if err := d.giveQueue(cpu); err != nil {
			return err
		}
	}
	for b := range table.Cpus {
		table.Cpus[b] = uint32(s.CPUs[b%len(s.CPUs)])
	}
	if s.Prioritised {
		table.Prioritised = 1
	}
	if s.Rate > 0 {
		if s.Burst == 0 {
			s.Burst = DefaultBurst(s.Rate)
		}
		if s.Burst > math.MaxUint64/uint64(time.Second) {
			return invalid("burst", "%d bytes is more than a bucket holds", s.Burst)
		}
		table.Rate, table.Burst = s.Rate/8, s.Burst*uint64(time.Second)
		// Every CPU's bucket starts full.
		full := make([]classifyTokenBucket, ebpf.MustPossibleCPU())
		for i := range full {
			full[i] = classifyTokenBucket{Rate: table.Rate, Burst: table.Burst, Tokens: table.Burst}
		}
		if err := d.objs.SliceBuckets.Put(s.ID, full); err != nil {
			return err
		}
	}
	if _, exists := d.slices[s.ID]; !exists { // a new slice counts from zero
		zero := make([]Counter, ebpf.MustPossibleCPU())
		for _, m := range []*ebpf.Map{d.objs.SliceCpuCounters, d.objs.SliceOffloaded, d.objs.SlicePoliced} {
			if err := m.Put(s.ID, zero); err != nil {
				return err
			}
		}
	}
	if err := d.objs.Slices.Put(s.ID, &table); err != nil {
		return err
	}
	s.CPUs = slices.Clone(s.CPUs)
	d.slices[s.ID] = s
	d.notify()
	return nil
}

// checkCPU refuses a CPU the machine does not have.
func (d *Datapath) checkCPU(field string, cpu int) error {
	if n := int(d.objs.SliceCpus.MaxEntries()); cpu < 0 || cpu >= n {
		return invalid(field, "there is no CPU %d: this machine has %d", cpu, n)
	}
	return nil
}

// giveQueue gives a CPU its queue of steered packets and xdp_slice_cpu,
// the first time a slice has it.
func (d *Datapath) giveQueue(cpu int) error {
	var have classifyBpfCpumapVal
	// A CPU map takes no BPF_NOEXIST: every key "exists".
	err := d.objs.SliceCpus.Lookup(uint32(cpu), &have)
	if !errors.Is(err, ebpf.ErrKeyNotExist) {
		return err
	}
	queue := classifyBpfCpumapVal{Qsize: steerQueue}
	queue.BpfProg.Fd = int32(d.objs.XdpSliceCpu.FD())
	if err := d.objs.SliceCpus.Put(uint32(cpu), &queue); err != nil {
		return fmt.Errorf("giving CPU %d a queue: %w", cpu, err)
	}
	return nil
}

// DeleteSlice removes a slice no rule steers to.
func (d *Datapath) DeleteSlice(id uint32) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.slices[id]; !ok {
		return fmt.Errorf("%w %d", ErrNoSlice, id)
	}
	for _, e := range d.table.rules {
		if e.rule.Action == ActionSteer && e.rule.Slice == id {
			return fmt.Errorf("%w: rule %d steers to slice %d", ErrSliceInUse, e.rule.ID, id)
		}
	}
	delete(d.slices, id)
	err := d.objs.Slices.Put(id, &classifySlice{})
	d.notify()
	return err
}

// SliceCapacity is the number of slices the data path holds, IDs 0 on.
func (d *Datapath) SliceCapacity() uint32 { return d.objs.Slices.MaxEntries() }

var (
	// ErrNoSlice is returned for a slice the data path does not have.
	ErrNoSlice = errors.New("no slice")
	// ErrSliceInUse is returned for deleting a slice rules steer to.
	ErrSliceInUse = errors.New("slice in use")
)

// Slices are the slices, by ID.
func (d *Datapath) Slices() []Slice {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Slice, 0, len(d.slices))
	for _, id := range slices.Sorted(maps.Keys(d.slices)) {
		s := d.slices[id]
		s.CPUs = slices.Clone(s.CPUs)
		out = append(out, s)
	}
	return out
}

// SliceCPUs is what each CPU took of a slice's packets, by CPU number.
func (d *Datapath) SliceCPUs(id uint32) ([]Counter, error) {
	var perCPU []Counter
	if err := d.objs.SliceCpuCounters.Lookup(id, &perCPU); err != nil {
		return nil, err
	}
	return perCPU, nil
}

// FlowCPUs is what each CPU took of each flow steered lately, by the
// flow's hash and CPU number.
func (d *Datapath) FlowCPUs() (map[uint32][]Counter, error) {
	out := map[uint32][]Counter{}
	var hash uint32
	var perCPU []Counter
	it := d.objs.FlowCpuCounters.Iterate()
	for it.Next(&hash, &perCPU) {
		out[hash] = slices.Clone(perCPU)
	}
	return out, it.Err()
}

// checkSteer refuses a steering rule to a slice that is not there.
func (d *Datapath) checkSteer(r Rule) error {
	if _, ok := d.slices[r.Slice]; r.Action == ActionSteer && !ok {
		return invalid("slice", "there is no slice %d", r.Slice)
	}
	return nil
}

// PrioFlow is a prioritised flow (the paper's prio-map): it stays on its
// CPU whatever its slice, and leaves for an alternative node only when even
// it cannot be served there.
type PrioFlow struct {
	Hash    uint32 // the hash steering gives its packets (flow_hash in bpf/classify/steer.h)
	CPU     int
	Counter // what it sent
}

// SetPrioFlow prioritises a flow, or moves it to another CPU.
func (d *Datapath) SetPrioFlow(f PrioFlow) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkCPU("cpu", f.CPU); err != nil {
		return err
	}
	if err := d.giveQueue(f.CPU); err != nil {
		return err
	}
	var entry classifyPrioFlow
	if err := d.objs.PrioFlows.Lookup(f.Hash, &entry); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return err
	}
	entry.Active, entry.Cpu = 1, uint32(f.CPU) // keeps what it sent so far
	return d.objs.PrioFlows.Put(f.Hash, &entry)
}

// DeletePrioFlow returns a flow to its slice's CPUs.
func (d *Datapath) DeletePrioFlow(hash uint32) error {
	err := d.objs.PrioFlows.Delete(hash)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("%w %#08x", ErrNoPrioFlow, hash)
	}
	return err
}

// ErrNoPrioFlow is returned for a flow that is not prioritised.
var ErrNoPrioFlow = errors.New("no prioritised flow")

// PrioFlows are the prioritised flows with what they sent, by hash.
func (d *Datapath) PrioFlows() ([]PrioFlow, error) {
	var out []PrioFlow
	var hash uint32
	var entry classifyPrioFlow
	it := d.objs.PrioFlows.Iterate()
	for it.Next(&hash, &entry) {
		out = append(out, PrioFlow{Hash: hash, CPU: int(entry.Cpu), Counter: entry.Stats})
	}
	slices.SortFunc(out, func(a, b PrioFlow) int { return cmp.Compare(a.Hash, b.Hash) })
	return out, it.Err()
}
