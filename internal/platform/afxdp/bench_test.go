package afxdp_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/xdp5g/xdp5g/internal/platform/afxdp"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
)

// BenchmarkForward forwards 64-byte frames from x0 to x1 through one UMEM,
// in place, as a CU-UP worker does between N3 and F1-U: the traffic
// generator sends b.N frames into p0 as fast as it can or at a given
// rate, native XDP
// redirects them to the socket on x0, the loop transmits them on x1. It
// reports what it forwarded per second and the share of the frames sent
// that it forwarded (the generator outruns it: the rest is dropped at the
// veth or the socket's RX ring).
func BenchmarkForward(b *testing.B) {
	for _, busy := range []bool{false, true} {
		for _, rate := range []uint64{0, 1_000_000} {
			name := fmt.Sprintf("busy-poll=%v/rate=%d", busy, rate)
			b.Run(name, func(b *testing.B) { benchmarkForward(b, busy, rate) })
		}
	}
}

func benchmarkForward(b *testing.B, busy bool, rate uint64) {
	n, r := newRedirected(b, false)
	u := newUMEM(b, n.dut, 8192, afxdp.UMEMOptions{})
	in := newSocket(b, n.dut, u, n.index["x0"], afxdp.Options{FillRing: 4096, RxRing: 2048, TxRing: afxdp.NoRing, BusyPoll: busy})
	out := newSocket(b, n.dut, u, n.index["x1"], afxdp.Options{RxRing: afxdp.NoRing, TxRing: 2048, CompletionRing: 2048,
		FillRing: 64, BusyPoll: busy})
	r.register(b, 0, in)
	gen, err := trafficgen.NewGenerator()
	if err != nil {
		b.Fatal(err)
	}
	defer gen.Close()
	frame := testFrame(b, n.mac["p0"], n.mac["x0"], 0, 64)

	sent := make(chan error, 1)
	batch := make([]afxdp.Desc, 64)
	forwarded := 0
	b.ResetTimer()
	start := time.Now()
	go func() {
		_, _, err := gen.Send(n.peer, n.index["p0"], frame, uint64(b.N), trafficgen.Options{Rate: rate})
		sent <- err
	}()
	generating, last := true, start
	for quiet := 0; forwarded < b.N && quiet < 100; {
		if !busy {
			if err := u.Wait(10 * time.Millisecond); err != nil {
				b.Fatal(err)
			}
		}
		got, err := in.Receive(batch)
		if err != nil {
			b.Fatal(err)
		}
		tx, err := out.Transmit(batch[:got])
		if err != nil {
			b.Fatal(err)
		}
		if err := u.Free(batch[tx:got]...); err != nil {
			b.Fatal(err)
		}
		forwarded += tx
		if tx > 0 {
			last = time.Now()
		}
		select {
		case err := <-sent:
			if err != nil {
				b.Fatal(err)
			}
			generating = false
		default:
		}
		if got == 0 && !generating {
			quiet++
			time.Sleep(time.Millisecond)
		}
	}
	b.StopTimer()
	elapsed := last.Sub(start)
	if generating {
		if err := <-sent; err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(forwarded)/elapsed.Seconds(), "forwarded/s")
	b.ReportMetric(float64(forwarded)/float64(b.N), "delivered")
}
