package pdcp

import (
	"errors"
	"fmt"
)

// TxStats are what a Transmitter built.
type TxStats struct {
	PDUs  uint64 `json:"pdus"`
	Bytes uint64 `json:"bytes"` // of the PDUs, headers and MAC-I included
}

// Transmitter is a transmitting PDCP entity (38.323 5.2.1).
//
// SNs are assigned when an SDU is protected, which the caller does when it
// sends the PDU to the DU, not when the SDU arrives: an SDU a Queue
// discards before that leaves no gap in the SNs for the receiver to wait
// out.
type Transmitter struct {
	cfg    Config
	hdr    int
	txNext uint64 // TX_NEXT
	stats  TxStats
}

// NewTransmitter returns a transmitting entity with TX_NEXT 0.
func NewTransmitter(cfg Config) (*Transmitter, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	return &Transmitter{cfg: cfg, hdr: cfg.headerLen()}, nil
}

// Headroom is the room Number needs before the SDU: the header length.
func (t *Transmitter) Headroom() int { return t.hdr }

// Tailroom is the room Seal needs after the SDU, within the buffer's
// capacity: the MAC-I when integrity protection is on.
func (t *Transmitter) Tailroom() int { return t.cfg.macLen() }

// Stats returns the counters.
func (t *Transmitter) Stats() TxStats { return t.stats }

// ErrCountExhausted is returned once COUNT 2^32-1 has been used: COUNT must
// not wrap (38.323 5.2.1), the DRB needs new keys first.
var ErrCountExhausted = errors.New("COUNT exhausted")

// Number gives the SDU in buf[off:] the next COUNT and writes the PDU
// header in the Headroom octets before off; it returns where the PDU
// starts and its COUNT. Seal completes the PDU, on this goroutine or
// another: only Number changes the entity.
func (t *Transmitter) Number(buf []byte, off int) (start int, count uint32, err error) {
	switch {
	case off < t.hdr || off > len(buf):
		return off, 0, fmt.Errorf("SDU at offset %d of a %d-octet buffer leaves no room for the %d-octet header", off, len(buf), t.hdr)
	case len(buf)-off > MaxSDUSize:
		return off, 0, fmt.Errorf("SDU of %d octets over the %d maximum", len(buf)-off, MaxSDUSize)
	case cap(buf)-len(buf) < t.cfg.macLen():
		return off, 0, errors.New("no room for the MAC-I after the SDU")
	case t.txNext > maxCount:
		return off, 0, ErrCountExhausted
	}
	count = uint32(t.txNext)
	start = off - t.hdr
	t.cfg.putHeader(buf[start:off], count&(1<<t.cfg.SNSize-1))
	t.txNext++
	t.stats.PDUs++
	t.stats.Bytes += uint64(len(buf) - start + t.cfg.macLen())
	return start, count, nil
}

// Seal protects a PDU that Number numbered count, SDU at buf[off:]: it
// appends the MAC-I of header and SDU within cap(buf) when integrity
// protection is on, then ciphers the SDU (past its SDAP header) and the
// MAC-I. It returns buf extended by the MAC-I. Seals of different PDUs
// may run at once.
func (t *Transmitter) Seal(buf []byte, off int, count uint32) []byte {
	if t.cfg.Integrity != nil {
		mac := t.cfg.Integrity.MAC(count, t.cfg.bearer(), uint8(t.cfg.Direction), buf[off-t.hdr:])
		buf = append(buf, mac[:]...)
	}
	t.cfg.cipher(count, buf[off:])
	return buf
}
