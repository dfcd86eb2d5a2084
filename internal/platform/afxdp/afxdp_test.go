package afxdp_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/platform/afxdp"
)

var attachModes = []struct {
	name    string
	generic bool
}{{name: "native", generic: false}, {name: "generic", generic: true}}

var wakeupModes = []struct {
	name string
	opts afxdp.UMEMOptions
}{{name: "need-wakeup", opts: afxdp.UMEMOptions{}}, {name: "no-need-wakeup", opts: afxdp.UMEMOptions{NoNeedWakeup: true}}}

// Frames the peer sends arrive, redirected by XDP, byte for byte, in
// either attach mode and either wakeup mode.
func TestReceive(t *testing.T) {
	for _, am := range attachModes {
		for _, wm := range wakeupModes {
			t.Run(am.name+"/"+wm.name, func(t *testing.T) {
				n, r := newRedirected(t, am.generic)
				u := newUMEM(t, n.dut, 512, wm.opts)
				s := newSocket(t, n.dut, u, n.index["x0"], afxdp.Options{FillRing: 256, RxRing: 256, TxRing: afxdp.NoRing})
				r.register(t, 0, s)
				peer := openPacketSocket(t, n.peer, n.index["p0"])

				var want [][]byte
				for seq := range 100 {
					f := testFrame(t, n.mac["p0"], n.mac["x0"], seq, 60+seq*14)
					want = append(want, f)
					peer.send(t, f)
				}
				if err := sameFrames(receiveAll(t, u, s, len(want)), want); err != nil {
					t.Fatal(err)
				}
				st, err := s.Stats()
				if err != nil {
					t.Fatal(err)
				}
				if st.RxPackets != 100 || st.RxDropped != 0 || st.RxFillRingEmpty != 0 {
					t.Errorf("stats %+v: want 100 received, none dropped", st)
				}
				if u.FreeFrames() != 512-256 {
					t.Errorf("%d frames free, want all but the fill ring's %d", u.FreeFrames(), 256)
				}
			})
		}
	}
}

// Frames built in allocated frames reach the peer byte for byte, more of
// them in one call than copy mode sends per system call.
func TestTransmit(t *testing.T) {
	for _, wm := range wakeupModes {
		t.Run(wm.name, func(t *testing.T) {
			n := newNetwork(t)
			u := newUMEM(t, n.dut, 256, wm.opts)
			s := newSocket(t, n.dut, u, n.index["x0"], afxdp.Options{FillRing: 64, RxRing: 64, TxRing: 128,
				CompletionRing: 128})
			peer := openPacketSocket(t, n.peer, n.index["p0"])

			descs := make([]afxdp.Desc, 100)
			if got := u.Alloc(descs); got != len(descs) {
				t.Fatalf("allocated %d frames, want %d", got, len(descs))
			}
			var want [][]byte
			for i := range descs {
				f := testFrame(t, n.mac["x0"], n.mac["p0"], i, 60+i*14)
				want = append(want, f)
				descs[i].Len = uint32(copy(u.Frame(descs[i])[:len(f)], f))
			}
			sent, err := s.Transmit(descs)
			if err != nil || sent != len(descs) {
				t.Fatalf("transmitted %d of %d: %v", sent, len(descs), err)
			}
			if err := sameFrames(peer.receive(len(want)), want); err != nil {
				t.Fatal(err)
			}
			// Every frame comes back: the fill ring's and the pool's.
			for u.FreeFrames() < 256-64 && s.Complete() > 0 {
			}
			if u.FreeFrames() != 256-64 {
				t.Errorf("%d frames free after completion, want %d", u.FreeFrames(), 256-64)
			}
			st, err := s.Stats()
			if err != nil {
				t.Fatal(err)
			}
			if st.TxPackets != 100 || st.Completed != 100 || st.TxInvalidDescs != 0 {
				t.Errorf("stats %+v: want 100 transmitted and completed", st)
			}
		})
	}
}

