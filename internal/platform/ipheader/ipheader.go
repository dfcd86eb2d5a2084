// Package ipheader writes the IP headers of the UDP datagrams that user
// space builds whole (the CU-UP's AF_XDP path, G-PDUs handed back to the
// data path) and the checksums they need.
package ipheader

import (
	"encoding/binary"
	"net/netip"
)

// PutIPv4 writes the 20-octet IPv4 header of a UDP packet of total
// octets (DF set, TTL 64), its checksum included.
func PutIPv4(h []byte, src, dst netip.Addr, total int, id uint16) {
	h[0], h[1] = 0x45, 0
	binary.BigEndian.PutUint16(h[2:], uint16(total))
	binary.BigEndian.PutUint16(h[4:], id)
	binary.BigEndian.PutUint16(h[6:], 0x4000) // DF
	h[8], h[9] = 64, 17
	h[10], h[11] = 0, 0
	s, d := src.As4(), dst.As4()
	copy(h[12:], s[:])
	copy(h[16:], d[:])
	binary.BigEndian.PutUint16(h[10:], ^uint16(onesSum(0, h)))
}

// PutIPv6 writes the 40-octet IPv6 header of a UDP datagram of payload
// octets (hop limit 64).
func PutIPv6(h []byte, src, dst netip.Addr, payload int) {
	binary.BigEndian.PutUint32(h[0:], 6<<28)
	binary.BigEndian.PutUint16(h[4:], uint16(payload))
	h[6], h[7] = 17, 64
	s, d := src.As16(), dst.As16()
	copy(h[8:], s[:])
	copy(h[24:], d[:])
}

// UDPChecksum6 is the checksum of a UDP datagram over IPv6, which may not
// be 0.
func UDPChecksum6(src, dst netip.Addr, udp []byte) uint16 {
	s, d := src.As16(), dst.As16()
	sum := onesSum(0, s[:])
	sum = onesSum(sum, d[:])
	sum += uint32(len(udp)) + 17
	sum = onesSum(sum, udp)
	c := ^fold(sum)
	if c == 0 {
		return 0xffff
	}
	return c
}

// onesSum adds b to a ones' complement sum and returns it folded.
func onesSum(sum uint32, b []byte) uint32 {
	for len(b) >= 2 {
		sum += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	return uint32(fold(sum))
}

func fold(sum uint32) uint16 {
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}
