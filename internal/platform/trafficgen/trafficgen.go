// Package trafficgen sends test traffic at millions of packets per second
// without a NIC or a userspace packet loop, and counts it where it arrives.
//
// The Generator runs an XDP program under BPF_PROG_TEST_RUN in live-frame
// mode: every run writes a frame template into a page and transmits it with
// XDP_TX out of the given interface. The Sink is an XDP program that counts,
// filters and samples what arrives.
package trafficgen

import (
	"errors"
	"fmt"
	"io"
	"math"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/platform/percpu"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
)

// MaxFrame is the longest frame the Generator sends and the Sink samples.
const MaxFrame = len(generatorFrame{}.Data)

// StampSize is the size of the stamp a Generator writes into each frame
// when asked (struct stamp): magic, slice, sequence, send time.
const StampSize = int(unsafe.Sizeof(generatorStamp{}))

// MaxSlices is the number of slices a stamped stream may have.
const MaxSlices = int(generatorLimitsSTAMP_SLICES)

const (
	minFrame = 14 // an Ethernet header
	maxFlows = 1 << 16
	// Every test run costs about 25 ms on top of its packets (the kernel
	// swaps the XDP dispatcher in and out), so runs are long: a few hundred
	// milliseconds between progress reports and checks of a paced send.
	progressChunk = 1 << 20
)

// Generator transmits copies of a frame. Its Send calls must not overlap.
type Generator struct {
	objs generatorObjects
}

// NewGenerator loads the generator program.
func NewGenerator() (*Generator, error) {
	g := &Generator{}
	if err := loadGeneratorObjects(&g.objs, nil); err != nil {
		return nil, fmt.Errorf("load generator: %w", err)
	}
	return g, nil
}

// Close unloads the generator.
func (g *Generator) Close() error { return g.objs.Close() }

// Options shape what Send transmits and how fast.
type Options struct {
	// FlowOffset is the byte offset of a 16-bit big-endian field, e.g. a UDP
	// port, that cycles through Flows consecutive values starting from its
	// value in the frame, one packet after another. Nothing else is
	// rewritten, so no checksum may cover the field (UDP over IPv4 can send
	// checksum 0). Frame n of a send has flow n % Flows.
	FlowOffset int
	Flows      int // 0 or 1: every packet is the frame as given
	// FlowOffset2, if not 0, is a second such field that cycles with the
	// first, each from its own value in the frame: a key split over two
	// places, e.g. a tunnel's TEID and the address inside it.
	FlowOffset2 int
	// FlowStride, if more than 1, visits the flows in its steps: frame n
	// has flow n*FlowStride % Flows, every flow once in Flows frames when
	// the two share no factor, which Send checks.
	FlowStride int
	// Rate is in packets per second, evenly spaced: the program drops
	// what would be ahead of the schedule, and when it has fallen behind,
	// between test runs or while its CPU was busy, it catches up with a
	// burst of at most 64 frames and gives up the rest of the lag, so a
	// send takes longer than count/Rate by the time lost. 0 sends as fast
	// as one CPU can.
	Rate uint64
	// StampOffset, if not 0, is where each frame gets a stamp of
	// StampSize octets: its slice (flow / FlowsPerSlice, 0 to MaxSlices-1),
	// its sequence number in the slice and its send time, which a Sink
	// with the same Filter.StampOffset turns into delay and jitter. No
	// checksum may cover it.
	StampOffset   int
	FlowsPerSlice int
	// Progress, if set, is called with the running total now and then.
	Progress func(sent uint64)
}

// Send transmits count copies of frame out of the interface ifindex in ns
// and returns how many it sent and how long that took: from the start to
// when the last frame left.
func (g *Generator) Send(ns *namespace.Netns, ifindex int, frame []byte, count uint64, opts Options) (sent uint64, elapsed time.Duration, err error) {
	if err := g.check(frame, opts); err != nil {
		return 0, 0, err
	}
	now, err := monotonicNow()
	if err != nil {
		return 0, 0, err
	}
	// The schedule of a paced send starts now.
	if err := g.configure(frame, count, opts, now); err != nil {
		return 0, 0, err
	}
	return g.run(ns, ifindex, frame, count, opts)
}