// A socket with only a TX ring sends, with no XDP program anywhere, and
// refuses to receive.
func TestTxOnlySocket(t *testing.T) {
	n := newNetwork(t)
	u := newUMEM(t, n.dut, 64, afxdp.UMEMOptions{})
	s := newSocket(t, n.dut, u, n.index["x0"], afxdp.Options{RxRing: afxdp.NoRing, TxRing: 32, FillRing: 32, CompletionRing: 32})
	if u.FreeFrames() != 64 {
		t.Errorf("a TX-only socket took %d frames for its fill ring", 64-u.FreeFrames())
	}
	peer := openPacketSocket(t, n.peer, n.index["p0"])
	want := testFrame(t, n.mac["x0"], n.mac["p0"], 7, 200)
	d := make([]afxdp.Desc, 1)
	u.Alloc(d)
	d[0].Len = uint32(copy(u.Frame(d[0])[:len(want)], want))
	if sent, err := s.Transmit(d); sent != 1 || err != nil {
		t.Fatalf("transmitted %d: %v", sent, err)
	}
	if err := sameFrames(peer.receive(1), [][]byte{want}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Receive(d); err == nil {
		t.Error("a TX-only socket received")
	}
	if err := u.Wait(0); err == nil {
		t.Error("waited on a UMEM without an RX ring")
	}
}

// A frame received on x0 leaves x1 from the same memory, with a header
// prepended in its headroom.
func TestSharedUMEMForwardsInPlace(t *testing.T) {
	for _, am := range attachModes {
		t.Run(am.name, func(t *testing.T) {
			n, r := newRedirected(t, am.generic)
			u := newUMEM(t, n.dut, 256, afxdp.UMEMOptions{Headroom: 64})
			in := newSocket(t, n.dut, u, n.index["x0"], afxdp.Options{FillRing: 64, RxRing: 64, TxRing: afxdp.NoRing})
			out := newSocket(t, n.dut, u, n.index["x1"], afxdp.Options{RxRing: afxdp.NoRing, TxRing: 64,
				FillRing: 64, CompletionRing: 64})
			r.register(t, 0, in)
			sender := openPacketSocket(t, n.peer, n.index["p0"])
			receiver := openPacketSocket(t, n.peer, n.index["p1"])

			// The new outer header: Ethernet to p1 and a tunnel header, the
			// original frame behind it.
			outer := append(append(append([]byte{}, n.mac["p1"]...), n.mac["x1"]...), 0x88, 0xb5, 'x', '5', 'g', '!')
			var want [][]byte
			batch := make([]afxdp.Desc, 16)
			for seq := range 40 {
				f := testFrame(t, n.mac["p0"], n.mac["x0"], seq, 100+seq*30)
				want = append(want, append(append([]byte{}, outer...), f...))
				sender.send(t, f)
				var got int
				for tries := 0; got == 0 && tries < 50; tries++ {
					if err := u.Wait(100 * time.Millisecond); err != nil {
						t.Fatal(err)
					}
					var err error
					if got, err = in.Receive(batch); err != nil {
						t.Fatal(err)
					}
				}
				if got != 1 {
					t.Fatalf("packet %d: received %d", seq, got)
				}
				d, ok := u.Reslice(batch[0], -len(outer), int(batch[0].Len))
				if !ok {
					t.Fatalf("no room for %d bytes before a packet with %d of headroom", len(outer), u.Headroom(batch[0]))
				}
				if d.Addr != batch[0].Addr-uint64(len(outer)) {
					t.Fatalf("the forwarded packet moved: %#x, received at %#x", d.Addr, batch[0].Addr)
				}
				copy(u.Frame(d), outer)
				if sent, err := out.Transmit([]afxdp.Desc{d}); sent != 1 || err != nil {
					t.Fatalf("packet %d: transmitted %d: %v", seq, sent, err)
				}
			}
			if err := sameFrames(receiver.receive(len(want)), want); err != nil {
				t.Fatal(err)
			}
			// The frames come back to the pool through out's completions
			// and go on to in's fill ring.
			for u.FreeFrames() < 256-64 && out.Complete() > 0 {
			}
			if u.FreeFrames() != 256-64 {
				t.Errorf("%d frames free, want %d", u.FreeFrames(), 256-64)
			}
		})
	}
}

// A burst many times the fill ring's size arrives whole: the fill ring is
// topped up after every batch and never runs dry.
func TestFillRingNeverEmpties(t *testing.T) {
	for _, am := range attachModes {
		t.Run(am.name, func(t *testing.T) {
			n, r := newRedirected(t, am.generic)
			const fill, total, window = 64, 2000, 48
			u := newUMEM(t, n.dut, 2*fill, afxdp.UMEMOptions{})
			s := newSocket(t, n.dut, u, n.index["x0"], afxdp.Options{FillRing: fill, RxRing: fill, TxRing: afxdp.NoRing})
			r.register(t, 0, s)
			peer := openPacketSocket(t, n.peer, n.index["p0"])

			// The peer keeps a window of packets in flight: less than
			// the fill ring, many times more in all.
			done := make(chan int)
			go func() {
				received, batch := 0, make([]afxdp.Desc, 16)
				for quiet := 0; received < total && quiet < 20; {
					u.Wait(100 * time.Millisecond)
					got, _ := s.Receive(batch)
					if got == 0 {
						quiet++
					}
					received += got
					for _, d := range batch[:got] {
						if f := u.Frame(d); len(f) != 200 {
							t.Errorf("packet of %d bytes", len(f))
						}
					}
					u.Free(batch[:got]...)
					if got > 0 {
						quiet = 0
						done <- received
					}
				}
				close(done)
			}()
			frame := testFrame(t, n.mac["p0"], n.mac["x0"], 0, 200)
			sent, received := 0, 0
			for received < total {
				for ; sent < total && sent-received < window; sent++ {
					peer.send(t, frame)
				}
				got, ok := <-done
				if !ok {
					break
				}
				received = got
			}
			for range done {
			}
			st, err := s.Stats()
			if err != nil {
				t.Fatal(err)
			}
			if received != total || st.RxFillRingEmpty != 0 || st.RxDropped != 0 || st.FillShort != 0 {
				t.Errorf("received %d of %d; stats %+v", received, total, st)
			}
		})
	}
}

// Closing sockets with their XDP program attached, in generic mode too,
// returns and gives every frame back.
func TestCloseReturnsFrames(t *testing.T) {
	for _, am := range attachModes {
		t.Run(am.name, func(t *testing.T) {
			n, r := newRedirected(t, am.generic)
			u := newUMEM(t, n.dut, 128, afxdp.UMEMOptions{})
			s := newSocket(t, n.dut, u, n.index["x0"], afxdp.Options{FillRing: 64, RxRing: 64, TxRing: 64, CompletionRing: 64})
			r.register(t, 0, s)
			peer := openPacketSocket(t, n.peer, n.index["p0"])
			for seq := range 20 { // some left unreceived in the RX ring
				peer.send(t, testFrame(t, n.mac["p0"], n.mac["x0"], seq, 100))
			}
			held := make([]afxdp.Desc, 3)
			u.Wait(time.Second)
			got, err := s.Receive(held)
			if err != nil || got == 0 {
				t.Fatalf("received %d: %v", got, err)
			}
			closed := make(chan error)
			go func() { closed <- s.Close() }()
			select {
			case err := <-closed:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Close hangs")
			}
			if err := u.Free(held[:got]...); err != nil {
				t.Fatal(err)
			}
			if u.FreeFrames() != 128 {
				t.Errorf("%d frames free after Close, want 128", u.FreeFrames())
			}
			if _, err := afxdp.NewSocket(u, n.index["x1"], 0, afxdp.Options{}); err == nil {
				t.Error("a socket joined a UMEM whose first socket is closed")
			}
		})
	}
}

// veth has no zero-copy support: binding says so, and the UMEM stays
// usable; a copy-mode socket reports copy mode.
func TestZeroCopyRefusedOnVeth(t *testing.T) {
	n := newNetwork(t)
	u := newUMEM(t, n.dut, 64, afxdp.UMEMOptions{Mode: afxdp.ModeZeroCopy})
	err := n.dut.Do(func() error {
		_, err := afxdp.NewSocket(u, n.index["x0"], 0, afxdp.Options{FillRing: 32, RxRing: 32})
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "zero-copy") {
		t.Fatalf("zero-copy bind on veth: %v", err)
	}
	if u.FreeFrames() != 64 {
		t.Errorf("a failed socket kept %d frames", 64-u.FreeFrames())
	}

	c := newUMEM(t, n.dut, 64, afxdp.UMEMOptions{Mode: afxdp.ModeCopy})
	s := newSocket(t, n.dut, c, n.index["x0"], afxdp.Options{FillRing: 32, RxRing: 32})
	if zc, err := s.ZeroCopy(); zc || err != nil {
		t.Errorf("copy-mode socket: zero copy %v, %v", zc, err)
	}
}

// Bad arguments get errors and change nothing.
func TestRefusesBadInput(t *testing.T) {
	n := newNetwork(t)
	for _, tc := range []struct {
		frames int
		opts   afxdp.UMEMOptions
	}{{frames: 0, opts: afxdp.UMEMOptions{}}, {frames: 8, opts: afxdp.UMEMOptions{Headroom: afxdp.MaxHeadroom + 1}}, {frames: 8, opts: afxdp.UMEMOptions{Mode: 7}}} {
		if u, err := afxdp.NewUMEM(tc.frames, tc.opts); err == nil {
			u.Close()
			t.Errorf("NewUMEM(%d, %+v) succeeded", tc.frames, tc.opts)
		}
	}
	u := newUMEM(t, n.dut, 64, afxdp.UMEMOptions{})
	for _, opts := range []afxdp.Options{
		{FillRing: 33}, {RxRing: afxdp.NoRing, TxRing: afxdp.NoRing}, {CompletionRing: afxdp.NoRing}, {TxRing: 1 << 17},
	} {
		if err := n.dut.Do(func() error { _, err := afxdp.NewSocket(u, n.index["x0"], 0, opts); return err }); err == nil {
			t.Errorf("NewSocket with %+v succeeded", opts)
		}
	}
	s := newSocket(t, n.dut, u, n.index["x0"], afxdp.Options{FillRing: 16, RxRing: 16, TxRing: 16, CompletionRing: 16})
	if err := n.dut.Do(func() error { _, err := afxdp.NewSocket(u, n.index["x0"], 0, afxdp.Options{}); return err }); err == nil {
		t.Error("two sockets of one UMEM on one queue")
	}

	held := make([]afxdp.Desc, 2)
	u.Alloc(held)
	if err := u.Free(held[0], held[0]); err == nil {
		t.Error("a frame freed twice")
	}
	if u.FreeFrames() != 64-16-1 {
		t.Errorf("%d frames free, want %d", u.FreeFrames(), 64-16-1)
	}
	// Only held frames go out, and within their frame.
	held[1].Len = 60
	for _, d := range []afxdp.Desc{held[0], {Addr: held[1].Addr, Len: afxdp.FrameSize}, {Addr: 1 << 40, Len: 60}} {
		if sent, err := s.Transmit([]afxdp.Desc{d}); sent != 0 || err == nil {
			t.Errorf("transmitting %+v: sent %d, %v", d, sent, err)
		}
	}
	if d, ok := u.Reslice(held[1], -u.Headroom(held[1])-1, 10); ok {
		t.Errorf("resliced before the frame: %+v", d)
	}
	if d, ok := u.Reslice(held[1], 0, afxdp.FrameSize); ok {
		t.Errorf("resliced past the frame: %+v", d)
	}
	if m := u.Meta(held[1], u.Headroom(held[1])+1); m != nil {
		t.Errorf("%d bytes of metadata before a packet with %d of headroom", len(m), u.Headroom(held[1]))
	}
}

// The per-packet path allocates nothing: receive, transmit, complete,
// free.
func TestNoAllocationsPerPacket(t *testing.T) {
	n, r := newRedirected(t, false)
	u := newUMEM(t, n.dut, 256, afxdp.UMEMOptions{})
	s := newSocket(t, n.dut, u, n.index["x0"], afxdp.Options{FillRing: 64, RxRing: 64, TxRing: 64, CompletionRing: 64})
	r.register(t, 0, s)
	peer := openPacketSocket(t, n.peer, n.index["p0"])
	frame := testFrame(t, n.mac["p0"], n.mac["x0"], 0, 100)
	batch := make([]afxdp.Desc, 8)
	var failed error
	allocs := testing.AllocsPerRun(50, func() {
		if _, err := unix.Write(peer.fd, frame); err != nil {
			failed = err
			return
		}
		got := 0
		for tries := 0; got == 0 && tries < 1000; tries++ {
			got, failed = s.Receive(batch)
		}
		if got == 0 {
			failed = errors.New("nothing received")
			return
		}
		sent, _ := s.Transmit(batch[:1])
		u.Free(batch[sent:got]...)
		s.Complete()
	})
	if failed != nil {
		t.Fatal(failed)
	}
	if allocs != 0 {
		t.Errorf("%v allocations per packet", allocs)
	}
}
