package sdf

import (
	"net/netip"
	"slices"
)

// What a filter matches, as the tests spell the meaning of the filters
// they parse out: the data path matches them in bpf/upf/sdf.h.

// Packet holds the header fields Filter.Matches looks at.
type Packet struct {
	Src, Dst         netip.Addr
	Proto            uint8
	SrcPort, DstPort uint16 // TCP, UDP and SCTP only
	TOS              uint8  // IPv4 Type of Service or IPv6 Traffic Class
	SPI              uint32 // ESP and AH only
	FlowLabel        uint32 // IPv6 only
}

// Matches reports whether pkt matches f. ue are the addresses "assigned"
// stands for: the UE's IPv4 address as a /32 and its IPv6 prefix.
func (f Filter) Matches(pkt Packet, ue ...netip.Prefix) bool {
	return (f.Proto == 0 || f.Proto == pkt.Proto) &&
		f.Src.matches(pkt.Src, pkt.Proto, pkt.SrcPort, ue) &&
		f.Dst.matches(pkt.Dst, pkt.Proto, pkt.DstPort, ue) &&
		(pkt.TOS^f.TOS.Value)&f.TOS.Mask == 0 &&
		(f.SPI == 0 || f.SPI == pkt.SPI) &&
		(!f.HasFlowLabel || pkt.Dst.Is6() && pkt.FlowLabel == f.FlowLabel)
}

func (e Endpoint) matches(addr netip.Addr, proto uint8, port uint16, ue []netip.Prefix) bool {
	switch {
	case e.Assigned:
		if !slices.ContainsFunc(ue, func(p netip.Prefix) bool { return p.Contains(addr) }) {
			return false
		}
	case e.Prefix.IsValid():
		if !e.Prefix.Contains(addr) {
			return false
		}
	}
	// Ports under protocol "ip" stand for the ports of any protocol that
	// has them (TS 29.214 §5.3.8 NOTE 1).
	return len(e.Ports) == 0 || hasPorts(proto) && slices.ContainsFunc(e.Ports, func(r PortRange) bool {
		return r.Lo <= port && port <= r.Hi
	})
}