// run sends as configured: the test runs go on until count frames have
// left.
func (g *Generator) run(ns *namespace.Netns, ifindex int, frame []byte, count uint64, opts Options) (sent uint64, elapsed time.Duration, err error) {
	chunk := uint64(math.MaxUint32)
	if opts.Rate > 0 || opts.Progress != nil {
		chunk = progressChunk
	}
	run := ebpf.RunOptions{
		Data:    frame,
		Flags:   unix.BPF_F_TEST_XDP_LIVE_FRAMES,
		Context: xdplink.Context{DataEnd: uint32(len(frame)), IngressIfindex: uint32(ifindex)},
	}
	before, err := g.transmitted()
	if err != nil {
		return 0, 0, err
	}
	// How many times a run of a paced send calls the program per second,
	// as the last one went.
	var iterationsPerSecond float64
	// The kernel resolves the ifindex in the namespace of the calling thread.
	err = ns.Do(func() error {
		for sent < count {
			// Unpaced, every run sends; paced, most drop. Nothing is sent
			// in a run's fixed cost, so a paced send without progress
			// reports makes its runs last about as long as what is left
			// of it: its schedule loses a few of those, not one a chunk.
			run.Repeat = uint32(chunk)
			switch {
			case opts.Rate == 0:
				run.Repeat = uint32(min(chunk, count-sent))
			case opts.Progress == nil && iterationsPerSecond > 0:
				left := float64(count-sent) / float64(opts.Rate) * iterationsPerSecond
				run.Repeat = uint32(min(max(left, progressChunk), math.MaxUint32))
			}
			began := time.Now()
			if _, err := g.objs.XdpTrafficgen.Run(&run); err != nil {
				return fmt.Errorf("generate on ifindex %d in %s: %w", ifindex, ns.Name, err)
			}
			iterationsPerSecond = float64(run.Repeat) / time.Since(began).Seconds()
			total, err := g.transmitted()
			if err != nil {
				return err
			}
			sent = total - before
			if opts.Progress != nil {
				opts.Progress(sent)
			}
		}
		return nil
	})
	if err != nil || count == 0 {
		return sent, 0, err
	}
	// Not when the last run ended: a paced one goes on dropping after the
	// last frame.
	var cfg generatorGenConfig
	if err := g.objs.Generator.Lookup(uint32(0), &cfg); err != nil {
		return sent, 0, fmt.Errorf("read the generator's schedule: %w", err)
	}
	return sent, time.Duration(cfg.LastNs - cfg.StartNs), nil
}

// transmitted is how many frames the generator has sent, on every CPU.
func (g *Generator) transmitted() (uint64, error) {
	n, err := percpu.Sum[uint64](g.objs.TxFrames, uint32(0))
	if err != nil {
		return 0, fmt.Errorf("read the frames sent: %w", err)
	}
	return n, nil
}

// check refuses a frame and options the generator cannot send.
func (g *Generator) check(frame []byte, opts Options) error {
	if len(frame) < minFrame || len(frame) > MaxFrame {
		return fmt.Errorf("frame of %d bytes, want %d to %d", len(frame), minFrame, MaxFrame)
	}
	if opts.Flows < 0 || opts.Flows > maxFlows {
		return fmt.Errorf("%d flows, want 0 to %d", opts.Flows, maxFlows)
	}
	if opts.Flows > 1 && (opts.FlowOffset < 0 || opts.FlowOffset+2 > len(frame)) {
		return fmt.Errorf("flow field at offset %d is outside the %d-byte frame", opts.FlowOffset, len(frame))
	}
	if opts.Flows > 1 && opts.FlowOffset2 != 0 && (opts.FlowOffset2 < 0 || opts.FlowOffset2+2 > len(frame)) {
		return fmt.Errorf("second flow field at offset %d is outside the %d-byte frame", opts.FlowOffset2, len(frame))
	}
	if opts.FlowStride < 0 {
		return fmt.Errorf("a stride of %d flows, want 0 or more", opts.FlowStride)
	}
	if opts.Flows > 1 && opts.FlowStride > 1 && gcd(opts.FlowStride, opts.Flows) != 1 {
		return fmt.Errorf("a stride of %d over %d flows visits some of them only", opts.FlowStride, opts.Flows)
	}
	if opts.StampOffset != 0 {
		if opts.StampOffset < minFrame || opts.StampOffset+StampSize > len(frame) {
			return fmt.Errorf("stamp at offset %d is outside the %d-byte frame's payload", opts.StampOffset, len(frame))
		}
		if slices := (max(opts.Flows, 1) + max(opts.FlowsPerSlice, 1) - 1) / max(opts.FlowsPerSlice, 1); slices > MaxSlices {
			return fmt.Errorf("%d slices, want %d at most", slices, MaxSlices)
		}
	}
	return nil
}

