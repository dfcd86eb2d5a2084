package sdf

import (
	"encoding/binary"
	"fmt"
)

// Flags of the SDF Filter IE, saying which fields follow (TS 29.244 §8.2.5).
const (
	flagFD  = 1 << iota // Flow Description
	flagTTC             // ToS Traffic Class
	flagSPI             // Security Parameter Index
	flagFL              // Flow Label
	flagBID             // Bidirectional SDF Filter: SDF Filter ID
)

// ParseIE decodes the value of an SDF Filter IE (TS 29.244 §8.2.5), the
// octets past the IE type and length. Octets past the last field are
// ignored, as later releases may append fields.
func ParseIE(b []byte) (Filter, error) {
	r := ieReader{rest: b}
	flags := r.next(2, "flags")[0] // the second octet is spare
	var f Filter
	if flags&flagFD != 0 {
		n := binary.BigEndian.Uint16(r.next(2, "flow description length"))
		desc := r.next(int(n), "flow description")
		if r.err == nil {
			var err error
			if f, err = Parse(string(desc)); err != nil {
				return Filter{}, err
			}
		}
	}
	if flags&flagTTC != 0 {
		v := r.next(2, "ToS traffic class")
		f.TOS = TOS{Value: v[0], Mask: v[1]}
	}
	if flags&flagSPI != 0 {
		f.SPI = binary.BigEndian.Uint32(r.next(4, "security parameter index"))
	}
	if flags&flagFL != 0 {
		v := r.next(3, "flow label")
		// The label is the low 20 bits; the others are spare.
		f.FlowLabel = uint32(v[0]&0x0f)<<16 | uint32(v[1])<<8 | uint32(v[2])
		f.HasFlowLabel = true
	}
	if flags&flagBID != 0 {
		f.ID = binary.BigEndian.Uint32(r.next(4, "SDF filter ID"))
		f.Bidirectional = true
	}
	if r.err != nil {
		return Filter{}, r.err
	}
	return f, nil
}

// ieReader hands out the fields of an IE in turn.
type ieReader struct {
	rest []byte
	err  error
}

// next consumes n octets. Once the IE runs short it records why and
// returns zeros, so that the caller checks err once at the end.
func (r *ieReader) next(n int, field string) []byte {
	if r.err == nil && len(r.rest) < n {
		r.err = fmt.Errorf("SDF filter IE: %s needs %d octets, %d left", field, n, len(r.rest))
	}
	if r.err != nil {
		return make([]byte, n)
	}
	v := r.rest[:n]
	r.rest = r.rest[n:]
	return v
}
