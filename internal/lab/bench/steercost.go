package bench

import (
	"context"
	"fmt"
	"io"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
)

// steerCosts are the per-packet costs of one flow of the deepest traffic
// type under one rule of each of three kinds: counting (the verdict
// cached, on to the kernel), steering to a slice's CPU, and steering to a
// slice with a rate; with the XDP_TX baseline of the same rounds.
type steerCosts struct {
	tx, count, steer, rated rounds
}

func measureSteerCost(ctx context.Context, b *baselines, runs int, frame []byte) (c steerCosts, err error) {
	rules := []struct {
		action classifyxdp.ActionKind
		slice  *classifyxdp.Slice
	}{
		{classifyxdp.ActionCount, nil},
		{classifyxdp.ActionSteer, &classifyxdp.Slice{ID: 1, CPUs: []int{0}}},
		{classifyxdp.ActionSteer, &classifyxdp.Slice{ID: 1, CPUs: []int{0}, Rate: 1e12}}, // 1 Tbit/s: never reached
	}
	subjects := []subject{{"XDP_TX", b.tx, [][]byte{frame}, xdplink.TX}}
	for _, r := range rules {
		d, err := classifyxdp.OpenDatapath(classifyxdp.Config{})
		if err != nil {
			return c, err
		}
		defer d.Close()
		verdict := xdplink.Pass
		rule := classifyxdp.Rule{ID: 1, Action: r.action}
		if r.slice != nil {
			if err := d.SetSlice(*r.slice); err != nil {
				return c, err
			}
			rule.Slice, verdict = r.slice.ID, xdplink.Redirect
		}
		if err := d.Add(rule); err != nil {
			return c, err
		}
		subjects = append(subjects, subject{"rule of action " + fmt.Sprint(r.action), d.Program(), [][]byte{frame}, verdict})
	}
	figures, err := perPacketNs(ctx, subjects, runs)
	if err != nil {
		return c, err
	}
	return steerCosts{tx: figures[0], count: figures[1], steer: figures[2], rated: figures[3]}, nil
}

func reportSteerCost(w io.Writer, c steerCosts) {
	p := linesTo(w)
	p("\n### Steering: per-packet cost by BPF_PROG_TEST_RUN (ns/packet)\n")
	p("One flow of %s (its verdict in the flow cache) under one rule: counting, then on to the kernel; steering to", trafficTypes[len(trafficTypes)-1])
	p("a slice (hash, bucket, prioritised-flow lookup, queue check, metadata, CPU map redirect; a test run does not carry")
	p("the redirect out); steering to a slice with a rate (its token bucket too).\n")
	p("| XDP_TX | Count | ×TX | Steer | ×TX | Steer, rate-limited | ×TX |")
	p("|---:|---:|---:|---:|---:|---:|---:|")
	p("| %.1f | %.1f | %.2f | %.1f | %.2f | %.1f | %.2f |", c.tx.median(), c.count.median(), c.count.per(c.tx),
		c.steer.median(), c.steer.per(c.tx), c.rated.median(), c.rated.per(c.tx))
}
