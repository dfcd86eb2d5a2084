package pdcp

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// step is one event of a receive case: a PDU of COUNT count received at
// at, or, with expire, Expire called at at; deliver is what it delivers.
type step struct {
	count   uint32
	expire  bool
	at      time.Duration
	err     error
	deliver []uint32
}

func recv(count uint32, deliver ...uint32) step { return step{count: count, deliver: deliver} }
func recvAt(at time.Duration, count uint32, deliver ...uint32) step {
	return step{count: count, at: at, deliver: deliver}
}
func discard(count uint32, err error) step { return step{count: count, err: err} }
func expire(at time.Duration, deliver ...uint32) step {
	return step{expire: true, at: at, deliver: deliver}
}

const ms = time.Millisecond

func TestReceiveWindow(t *testing.T) {
	for _, tc := range []struct {
		name     string
		snSize   int
		start    uint64 // RX_NEXT and RX_DELIV before the first step
		tReord   time.Duration
		ooo      bool
		steps    []step
		want     RxState
		deadline time.Duration // of t-Reordering after the last step; 0: none
	}{
		{name: "in order", snSize: 12, tReord: 10 * ms,
			steps: []step{recv(0, 0), recv(1, 1), recv(2, 2)},
			want:  RxState{Next: 3, Deliv: 3}},
		{name: "HFN wrap at 4096", snSize: 12, start: 4094, tReord: 10 * ms,
			steps: []step{recv(4094, 4094), recv(4095, 4095), recv(4096, 4096), recv(4097, 4097)},
			want:  RxState{Next: 4098, Deliv: 4098}},
		{name: "HFN wrap at 2^18", snSize: 18, start: 1<<18 - 2, tReord: 10 * ms,
			steps: []step{recv(1<<18-2, 1<<18-2), recv(1<<18-1, 1<<18-1), recv(1<<18, 1<<18), recv(1<<18+1, 1<<18+1)},
			want:  RxState{Next: 1<<18 + 2, Deliv: 1<<18 + 2}},
		{name: "second HFN wrap, 18-bit", snSize: 18, start: 2<<18 - 1, tReord: 10 * ms,
			steps: []step{recv(2 << 18), recv(2<<18-1, 2<<18-1, 2<<18)},
			want:  RxState{Next: 2<<18 + 1, Deliv: 2<<18 + 1, Reord: 2<<18 + 1}},
		{name: "reordered across the SN wrap", snSize: 12, start: 4094, tReord: 10 * ms,
			steps: []step{recv(4096), recv(4095), recv(4094, 4094, 4095, 4096)},
			want:  RxState{Next: 4097, Deliv: 4097, Reord: 4097}},
		{name: "PDU from before HFN 0 is out of window", snSize: 12, tReord: 10 * ms,
			steps: []step{discard(3000, ErrOutOfWindow)},
			want:  RxState{}},
		{name: "older than RX_DELIV, within half the SN space", snSize: 12, start: 5000, tReord: 10 * ms,
			steps: []step{discard(4000, ErrOutOfWindow), discard(4999, ErrOutOfWindow), recv(5000, 5000)},
			want:  RxState{Next: 5001, Deliv: 5001}},
		{name: "more than a window back is taken for a COUNT ahead", snSize: 12, start: 5000, tReord: 10 * ms,
			steps: []step{discard(5000-2049, ErrIntegrity)},
			want:  RxState{Next: 5000, Deliv: 5000}},
		{name: "last COUNT, then nothing", snSize: 12, start: maxCount, tReord: 10 * ms,
			steps: []step{recv(maxCount, maxCount), discard(0, ErrOutOfWindow)},
			want:  RxState{Next: 1 << 32, Deliv: 1 << 32}},
		{name: "duplicate of a buffered PDU", snSize: 12, tReord: 10 * ms,
			steps: []step{recv(2), discard(2, ErrDuplicate), recv(0, 0), recv(1, 1, 2)},
			want:  RxState{Next: 3, Deliv: 3, Reord: 3}},
		{name: "duplicate of a delivered PDU", snSize: 12, tReord: 10 * ms,
			steps: []step{recv(0, 0), discard(0, ErrOutOfWindow)},
			want:  RxState{Next: 1, Deliv: 1}},
		{name: "gap delivered after t-Reordering", snSize: 12, tReord: 10 * ms,
			steps: []step{recv(0, 0), recvAt(1*ms, 2), expire(10 * ms), expire(11*ms, 2)},
			want:  RxState{Next: 3, Deliv: 3, Reord: 3}},
		{name: "late arrival after t-Reordering discarded", snSize: 12, tReord: 10 * ms,
			steps: []step{recv(0, 0), recv(2), expire(10*ms, 2), {count: 1, at: 12 * ms, err: ErrOutOfWindow}, recv(3, 3)},
			want:  RxState{Next: 4, Deliv: 4, Reord: 3}},
		{name: "expiry delivers below RX_REORD and restarts for a later gap", snSize: 12, tReord: 10 * ms,
			steps: []step{recv(0, 0), recv(2), recvAt(5*ms, 4), expire(10*ms, 2)},
			want:  RxState{Next: 5, Deliv: 3, Reord: 5, Reordering: true}, deadline: 20 * ms},
		{name: "expiry delivers what follows RX_REORD without a gap", snSize: 12, tReord: 10 * ms,
			steps: []step{recv(1), recvAt(1*ms, 3), recvAt(2*ms, 2), expire(10*ms, 1, 2, 3)},
			want:  RxState{Next: 4, Deliv: 4, Reord: 2}},
		{name: "restarted timer fills the later gap", snSize: 12, tReord: 10 * ms,
			steps: []step{recv(0, 0), recv(2), recvAt(5*ms, 4), expire(10*ms, 2), recvAt(12*ms, 3, 3, 4)},
			want:  RxState{Next: 5, Deliv: 5, Reord: 5}},
		{name: "gap filled: t-Reordering stops", snSize: 12, tReord: 10 * ms,
			steps: []step{recv(1), recvAt(3*ms, 0, 0, 1), expire(20 * ms)},
			want:  RxState{Next: 2, Deliv: 2, Reord: 2}},
		{name: "partly filled: t-Reordering restarts from RX_NEXT", snSize: 12, tReord: 10 * ms,
			steps: []step{recv(1), recvAt(2*ms, 3), recvAt(4*ms, 0, 0, 1)},
			want:  RxState{Next: 4, Deliv: 2, Reord: 4, Reordering: true}, deadline: 14 * ms},
		{name: "t-Reordering 0 delivers past a gap at once", snSize: 18, tReord: 0,
			steps: []step{recv(2, 2), recv(5, 5)},
			want:  RxState{Next: 6, Deliv: 6, Reord: 6}},
		{name: "t-Reordering infinity waits", snSize: 12, tReord: Infinity,
			steps: []step{recv(1), expire(time.Hour), recv(0, 0, 1)},
			want:  RxState{Next: 2, Deliv: 2, Reord: 2}},
		{name: "out-of-order delivery", snSize: 12, tReord: 10 * ms, ooo: true,
			steps: []step{recv(2, 2), recv(0, 0), discard(2, ErrDuplicate), recv(1, 1)},
			want:  RxState{Next: 3, Deliv: 3, Reord: 3}},
		{name: "out-of-order delivery: t-Reordering moves RX_DELIV", snSize: 12, tReord: 10 * ms, ooo: true,
			steps: []step{recv(1, 1), recv(3, 3), expire(10 * ms), discard(0, ErrOutOfWindow)},
			want:  RxState{Next: 4, Deliv: 2, Reord: 4, Reordering: true}, deadline: 20 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, RxConfig{Config: secured(tc.snSize), TReordering: tc.tReord, OutOfOrderDelivery: tc.ooo}, tc.start)
			for i, s := range tc.steps {
				if s.expire {
					f.rx.Expire(f.at(s.at))
				} else if err := f.rx.Receive(f.pdu(s.count), f.at(s.at)); !errors.Is(err, s.err) {
					t.Fatalf("step %d, COUNT %d: error %v, want %v", i, s.count, err, s.err)
				}
				if got := f.take(); !slices.Equal(got, s.deliver) {
					t.Fatalf("step %d: delivered %v, want %v", i, got, s.deliver)
				}
			}
			if got := f.rx.State(); got != tc.want {
				t.Errorf("state %+v, want %+v", got, tc.want)
			}
			d, ok := f.rx.NextDeadline()
			if want := tc.deadline != 0; ok != want || (ok && !d.Equal(f.at(tc.deadline))) {
				t.Errorf("t-Reordering deadline %v (%v), want %v", d.Sub(f.t0), ok, tc.deadline)
			}
		})
	}
}

