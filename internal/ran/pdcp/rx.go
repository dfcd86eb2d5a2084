package pdcp

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"math/bits"
	"time"
)

// DefaultMaxBuffered is RxConfig.MaxBuffered when left 0.
const DefaultMaxBuffered = 2048

// RxConfig configures a Receiver.
type RxConfig struct {
	Config
	// TReordering is t-Reordering: 0 delivers past a gap at once, Infinity
	// (t-Reordering absent) waits for the missing PDU for ever.
	TReordering time.Duration
	// OutOfOrderDelivery delivers each SDU as it comes (38.331
	// outOfOrderDelivery); duplicates are still discarded.
	OutOfOrderDelivery bool
	// MaxBuffered bounds the SDUs held for reordering, whose copies the
	// Receiver keeps; a PDU beyond it is dropped (ErrBufferFull).
	MaxBuffered int
	// Deliver is given each SDU, in COUNT order unless OutOfOrderDelivery.
	// sdu is valid only until Deliver returns: it is either within the PDU
	// being received, deciphered in place, or a buffer the Receiver reuses.
	// Deliver must not call the Receiver.
	Deliver func(count uint32, sdu []byte)
	// Control, if not nil, is given each control PDU (D/C = 0), untouched
	// and valid until it returns.
	Control func(pdu []byte)
}

// RxStats are what a Receiver did with its PDUs.
type RxStats struct {
	PDUs      uint64 `json:"pdus"`  // data PDUs received, discarded ones included
	Bytes     uint64 `json:"bytes"` // of those PDUs
	Delivered uint64 `json:"delivered"`
	Control   uint64 `json:"control"` // control PDUs handed up

	IntegrityFailures uint64 `json:"integrity_failures"`
	Duplicates        uint64 `json:"duplicates"`
	OutOfWindow       uint64 `json:"out_of_window"`
	Malformed         uint64 `json:"malformed"`
	BufferFull        uint64 `json:"buffer_full"`

	ReorderingTimeouts uint64 `json:"reordering_timeouts"` // t-Reordering expiries
}

// RxState holds the state variables of 38.323 7.1. COUNTs are 64-bit here
// because RX_NEXT and RX_DELIV reach 2^32 after COUNT 2^32-1.
type RxState struct {
	Next, Deliv, Reord uint64 // RX_NEXT, RX_DELIV, RX_REORD
	Reordering         bool   // t-Reordering is running
}

// Receiver is a receiving PDCP entity (38.323 5.2.2).
type Receiver struct {
	cfg      RxConfig
	hdr, mac int
	window   uint64 // Window_Size
	st       RxState
	deadline time.Time // of t-Reordering; zero when it runs for ever
	buf      reception
	stats    RxStats
}

// NewReceiver returns a receiving entity with RX_NEXT and RX_DELIV 0.
func NewReceiver(cfg RxConfig) (*Receiver, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.TReordering < 0 {
		return nil, fmt.Errorf("t-Reordering %v is negative", cfg.TReordering)
	}
	if cfg.MaxBuffered < 0 {
		return nil, fmt.Errorf("MaxBuffered %d is negative", cfg.MaxBuffered)
	}
	if cfg.MaxBuffered == 0 {
		cfg.MaxBuffered = DefaultMaxBuffered
	}
	if cfg.Deliver == nil {
		return nil, errors.New("no Deliver function")
	}
	return &Receiver{
		cfg:    cfg,
		hdr:    cfg.headerLen(),
		mac:    cfg.macLen(),
		window: 1 << (cfg.SNSize - 1),
	}, nil
}

// Stats returns the counters.
func (r *Receiver) Stats() RxStats { return r.stats }

// Receive handles a PDU from lower layers at now (38.323 5.2.2.1),
// deciphering it in place. A control PDU goes to RxConfig.Control. A data
// PDU's SDU is delivered at once or held for reordering, and so may be SDUs
// held before it; a PDU discarded is counted and reported by one of the
// package's errors (ErrMalformed wrapped with the reason).
//
// Receive is Check, Open and Accept, which a caller may run apart to have
// the cryptography of many PDUs done at once, elsewhere. The discards that
// COUNT alone decides (too old, duplicate) come before deciphering and
// integrity verification rather than after as in 5.2.2.1: replays then
// cost no cryptography, and the PDU is discarded all the same.
func (r *Receiver) Receive(pdu []byte, now time.Time) error {
	count, data, err := r.Check(pdu)
	if err != nil || !data {
		return err
	}
	sdu, ok := r.Open(pdu, count)
	return r.Accept(count, sdu, ok, now)
}

