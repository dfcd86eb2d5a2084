// Package session holds PFCP sessions (PDRs and FARs) and installs them into
// the data path, owning the map slots each session uses.
package session

import (
	"net"
	"net/netip"

	"github.com/xdp5g/xdp5g/internal/upf/sdf"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// Interface is a PFCP Source or Destination Interface value (TS 29.244 8.2.2).
type Interface uint8

const (
	InterfaceAccess     Interface = 0
	InterfaceCore       Interface = 1
	InterfaceSGiLAN     Interface = 2
	InterfaceCPFunction Interface = 3
	InterfaceLIFunction Interface = 4 // lawful interception: where copies go (DUPL)
)

// OuterHeaderRemoval values (TS 29.244 8.2.64) the data path implements.
const (
	// The three remove GTP-U/UDP/IP of either family: the data path takes
	// the G-PDUs of a TEID on every N3 address, and Open5GS asks for 1 by
	// the PDU session's type, whatever carries the tunnel.
	RemoveGTPUUDPIPv4 uint8 = 0
	RemoveGTPUUDPIPv6 uint8 = 1
	RemoveUDPIPv4     uint8 = 2
	RemoveGTPUUDPIP   uint8 = 6
)

// Session is one PFCP session: its packet detection and forwarding rules.
type Session struct {
	SEID uint64
	PDRs []PDR
	FARs []FAR
	QERs []QER
	URRs []URR
	// Neighbours are static IP-to-MAC entries for next hops (the
	// document's arpTable); they take precedence over the kernel's.
	Neighbours []Neighbour
	// Origin is the interface that created the session: Restore drops
	// the PFCP ones.
	Origin Origin `json:",omitempty"`
}

// PDR is a Packet Detection Rule.
type PDR struct {
	ID         uint16
	Precedence uint32 // lower value wins
	FARID      uint32
	PDI        PDI
	// OuterHeaderRemoval is nil when the packet keeps its outer headers.
	OuterHeaderRemoval *uint8
	// QERIDs are the QERs that all apply to the PDR's packets.
	QERIDs []uint32 `json:",omitempty"`
	// URRIDs are the URRs that all count the packets its FAR forwards.
	URRIDs []uint32 `json:",omitempty"`
}

// PDI is a PDR's Packet Detection Information.
type PDI struct {
	SourceInterface Interface
	// TEID and LocalAddress are the local F-TEID, for a PDR of G-PDUs:
	// from access (N3, or N9 at a PSA), from the CP function, or from the
	// core over N9 (at an I-UPF); 0 for none. LocalAddress is one of the
	// UPF's GTP-U addresses, N3 or N9; the zero Addr stands for the first
	// N3 address.
	TEID         uint32
	LocalAddress netip.Addr   `json:",omitzero"`
	UEAddress    netip.Prefix // /32 for IPv4, /64 (or longer) for IPv6; invalid when absent
	// UEIPv6Prefix is a dual-stack UE's IPv6 prefix (/64 or longer),
	// beside its IPv4 UEAddress: the PDR takes the packets of both;
	// invalid when absent.
	UEIPv6Prefix netip.Prefix `json:",omitzero"`
	QFI          uint8        // 0: any. Access PDRs match it; core PDRs mark it.
	// SDFFilters: a packet must match one of them, if there are any.
	SDFFilters []SDFFilter `json:",omitempty"`
}

// SDFFilter is an SDF filter (TS 29.244 8.2.5) given by its flow
// description alone, which is written from the downlink view ("from" the
// remote side "to" the UE) whatever the PDR's direction. In JSON it is the
// flow description.
type SDFFilter struct{ sdf.Filter }

func (f SDFFilter) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

func (f *SDFFilter) UnmarshalText(b []byte) error {
	var err error
	f.Filter, err = sdf.Parse(string(b))
	return err
}

// Action is what a FAR does with a packet.
type Action uint8

const (
	ActionDrop Action = iota
	ActionForward
	// ActionBuffer keeps downlink packets until the FAR forwards again,
	// then sends them first, in order (the buffer package).
	ActionBuffer
)

// FAR is a Forwarding Action Rule.
type FAR struct {
	ID     uint32
	Action Action
	Forwarding
	// Duplicating is where copies of the FAR's packets go, its Duplicating
	// Parameters (Apply Action DUPL, with FORW, DROP or BUFF for the
	// packets themselves); nil: none. The copy of a packet is the IP
	// packet its PDR matched (outer headers removed, TTL as it came), put
	// into a GTP-U/UDP/IPv4 tunnel; without one it goes plain to NextHop
	// (a Forwarding Policy), or along the route of its own destination.
	Duplicating *Forwarding `json:",omitempty"`
}

// Forwarding is where a FAR sends packets, or their copies.
type Forwarding struct {
	DestinationInterface Interface
	// OuterHeaderCreation is nil when no tunnel is added.
	OuterHeaderCreation *OuterHeaderCreation
	// DSCP marks the tunnel's outer IP header (Transport Level Marking).
	DSCP uint8 `json:",omitempty"`
	// NextHop steers packets through this neighbour instead of the routes
	// (a PFCP Forwarding Policy, traffic steering); invalid when the
	// routes decide.
	NextHop netip.Addr `json:",omitzero"`
}

// nexthop is the address sent to through a next-hop slot of its own: the
// tunnel's peer or the next hop; invalid when the routes decide.
func (f *Forwarding) nexthop() netip.Addr {
	if f.OuterHeaderCreation != nil {
		return f.OuterHeaderCreation.Peer
	}
	return f.NextHop
}

// nexthop is the address a forwarding FAR sends through a next-hop slot
// of its own (Forwarding.nexthop); invalid when the FAR does not forward.
func (f *FAR) nexthop() netip.Addr {
	if f.Action != ActionForward {
		return netip.Addr{}
	}
	return f.Forwarding.nexthop()
}

// OuterHeaderCreation describes the GTP-U/UDP/IP tunnel a FAR adds, over
// IPv4 or IPv6 (the peer's family): towards access (a gNB's N3 address, or
// an I-UPF's N9 one at a PSA), the CP function, or the core (the next
// UPF's N9 address).
type OuterHeaderCreation struct {
	TEID uint32
	Peer netip.Addr
	Port uint16 // 0 or 2152: the data path always sends to 2152
}

// QER is a QoS Enforcement Rule: gates and maximum bit rates per
// direction, and the QFI (and reflective QoS indication) that downlink
// packets are marked with.
type QER struct {
	ID                         uint32
	GateULClosed, GateDLClosed bool
	MBRUL, MBRDL               uint64 // bits per second; 0: no limit
	// GBRUL and GBRDL are guaranteed bit rates (bits per second): kept
	// and shown, not enforced; the MBR caps the flow.
	GBRUL, GBRDL uint64 `json:",omitempty"`
	QFI          uint8  // 0: none
	RQI          bool   `json:",omitempty"`
}

// URR is a Usage Reporting Rule: the data path counts what the FARs of its
// PDRs forward, reports its thresholds and stops at its quotas.
type URR struct {
	ID     uint32
	Limits upfxdp.URRLimits
	// BeforeQoS: the URR measures before QoS enforcement (MBQE), so it
	// counts what its PDRs' QERs and FARs then drop too.
	BeforeQoS bool `json:",omitempty"`
}

// Neighbour is a static next-hop MAC address.
type Neighbour struct {
	IP  netip.Addr
	MAC net.HardwareAddr
}
