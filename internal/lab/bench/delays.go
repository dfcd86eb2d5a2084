package bench

import (
	"errors"
	"io"
	"time"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/lab/videonet"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
)

// Table I of the paper on XDP-based 6G backbone network slicing: slices
// of 32 users each, the users told apart by their
// GTP-U TEID; per slice the delay, jitter and loss of the users' packets.
var delaySlices = []int{1, 2, 4, 8, 16}

const (
	usersPerSlice = 32
	delayRate     = 100_000 // packets/s in all, below what the host can forward
	delaySpan     = 2 * time.Second
	// jitterTarget is the 6G KPI set for the prioritised slices.
	jitterTarget = 20 * time.Microsecond
)

// delayRow is one slice of one measurement.
type delayRow struct {
	setup       string
	slices      int
	slice       int
	prioritised bool
	sent        uint64
	delay       trafficgen.SliceDelay
}

// measureDelays compares, for each number of slices, no steering (every
// packet on the generator's CPU, 0) with xdp5g keeping the prioritised
// slices (the first half; the one slice when there is one) on CPU 1 and
// the others on CPU 0.
func measureDelays() (rows []delayRow, err error) {
	restore, err := videonet.OnCPU0()
	if err != nil {
		return nil, err
	}
	defer restore()
	for _, steer := range []bool{false, true} {
		for _, n := range delaySlices {
			setup := map[bool]string{false: "baseline", true: "xdp5g"}[steer]
			progress("delay and jitter: %s, %d slices", setup, n)
			r, err := measureDelayPoint(n, steer)
			if err != nil {
				return nil, err
			}
			for i := range r {
				r[i].setup = setup
			}
			rows = append(rows, r...)
		}
	}
	return rows, nil
}

func measureDelayPoint(slices int, steer bool) (rows []delayRow, err error) {
	d, n, closeAll, err := newSegment()
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, closeAll()) }()
	prioritised := func(s int) bool { return s < max(slices/2, 1) }
	if steer {
		for s := range slices {
			cpu := 0
			if prioritised(s) {
				cpu = 1
			}
			if err := d.SetSlice(classifyxdp.Slice{ID: uint32(s), CPUs: []int{cpu}, Prioritised: prioritised(s)}); err != nil {
				return nil, err
			}
			if err := d.Add(classifyxdp.Rule{ID: uint32(s + 1), Action: classifyxdp.ActionSteer, Slice: uint32(s),
				Matches: []classifyxdp.Match{{Field: "tunnel1Id", Value: uint64(prioTEID + s*usersPerSlice), Mask: ^uint64(usersPerSlice-1) & 0xffffffff}}}); err != nil {
				return nil, err
			}
		}
	}
	count := uint64(delayRate * delaySpan.Seconds())
	opts := trafficgen.Options{FlowOffset: gtpTEIDLowAt, Flows: slices * usersPerSlice, FlowsPerSlice: usersPerSlice,
		StampOffset: gtpStampAt, Rate: delayRate}
	if _, _, err := n.Gen.Send(n.Sender, n.SenderIndex, gtpFrame(n.RouterMAC, videonet.SinkAddr, 256), count, opts); err != nil {
		return nil, err
	}
	if _, err := videonet.Settled(n.Counter); err != nil {
		return nil, err
	}
	delays, err := n.Counter.Delays()
	if err != nil {
		return nil, err
	}
	for s, sent := range opts.SliceCounts(count) {
		rows = append(rows, delayRow{slices: slices, slice: s, prioritised: prioritised(s), sent: sent, delay: delays[s]})
	}
	return rows, nil
}

func reportDelays(w io.Writer, rows []delayRow) {
	p := linesTo(w)
	p("\n### Delay and jitter per slice (Table I of the paper on XDP-based 6G backbone network slicing)\n")
	p("Slices of %d users each (told apart by GTP-U TEID), %d packets/s in all of 256 octets for %s, stamped by the", usersPerSlice, delayRate, delaySpan)
	p("generator (CPU 0) and read at the sink: delay from send to arrival, RFC 3550 jitter, loss. Baseline: no steering,")
	p("every packet on CPU 0 with the generator. xdp5g: the prioritised slices (the first half; the one slice when there is")
	p("one) steered to CPU 1, the others to CPU 0.\n")
	p("| Setup | Slices | Slice | Prioritised | Mean delay | Max delay | Jitter | Loss |")
	p("|---|---:|---:|---|---:|---:|---:|---:|")
	met := true
	for _, r := range rows {
		lost := r.sent - min(r.sent, r.delay.Received)
		p("| %s | %d | %d | %v | %.1f µs | %.1f µs | %.2f µs | %.2f%% |", r.setup, r.slices, r.slice, r.prioritised,
			micros(r.delay.Mean), micros(r.delay.Max), micros(r.delay.Jitter), percent(lost, r.sent))
		if r.setup == "xdp5g" && r.prioritised && (r.delay.Jitter > jitterTarget || lost > 0) {
			met = false
		}
	}
	p("\n- prioritised slices with xdp5g: jitter ≤ %s and no loss: %s", jitterTarget, verdict[met])
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
