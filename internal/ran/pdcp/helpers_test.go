package pdcp

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"
)

// Test doubles for the security algorithms: keyed SHA-256 of COUNT, BEARER
// and DIRECTION (and the message, for the MAC), so that a PDU protected
// with one input is unreadable or fails verification with any other.

type shaCipher struct{ key byte }

func (c shaCipher) XORKeyStream(count uint32, bearer, direction uint8, dst, src []byte) {
	var block [sha256.Size]byte
	for i := range src {
		if i%sha256.Size == 0 {
			in := binary.BigEndian.AppendUint32([]byte{c.key, bearer, direction}, count)
			block = sha256.Sum256(binary.BigEndian.AppendUint32(in, uint32(i)))
		}
		dst[i] = src[i] ^ block[i%sha256.Size]
	}
}

type shaMAC struct{ key byte }

func (m shaMAC) MAC(count uint32, bearer, direction uint8, message []byte) [4]byte {
	in := binary.BigEndian.AppendUint32([]byte{m.key, bearer, direction}, count)
	sum := sha256.Sum256(append(in, message...))
	return [4]byte(sum[:4])
}

// payload is the SDU sent with COUNT count, so that a delivery shows which
// PDU it came from.
func payload(count uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte("sdu of count "), count)
}

// secured is a DRB with ciphering and integrity protection.
func secured(snSize int) Config {
	return Config{SNSize: snSize, DRB: 5, Direction: Uplink, Cipher: shaCipher{1}, Integrity: shaMAC{2}}
}

// fixture is a transmitter and a receiver of the same DRB; the receiver
// checks that each SDU it delivers is the payload of its COUNT.
type fixture struct {
	tb        testing.TB
	tx        *Transmitter
	rx        *Receiver
	delivered []uint32
	controls  [][]byte
	t0        time.Time
}

func newFixture(tb testing.TB, cfg RxConfig, start uint64) *fixture {
	tb.Helper()
	f := &fixture{tb: tb, t0: time.Unix(1000, 0)}
	var err error
	if f.tx, err = NewTransmitter(cfg.Config); err != nil {
		tb.Fatal(err)
	}
	cfg.Deliver = func(count uint32, sdu []byte) {
		if !bytes.Equal(sdu, payload(count)) {
			tb.Errorf("COUNT %d delivered as %q", count, sdu)
		}
		f.delivered = append(f.delivered, count)
	}
	cfg.Control = func(pdu []byte) { f.controls = append(f.controls, bytes.Clone(pdu)) }
	if f.rx, err = NewReceiver(cfg); err != nil {
		tb.Fatal(err)
	}
	f.rx.st.Next, f.rx.st.Deliv = start, start
	return f
}

// pdu is the PDU the transmitter builds for COUNT count.
func (f *fixture) pdu(count uint32) []byte {
	f.tb.Helper()
	f.tx.txNext = uint64(count)
	hdr, sdu := f.tx.Headroom(), payload(count)
	buf := make([]byte, hdr+len(sdu), hdr+len(sdu)+f.tx.Tailroom())
	copy(buf[hdr:], sdu)
	out, start, got, err := f.tx.Protect(buf, hdr)
	if err != nil || got != count {
		f.tb.Fatalf("Protect for COUNT %d: COUNT %d, %v", count, got, err)
	}
	return out[start:]
}

func (f *fixture) at(d time.Duration) time.Time { return f.t0.Add(d) }

// take returns the COUNTs delivered since the last call.
func (f *fixture) take() []uint32 {
	d := f.delivered
	f.delivered = nil
	return d
}

// Next is TX_NEXT, the COUNT the next PDU gets.
func (t *Transmitter) Next() uint32 { return uint32(t.txNext) }

// Protect turns the SDU in buf[off:] into a PDCP Data PDU in place (38.323
// 5.2.1): Number, then Seal.
func (t *Transmitter) Protect(buf []byte, off int) (out []byte, start int, count uint32, err error) {
	if start, count, err = t.Number(buf, off); err != nil {
		return buf, off, 0, err
	}
	return t.Seal(buf, off, count), start, count, nil
}