func TestReceiveStats(t *testing.T) {
	f := newFixture(t, RxConfig{Config: secured(12), TReordering: 10 * ms, MaxBuffered: 2}, 0)
	pdus := [][]byte{f.pdu(0), f.pdu(2), f.pdu(3), f.pdu(4)}
	bad := f.pdu(1)
	bad[len(bad)-1] ^= 1
	for _, in := range []struct {
		pdu  []byte
		want error
	}{
		{pdu: pdus[0], want: nil},
		{pdu: bytes.Clone(pdus[0]), want: ErrOutOfWindow}, // the original was deciphered in place
		{pdu: pdus[1], want: nil},
		{pdu: bad, want: ErrIntegrity},
		{pdu: pdus[2], want: nil},
		{pdu: pdus[3], want: ErrBufferFull},
		{pdu: []byte{0x80}, want: ErrMalformed},
		{pdu: []byte{0x80, 0, 1, 2, 3}, want: ErrMalformed}, // header, no room for the MAC-I
		{pdu: nil, want: ErrMalformed},
		{pdu: []byte{0x00, 0, 0, 0, 7}, want: nil}, // a status report
	} {
		if err := f.rx.Receive(in.pdu, f.t0); !errors.Is(err, in.want) {
			t.Errorf("PDU %x: %v, want %v", in.pdu, err, in.want)
		}
	}
	f.rx.Expire(f.at(10 * ms))
	want := RxStats{PDUs: 6, Bytes: uint64(6 * len(pdus[0])), Delivered: 3, Control: 1,
		IntegrityFailures: 1, OutOfWindow: 1, Malformed: 3, BufferFull: 1, ReorderingTimeouts: 1}
	if got := f.rx.Stats(); got != want {
		t.Errorf("stats\n%+v, want\n%+v", got, want)
	}
	if len(f.controls) != 1 || !bytes.Equal(f.controls[0], []byte{0, 0, 0, 0, 7}) {
		t.Errorf("control PDUs handed up: %x", f.controls)
	}
	// 4 was dropped for want of room: RX_NEXT did not move to it.
	if s := f.rx.State(); s.Next != 4 || s.Deliv != 4 {
		t.Errorf("state %+v", s)
	}
}

