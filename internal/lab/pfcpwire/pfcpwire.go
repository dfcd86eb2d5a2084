// Package pfcpwire encodes PFCP messages by hand, octet by octet as TS
// 29.244 lays them out, for the lab's SMFs that must not share an encoder
// (go-pfcp) with the UPF they test.
package pfcpwire

import (
	"encoding/binary"
	"net/netip"
	"slices"
)

// IE is an IE with its value (§8.1.1); a grouped one's value is its IEs.
func IE(typ uint16, value ...[]byte) []byte {
	v := slices.Concat(value...)
	return slices.Concat(U16(typ), U16(uint16(len(v))), v)
}

// Message is a PFCP message (§7.2.2): a session message when session is
// set, with seid in its header.
func Message(typ uint8, session bool, seid uint64, seq uint32, ies ...[]byte) []byte {
	body := slices.Concat(ies...)
	head := []byte{1 << 5, typ, 0, 0} // version 1
	if session {
		head[0] |= 0x01 // S
		head = append(head, U64(seid)...)
	}
	head = append(head, byte(seq>>16), byte(seq>>8), byte(seq), 0)
	binary.BigEndian.PutUint16(head[2:], uint16(len(head)-4+len(body)))
	return append(head, body...)
}

func U8(v uint8) []byte   { return []byte{v} }
func U16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
func U32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func U64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// IP4 is an IPv4 address's four octets.
func IP4(a netip.Addr) []byte {
	b := a.As4()
	return b[:]
}

// NodeID is a Node ID IE (§8.2.38) of an IPv4 address.
func NodeID(a netip.Addr) []byte { return IE(60, U8(0), IP4(a)) }

// FSEID is an F-SEID IE (§8.2.37): V4, the SEID, the IPv4 address.
func FSEID(seid uint64, a netip.Addr) []byte { return IE(57, U8(0x02), U64(seid), IP4(a)) }

// FTEID is an F-TEID IE (§8.2.3) of teid at an IPv4 (V4) or IPv6 (V6)
// address.
func FTEID(teid uint32, at netip.Addr) []byte {
	flags := uint8(0x01) // V4
	if at.Is6() {
		flags = 0x02 // V6
	}
	return IE(21, U8(flags), U32(teid), at.AsSlice())
}

// OuterHeaderCreation is an Outer Header Creation IE (§8.2.56) of a
// GTP-U/UDP/IPv4 or GTP-U/UDP/IPv6 tunnel to teid at to, by to's family.
func OuterHeaderCreation(teid uint32, to netip.Addr) []byte {
	desc := uint16(0x0100) // GTP-U/UDP/IPv4
	if to.Is6() {
		desc = 0x0200 // GTP-U/UDP/IPv6
	}
	return IE(84, U16(desc), U32(teid), to.AsSlice())
}

// UEIPAddress is a UE IP Address IE (§8.2.62) of an IPv4 (V4) or IPv6
// (V6) address, the destination of the PDR's packets when sd (S/D).
func UEIPAddress(a netip.Addr, sd bool) []byte {
	flags := uint8(0x02) // V4
	if a.Is6() {
		flags = 0x01 // V6
	}
	if sd {
		flags |= 0x04
	}
	return IE(93, U8(flags), a.AsSlice())
}

// MBR is an MBR IE (§8.2.8): uplink then downlink, in kbps, 5 octets each.
func MBR(ul, dl uint64) []byte { return IE(26, U64(ul)[3:], U64(dl)[3:]) }

// SDFFilter is an SDF Filter IE (§8.2.5) of a flow description (FD).
func SDFFilter(flow string) []byte {
	return IE(23, U8(0x01), U8(0), U16(uint16(len(flow))), []byte(flow))
}
