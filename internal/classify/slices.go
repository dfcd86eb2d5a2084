package classify

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/cilium/ebpf"
)

// SliceBuckets is the number of hash buckets a slice spreads its flows
// over: a flow goes to the CPU of its bucket.
const SliceBuckets = len(classifySlice{}.Cpus)

// steerQueue is the length of a CPU's queue of steered packets.
const steerQueue = 2048

// Slice is a set of CPUs that rules steer packets to: the innermost flow
// and the tunnel ids of a packet pick one of them, the same for every
// packet of a flow while the set stays.
type Slice struct {
	ID   uint32
	CPUs []int
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
		if cpu < 0 || cpu >= int(d.objs.SliceCpus.MaxEntries()) {
			return invalid(fmt.Sprintf("cpus[%d]", i), "there is no CPU %d: this machine has %d", cpu, d.objs.SliceCpus.MaxEntries())
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
	if err := d.objs.Slices.Put(s.ID, &table); err != nil {
		return err
	}
	d.slices[s.ID] = slices.Clone(s.CPUs)
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
	return d.objs.Slices.Put(id, &classifySlice{})
}

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
		out = append(out, Slice{ID: id, CPUs: slices.Clone(d.slices[id])})
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