// A transmitter's PDUs, reordered and duplicated, reach the receiver of the
// same DRB as the SDUs sent, in order, across HFN wraps; a receiver with
// any other BEARER or DIRECTION cannot verify one.
func TestTxToRx(t *testing.T) {
	const n = 3 * 4096
	for _, ooo := range []bool{false, true} {
		f := newFixture(t, RxConfig{Config: secured(12), TReordering: Infinity, OutOfOrderDelivery: ooo}, 0)
		pdus := make([][]byte, n)
		for i := range pdus {
			pdus[i] = f.pdu(uint32(i))
		}
		// Shuffle within blocks of 64, well inside the window, and
		// repeat some PDUs.
		rng := rand.New(rand.NewPCG(1, 2))
		var order [][]byte
		for b := 0; b < n; b += 64 {
			block := slices.Clone(pdus[b : b+64])
			rng.Shuffle(len(block), func(i, j int) { block[i], block[j] = block[j], block[i] })
			order = append(order, block...)
			order = append(order, block[0])
		}
		dups := 0
		for _, p := range order {
			err := f.rx.Receive(bytes.Clone(p), f.t0)
			switch {
			case errors.Is(err, ErrDuplicate) || errors.Is(err, ErrOutOfWindow):
				dups++
			case err != nil:
				t.Fatalf("out-of-order %v: %v", ooo, err)
			}
		}
		got := f.take()
		if !ooo && !slices.Equal(got, seq(n)) {
			t.Errorf("in-order delivery: %d SDUs, not 0..%d in order", len(got), n-1)
		}
		slices.Sort(got)
		if !slices.Equal(got, seq(n)) || dups != n/64 {
			t.Errorf("out-of-order %v: delivered %d distinct of %d, %d repeats discarded", ooo, len(slices.Compact(got)), n, dups)
		}
	}

	for _, other := range []Config{
		{SNSize: 12, DRB: 6, Direction: Uplink, Cipher: shaCipher{1}, Integrity: shaMAC{2}},
		{SNSize: 12, DRB: 5, Direction: Downlink, Cipher: shaCipher{1}, Integrity: shaMAC{2}},
	} {
		f := newFixture(t, RxConfig{Config: secured(12)}, 0)
		rx, err := NewReceiver(RxConfig{Config: other, Deliver: func(uint32, []byte) { t.Error("delivered") }})
		if err != nil {
			t.Fatal(err)
		}
		for i := range uint32(8) {
			if err := rx.Receive(f.pdu(i), f.t0); !errors.Is(err, ErrIntegrity) {
				t.Errorf("DRB %d direction %d: %v, want ErrIntegrity", other.DRB, other.Direction, err)
			}
		}
	}
}

