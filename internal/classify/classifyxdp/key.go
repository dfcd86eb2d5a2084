// Package classifyxdp loads the classifier (bpf/classify/classify.c) and
// keeps its rules and slices. The classifier matches packets of nested,
// multi-tenant traffic (GTP-U, VXLAN, GENEVE and GRE in any order, RTP and
// H.265 inside) against wildcard rules, and steers them to slices' CPUs.
//
// A packet is reduced to one Key by the parser; a Rule matches any subset
// of the key's fields, each with a value and a mask (or a range of a
// number), and the matching rule of highest priority gives the packet its
// action. A Table keeps the rules as a tuple space: one exact-match table
// per distinct mask, so a lookup costs one probe per mask whatever the
// number of rules, and the number of masks is bounded.
package classifyxdp

import (
	"encoding/binary"
	"fmt"
	"slices"
	"unsafe"
)

// MaxTunnels is the number of tunnel levels the key records.
const MaxTunnels = len(classifyClassifyKey{}.TunnelType)

// Tunnel types of the key's tunnelN fields.
const (
	TunnelNone   = uint8(classifyTunnelTypeTUNNEL_NONE)
	TunnelVXLAN  = uint8(classifyTunnelTypeTUNNEL_VXLAN)
	TunnelGENEVE = uint8(classifyTunnelTypeTUNNEL_GENEVE)
	TunnelGRE    = uint8(classifyTunnelTypeTUNNEL_GRE)
	TunnelGTPU   = uint8(classifyTunnelTypeTUNNEL_GTPU)
)

// TunnelNames name the tunnel types as rules write them: enum tunnel_type's
// names in lower case, without TUNNEL_. TunnelNone has none.
var TunnelNames = [...]string{TunnelVXLAN: "vxlan", TunnelGENEVE: "geneve", TunnelGRE: "gre", TunnelGTPU: "gtpu"}

// kind is how a field's values are written.
type kind int

const (
	number  kind = iota // big-endian unsigned, 1 to 4 octets
	address             // IPv6, or IPv4 as ::ffff:a.b.c.d
)

// Field is a field of the key: its name in rules, and where it sits.
type Field struct {
	Name         string
	Offset, Size int
	kind         kind
	largest      uint64 // of a number: the largest value the parser writes there
}

// KeySize is the size of a Key in octets.
const KeySize = int(unsafe.Sizeof(classifyClassifyKey{}))

// Key is what the parser takes out of a packet, every number big-endian
// as on the wire. Its layout is the data path's struct classify_key.
type Key [KeySize]byte

// Fields are the key's fields, in the order of the layout: where each lies
// in the generated struct classify_key.
var Fields = slices.Concat(
	[]Field{num("tunnels", unsafe.Offsetof(layout.Tunnels), unsafe.Sizeof(layout.Tunnels)).upTo(uint64(MaxTunnels))},              // tunnel levels seen
	upTo(levels("tunnel%d", unsafe.Offsetof(layout.TunnelType), unsafe.Sizeof(layout.TunnelType[0])), uint64(len(TunnelNames)-1)), // Tunnel* type, tunnel1 the outermost level's
	[]Field{
		num("proto", unsafe.Offsetof(layout.Proto), unsafe.Sizeof(layout.Proto)),       // of the innermost IP header
		num("dscp", unsafe.Offsetof(layout.Dscp), unsafe.Sizeof(layout.Dscp)).upTo(63), // 6 bits
		num("qfi", unsafe.Offsetof(layout.Qfi), unsafe.Sizeof(layout.Qfi)).upTo(63),    // 6 bits, from the innermost GTP-U PDU Session Container
	},
	levels("tunnel%dId", unsafe.Offsetof(layout.TunnelId), unsafe.Sizeof(layout.TunnelId[0])), // VNI, GRE key or TEID
	[]Field{
		addr("outerSrc", unsafe.Offsetof(layout.OuterSrc), unsafe.Sizeof(layout.OuterSrc)), // the outermost IP header
		addr("outerDst", unsafe.Offsetof(layout.OuterDst), unsafe.Sizeof(layout.OuterDst)),
		addr("innerSrc", unsafe.Offsetof(layout.InnerSrc), unsafe.Sizeof(layout.InnerSrc)), // the innermost IP header
		addr("innerDst", unsafe.Offsetof(layout.InnerDst), unsafe.Sizeof(layout.InnerDst)),
		num("srcPort", unsafe.Offsetof(layout.SrcPort), unsafe.Sizeof(layout.SrcPort)), // of the innermost UDP, TCP or SCTP header
		num("dstPort", unsafe.Offsetof(layout.DstPort), unsafe.Sizeof(layout.DstPort)),
		num("rtpSsrc", unsafe.Offsetof(layout.RtpSsrc), unsafe.Sizeof(layout.RtpSsrc)),
		num("rtpPayloadType", unsafe.Offsetof(layout.RtpPayloadType), unsafe.Sizeof(layout.RtpPayloadType)).upTo(127), // 7 bits
		num("nalType", unsafe.Offsetof(layout.NalType), unsafe.Sizeof(layout.NalType)).upTo(63),                       // 6 bits: H.265 NAL unit header (RFC 7798)
		num("layerId", unsafe.Offsetof(layout.LayerId), unsafe.Sizeof(layout.LayerId)).upTo(63),                       // 6 bits
		num("temporalId", unsafe.Offsetof(layout.TemporalId), unsafe.Sizeof(layout.TemporalId)).upTo(6),               // TID - 1, TID from 1 to 7
		num("rtp", unsafe.Offsetof(layout.Rtp), unsafe.Sizeof(layout.Rtp)).upTo(1),                                    // 1: the innermost UDP payload is RTP
		num("h265", unsafe.Offsetof(layout.H265), unsafe.Sizeof(layout.H265)).upTo(1),                                 // 1: and an H.265 NAL unit header was read
	},
)

// layout is a struct classify_key, for Fields to find their place in.
var layout classifyClassifyKey

func num(name string, offset, size uintptr) Field {
	f := Field{Name: name, Offset: int(offset), Size: int(size), kind: number}
	f.largest = f.max()
	return f
}

func addr(name string, offset, size uintptr) Field {
	return Field{Name: name, Offset: int(offset), Size: int(size), kind: address}
}

// upTo is f for a parser that writes values up to largest only there.
func (f Field) upTo(largest uint64) Field {
	f.largest = largest
	return f
}

// upTo is fields, each upTo largest.
func upTo(fields []Field, largest uint64) []Field {
	for i := range fields {
		fields[i] = fields[i].upTo(largest)
	}
	return fields
}

// levels are the number fields of an array of one element per tunnel
// level, named by format and the level, 1 for the outermost.
func levels(format string, offset, size uintptr) []Field {
	out := make([]Field, MaxTunnels)
	for i := range out {
		out[i] = num(fmt.Sprintf(format, i+1), offset+uintptr(i)*size, size)
	}
	return out
}

var fieldsByName = func() map[string]Field {
	m := map[string]Field{}
	for _, f := range Fields {
		m[f.Name] = f
	}
	return m
}()

// FieldByName finds a field of the key.
func FieldByName(name string) (Field, bool) {
	f, ok := fieldsByName[name]
	return f, ok
}

// max is the largest value a number field's octets hold.
func (f Field) max() uint64 { return 1<<(8*f.Size) - 1 }

// SetNumber writes a number field.
func (k *Key) SetNumber(f Field, v uint64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	copy(k[f.Offset:f.Offset+f.Size], b[8-f.Size:])
}
