// Package nru encodes and decodes the frames of the NR user plane protocol
// (TS 38.425) that the CU-UP and the DU exchange on F1-U: DL USER DATA
// (PDU Type 0), which the CU-UP sends, and DL DATA DELIVERY STATUS (PDU
// Type 1), which it decodes from the DU; ASSISTANCE INFORMATION (PDU
// Type 2) is only recognised.
//
// A frame travels as the content of a GTP-U NR RAN Container extension
// header (TS 29.281 5.2.2), which package gtpu writes and reads: a length
// octet counting 4-octet units, the frame, and the type of the next
// extension header. Len, Put and Decode deal with the frame alone, padded
// so that the whole extension header is a multiple of 4 octets. Nothing
// allocates per frame: Put writes into the caller's buffer, and Decode
// reuses the slices of the value it fills.
package nru

import (
	"errors"
	"fmt"
)

// ExtensionType is the GTP-U extension header type of the NR RAN Container.
const ExtensionType = 0x84

// PDUType is the PDU Type field, the high 4 bits of a frame's first octet.
type PDUType uint8

// The PDU types of 38.425 5.5.3.
const (
	TypeDLUserData            PDUType = 0
	TypeDLDataDeliveryStatus  PDUType = 1
	TypeAssistanceInformation PDUType = 2
)

func (t PDUType) String() string {
	switch t {
	case TypeDLUserData:
		return "DL USER DATA"
	case TypeDLDataDeliveryStatus:
		return "DL DATA DELIVERY STATUS"
	case TypeAssistanceInformation:
		return "ASSISTANCE INFORMATION"
	}
	return fmt.Sprintf("PDU type %d", uint8(t))
}

// TypeOf returns the PDU type of a frame, whichever it is.
func TypeOf(frame []byte) (PDUType, error) {
	if len(frame) == 0 {
		return 0, errors.New("empty NR-U frame")
	}
	return PDUType(frame[0] >> 4), nil
}

// MaxSN is the largest NR-U SN and the largest NR PDCP SN field value: both
// fields have 3 octets.
const MaxSN = 1<<24 - 1

// padded is the frame length for n octets of fields: padding makes it 4k-2
// octets so that with the extension header's length and next type octets
// it fills whole 4-octet units (38.425 5.5.2).
func padded(n int) int { return n + (4-(n+2)%4)%4 }

// maxFrame is the largest frame an NR RAN Container carries: its length
// octet counts up to 255 units of 4 octets, its own and the next type's
// among them.
const maxFrame = 255*4 - 2

// checkRoom refuses to write a frame of n octets of type typ into a buffer
// of size octets, or one no NR RAN Container can carry.
func checkRoom(typ PDUType, n, size int) error {
	switch {
	case n > maxFrame:
		return fmt.Errorf("%v frame of %d octets over the %d an NR RAN Container carries", typ, n, maxFrame)
	case size < n:
		return fmt.Errorf("%d octets for a %d-octet %v frame", size, n, typ)
	}
	return nil
}

// SNRange is a range of sequence numbers, both ends included.
type SNRange struct{ Start, End uint32 }

// writer puts fields into a frame already checked to be large enough.
type writer struct {
	b []byte
	n int
}

func (w *writer) u8(v uint8) { w.b[w.n] = v; w.n++ }

func (w *writer) u24(v uint32) {
	w.b[w.n], w.b[w.n+1], w.b[w.n+2] = byte(v>>16), byte(v>>8), byte(v)
	w.n += 3
}

// pad zeroes the padding up to the frame's end and returns its length.
func (w *writer) pad(frameLen int) int {
	clear(w.b[w.n:frameLen])
	return frameLen
}

// reader takes fields from a frame of type typ; the first field missing
// sets err, which names it, and every read after it returns 0.
type reader struct {
	typ PDUType
	b   []byte
	err error
}

// flags reads the two octets of PDU type and flags that start every frame
// and checks the type.
func (r *reader) flags() (f1, f2 uint8, err error) {
	f1, f2 = r.u8("the first flags"), r.u8("the second flags")
	if r.err == nil && PDUType(f1>>4) != r.typ {
		return 0, 0, fmt.Errorf("%v, not %v", PDUType(f1>>4), r.typ)
	}
	return f1, f2, nil
}

func (r *reader) take(n int, field string) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b) < n {
		r.err = fmt.Errorf("%v truncated at %s (%d octets needed, %d left)", r.typ, field, n, len(r.b))
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8(field string) uint8 {
	if v := r.take(1, field); v != nil {
		return v[0]
	}
	return 0
}

func (r *reader) u24(field string) uint32 {
	if v := r.take(3, field); v != nil {
		return uint32(v[0])<<16 | uint32(v[1])<<8 | uint32(v[2])
	}
	return 0
}

func (r *reader) u32(field string) uint32 {
	if v := r.take(4, field); v != nil {
		return uint32(v[0])<<24 | uint32(v[1])<<16 | uint32(v[2])<<8 | uint32(v[3])
	}
	return 0
}

// ranges reads a count octet and that many ranges of two 3-octet SNs into
// dst[:0]. The count is at least 1: the flag of the list says it is there.
func (r *reader) ranges(dst []SNRange, countField, field string) []SNRange {
	dst = dst[:0]
	n := int(r.u8(countField))
	if r.err == nil && n == 0 {
		r.err = fmt.Errorf("%v: %s is 0", r.typ, countField)
	}
	for range n {
		start := r.u24(field)
		end := r.u24(field)
		if r.err != nil {
			break
		}
		dst = append(dst, SNRange{start, end})
	}
	return dst
}

// checkSNs reports the first of values that does not fit in 3 octets.
func checkSNs(typ PDUType, values ...uint32) error {
	for _, v := range values {
		if v > MaxSN {
			return fmt.Errorf("%v: SN %d does not fit in 3 octets", typ, v)
		}
	}
	return nil
}

// octets is n for a field that is present, else 0.
func octets(present bool, n int) int {
	if present {
		return n
	}
	return 0
}

// flag is bit for a flag that is set, else 0.
func flag(b bool, bit uint8) uint8 {
	if b {
		return bit
	}
	return 0
}