// State returns the state variables.
func (r *Receiver) State() RxState { return r.st }

// PDCP status reports, which the CU-UP does not send (its Receiver hands
// control PDUs up untouched): the tests read the reception buffer's state
// through them.

// Control PDU types (38.323 6.3.8), from the PDU Type field.
const (
	ControlStatusReport = 0 // PDCP status report
	ControlROHCFeedback = 1 // interspersed ROHC feedback
	ControlEHCFeedback  = 2 // EHC feedback
)

const (
	controlTypeShift = 4    // the PDU Type follows the D/C bit
	controlTypeBits  = 0x07 // and has 3 bits
	statusHeaderLen  = 5    // D/C, PDU Type, R; FMC
)

// ControlType is the PDU Type of a control PDU (D/C = 0).
func ControlType(pdu []byte) (uint8, error) {
	if len(pdu) == 0 {
		return 0, errors.New("empty PDU")
	}
	if pdu[0]&dataBit != 0 {
		return 0, errors.New("a data PDU, not a control PDU")
	}
	return pdu[0] >> controlTypeShift & controlTypeBits, nil
}

// StatusReport is a PDCP status report (38.323 6.2.3.1): every COUNT below
// FMC was received, FMC was not, and bit i of Bitmap (the most significant
// bit of the first octet being bit 0) is 1 when FMC+1+i was.
type StatusReport struct {
	FMC    uint32
	Bitmap []byte
}

// ParseStatusReport reads a status report control PDU; Bitmap is within pdu.
func ParseStatusReport(pdu []byte) (StatusReport, error) {
	t, err := ControlType(pdu)
	if err != nil {
		return StatusReport{}, err
	}
	if t != ControlStatusReport {
		return StatusReport{}, fmt.Errorf("control PDU type %d is no status report", t)
	}
	if len(pdu) < statusHeaderLen {
		return StatusReport{}, fmt.Errorf("status report of %d octets, shorter than its %d-octet header", len(pdu), statusHeaderLen)
	}
	return StatusReport{FMC: binary.BigEndian.Uint32(pdu[1:statusHeaderLen]), Bitmap: pdu[statusHeaderLen:]}, nil
}

// Received tells whether the report says count was received.
func (s StatusReport) Received(count uint32) bool {
	if count < s.FMC {
		return true
	}
	i := uint64(count) - uint64(s.FMC) - 1
	if count == s.FMC || i >= 8*uint64(len(s.Bitmap)) {
		return false
	}
	return s.Bitmap[i/8]&(0x80>>(i%8)) != 0
}

// Append appends the report as a control PDU.
func (s StatusReport) Append(dst []byte) []byte {
	return append(appendStatusHeader(dst, s.FMC), s.Bitmap...)
}

func appendStatusHeader(dst []byte, fmc uint32) []byte {
	dst = append(dst, ControlStatusReport<<controlTypeShift)
	return binary.BigEndian.AppendUint32(dst, fmc)
}

// AppendStatusReport appends the PDCP status report of the entity's state
// (38.323 5.4.1): FMC is RX_DELIV and the bitmap marks the COUNTs received
// after it, up to RX_NEXT-1, within the 9000-octet PDU limit.
func (r *Receiver) AppendStatusReport(dst []byte) []byte {
	n := uint64(0) // bits of the bitmap
	if r.st.Next > r.st.Deliv {
		n = min(r.st.Next-r.st.Deliv-1, 8*(MaxSDUSize-statusHeaderLen))
	}
	dst = appendStatusHeader(dst, uint32(r.st.Deliv))
	start := len(dst)
	dst = append(dst, make([]byte, (n+7)/8)...)
	for i := uint64(0); i < n; i++ {
		if r.buf.holds(r.st.Deliv + 1 + i) {
			dst[start+int(i/8)] |= 0x80 >> (i % 8)
		}
	}
	return dst
}
