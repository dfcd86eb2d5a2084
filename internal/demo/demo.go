// Package demo is `xdp5g demo`: a gNB, the UPF and a data network in
// throw-away network namespaces, real GTP-U traffic through xdp_upf in both
// directions, and a report of what arrived; then a UPF, the CU-UP and a DU,
// a UE's traffic through the CU-UP's AF_XDP path with 3GPP security both
// ways. Its UPF testbed serves the end-to-end tests too.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

const (
	packetsPerDirection = 2_000_000
	progressInterval    = 100 * time.Millisecond
)

// Run builds the demo network, sends traffic through the UPF and writes the
// report to w. Everything it builds is removed before it returns, also on
// error or when ctx is cancelled.
func Run(ctx context.Context, w io.Writer) (err error) {
	if os.Geteuid() != 0 {
		return errors.New("the demo needs root: it creates network namespaces and attaches XDP programs")
	}
	tb, err := NewTestbed()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, tb.Close()) }()
	upf, err := tb.StartUPF()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, upf.Close()) }()
	if err := upf.Install(); err != nil {
		return err
	}
	fmt.Fprintln(w, "xdp5g demo: gNB ──N3── UPF ──N6── DN, each in a network namespace of its own")
	fmt.Fprintf(w, "  gNB  %-16s %s %s\n", tb.GNB.Name, N3, GNBAddr)
	fmt.Fprintf(w, "  UPF  %-16s %s %s (access), %s %s (core): xdp_upf in native mode\n", tb.UPF.Name, N3, N3Addr, N6, N6Addr)
	fmt.Fprintf(w, "  DN   %-16s %s %s\n", tb.DN.Name, N6, DNAddr)
	fmt.Fprintf(w, "  session %d: UE %s, uplink TEID %#x, downlink TEID %#x to %s, QFI %d\n\n",
		SEID, UEAddr, UplinkTEID, DownlinkTEID, GNBAddr, QFI)

	gen, err := trafficgen.NewGenerator()
	if err != nil {
		return err
	}
	defer gen.Close()
	flows := []struct {
		dir   Direction
		frame []byte
	}{
		{tb.Uplink(), tb.UplinkFrame(UplinkTEID, QFI, UEPacket(UEAddr, DNAddr, true, UETTL))},
		{tb.Downlink(), tb.DownlinkFrame(UEPacket(UEAddr, DNAddr, false, UETTL))},
	}
	var results []result
	for _, f := range flows {
		// A direction's run cannot be interrupted, but takes about a second.
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := send(w, gen, f.dir, f.frame)
		if err != nil {
			return err
		}
		results = append(results, r)
	}

	fmt.Fprintf(w, "\n%-9s %11s %11s %9s %10s\n", "", "sent", "delivered", "lost", "rate")
	for _, r := range results {
		fmt.Fprintf(w, "%-9s %11s %11s %9s %5.2f Mpps\n", r.dir.Name, grouped(r.sent), grouped(r.delivered),
			grouped(r.sent-min(r.delivered, r.sent)), float64(r.sent)/r.elapsed.Seconds()/1e6)
	}
	for _, r := range results {
		sample, err := r.dir.Sink.Sample()
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "\n%s packet as it arrived at %s (%d bytes):\n", r.dir.Name, r.dir.To, len(sample))
		describe(w, sample)
	}
	if err := printCounters(w, upf.Datapath); err != nil {
		return err
	}
	for _, r := range results {
		if r.delivered == 0 {
			return fmt.Errorf("no %s packet arrived", r.dir.Name)
		}
	}
	return runCUUP(ctx, w)
}

type result struct {
	dir             Direction
	sent, delivered uint64
	elapsed         time.Duration
}

// send transmits packetsPerDirection frames in one run of the generator, as
// fast as it goes, redrawing a progress line from the sink's count while it
// runs; then it waits for the sink to count the rest.
func send(w io.Writer, gen *trafficgen.Generator, dir Direction, frame []byte) (result, error) {
	r := result{dir: dir}
	done := make(chan error, 1)
	go func() {
		var err error
		r.sent, r.elapsed, err = dir.Send(gen, frame, packetsPerDirection, trafficgen.Options{})
		done <- err
	}()
	progress := func(packets uint64, elapsed time.Duration) {
		fmt.Fprintf(w, "\r%-9s %3d%%  %11s packets  %5.2f Mpps", dir.Name, packets*100/packetsPerDirection,
			grouped(packets), float64(packets)/elapsed.Seconds()/1e6)
	}
	tick := time.NewTicker(progressInterval)
	defer tick.Stop()
	start := time.Now()
	for {
		select {
		case err := <-done:
			if err == nil {
				progress(r.sent, r.elapsed)
				r.delivered, err = dir.Delivered(r.sent)
			}
			fmt.Fprintln(w)
			return r, err
		case <-tick.C:
			c, err := dir.Sink.Counts()
			if err != nil {
				sendErr := <-done // the sender writes r until it is done
				return r, errors.Join(err, sendErr)
			}
			progress(c.MatchPackets, time.Since(start))
		}
	}
}

// describe prints a frame layer by layer.
func describe(w io.Writer, frame []byte) {
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	for _, l := range p.Layers() {
		fmt.Fprintf(w, "  %-9s %s\n", l.LayerType(), summary(l))
	}
}

func summary(l gopacket.Layer) string {
	switch l := l.(type) {
	case *layers.Ethernet:
		return fmt.Sprintf("%s → %s", l.SrcMAC, l.DstMAC)
	case *layers.IPv4:
		return fmt.Sprintf("%s → %s  TTL %d  length %d", l.SrcIP, l.DstIP, l.TTL, l.Length)
	case *layers.IPv6:
		return fmt.Sprintf("%s → %s  hop limit %d  payload %d", l.SrcIP, l.DstIP, l.HopLimit, l.Length)
	case *layers.UDP:
		return fmt.Sprintf("port %d → %d  length %d", l.SrcPort, l.DstPort, l.Length)
	case *layers.GTPv1U:
		s := fmt.Sprintf("message type %d  TEID %#x", l.MessageType, l.TEID)
		for _, e := range l.GTPExtensionHeaders {
			if e.Type == PDUSessionContainer && len(e.Content) >= 2 {
				s += fmt.Sprintf("  PDU Session Container QFI %d", e.Content[1]&0x3f)
			}
		}
		return s
	case *gopacket.Payload:
		return fmt.Sprintf("%d bytes %q", len(*l), []byte(*l))
	}
	return ""
}

// printCounters prints the data path's non-zero outcome counters per
// interface.
func printCounters(w io.Writer, dp *upfxdp.Datapath) error {
	ifaces, err := dp.Counters()
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "\nUPF counters:")
	for _, c := range ifaces {
		for _, reason := range upfxdp.ReasonNames {
			if n := c.Reasons[reason]; n.Packets > 0 {
				fmt.Fprintf(w, "  %-4s %-20s %11s packets %13s bytes\n", c.Name, reason, grouped(n.Packets), grouped(n.Bytes))
			}
		}
	}
	return nil
}

// grouped writes n with thousands separators.
func grouped(n uint64) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