// Check counts a PDU and reads its COUNT, or says why it is discarded; data
// is false for a control PDU, which it hands to RxConfig.Control.
func (r *Receiver) Check(pdu []byte) (count uint64, data bool, err error) {
	if len(pdu) == 0 {
		r.stats.Malformed++
		return 0, false, fmt.Errorf("%w: empty", ErrMalformed)
	}
	if pdu[0]&dataBit == 0 {
		r.stats.Control++
		if r.cfg.Control != nil {
			r.cfg.Control(pdu)
		}
		return 0, false, nil
	}
	if len(pdu) < r.hdr+r.mac {
		r.stats.Malformed++
		return 0, false, fmt.Errorf("%w: %d octets, shorter than its header and MAC-I (%d)", ErrMalformed, len(pdu), r.hdr+r.mac)
	}
	r.stats.PDUs++
	r.stats.Bytes += uint64(len(pdu))
	count, ok := r.rcvdCount(r.cfg.headerSN(pdu))
	if !ok {
		r.stats.OutOfWindow++
		return 0, false, ErrOutOfWindow
	}
	if r.duplicate(count) {
		r.stats.Duplicates++
		return 0, false, ErrDuplicate
	}
	return count, true, nil
}

func (r *Receiver) duplicate(count uint64) bool { return count < r.st.Next && r.buf.holds(count) }

// Open deciphers a data PDU of COUNT count in place and verifies its MAC-I,
// and returns its SDU and whether it is intact. It changes nothing in the
// entity: Opens of different PDUs may run at once, on any goroutine.
func (r *Receiver) Open(pdu []byte, count uint64) (sdu []byte, ok bool) {
	body := pdu[r.hdr:]
	r.cfg.cipher(uint32(count), body)
	if r.mac == 0 {
		return body, true
	}
	end := len(pdu) - MACLen
	xmac := r.cfg.Integrity.MAC(uint32(count), r.cfg.bearer(), uint8(r.cfg.Direction), pdu[:end])
	return pdu[r.hdr:end], subtle.ConstantTimeCompare(xmac[:], pdu[end:]) == 1
}

// Accept takes the SDU of COUNT count that Open returned, intact or not,
// at now: it is stored or delivered unless COUNT is now too old or a
// duplicate, the state having moved since Check.
func (r *Receiver) Accept(count uint64, sdu []byte, intact bool, now time.Time) error {
	switch {
	case !intact:
		r.stats.IntegrityFailures++
		return ErrIntegrity
	case count < r.st.Deliv:
		r.stats.OutOfWindow++
		return ErrOutOfWindow
	case r.duplicate(count):
		r.stats.Duplicates++
		return ErrDuplicate
	}
	return r.accept(count, sdu, now)
}

// rcvdCount is RCVD_COUNT (38.323 5.2.2.1): the HFN of RX_DELIV, one more
// or one less when the SN is over half the SN space away from RX_DELIV's.
// It is false when that COUNT is below RX_DELIV, below 0 or over 2^32-1.
func (r *Receiver) rcvdCount(sn uint32) (uint64, bool) {
	hfn, delivSN := r.st.Deliv>>r.cfg.SNSize, r.st.Deliv&(1<<r.cfg.SNSize-1)
	switch {
	case uint64(sn)+r.window < delivSN:
		hfn++
	case uint64(sn) >= delivSN+r.window:
		if hfn == 0 {
			return 0, false
		}
		hfn--
	}
	count := hfn<<r.cfg.SNSize | uint64(sn)
	return count, count >= r.st.Deliv && count <= maxCount
}

// accept stores and delivers an SDU that was not discarded and starts or
// stops t-Reordering (38.323 5.2.2.1).
func (r *Receiver) accept(count uint64, sdu []byte, now time.Time) error {
	switch {
	case r.cfg.OutOfOrderDelivery:
		r.deliver(count, sdu)
		if count != r.st.Deliv {
			// Kept as received to discard duplicates and advance RX_DELIV.
			r.buf.mark(count, r.st.Deliv, r.window)
		}
	case count != r.st.Deliv:
		if r.buf.stored >= r.cfg.MaxBuffered {
			r.stats.BufferFull++
			return ErrBufferFull
		}
		r.buf.store(count, r.st.Deliv, r.window, sdu)
	default:
		r.deliver(count, sdu)
	}
	if count >= r.st.Next {
		r.st.Next = count + 1
	}
	if count == r.st.Deliv {
		r.st.Deliv++
		r.deliverConsecutive()
	}
	if r.st.Reordering && r.st.Deliv >= r.st.Reord {
		r.st.Reordering = false
	}
	if !r.st.Reordering && r.st.Deliv < r.st.Next {
		r.startReordering(now)
	}
	return nil
}

func (r *Receiver) deliver(count uint64, sdu []byte) {
	r.stats.Delivered++
	r.cfg.Deliver(uint32(count), sdu)
}

