package n4state

import (
	"encoding/binary"
	"errors"
	"math"
	"net/netip"
	"time"
)

// The values of the ops are written with these: integers as varints, so
// that the small numbers most fields hold take an octet or two.

// Enc appends values to B.
type Enc struct{ B []byte }

func (e *Enc) Uint(v uint64) { e.B = binary.AppendUvarint(e.B, v) }
func (e *Enc) Int(v int64)   { e.B = binary.AppendVarint(e.B, v) }
func (e *Enc) Byte(v byte)   { e.B = append(e.B, v) }

func (e *Enc) Bool(v bool) {
	if v {
		e.Byte(1)
	} else {
		e.Byte(0)
	}
}

func (e *Enc) Bytes(v []byte) {
	e.Uint(uint64(len(v)))
	e.B = append(e.B, v...)
}

func (e *Enc) String(v string) {
	e.Uint(uint64(len(v)))
	e.B = append(e.B, v...)
}

// Addr writes an address as its octets: none for the zero Addr.
func (e *Enc) Addr(a netip.Addr) {
	b, _ := a.MarshalBinary() // cannot fail
	e.Bytes(b)
}

func (e *Enc) AddrPort(a netip.AddrPort) {
	e.Addr(a.Addr())
	e.Uint(uint64(a.Port()))
}

// Prefix writes a prefix; the invalid Prefix reads back as one.
func (e *Enc) Prefix(p netip.Prefix) {
	e.Addr(p.Addr())
	e.Int(int64(p.Bits()))
}

// Time writes a time to the nanosecond; the zero Time reads back as zero.
func (e *Enc) Time(t time.Time) {
	if t.IsZero() {
		e.Int(math.MinInt64)
		return
	}
	e.Int(t.UnixNano())
}

func (e *Enc) Duration(d time.Duration) { e.Int(int64(d)) }

// ErrCorrupt is what Dec reports of a value it cannot read.
var ErrCorrupt = errors.New("corrupt value")

// Dec reads values back in the order Enc wrote them. The first value it
// cannot read sets Err; every read after that returns zero.
type Dec struct {
	b   []byte
	Err error
}

// NewDec reads b.
func NewDec(b []byte) *Dec { return &Dec{b: b} }

// Done says every octet was read, and read well.
func (d *Dec) Done() error {
	if d.Err == nil && len(d.b) != 0 {
		d.Err = ErrCorrupt
	}
	return d.Err
}

func (d *Dec) fail() { d.Fail(ErrCorrupt) }

// Fail stops the reading with err, for a value the caller finds wrong.
func (d *Dec) Fail(err error) {
	if d.Err == nil {
		d.Err = err
	}
	d.b = nil
}

// Len is the number of octets left.
func (d *Dec) Len() int { return len(d.b) }

func (d *Dec) Uint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *Dec) Int() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

// Uint32, Uint16 and Uint8 read a Uint that must fit.
func (d *Dec) Uint32() uint32 { return uint32(d.bounded(math.MaxUint32)) }
func (d *Dec) Uint16() uint16 { return uint16(d.bounded(math.MaxUint16)) }
func (d *Dec) Uint8() uint8   { return uint8(d.bounded(math.MaxUint8)) }

func (d *Dec) bounded(limit uint64) uint64 {
	v := d.Uint()
	if v > limit {
		d.fail()
		return 0
	}
	return v
}

func (d *Dec) Byte() byte {
	if len(d.b) == 0 {
		d.fail()
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *Dec) Bool() bool {
	switch d.Byte() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail()
	return false
}

// Bytes returns a slice of the input, not a copy.
func (d *Dec) Bytes() []byte {
	n := d.Uint()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *Dec) String() string { return string(d.Bytes()) }

func (d *Dec) Addr() netip.Addr {
	var a netip.Addr
	if err := a.UnmarshalBinary(d.Bytes()); err != nil {
		d.fail()
	}
	return a
}

func (d *Dec) AddrPort() netip.AddrPort {
	a := d.Addr()
	return netip.AddrPortFrom(a, d.Uint16())
}

func (d *Dec) Prefix() netip.Prefix {
	a, bits := d.Addr(), d.Int()
	if !a.IsValid() {
		return netip.Prefix{}
	}
	if bits < 0 || bits > int64(a.BitLen()) {
		d.fail()
		return netip.Prefix{}
	}
	return netip.PrefixFrom(a, int(bits))
}

func (d *Dec) Time() time.Time {
	v := d.Int()
	if v == math.MinInt64 {
		return time.Time{}
	}
	return time.Unix(0, v)
}

func (d *Dec) Duration() time.Duration { return time.Duration(d.Int()) }