// monotonicNow reads bpf_ktime_get_ns's clock.
func monotonicNow() (time.Duration, error) {
	var now unix.Timespec
	err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &now)
	return time.Duration(now.Nano()), err
}

// configure stores the template, the number of frames to send and the
// schedule from start (monotonicNow).
func (g *Generator) configure(frame []byte, count uint64, opts Options, start time.Duration) error {
	cfg := generatorGenConfig{
		Tmpl:          generatorFrame{Len: uint32(len(frame))},
		FlowOffset:    uint32(opts.FlowOffset),
		Flows:         uint32(opts.Flows),
		FlowOffset2:   uint32(opts.FlowOffset2),
		Budget:        int64(min(count, math.MaxInt64)),
		Count:         int64(min(count, math.MaxInt64)),
		Rate:          opts.Rate,
		StartNs:       uint64(start),
		StampOffset:   uint32(opts.StampOffset),
		FlowsPerSlice: uint32(opts.FlowsPerSlice),
		FlowStride:    uint32(opts.FlowStride),
	}
	copy(cfg.Tmpl.Data[:], frame)
	if err := g.objs.Generator.Put(uint32(0), &cfg); err != nil {
		return fmt.Errorf("store frame template: %w", err)
	}
	return nil
}

// SliceCounts is how many of sent frames each slice has, by slice: frame n
// of a send is of flow n % Flows, whichever CPU sends it.
func (o Options) SliceCounts(sent uint64) []uint64 {
	flows, perSlice := uint64(max(o.Flows, 1)), uint64(max(o.FlowsPerSlice, 1))
	out := make([]uint64, (flows+perSlice-1)/perSlice)
	for flow := range flows {
		n := sent / flows
		if flow < sent%flows {
			n++
		}
		out[flow/perSlice] += n
	}
	return out
}

// Filter selects the packets a Sink counts as matching; zero fields match
// anything. IPProto is that of the IPv4 header or the IPv6 fixed header (no
// extension headers are walked); DstPort is a UDP or TCP destination port.
type Filter struct {
	EtherType uint16 // e.g. 0x0800 for IPv4
	IPProto   uint8  // e.g. 17 for UDP
	DstPort   uint16
	// StampOffset, if not 0, is where matching frames carry a Generator's
	// stamp (Options.StampOffset): the Sink keeps each slice's delay and
	// jitter.
	StampOffset int
}

// Counts are a Sink's totals: all packets, and those matching its Filter.
type Counts = sinkSinkStats

// Sink counts the packets arriving at an interface and drops them.
type Sink struct {
	objs       sinkObjects
	attachment io.Closer
}