// deliverConsecutive delivers the SDUs held from RX_DELIV on, up to the
// first COUNT not received, and moves RX_DELIV there.
func (r *Receiver) deliverConsecutive() {
	for r.buf.holds(r.st.Deliv) {
		r.pass(r.st.Deliv)
		r.st.Deliv++
	}
}

// pass delivers the SDU held for count, unless it was delivered already
// out of order, and frees its place.
func (r *Receiver) pass(count uint64) {
	s := r.buf.slot(count)
	if s == nil {
		return
	}
	if s.state == stored {
		r.deliver(count, s.sdu)
	}
	r.buf.release(s)
}

// startReordering sets RX_REORD to RX_NEXT and starts t-Reordering.
func (r *Receiver) startReordering(now time.Time) {
	r.st.Reord, r.st.Reordering = r.st.Next, true
	switch r.cfg.TReordering {
	case Infinity:
		r.deadline = time.Time{}
	case 0:
		r.reorderingExpired(now)
	default:
		r.deadline = now.Add(r.cfg.TReordering)
	}
}

// NextDeadline is when t-Reordering expires; false when it is not running
// or runs for ever.
func (r *Receiver) NextDeadline() (time.Time, bool) {
	return r.deadline, r.st.Reordering && !r.deadline.IsZero()
}

// Expire runs the expiry of t-Reordering if it is due at now.
func (r *Receiver) Expire(now time.Time) {
	if d, ok := r.NextDeadline(); ok && !now.Before(d) {
		r.reorderingExpired(now)
	}
}

// reorderingExpired delivers everything held below RX_REORD and what
// follows it without a gap, moves RX_DELIV past them and restarts
// t-Reordering if PDUs are still missing (38.323 5.2.2.2).
func (r *Receiver) reorderingExpired(now time.Time) {
	r.st.Reordering = false
	r.stats.ReorderingTimeouts++
	for ; r.st.Deliv < r.st.Reord; r.st.Deliv++ {
		r.pass(r.st.Deliv)
	}
	r.deliverConsecutive()
	if r.st.Deliv < r.st.Next {
		r.startReordering(now)
	}
}

// The reception buffer holds the SDUs received out of order and, with
// out-of-order delivery, marks those delivered before RX_DELIV reaches
// them. It is a ring indexed by COUNT, only as large as the span between
// RX_DELIV and RX_NEXT has needed (at most Window_Size, which that span
// never exceeds), so that a DRB that is rarely reordered costs little.
type reception struct {
	slots  []slot // a power of two long; the COUNTs held are in [RX_DELIV, RX_NEXT)
	stored int    // slots holding an SDU
	free   [][]byte
}

// minSDUBuffer is the smallest buffer made for a held SDU, so that most
// are reused whatever the size of the next one.
const minSDUBuffer = 2048

type slotState uint8

const (
	empty slotState = iota
	stored
	delivered // out of order
)

type slot struct {
	count uint64
	state slotState
	sdu   []byte
}

// slot returns the slot of count, nil if count was not received.
func (b *reception) slot(count uint64) *slot {
	if len(b.slots) == 0 {
		return nil
	}
	s := &b.slots[count&uint64(len(b.slots)-1)]
	if s.state == empty || s.count != count {
		return nil
	}
	return s
}

func (b *reception) holds(count uint64) bool { return b.slot(count) != nil }

// store keeps a copy of sdu for count, deliv being RX_DELIV.
func (b *reception) store(count, deliv, window uint64, sdu []byte) {
	var copied []byte
	if n := len(b.free); n > 0 {
		copied, b.free = b.free[n-1], b.free[:n-1]
	}
	if cap(copied) < len(sdu) {
		copied = make([]byte, 0, max(len(sdu), minSDUBuffer))
	}
	s := b.place(count, deliv, window)
	*s = slot{count: count, state: stored, sdu: append(copied[:0], sdu...)}
	b.stored++
}

// mark records count as delivered out of order.
func (b *reception) mark(count, deliv, window uint64) {
	*b.place(count, deliv, window) = slot{count: count, state: delivered}
}

// place returns the slot for count, growing the ring to reach it.
func (b *reception) place(count, deliv, window uint64) *slot {
	if span := count - deliv + 1; span > uint64(len(b.slots)) {
		size := max(uint64(1)<<bits.Len64(span-1), 64)
		grown := make([]slot, min(size, window))
		for _, s := range b.slots {
			if s.state != empty {
				grown[s.count&uint64(len(grown)-1)] = s
			}
		}
		b.slots = grown
	}
	return &b.slots[count&uint64(len(b.slots)-1)]
}

// release empties s, keeping its SDU's buffer for a later store.
func (b *reception) release(s *slot) {
	if s.state == stored {
		b.free = append(b.free, s.sdu)
		b.stored--
	}
	*s = slot{}
}
