package pdcp

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
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