// NewSink attaches a sink to ifname in ns in native mode. With pass set it
// hands every packet on to the stack instead of dropping it.
func NewSink(ns *namespace.Netns, ifname string, filter Filter, pass bool) (*Sink, error) {
	spec, err := loadSink()
	if err != nil {
		return nil, err
	}
	var vars sinkVariableSpecs
	if err := spec.Assign(&vars); err != nil {
		return nil, err
	}
	if err := errors.Join(vars.FilterEthertype.Set(filter.EtherType), vars.FilterIpProto.Set(filter.IPProto),
		vars.FilterDstPort.Set(filter.DstPort), vars.SinkPass.Set(pass),
		vars.SinkStampOffset.Set(uint32(filter.StampOffset))); err != nil {
		return nil, fmt.Errorf("set the sink's filter: %w", err)
	}
	s := &Sink{}
	if err := spec.LoadAndAssign(&s.objs, nil); err != nil {
		return nil, fmt.Errorf("load sink: %w", err)
	}
	if s.attachment, err = ns.AttachXDP(ifname, s.objs.XdpSink, false); err != nil {
		return nil, errors.Join(err, s.objs.Close())
	}
	return s, nil
}

// CountsByCPU are the counters of each CPU: what arrived there.
func (s *Sink) CountsByCPU() ([]Counts, error) {
	var perCPU []Counts
	if err := s.objs.SinkCounts.Lookup(uint32(0), &perCPU); err != nil {
		return nil, fmt.Errorf("read sink counters: %w", err)
	}
	return perCPU, nil
}

// Counts sums the counters of all CPUs.
func (s *Sink) Counts() (Counts, error) {
	perCPU, err := s.CountsByCPU()
	if err != nil {
		return Counts{}, err
	}
	return percpu.Total(perCPU), nil
}

// Sample returns the first matching frame, cut to MaxFrame bytes, or nil if
// none has arrived. With several receiving CPUs, it is the first one of the
// lowest-numbered CPU.
func (s *Sink) Sample() ([]byte, error) {
	var perCPU []sinkFrame
	if err := s.objs.SinkSample.Lookup(uint32(0), &perCPU); err != nil {
		return nil, fmt.Errorf("read sink sample: %w", err)
	}
	for _, f := range perCPU {
		if f.Len > 0 {
			return f.Data[:f.Len], nil
		}
	}
	return nil, nil
}

// Close detaches and unloads the sink.
func (s *Sink) Close() error {
	return errors.Join(s.attachment.Close(), s.objs.Close())
}

// SliceDelay is what a Sink saw of a slice's stamped frames: how many, and
// their delay from the Generator's send time; Jitter is the mean over the
// receiving CPUs, weighted by frames, of RFC 3550's interarrival jitter.
// FirstSent is the earliest send time among them, on CLOCK_MONOTONIC.
type SliceDelay struct {
	Received               uint64
	Mean, Min, Max, Jitter time.Duration
	FirstSent              time.Duration
}

// Delays are the slices' delays, by slice.
func (s *Sink) Delays() ([]SliceDelay, error) {
	out := make([]SliceDelay, MaxSlices)
	for slice := range out {
		var perCPU []sinkSliceDelay
		if err := s.objs.SinkDelays.Lookup(uint32(slice), &perCPU); err != nil {
			return nil, err
		}
		d := &out[slice]
		var sum, jitter float64
		for _, c := range perCPU {
			if c.Received == 0 {
				continue
			}
			if d.Received == 0 || time.Duration(c.DelayMin) < d.Min {
				d.Min = time.Duration(c.DelayMin)
			}
			if d.Received == 0 || time.Duration(c.FirstSentNs) < d.FirstSent {
				d.FirstSent = time.Duration(c.FirstSentNs)
			}
			d.Max = max(d.Max, time.Duration(c.DelayMax))
			d.Received += c.Received
			sum += float64(c.DelaySum)
			jitter += float64(c.Jitter16) / 16 * float64(c.Received)
		}
		if d.Received > 0 {
			d.Mean = time.Duration(sum / float64(d.Received))
			d.Jitter = time.Duration(jitter / float64(d.Received))
		}
	}
	return out, nil
}

// ScatteredStride is a FlowStride that visits flows in an order far from
// theirs: about flows/1.6 (the golden ratio's share), odd and sharing no
// factor with flows; 1 for a single flow.
func ScatteredStride(flows int) int {
	if flows <= 2 {
		return 1
	}
	s := flows*5/8 | 1
	for gcd(s, flows) != 1 {
		s += 2
	}
	return s
}

// gcd is the greatest common divisor of a and b, positive.
func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
