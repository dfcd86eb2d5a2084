package bench

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/lab/videonet"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
)

// The loads at which the reaction to an overload is measured: from
// 400,000 packets/s this VM's CPU stalls alone fill queues, and flows
// leave before the overload.
var reactionRates = []uint64{50_000, 100_000, 200_000}

// reactionTries are the measurements at each load.
const reactionTries = 3

const (
	reactionSpan  = time.Second            // of traffic
	reactionAfter = 300 * time.Millisecond // into it, CPU 1 is taken
)

// reaction is how long after CPU 1 was taken the first packet went to the
// alternative node, at a load, in each try; early counts the tries in which
// flows left before, when a stall of CPU 1 filled its queue: they are tried
// again.
type reaction struct {
	rate  uint64
	after []time.Duration
	early int
}

// measureReactions steers every service to CPU 1 with an alternative node,
// takes CPU 1 with a real-time task partway through the traffic, and reads
// the send time of the first packet that reached the alternative node.
func measureReactions() (out []reaction, err error) {
	restore, err := videonet.OnCPU0()
	if err != nil {
		return nil, err
	}
	defer restore()
	for _, rate := range reactionRates {
		progress("reaction to an overload at %d packets/s", rate)
		r := reaction{rate: rate}
		for len(r.after) < reactionTries {
			after, err := measureReaction(rate)
			if err != nil {
				return nil, err
			}
			if after >= 0 {
				r.after = append(r.after, after)
			} else if r.early++; r.early > 3*reactionTries {
				return nil, fmt.Errorf("at %d packets/s, flows left before the overload in %d tries", rate, r.early)
			}
		}
		slices.Sort(r.after)
		out = append(out, r)
	}
	return out, nil
}

func measureReaction(rate uint64) (after time.Duration, err error) {
	d, n, closeAll, err := newSegment()
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, closeAll()) }()
	if err := d.SetSlice(classifyxdp.Slice{ID: 1, CPUs: []int{1}}); err != nil {
		return 0, err
	}
	if err := d.Add(classifyxdp.Rule{ID: 1, Action: classifyxdp.ActionSteer, Slice: 1,
		Matches: []classifyxdp.Match{{Field: "tunnel1", Value: uint64(classifyxdp.TunnelGTPU), Mask: 0xff}}}); err != nil {
		return 0, err
	}
	if err := d.SetAlternatives([]classifyxdp.Alternative{{MAC: n.AltMAC, Addr: netip.MustParseAddr("192.0.2.99"), Ifindex: n.AltIndex}}); err != nil {
		return 0, err
	}
	taken := make(chan time.Duration, 1)
	done := make(chan struct{})
	hogged := make(chan error, 1)
	go func() {
		time.Sleep(reactionAfter)
		var now unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &now); err != nil {
			hogged <- err
			return
		}
		taken <- time.Duration(now.Nano())
		stop, err := videonet.HogCPU(1)
		if err == nil {
			<-done
			stop()
		}
		hogged <- err
	}()
	_, _, err = n.Gen.Send(n.Sender, n.SenderIndex, gtpFrame(n.RouterMAC, videonet.SinkAddr, 256), uint64(float64(rate)*reactionSpan.Seconds()),
		trafficgen.Options{FlowOffset: gtpTEIDLowAt, Flows: prioServices, FlowsPerSlice: prioServices, StampOffset: gtpStampAt, Rate: rate})
	close(done)
	if err := errors.Join(err, <-hogged); err != nil {
		return 0, err
	}
	if _, err := videonet.Settled(n.Offloaded); err != nil {
		return 0, err
	}
	away, err := n.Offloaded.Delays()
	if err != nil {
		return 0, err
	}
	if away[0].Received == 0 {
		return 0, errors.New("nothing was offloaded")
	}
	return away[0].FirstSent - <-taken, nil
}

func reportReactions(w io.Writer, rs []reaction) {
	p := linesTo(w)
	p("\n### Reaction to an overload\n")
	p("Every service steered to CPU 1 with an alternative node; %s into %s of traffic, a real-time task takes CPU 1.", reactionAfter, reactionSpan)
	p("Reaction: from then to the send time of the first packet that reached the alternative node. A flow leaves when")
	p("its CPU's queue holds %d packets, checked at every packet, so the reaction is the time that many packets take", classifyxdp.OffloadBacklog)
	p("to arrive at the load, less what the queue already held. %d tries per load; a try in which flows left before CPU 1", reactionTries)
	p("was taken (a stall of this VM's CPU 1 filled the queue first) is counted as early and made again.\n")
	p("| Load (packets/s) | Reaction, median | Fastest | Slowest | %d packets at the load | Early tries |", classifyxdp.OffloadBacklog)
	p("|---:|---:|---:|---:|---:|---:|")
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for _, r := range rs {
		p("| %d | %.2f ms | %.2f ms | %.2f ms | %.2f ms | %d |", r.rate, ms(r.after[len(r.after)/2]), ms(r.after[0]), ms(r.after[len(r.after)-1]),
			1000*float64(classifyxdp.OffloadBacklog)/float64(r.rate), r.early)
	}
}
