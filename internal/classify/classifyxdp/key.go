// Package classify matches packets of nested, multi-tenant traffic (GTP-U,
// VXLAN, GENEVE and GRE in any order, RTP and H.265 inside) against
// wildcard rules.
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
}

// KeySize is the size of a Key in octets.
const KeySize = int(unsafe.Sizeof(classifyClassifyKey{}))

// Key is what the parser takes out of a packet, every number big-endian
// as on the wire. Its layout is the data path's struct classify_key.
type Key [KeySize]byte

// Fields are the key's fields, in the order of the layout.
var Fields = []Field{
	{"tunnels", 0, 1, number}, // tunnel levels seen, 0 to MaxTunnels
	{"tunnel1", 1, 1, number}, // Tunnel* type of the outermost level
	{"tunnel2", 2, 1, number},
	{"tunnel3", 3, 1, number},
	{"tunnel4", 4, 1, number},
	{"proto", 5, 1, number}, // of the innermost IP header
	{"dscp", 6, 1, number},
	{"qfi", 7, 1, number},       // from the innermost GTP-U PDU Session Container
	{"tunnel1Id", 8, 4, number}, // VNI, GRE key or TEID of the outermost level
	{"tunnel2Id", 12, 4, number},
	{"tunnel3Id", 16, 4, number},
	{"tunnel4Id", 20, 4, number},
	{"outerSrc", 24, 16, address}, // the outermost IP header
	{"outerDst", 40, 16, address},
	{"innerSrc", 56, 16, address}, // the innermost IP header
	{"innerDst", 72, 16, address},
	{"srcPort", 88, 2, number}, // of the innermost UDP, TCP or SCTP header
	{"dstPort", 90, 2, number},
	{"rtpSsrc", 92, 4, number},
	{"rtpPayloadType", 96, 1, number},
	{"nalType", 97, 1, number}, // H.265 NAL unit header (RFC 7798)
	{"layerId", 98, 1, number},
	{"temporalId", 99, 1, number},
	{"rtp", 100, 1, number},  // 1: the innermost UDP payload is RTP
	{"h265", 101, 1, number}, // 1: and an H.265 NAL unit header was read
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

// max is the largest value of a number field.
func (f Field) max() uint64 { return 1<<(8*f.Size) - 1 }

// SetNumber writes a number field.
func (k *Key) SetNumber(f Field, v uint64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	copy(k[f.Offset:f.Offset+f.Size], b[8-f.Size:])
}
