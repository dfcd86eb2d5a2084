package cuupxdp

import (
	"errors"
	"unsafe"

	"github.com/xdp5g/xdp5g/internal/platform/afxdp"
)

// Meta is what xdp_cuup leaves in the XDP metadata, the MetaLen bytes
// right before a packet it redirects (struct cuup_meta in bpf/cuup/structs.h):
// offsets count from the packet's first byte, numbers are in host order.
type Meta = cuupCuupMeta

// MetaLen is the size of Meta.
const MetaLen = int(unsafe.Sizeof(Meta{}))

// Bits of Meta.Flags.
const (
	MetaPSC   = uint8(cuupCuupMetaFlagsCUUP_META_PSC)    // a PDU Session Container: Qfi and the bits below are its
	MetaRQI   = uint8(cuupCuupMetaFlagsCUUP_META_RQI)    // its Reflective QoS Indicator
	MetaPPP   = uint8(cuupCuupMetaFlagsCUUP_META_PPP)    // its Paging Policy Presence
	MetaNRRAN = uint8(cuupCuupMetaFlagsCUUP_META_NR_RAN) // an NR RAN Container: RanOff, RanLen
)

// Errors of ParseMeta.
var (
	ErrNoMeta  = errors.New("cuupxdp: no CU-UP metadata before the packet")
	ErrBadMeta = errors.New("cuupxdp: the metadata points outside the packet")
)

// ParseMeta reads the metadata at the end of b, the bytes before a packet
// of pktLen bytes, and checks that what it points to lies in the packet.
func ParseMeta(b []byte, pktLen int) (Meta, error) {
	var m Meta
	if len(b) < MetaLen {
		return m, ErrNoMeta
	}
	// The generated type has struct cuup_meta's layout: copy it whole.
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&m)), MetaLen), b[len(b)-MetaLen:])
	if m.Magic != uint32(cuupCuupMetaMagicCUUP_META_MAGIC) {
		return Meta{}, ErrNoMeta
	}
	if int(m.TpduOff)+int(m.TpduLen) > pktLen || m.Flags&MetaNRRAN != 0 && int(m.RanOff)+int(m.RanLen) > pktLen {
		return Meta{}, ErrBadMeta
	}
	return m, nil
}

// ReadMeta reads the metadata before a packet a socket of u received.
func ReadMeta(u *afxdp.UMEM, d afxdp.Desc) (Meta, error) {
	return ParseMeta(u.Meta(d, MetaLen), int(d.Len))
}

// RANContainer is the content of pkt's NR RAN Container (TS 38.425 NR-U
// frame); nil when there is none.
func (m *Meta) RANContainer(pkt []byte) []byte {
	if m.Flags&MetaNRRAN == 0 {
		return nil
	}
	return span(pkt, m.RanOff, m.RanLen)
}

func span(pkt []byte, off, n uint16) []byte {
	if int(off)+int(n) > len(pkt) {
		return nil
	}
	return pkt[off : int(off)+int(n) : int(off)+int(n)]
}
