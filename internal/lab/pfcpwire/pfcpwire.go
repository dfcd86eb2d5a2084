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
