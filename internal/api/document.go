package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xdp5g/xdp5g/internal/fielderr"
	"github.com/xdp5g/xdp5g/internal/upf/buffer"
	"github.com/xdp5g/xdp5g/internal/upf/sdf"
	"github.com/xdp5g/xdp5g/internal/upf/session"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// defaultPrecedence is the precedence of a PDR whose document gives none:
// the lowest of the values SMFs commonly use, so that PDRs with an explicit
// precedence win (lower wins).
const defaultPrecedence = 255

// document is a session as the REST API reads and writes it: the document
// of Fig. 10 of the paper plus optional fields (precedence, qfi, teid,
// applyAction). Field order follows Fig. 10.
type document struct {
	SEID     uint64     `json:"seid" required:"true"`
	PDRs     []pdrDoc   `json:"pdrs"`
	FARs     []farDoc   `json:"fars"`
	QERs     []qerDoc   `json:"qers,omitempty"`
	URRs     []urrDoc   `json:"urrs,omitempty"`
	ARPTable []arpEntry `json:"arpTable,omitempty"`
}

type pdrDoc struct {
	ID                 uint16   `json:"pdrId" required:"true"`
	FARID              uint32   `json:"farId" required:"true"`
	Precedence         *uint32  `json:"precedence,omitempty"`
	OuterHeaderRemoval *removal `json:"outerHeaderRemoval,omitempty"`
	PDI                pdiDoc   `json:"pdi" required:"true"`
	QERIDs             []uint32 `json:"qerIds,omitempty"` // every one applies
	URRIDs             []uint32 `json:"urrIds,omitempty"`
	// Counters are live in responses; a document sent back with them (a
	// GET, edited, then PUT) is accepted and they are ignored.
	Counters *Counter `json:"counters,omitempty"`
}

type pdiDoc struct {
	TEID uint32 `json:"teid,omitempty"`
	// LocalAddress is the address of the local F-TEID, one of the UPF's
	// N3 or N9 addresses; the first N3 address when absent.
	LocalAddress    *string `json:"localAddress,omitempty"`
	SourceInterface iface   `json:"sourceInterface" required:"true"`
	UEIPAddress     *string `json:"ueIPAddress,omitempty"`
	// UEIPv6Prefix is a dual-stack UE's IPv6 prefix, beside its IPv4
	// ueIPAddress.
	UEIPv6Prefix *string `json:"ueIPv6Prefix,omitempty"`
	// QFI: access PDRs match it in the PDU Session Container, core PDRs
	// mark it in the downlink one.
	QFI uint8 `json:"qfi,omitempty" range:"0..63"`
	// SDFFilters are flow descriptions as PFCP carries them, from the
	// downlink view ("permit out 17 from 198.51.100.0/24 5060 to
	// assigned"); access PDRs apply them turned around.
	SDFFilters []string `json:"sdfFilters,omitempty"`
}

type farDoc struct {
	ID                   uint32                `json:"farId" required:"true"`
	ApplyAction          *action               `json:"applyAction,omitempty"`
	ForwardingParameters *forwardingParameters `json:"forwardingParameters,omitempty"`
	// Fig. 10 has the destination here, TS 29.244 in the forwarding
	// parameters; both are accepted.
	DestinationInterface *iface `json:"destinationInterface,omitempty"`
	// DuplicatingParameters: a copy of each packet goes there too (DUPL),
	// whatever the FAR does with the packet itself.
	DuplicatingParameters *duplicatingParameters `json:"duplicatingParameters,omitempty"`
	// Buffer is what a buffering FAR holds, delivered and dropped; live
	// in responses, ignored in requests.
	Buffer *buffer.Stats `json:"buffer,omitempty"`
}

// duplicatingParameters are where a FAR's copies go: into a GTP-U tunnel,
// or plain to a next hop, or plain along the route of their destination.
type duplicatingParameters struct {
	DestinationInterface iface                `json:"destinationInterface" required:"true"`
	OuterHeaderCreation  *outerHeaderCreation `json:"outerHeaderCreation,omitempty"`
	DSCP                 uint8                `json:"dscp,omitempty" range:"0..63"` // of the tunnel's outer header
	NextHop              string               `json:"nextHop,omitempty"`
}

