// Package sdf parses PFCP SDF filters (TS 29.244 §8.2.5). Their
// flow descriptions use the IPFilterRule syntax of RFC 6733 §4.3 as
// restricted by TS 29.212 §5.4.2:
//
//	permit out <proto> from <src> [<ports>] to <dst> [<ports>]
//
// A flow description is written from the downlink view: "from" is the
// remote side and "to" the UE. Filter.Uplink turns it around.
package sdf

import (
	"net/netip"
	"strconv"
	"strings"
)

// Filter is an SDF filter. The zero Filter matches every packet.
type Filter struct {
	// Proto is the IP protocol number; 0 matches any protocol, as "ip" is
	// protocol 0 for ipfw, and protocol 0 (HOPOPT) is an IPv6 extension
	// header, never the upper-layer protocol.
	Proto    uint8
	Src, Dst Endpoint

	// The SDF Filter fields beside the flow description.
	TOS TOS
	// SPI is the IPsec Security Parameter Index; 0 matches any, as RFC
	// 4303 §2.1 keeps SPI 0 off the wire.
	SPI uint32
	// FlowLabel is the IPv6 flow label to match if HasFlowLabel: label 0
	// (unlabelled packets) is a valid value, hence the flag.
	FlowLabel    uint32
	HasFlowLabel bool
	// ID is the SDF Filter ID by which PDRs refer to a bidirectional
	// filter; it is present if Bidirectional (the BID flag).
	ID            uint32
	Bidirectional bool
}

// Endpoint is one side of a flow description.
type Endpoint struct {
	// Assigned stands for the UE's own addresses (keyword "assigned").
	Assigned bool
	// Prefix holds the addresses matched unless Assigned; the zero Prefix
	// (keyword "any") matches every address of either family.
	Prefix netip.Prefix
	// Ports lists the port ranges matched; none matches every port.
	Ports []PortRange
}

// PortRange is an inclusive range of ports.
type PortRange struct{ Lo, Hi uint16 }

// TOS is the IPv4 Type of Service or IPv6 Traffic Class a packet must carry
// in the bits of Mask; the zero TOS matches every packet.
type TOS struct{ Value, Mask uint8 }

// Uplink returns f as an uplink packet sees it. A flow description
// describes downlink traffic (TS 29.212 §5.4.2), so source and destination
// swap, ports included.
func (f Filter) Uplink() Filter {
	f.Src, f.Dst = f.Dst, f.Src
	return f
}

// hasPorts reports whether proto is one that RFC 6733 §4.3 allows ports for.
func hasPorts(proto uint8) bool {
	return proto == protoTCP || proto == protoUDP || proto == protoSCTP
}

// String returns f's flow description; the other SDF Filter fields have no
// textual form.
func (f Filter) String() string {
	proto := "ip"
	if f.Proto != 0 {
		proto = strconv.Itoa(int(f.Proto))
	}
	return "permit out " + proto + " from " + f.Src.String() + " to " + f.Dst.String()
}

// String returns e as in a flow description.
func (e Endpoint) String() string {
	var b strings.Builder
	switch {
	case e.Assigned:
		b.WriteString("assigned")
	case e.Prefix.IsSingleIP():
		b.WriteString(e.Prefix.Addr().String())
	case e.Prefix.IsValid():
		b.WriteString(e.Prefix.String())
	default:
		b.WriteString("any")
	}
	sep := " "
	for _, r := range e.Ports {
		b.WriteString(sep)
		sep = ","
		b.WriteString(strconv.Itoa(int(r.Lo)))
		if r.Hi != r.Lo {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(int(r.Hi)))
		}
	}
	return b.String()
}