func seq(n int) []uint32 {
	s := make([]uint32, n)
	for i := range s {
		s[i] = uint32(i)
	}
	return s
}

func TestStatusReport(t *testing.T) {
	f := newFixture(t, RxConfig{Config: secured(12), TReordering: Infinity}, 0)
	for _, c := range []uint32{0, 2, 3, 5, 11} {
		if err := f.rx.Receive(f.pdu(c), f.t0); err != nil {
			t.Fatal(err)
		}
	}
	// FMC = RX_DELIV = 1; bits for COUNTs 2..10: 1 1 0 1 0 0 0 0 | 0 1
	// (the last bit is COUNT 11, RX_NEXT-1); padded to whole octets.
	want := []byte{0x00, 0, 0, 0, 1, 0b1101_0000, 0b0100_0000}
	got := f.rx.AppendStatusReport(nil)
	if !bytes.Equal(got, want) {
		t.Fatalf("status report %x, want %x", got, want)
	}
	r, err := ParseStatusReport(got)
	if err != nil || r.FMC != 1 {
		t.Fatalf("parsed %+v, %v", r, err)
	}
	for c, want := range map[uint32]bool{0: true, 1: false, 2: true, 3: true, 4: false, 5: true, 6: false, 11: true, 12: false, 100: false} {
		if r.Received(c) != want {
			t.Errorf("Received(%d) = %v", c, !want)
		}
	}
	if again := r.Append([]byte{0xee}); !bytes.Equal(again, append([]byte{0xee}, want...)) {
		t.Errorf("Append = %x", again)
	}

	empty := newFixture(t, RxConfig{Config: secured(18)}, 77)
	if got := empty.rx.AppendStatusReport(nil); !bytes.Equal(got, []byte{0, 0, 0, 0, 77}) {
		t.Errorf("nothing missing: %x", got)
	}

	for _, tc := range []struct {
		name string
		pdu  []byte
	}{
		{name: "empty", pdu: nil},
		{name: "data PDU", pdu: []byte{0x80, 0, 0, 0, 0}},
		{name: "ROHC feedback", pdu: []byte{0x10, 0, 0, 0, 0}},
		{name: "short", pdu: []byte{0x00, 0, 0, 0}},
	} {
		if _, err := ParseStatusReport(tc.pdu); err == nil {
			t.Errorf("%s: parsed", tc.name)
		}
	}
	if typ, err := ControlType([]byte{0x2f}); err != nil || typ != ControlEHCFeedback {
		t.Errorf("ControlType(0x2f) = %d, %v", typ, err)
	}
}