type forwardingParameters struct {
	DestinationInterface *iface               `json:"destinationInterface,omitempty"`
	OuterHeaderCreation  *outerHeaderCreation `json:"outerHeaderCreation,omitempty"`
	// DSCP of the tunnel's outer header (Transport Level Marking).
	DSCP uint8 `json:"dscp,omitempty" range:"0..63"`
	// NextHop is the neighbour packets to the core go to instead of the
	// routes' (traffic steering; a PFCP Forwarding Policy).
	NextHop string `json:"nextHop,omitempty"`
}

type outerHeaderCreation struct {
	Description creation `json:"outerHeaderCreationDescription" required:"true"`
	IPv4Address *string  `json:"ipv4Address,omitempty"`
	// IPv6Address is the peer of a GTP-U/UDP/IPv6 tunnel.
	IPv6Address *string `json:"ipv6Address,omitempty"`
	// PortNumber is accepted and ignored: GTP-U always goes to port 2152
	// (Fig. 10 gives 1234).
	PortNumber uint16 `json:"portNumber,omitempty"`
	// TEID defaults to the TEID of the session's access PDRs when they
	// have exactly one: Fig. 10's document has none and uses the same
	// TEID both ways.
	TEID *uint32 `json:"teid,omitempty"`
}

// qerDoc is a QoS Enforcement Rule; rates are in bits per second.
type qerDoc struct {
	ID         uint32    `json:"qerId" required:"true"`
	GateStatus *gateDoc  `json:"gateStatus,omitempty"` // both open when absent
	MBR        *bitRates `json:"mbr,omitempty"`
	GBR        *bitRates `json:"gbr,omitempty"` // kept, not enforced
	QFI        uint8     `json:"qfi,omitempty" range:"0..63"`
	RQI        bool      `json:"rqi,omitempty"`
}

type gateDoc struct {
	UL gate `json:"ul" required:"true"`
	DL gate `json:"dl" required:"true"`
}

type bitRates struct {
	UL uint64 `json:"ul"`
	DL uint64 `json:"dl"`
}

// gate is a Gate Status value (TS 29.244 8.2.7).
type gate uint8

var gateNames = enum{0: "OPEN", 1: "CLOSED"}

func (g *gate) FromJSON(v any) error {
	n, err := gateNames.parse(v)
	*g = gate(n)
	return err
}

func (g gate) MarshalJSON() ([]byte, error) { return json.Marshal(gateNames[uint8(g)]) }

// urrDoc is a Usage Reporting Rule: the REST API measures usage and shows
// it; reporting is an SMF's business, so only an SMF (PFCP) sets the
// limits, which are shown for its sessions.
type urrDoc struct {
	ID uint32 `json:"urrId" required:"true"`
	// VolumeThreshold and VolumeQuota are where the data path reports to
	// the SMF and where it stops forwarding: inner octets counted as usage
	// counts them, so the SMF's values plus the usage when it set them.
	VolumeThreshold *volumes `json:"volumeThreshold,omitempty"`
	VolumeQuota     *volumes `json:"volumeQuota,omitempty"`
	NotifyStart     bool     `json:"notifyStart,omitempty"` // the next packet is reported as the start of traffic
	// MeasureBeforeQoS: the URR counts packets before its PDRs' QERs and
	// FARs, what they drop included (MBQE).
	MeasureBeforeQoS bool   `json:"measureBeforeQoS,omitempty"`
	Usage            *Usage `json:"usage,omitempty"` // live in responses, ignored in requests
}

// volumes are octet counts by direction; 0 is none.
type volumes struct {
	Total    uint64 `json:"total,omitempty"`
	Uplink   uint64 `json:"uplink,omitempty"`
	Downlink uint64 `json:"downlink,omitempty"`
}

// volumesOf reads limits indexed as upfxdp.URRTotal, URRUplink and
// URRDownlink; nil when there are none.
func volumesOf(v [3]uint64) *volumes {
	if v == [3]uint64{} {
		return nil
	}
	return &volumes{Total: v[upfxdp.URRTotal], Uplink: v[upfxdp.URRUplink], Downlink: v[upfxdp.URRDownlink]}
}

