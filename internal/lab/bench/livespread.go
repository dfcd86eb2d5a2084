package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
)

// liveInstalled is the attached UPF under live traffic with the sessions
// of a cost row installed: with the frames of the last session installed,
// then spread over each count of flows consecutive sessions, next to the
// redirect baseline of the same rounds.
type liveInstalled struct {
	flows    []int           // of each spread
	upf      [][2]liveResult // one session's frames, then each spread's; by direction
	baseline [2]liveResult
	first    []int    // each spread's first session
	reached  [][2]int // of each spread's sessions, how many each direction's PDR counted packets of
}

// measureLiveInstalled measures the UPF u, n sessions installed (and
// attached by measureInstalled, its rounds done), under live traffic:
// bpf_stats and the testbed rate, one session's frames and spread over
// min(n, flows) sessions, interleaved with the redirect baseline round by
// round. Nil if no spread is possible: n < 2, or no spread's sessions
// share the upper 16 bits of their TEIDs (spreadStart).
func measureLiveInstalled(ctx context.Context, tb *demo.Testbed, b *baselines, u *demo.UPF, n int, flows []int,
	packets uint64, nRounds int) (_ *liveInstalled, err error) {
	res := &liveInstalled{}
	upf := forwarder{name: fmt.Sprintf("xdp5g, %d sessions", n), attach: u.Attach, detach: u.Detach,
		traffic: [][2]traffic{{{frame: uplinkFrame(tb, teid(n-1), n-1)}, {frame: downlinkFrame(tb, n-1)}}}}
	for _, count := range flows {
		k := min(n, count)
		first, ok := spreadStart(n, k)
		if k < 2 || !ok || slices.Contains(res.flows, k) {
			continue
		}
		t, err := spreadTraffic(tb, first, k)
		if err != nil {
			return nil, err
		}
		upf.traffic = append(upf.traffic, t)
		res.flows, res.first = append(res.flows, k), append(res.first, first)
	}
	if len(res.flows) == 0 {
		return nil, nil
	}
	before, err := res.pdrPackets(u)
	if err != nil {
		return nil, err
	}
	// Attached in turn with the baseline from here.
	if err := u.Detach(); err != nil {
		return nil, err
	}
	gen, err := trafficgen.NewGenerator()
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, gen.Close()) }()
	results, err := measureAttached(ctx, tb, gen, []forwarder{upf, b.forwarder(tb)}, liveDirections(tb), packets, nRounds)
	if err != nil {
		return nil, err
	}
	res.upf, res.baseline = results[0], results[1][0]
	after, err := res.pdrPackets(u)
	if err != nil {
		return nil, err
	}
	res.reached = make([][2]int, len(res.flows))
	for s := range after {
		for i := range after[s] {
			for d := range 2 {
				if after[s][i][d] > before[s][i][d] {
					res.reached[s][d]++
				}
			}
		}
	}
	return res, nil
}

// spreadStart is the first of the k consecutive sessions, of the n
// installed, that live traffic spreads over: the last k whose uplink TEIDs
// differ in their low 16 bits alone, which the generator counts up (their
// UE addresses too: both count from a base whose low 16 bits are 0).
// False if there are none.
func spreadStart(n, k int) (int, bool) {
	first := n - k
	if int(teid(first)&0xffff)+k > 1<<16 {
		// The last k below the last session's upper 16 bits.
		first = int(teid(n-1)&^0xffff) - 1 - k
	}
	return first, first >= 0
}

// spreadTraffic is the traffic of the k sessions from first on: the
// first's frames, the generator setting the low 16 bits of the uplink's
// TEID and, with them, of the UE address it carries (the uplink PDRs
// match it), and of the downlink's destination, the UE address. The
// inner headers' checksums, and over IPv6 the outer UDP checksum, then no
// longer match: neither the UPF nor the sinks check them.
func spreadTraffic(tb *demo.Testbed, first, k int) ([2]traffic, error) {
	const ethernet, udp, ipv4Src, ipv4Dst, low = 14, 8, 12, 16, 2
	outerIP := 20
	if overIPv6 {
		outerIP = 40
	}
	teidAt := ethernet + outerIP + udp + 4 + low // in the GTP-U header
	ul, dl := uplinkFrame(tb, teid(first), first), downlinkFrame(tb, first)
	ueAt := len(ul) - len(demo.UEPacket(ueAddr(first), demo.DNAddr, true, demo.UETTL)) + ipv4Src + low
	dstAt := ethernet + ipv4Dst + low
	ue := ueAddr(first).As4()
	key := uint16(teid(first))
	if binary.BigEndian.Uint16(ul[teidAt:]) != key || binary.BigEndian.Uint16(ul[ueAt:]) != key ||
		binary.BigEndian.Uint16(dl[dstAt:]) != key || binary.BigEndian.Uint16(ue[low:]) != key || int(key)+k > 1<<16 {
		return [2]traffic{}, fmt.Errorf("sessions %d to %d: their keys are not where the generator counts them", first, first+k-1)
	}
	// Counting up one by one, the frames walked the sessions' slots in
	// address order, and the tables the control plane filled in that order
	// with them: subscribers come in no such order.
	stride := trafficgen.ScatteredStride(k)
	return [2]traffic{
		{ul, trafficgen.Options{Flows: k, FlowOffset: teidAt, FlowOffset2: ueAt, FlowStride: stride}},
		{dl, trafficgen.Options{Flows: k, FlowOffset: dstAt, FlowStride: stride}},
	}, nil
}

// pdrPackets are the packets the uplink and the downlink PDR of each
// spread's sessions have counted: [spread][session][direction].
func (res *liveInstalled) pdrPackets(u *demo.UPF) ([][][2]uint64, error) {
	const uplinkPDR, downlinkPDR = 1, 2 // benchSession's, in both shapes
	out := make([][][2]uint64, len(res.flows))
	for s, k := range res.flows {
		out[s] = make([][2]uint64, k)
		for i := range k {
			id := seid(res.first[s] + i)
			slots, ok := u.Store.Slots(id)
			if !ok {
				return nil, fmt.Errorf("no session %d", id)
			}
			for _, e := range slots.PDR {
				d := slices.Index([]uint32{uplinkPDR, downlinkPDR}, e.ID)
				if d < 0 {
					continue
				}
				c, err := u.Datapath.PDRCounter(e.Slot)
				if err != nil {
					return nil, err
				}
				out[s][i][d] = c.Packets
			}
		}
	}
	return out, nil
}