// FuzzReceive feeds arbitrary PDUs to receivers of each SN size, with and
// without security, one of them holding a PDU already: nothing panics and
// the state stays within its window. The input is a sequence of PDUs, each
// preceded by its length, 3 ms apart.
func FuzzReceive(f *testing.F) {
	seed := newFixture(f, RxConfig{Config: secured(12)}, 4000)
	chunks := func(pdus ...[]byte) []byte {
		var in []byte
		for _, p := range pdus {
			in = append(append(in, byte(len(p))), p...)
		}
		return in
	}
	f.Add(chunks(seed.pdu(4000)))
	f.Add(chunks(seed.pdu(4001), seed.pdu(4003), seed.pdu(4097), seed.pdu(4003)))
	f.Add(chunks([]byte{0x80}, []byte{0x00, 1, 2, 3, 4, 5}, []byte{0xbf, 0xff, 0xff, 1}))
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, cfg := range []Config{secured(12), secured(18), {SNSize: 12, DRB: 1}, {SNSize: 18, DRB: 32, Direction: Downlink}} {
			fx := newFixture(t, RxConfig{Config: cfg, TReordering: 5 * ms}, 4000)
			fx.rx.cfg.Deliver = func(uint32, []byte) {} // unprotected PDUs deliver anything
			if err := fx.rx.Receive(fx.pdu(4002), fx.t0); err != nil {
				t.Fatal(err)
			}
			now := fx.t0
			for rest := in; len(rest) > 0; {
				n := min(int(rest[0]), len(rest)-1)
				pdu := bytes.Clone(rest[1 : 1+n])
				rest = rest[1+n:]
				now = now.Add(3 * ms)
				fx.rx.Expire(now)
				_ = fx.rx.Receive(pdu, now)
				s := fx.rx.State()
				if s.Deliv > s.Next || s.Next-s.Deliv > fx.rx.window || s.Deliv < 4000 {
					t.Fatalf("state %+v after %x", s, pdu)
				}
			}
			_ = fx.rx.AppendStatusReport(nil)
		}
	})
}

func BenchmarkReceive(b *testing.B) {
	for _, tc := range []struct {
		name    string
		reorder bool
	}{
		{name: "in-order", reorder: false},
		{name: "pairs-swapped", reorder: true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			// No security: the doubles' SHA-256 would hide what the entity
			// costs, and each round through the 12-bit SNs (4096 PDUs)
			// stands for the next HFN.
			f := newFixture(b, RxConfig{Config: Config{SNSize: 12, DRB: 1}, TReordering: 10 * ms}, 0)
			f.rx.cfg.Deliver = func(uint32, []byte) {}
			const n = 1 << 12
			pdus := make([][]byte, n)
			for i := range pdus {
				pdus[i] = append(f.pdu(uint32(i)), make([]byte, 1300)...)
			}
			if tc.reorder {
				for i := 0; i < n; i += 2 {
					pdus[i], pdus[i+1] = pdus[i+1], pdus[i]
				}
			}
			pdu := make([]byte, 1400)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				pdu = append(pdu[:0], pdus[i%n]...)
				if err := f.rx.Receive(pdu, f.t0); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// Check, Open and Accept apart, as a caller does that has the cryptography
// of a batch done elsewhere: PDUs checked before others were accepted are
// still delivered in order, and a copy checked twice is accepted once (the
// second is older than RX_DELIV by then, as Receive would find it).
func TestReceiveInSteps(t *testing.T) {
	f := newFixture(t, RxConfig{Config: secured(18), TReordering: Infinity}, 0)
	type step struct {
		count uint64
		sdu   []byte
		ok    bool
	}
	var steps []step
	for _, c := range []uint32{1, 0, 1, 2} {
		pdu := f.pdu(c)
		count, data, err := f.rx.Check(pdu)
		if err != nil || !data || count != uint64(c) {
			t.Fatalf("Check of COUNT %d: %d, %v, %v", c, count, data, err)
		}
		sdu, ok := f.rx.Open(pdu, count)
		steps = append(steps, step{count: count, sdu: sdu, ok: ok})
	}
	var errs []error
	for _, s := range steps {
		errs = append(errs, f.rx.Accept(s.count, s.sdu, s.ok, f.at(0)))
	}
	if got := f.take(); !slices.Equal(got, []uint32{0, 1, 2}) {
		t.Errorf("delivered %v, want 0 1 2", got)
	}
	if !errors.Is(errs[2], ErrOutOfWindow) || errs[0] != nil || errs[1] != nil || errs[3] != nil {
		t.Errorf("Accept returned %v, want the second COUNT 1 discarded", errs)
	}
	// A PDU that Open found damaged is refused and counted.
	pdu := f.pdu(3)
	pdu[len(pdu)-1] ^= 1
	count, _, _ := f.rx.Check(pdu)
	sdu, ok := f.rx.Open(pdu, count)
	if err := f.rx.Accept(count, sdu, ok, f.at(0)); !errors.Is(err, ErrIntegrity) || f.rx.Stats().IntegrityFailures != 1 {
		t.Errorf("a damaged PDU: %v, %d integrity failures", err, f.rx.Stats().IntegrityFailures)
	}
}