// Usage is what a URR measured: inner packet octets and packets.
type Usage struct {
	Uplink      Counter    `json:"uplink"`
	Downlink    Counter    `json:"downlink"`
	FirstPacket *time.Time `json:"firstPacket,omitempty"`
	LastPacket  *time.Time `json:"lastPacket,omitempty"`
}

type arpEntry struct {
	IP  string `json:"ip" required:"true"`
	MAC string `json:"mac" required:"true"`
}

// Counter is what a PDR or a per-interface reason counted.
type Counter struct {
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

// enum names the values of a PFCP enumeration, which documents give by
// name or by number.
type enum map[uint8]string

// enumOf is the enum of names indexed by value; empty ones name nothing.
func enumOf(names []string) enum {
	e := enum{}
	for v, name := range names {
		if name != "" {
			e[uint8(v)] = name
		}
	}
	return e
}

func (e enum) parse(v any) (uint8, error) {
	switch v := v.(type) {
	case string:
		for n, name := range e {
			if name == v {
				return n, nil
			}
		}
	case json.Number:
		if n, err := strconv.ParseUint(string(v), 10, 8); err == nil && e[uint8(n)] != "" {
			return uint8(n), nil
		}
	}
	var accepted []string
	for n, name := range e {
		accepted = append(accepted, fmt.Sprintf("%s (%d)", name, n))
	}
	slices.Sort(accepted)
	return 0, fmt.Errorf("must be one of %s", strings.Join(accepted, ", "))
}

// iface is a Source or Destination Interface (TS 29.244 8.2.2).
type iface session.Interface

var ifaceNames = enum{
	uint8(session.InterfaceAccess):     "INTERFACE_VALUE_ACCESS",
	uint8(session.InterfaceCore):       "INTERFACE_VALUE_CORE",
	uint8(session.InterfaceSGiLAN):     "INTERFACE_VALUE_SGI_LAN",
	uint8(session.InterfaceCPFunction): "INTERFACE_VALUE_CP_FUNCTION",
	uint8(session.InterfaceLIFunction): "INTERFACE_VALUE_LI_FUNCTION",
}

func (i *iface) FromJSON(v any) error {
	n, err := ifaceNames.parse(v)
	*i = iface(n)
	return err
}

func (i iface) MarshalJSON() ([]byte, error) { return json.Marshal(ifaceNames[uint8(i)]) }

// removal is an Outer Header Removal Description (TS 29.244 8.2.64).
type removal uint8

var removalNames = enum{
	session.RemoveGTPUUDPIPv4: "OUTER_HEADER_REMOVAL_GTPU_UDP_IPV4",
	session.RemoveGTPUUDPIPv6: "OUTER_HEADER_REMOVAL_GTPU_UDP_IPV6",
	session.RemoveUDPIPv4:     "OUTER_HEADER_REMOVAL_UDP_IPV4",
	session.RemoveGTPUUDPIP:   "OUTER_HEADER_REMOVAL_GTPU_UDP_IP",
}

func (r *removal) FromJSON(v any) error {
	n, err := removalNames.parse(v)
	*r = removal(n)
	return err
}

func (r removal) MarshalJSON() ([]byte, error) { return json.Marshal(removalNames[uint8(r)]) }

// creation is an Outer Header Creation Description, by name.
type creation string

const (
	createGTPU  creation = "OUTER_HEADER_CREATION_GTPU_UDP_IPV4"
	createGTPU6 creation = "OUTER_HEADER_CREATION_GTPU_UDP_IPV6"
	// createUDP towards the core is Fig. 10's way of saying "plain IP":
	// the UPF forwards to N6 without adding anything.
	createUDP creation = "OUTER_HEADER_CREATION_UDP_IPV4"
)

func (c *creation) FromJSON(v any) error {
	if v != string(createGTPU) && v != string(createGTPU6) && v != string(createUDP) {
		return fmt.Errorf("must be %s, %s or %s", createGTPU, createGTPU6, createUDP)
	}
	*c = creation(v.(string))
	return nil
}

// action is a FAR's Apply Action.
type action string

const (
	forward action = "FORW"
	drop    action = "DROP"
	buff    action = "BUFF" // keep downlink packets until the FAR forwards
)

func (a *action) FromJSON(v any) error {
	if v != string(forward) && v != string(drop) && v != string(buff) {
		return fmt.Errorf("must be %s, %s or %s", forward, drop, buff)
	}
	*a = action(v.(string))
	return nil
}

func rates(ul, dl uint64) *bitRates {
	if ul == 0 && dl == 0 {
		return nil
	}
	return &bitRates{ul, dl}
}

func gateOf(closed bool) gate {
	if closed {
		return 1
	}
	return 0
}

// session converts a decoded document, naming the field of anything the
// session model cannot hold; session.Validate checks the rest. A document
// needs a PDR, as a PFCP establishment needs a Create PDR: a session
// without one matches no packet.
func (d *document) session() (session.Session, error) {
	s := session.Session{SEID: d.SEID}
	if len(d.PDRs) == 0 {
		return s, fielderr.New("pdrs", "needs at least one PDR: a session without one matches no packet")
	}
	for i := range d.PDRs {
		p, err := d.PDRs[i].pdr(fmt.Sprintf("pdrs[%d]", i))
		if err != nil {
			return s, err
		}
		s.PDRs = append(s.PDRs, p)
	}
	for i := range d.FARs {
		f, err := d.FARs[i].far(fmt.Sprintf("fars[%d]", i), d.accessTEIDs())
		if err != nil {
			return s, err
		}
		s.FARs = append(s.FARs, f)
	}
	for _, q := range d.QERs {
		sq := session.QER{ID: q.ID, QFI: q.QFI, RQI: q.RQI}
		if g := q.GateStatus; g != nil {
			sq.GateULClosed, sq.GateDLClosed = g.UL == 1, g.DL == 1
		}
		if r := q.MBR; r != nil {
			sq.MBRUL, sq.MBRDL = r.UL, r.DL
		}
		if r := q.GBR; r != nil {
			sq.GBRUL, sq.GBRDL = r.UL, r.DL
		}
		s.QERs = append(s.QERs, sq)
	}
	for i, u := range d.URRs {
		if u.VolumeThreshold != nil || u.VolumeQuota != nil || u.NotifyStart {
			return s, fielderr.New(fmt.Sprintf("urrs[%d]", i), "thresholds and quotas are set by an SMF over PFCP, which gets the reports")
		}
		s.URRs = append(s.URRs, session.URR{ID: u.ID, BeforeQoS: u.MeasureBeforeQoS})
	}
	seen := map[netip.Addr]bool{}
	for i, e := range d.ARPTable {
		field := fmt.Sprintf("arpTable[%d]", i)
		ip, err := netip.ParseAddr(e.IP)
		if err != nil || ip.Zone() != "" {
			return s, fielderr.New(field+".ip", "%q is not an IP address", e.IP)
		}
		if seen[ip] {
			return s, fielderr.New(field+".ip", "%s is listed twice", ip)
		}
		seen[ip] = true
		mac, err := net.ParseMAC(e.MAC)
		if err != nil || len(mac) != 6 {
			return s, fielderr.New(field+".mac", "%q is not an Ethernet MAC address", e.MAC)
		}
		s.Neighbours = append(s.Neighbours, session.Neighbour{IP: ip, MAC: mac})
	}
	return s, nil
}

func (p *pdrDoc) pdr(field string) (session.PDR, error) {
	pdr := session.PDR{
		ID: p.ID, FARID: p.FARID, Precedence: defaultPrecedence, QERIDs: p.QERIDs, URRIDs: p.URRIDs,
		PDI: session.PDI{SourceInterface: session.Interface(p.PDI.SourceInterface), TEID: p.PDI.TEID, QFI: p.PDI.QFI},
	}
	if p.Precedence != nil {
		pdr.Precedence = *p.Precedence
	}
	for i, id := range p.QERIDs {
		if slices.Contains(p.QERIDs[:i], id) { // it would apply once: a slip
			return pdr, fielderr.New(field+".qerIds", "QER %d is named twice", id)
		}
	}
	if s := p.PDI.LocalAddress; s != nil {
		a, err := netip.ParseAddr(*s)
		if err != nil || a.Zone() != "" {
			return pdr, fielderr.New(field+".pdi.localAddress", "%q is not an IP address", *s)
		}
		pdr.PDI.LocalAddress = a
	}
	if r := p.OuterHeaderRemoval; r != nil {
		pdr.OuterHeaderRemoval = (*uint8)(r)
	}
	for _, ue := range []struct {
		doc   *string
		to    *netip.Prefix
		field string
	}{{p.PDI.UEIPAddress, &pdr.PDI.UEAddress, ".pdi.ueIPAddress"}, {p.PDI.UEIPv6Prefix, &pdr.PDI.UEIPv6Prefix, ".pdi.ueIPv6Prefix"}} {
		if ue.doc == nil {
			continue
		}
		a, err := parseUE(*ue.doc)
		if err != nil {
			return pdr, fielderr.New(field+ue.field, "%q is not an IP address or prefix", *ue.doc)
		}
		*ue.to = a
	}
	for i, desc := range p.PDI.SDFFilters {
		f, err := sdf.Parse(desc)
		if err != nil {
			return pdr, fielderr.New(fmt.Sprintf("%s.pdi.sdfFilters[%d]", field, i), "%v", err)
		}
		pdr.PDI.SDFFilters = append(pdr.PDI.SDFFilters, session.SDFFilter{Filter: f})
	}
	return pdr, nil
}

// parseUE reads a UE address: an address (IPv4 /32, IPv6 /128) or an IPv6
// prefix.
func parseUE(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, errors.New("not an address")
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// ueDoc is a UE address as the document has it: an address alone, not as
// a prefix; nil for none.
func ueDoc(ue netip.Prefix) *string {
	if !ue.IsValid() {
		return nil
	}
	s := ue.String()
	if ue.IsSingleIP() {
		s = ue.Addr().String()
	}
	return &s
}

// accessTEIDs lists the distinct TEIDs of the document's access PDRs.
func (d *document) accessTEIDs() []uint32 {
	var teids []uint32
	for _, p := range d.PDRs {
		if p.PDI.SourceInterface == iface(session.InterfaceAccess) && p.PDI.TEID != 0 && !slices.Contains(teids, p.PDI.TEID) {
			teids = append(teids, p.PDI.TEID)
		}
	}
	return teids
}

func (f *farDoc) far(field string, accessTEIDs []uint32) (session.FAR, error) {
	far := session.FAR{ID: f.ID}
	fp := f.ForwardingParameters
	dest := f.DestinationInterface
	if fp != nil && fp.DestinationInterface != nil {
		if dest != nil && *dest != *fp.DestinationInterface {
			return far, fielderr.New(field+".forwardingParameters.destinationInterface", "contradicts %s.destinationInterface", field)
		}
		dest = fp.DestinationInterface
	}
	switch {
	case f.ApplyAction != nil && *f.ApplyAction == drop:
		far.Action = session.ActionDrop
	case f.ApplyAction != nil && *f.ApplyAction == buff:
		far.Action = session.ActionBuffer
	case f.ApplyAction != nil || fp != nil || dest != nil:
		far.Action = session.ActionForward
	default:
		return far, fielderr.New(field+".applyAction", "is required when there are no forwarding parameters")
	}
	if dest != nil {
		far.DestinationInterface = session.Interface(*dest)
	} else if far.Action == session.ActionForward {
		return far, fielderr.New(field+".destinationInterface", "is required to forward")
	}
	if d := f.DuplicatingParameters; d != nil {
		var err error
		if far.Duplicating, err = d.duplicating(field + ".duplicatingParameters"); err != nil {
			return far, err
		}
	}
	if fp != nil && fp.NextHop != "" {
		a, err := netip.ParseAddr(fp.NextHop)
		if err != nil {
			return far, fielderr.New(field+".forwardingParameters.nextHop", "%q is not an IP address", fp.NextHop)
		}
		far.NextHop = a
	}
	if fp == nil || fp.OuterHeaderCreation == nil {
		return far, nil
	}
	far.DSCP = fp.DSCP
	o := fp.OuterHeaderCreation
	ohc := field + ".forwardingParameters.outerHeaderCreation"
	// The peer is the address of the description's family.
	peerField, given, family := ohc+".ipv4Address", o.IPv4Address, "IPv4"
	if o.Description == createGTPU6 {
		peerField, given, family = ohc+".ipv6Address", o.IPv6Address, "IPv6"
	}
	var peer netip.Addr
	if given != nil {
		a, err := netip.ParseAddr(*given)
		if err != nil || a.Is4() != (family == "IPv4") || a.Is4In6() || a.Zone() != "" {
			return far, fielderr.New(peerField, "%q is not an %s address", *given, family)
		}
		peer = a
	}
	if o.Description == createUDP {
		// Towards access, session.Validate says a tunnel is needed.
		return far, nil
	}
	if !peer.IsValid() {
		return far, fielderr.New(peerField, "is required for a GTP-U tunnel")
	}
	var teid uint32
	switch {
	case o.TEID != nil:
		teid = *o.TEID
	case far.DestinationInterface == session.InterfaceCore: // N9: the next UPF's F-TEID
		return far, fielderr.New(ohc+".teid", "is required for a tunnel towards the core")
	case len(accessTEIDs) == 1:
		teid = accessTEIDs[0]
	default:
		return far, fielderr.New(ohc+".teid", "is required: it defaults to the TEID of the session's access PDRs only when they have exactly one (they have %d)", len(accessTEIDs))
	}
	far.OuterHeaderCreation = &session.OuterHeaderCreation{TEID: teid, Peer: peer}
	return far, nil
}

func (d *duplicatingParameters) duplicating(field string) (*session.Forwarding, error) {
	dup := &session.Forwarding{DestinationInterface: session.Interface(d.DestinationInterface), DSCP: d.DSCP}
	if d.NextHop != "" {
		a, err := netip.ParseAddr(d.NextHop)
		if err != nil {
			return nil, fielderr.New(field+".nextHop", "%q is not an IP address", d.NextHop)
		}
		dup.NextHop = a
	}
	o := d.OuterHeaderCreation
	if o == nil {
		return dup, nil
	}
	ohc := field + ".outerHeaderCreation"
	switch {
	case o.Description != createGTPU:
		return nil, fielderr.New(ohc+".outerHeaderCreationDescription", "copies go plain or in a GTP-U tunnel: %s", createGTPU)
	case o.IPv4Address == nil:
		return nil, fielderr.New(ohc+".ipv4Address", "is required for a GTP-U tunnel")
	case o.TEID == nil:
		return nil, fielderr.New(ohc+".teid", "is required for a GTP-U tunnel")
	}
	peer, err := netip.ParseAddr(*o.IPv4Address) // of the family session.Validate wants
	if err != nil {
		return nil, fielderr.New(ohc+".ipv4Address", "%q is not an IPv4 address", *o.IPv4Address)
	}
	dup.OuterHeaderCreation = &session.OuterHeaderCreation{TEID: *o.TEID, Peer: peer}
	return dup, nil
}

// documentOf is the document of an installed session with its PDRs' live
// counters.
func documentOf(s session.Session, counters map[uint16]upfxdp.Counter, usage map[uint32]upfxdp.URRUsage,
	buffers map[uint32]buffer.Stats) *document {
	d := &document{SEID: s.SEID, PDRs: []pdrDoc{}, FARs: []farDoc{}}
	for _, p := range s.PDRs {
		pd := pdrDoc{ID: p.ID, FARID: p.FARID, OuterHeaderRemoval: (*removal)(p.OuterHeaderRemoval),
			PDI:    pdiDoc{TEID: p.PDI.TEID, SourceInterface: iface(p.PDI.SourceInterface), QFI: p.PDI.QFI},
			QERIDs: p.QERIDs, URRIDs: p.URRIDs}
		if p.Precedence != defaultPrecedence {
			pd.Precedence = &p.Precedence
		}
		if a := p.PDI.LocalAddress; a.IsValid() {
			s := a.String()
			pd.PDI.LocalAddress = &s
		}
		pd.PDI.UEIPAddress, pd.PDI.UEIPv6Prefix = ueDoc(p.PDI.UEAddress), ueDoc(p.PDI.UEIPv6Prefix)
		for _, f := range p.PDI.SDFFilters {
			pd.PDI.SDFFilters = append(pd.PDI.SDFFilters, f.String())
		}
		if c, ok := counters[p.ID]; ok {
			pd.Counters = &Counter{Packets: c.Packets, Bytes: c.Bytes}
		}
		d.PDRs = append(d.PDRs, pd)
	}
	for _, f := range s.FARs {
		fd := farDoc{ID: f.ID}
		// A FAR that drops and was told nothing of where to forward (an
		// SMF's DROP FAR without Forwarding Parameters) shows no
		// destination: the zero interface is Access, which it never named.
		if f.Action != session.ActionDrop || f.Forwarding != (session.Forwarding{}) {
			dest := iface(f.DestinationInterface)
			fd.DestinationInterface = &dest
		}
		if b, ok := buffers[f.ID]; ok {
			fd.Buffer = &b
		}
		switch f.Action {
		case session.ActionDrop:
			a := drop
			fd.ApplyAction = &a
		case session.ActionBuffer:
			a := buff
			fd.ApplyAction = &a
		}
		if o := f.OuterHeaderCreation; o != nil {
			peer, teid := o.Peer.String(), o.TEID
			doc := &outerHeaderCreation{Description: createGTPU, IPv4Address: &peer, TEID: &teid}
			if o.Peer.Is6() {
				doc.Description, doc.IPv4Address, doc.IPv6Address = createGTPU6, nil, &peer
			}
			fd.ForwardingParameters = &forwardingParameters{OuterHeaderCreation: doc, DSCP: f.DSCP}
		}
		if f.NextHop.IsValid() {
			fd.ForwardingParameters = &forwardingParameters{NextHop: f.NextHop.String()}
		}
		if dup := f.Duplicating; dup != nil {
			fd.DuplicatingParameters = duplicatingDoc(dup)
		}
		d.FARs = append(d.FARs, fd)
	}
	for _, q := range s.QERs {
		qd := qerDoc{ID: q.ID, QFI: q.QFI, RQI: q.RQI, MBR: rates(q.MBRUL, q.MBRDL), GBR: rates(q.GBRUL, q.GBRDL)}
		if q.GateULClosed || q.GateDLClosed {
			qd.GateStatus = &gateDoc{UL: gateOf(q.GateULClosed), DL: gateOf(q.GateDLClosed)}
		}
		d.QERs = append(d.QERs, qd)
	}
	for _, u := range s.URRs {
		ud := urrDoc{ID: u.ID, VolumeThreshold: volumesOf(u.Limits.Threshold), VolumeQuota: volumesOf(u.Limits.Quota),
			NotifyStart: u.Limits.NotifyStart, MeasureBeforeQoS: u.BeforeQoS}
		if m, ok := usage[u.ID]; ok {
			ud.Usage = &Usage{Uplink: Counter{Packets: m.Packets[upfxdp.URRUplink], Bytes: m.Bytes[upfxdp.URRUplink]},
				Downlink: Counter{Packets: m.Packets[upfxdp.URRDownlink], Bytes: m.Bytes[upfxdp.URRDownlink]}}
			if !m.FirstPacket.IsZero() {
				ud.Usage.FirstPacket, ud.Usage.LastPacket = &m.FirstPacket, &m.LastPacket
			}
		}
		d.URRs = append(d.URRs, ud)
	}
	for _, n := range s.Neighbours {
		d.ARPTable = append(d.ARPTable, arpEntry{IP: n.IP.String(), MAC: n.MAC.String()})
	}
	return d
}

func duplicatingDoc(dup *session.Forwarding) *duplicatingParameters {
	d := &duplicatingParameters{DestinationInterface: iface(dup.DestinationInterface), DSCP: dup.DSCP}
	if dup.NextHop.IsValid() {
		d.NextHop = dup.NextHop.String()
	}
	if o := dup.OuterHeaderCreation; o != nil {
		peer, teid := o.Peer.String(), o.TEID
		d.OuterHeaderCreation = &outerHeaderCreation{Description: createGTPU, IPv4Address: &peer, TEID: &teid}
	}
	return d
}
