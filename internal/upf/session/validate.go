package session

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"github.com/xdp5g/xdp5g/internal/fielderr"
	"github.com/xdp5g/xdp5g/internal/upf/sdf"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// invalid names the field of a session that cannot be installed.
func invalid(field, format string, args ...any) error { return fielderr.New(field, format, args...) }

// element is element i of one of a session's lists, named in full only for
// an error: a session that is valid costs no names.
type element struct {
	list string
	i    int
}

// field names a field of the element, "" for the element itself.
func (e element) field(name string) string { return fmt.Sprintf("%s[%d]%s", e.list, e.i, name) }

// Validate checks a session on its own; conflicts with other sessions are
// the store's business. A session may have no PDRs: TS 29.244 asks for one
// only in the establishment (which the PFCP server and the REST API check),
// and OAI's SMF removes every PDR and FAR of a session whose UE goes idle.
func Validate(s *Session) error {
	if s.SEID == 0 {
		return invalid("seid", "must not be 0")
	}
	fars := map[uint32]*FAR{}
	for i := range s.FARs {
		f := &s.FARs[i]
		at := element{"fars", i}
		if _, dup := fars[f.ID]; dup {
			return invalid(at.field(".farId"), "FAR %d is defined twice", f.ID)
		}
		fars[f.ID] = f
		if err := validateFAR(at, f); err != nil {
			return err
		}
	}
	qers := map[uint32]bool{}
	for i, q := range s.QERs {
		if qers[q.ID] {
			return invalid(element{"qers", i}.field(".qerId"), "QER %d is defined twice", q.ID)
		}
		qers[q.ID] = true
		if q.QFI > 63 {
			return invalid(element{"qers", i}.field(".qfi"), "must be 0..63")
		}
	}
	urrs := map[uint32]bool{}
	for i, u := range s.URRs {
		if urrs[u.ID] {
			return invalid(element{"urrs", i}.field(".urrId"), "URR %d is defined twice", u.ID)
		}
		urrs[u.ID] = true
	}
	pdrIDs := map[uint16]bool{}
	perKey := map[dpKey]int{}
	for i := range s.PDRs {
		p := &s.PDRs[i]
		at := element{"pdrs", i}
		if pdrIDs[p.ID] {
			return invalid(at.field(".pdrId"), "PDR %d is defined twice", p.ID)
		}
		pdrIDs[p.ID] = true
		far, ok := fars[p.FARID]
		if !ok {
			return invalid(at.field(".farId"), "FAR %d is not in the session", p.FARID)
		}
		if len(p.QERIDs) > upfxdp.QERsPerPDR {
			return invalid(at.field(".qerIds"), "at most %d QERs per PDR", upfxdp.QERsPerPDR)
		}
		for _, id := range p.QERIDs {
			if !qers[id] {
				return invalid(at.field(".qerIds"), "QER %d is not in the session", id)
			}
		}
		if len(p.URRIDs) > upfxdp.URRsPerPDR {
			return invalid(at.field(".urrIds"), "at most %d URRs per PDR", upfxdp.URRsPerPDR)
		}
		for j, id := range p.URRIDs {
			if !urrs[id] {
				return invalid(at.field(".urrIds"), "URR %d is not in the session", id)
			}
			if slices.Contains(p.URRIDs[:j], id) { // would count each packet twice
				return invalid(at.field(".urrIds"), "URR %d is named twice", id)
			}
		}
		if err := validatePDR(at, p, far); err != nil {
			return err
		}
		keys := p.keys()
		for _, key := range keys.all() {
			if perKey[key]++; perKey[key] > upfxdp.PDRsPerKey {
				return invalid(at.field(""), "more than %d PDRs share the key %v", upfxdp.PDRsPerKey, key)
			}
		}
	}
	return nil
}

func validateFAR(at element, f *FAR) error {
	if d := f.Duplicating; d != nil {
		if err := validateDuplicating(at, d); err != nil {
			return err
		}
	}
	switch f.Action {
	case ActionDrop, ActionBuffer: // the forwarding parameters wait for the FAR to forward
		return nil
	case ActionForward:
	default:
		return invalid(at.field(".applyAction"), "unsupported action %d", f.Action)
	}
	if f.DSCP > 63 {
		return invalid(at.field(".forwardingParameters.dscp"), "DSCP %d is not in 0..63", f.DSCP)
	}
	switch nh := f.NextHop; {
	case !nh.IsValid():
	case nh.IsUnspecified() || nh.IsMulticast():
		return invalid(at.field(".forwardingParameters.nextHop"), "%v is not a unicast address", nh)
	case f.DestinationInterface != InterfaceCore && f.DestinationInterface != InterfaceSGiLAN:
		return invalid(at.field(".forwardingParameters.nextHop"), "steers traffic towards the core; a tunnel's peer is its next hop")
	}
	switch f.DestinationInterface {
	case InterfaceAccess, InterfaceCPFunction:
		if f.OuterHeaderCreation == nil {
			return invalid(at.field(".forwardingParameters.outerHeaderCreation"), "forwarding to access or the CP function needs GTP-U/UDP/IP outer header creation")
		}
	case InterfaceCore: // with a tunnel: to the next UPF over N9
	case InterfaceSGiLAN:
		if f.OuterHeaderCreation != nil {
			return invalid(at.field(".forwardingParameters.outerHeaderCreation"), "tunnels towards SGi-LAN are not supported")
		}
	default:
		return invalid(at.field(".destinationInterface"), "forwarding to interface %d is not supported", f.DestinationInterface)
	}
	return validateTunnel(at, ".forwardingParameters", f.OuterHeaderCreation)
}

// validateTunnel checks the GTP-U tunnel, if any, of a FAR's forwarding
// or duplicating parameters (params).
func validateTunnel(at element, params string, o *OuterHeaderCreation) error {
	ohc := params + ".outerHeaderCreation"
	switch {
	case o == nil:
	case !o.Peer.IsValid() || o.Peer.Is4In6() || o.Peer.IsUnspecified() || o.Peer.IsMulticast():
		field := ohc + ".ipv4Address"
		if o.Peer.Is6() {
			field = ohc + ".ipv6Address"
		}
		return invalid(at.field(field), "%v is not a unicast IPv4 or IPv6 address", o.Peer)
	case o.TEID == 0:
		return invalid(at.field(ohc+".teid"), "must not be 0")
	case o.Port != 0 && o.Port != 2152:
		return invalid(at.field(ohc+".portNumber"), "GTP-U is sent to port 2152, not %d", o.Port)
	}
	return nil
}

func validateDuplicating(at element, d *Forwarding) error {
	switch d.DestinationInterface {
	case InterfaceAccess, InterfaceCore, InterfaceSGiLAN, InterfaceCPFunction, InterfaceLIFunction:
	default:
		return invalid(at.field(".duplicatingParameters.destinationInterface"), "duplicating to interface %d is not supported", d.DestinationInterface)
	}
	if d.DSCP > 63 {
		return invalid(at.field(".duplicatingParameters.dscp"), "DSCP %d is not in 0..63", d.DSCP)
	}
	if nh := d.NextHop; nh.IsValid() && (nh.IsUnspecified() || nh.IsMulticast() || !nh.Is4()) {
		return invalid(at.field(".duplicatingParameters.nextHop"), "%v is not a unicast IPv4 address", nh)
	}
	o := d.OuterHeaderCreation
	switch {
	case o == nil:
		return nil
	case d.NextHop.IsValid():
		return invalid(at.field(".duplicatingParameters.nextHop"), "the tunnel's peer is the copies' next hop")
	case !o.Peer.Is4():
		return invalid(at.field(".duplicatingParameters.outerHeaderCreation.ipv4Address"), "must be an IPv4 address")
	}
	return validateTunnel(at, ".duplicatingParameters", o)
}

func validatePDR(at element, p *PDR, far *FAR) error {
	if p.PDI.QFI > 63 {
		return invalid(at.field(".pdi.qfi"), "must be 0..63")
	}
	if err := validateSDFFilters(at, p.PDI.SDFFilters); err != nil {
		return err
	}
	ue := p.PDI.UEAddress
	if ue.IsValid() && !(ue.Addr().Is4() && ue.Bits() == 32) && !ipv6Prefix(ue) {
		return invalid(at.field(".pdi.ueIPAddress"), "must be an IPv4 address or an IPv6 prefix of /64 or longer")
	}
	switch ue6 := p.PDI.UEIPv6Prefix; {
	case !ue6.IsValid():
	case !ipv6Prefix(ue6):
		return invalid(at.field(".pdi.ueIPv6Prefix"), "must be an IPv6 prefix of /64 or longer")
	case !ue.Addr().Is4():
		return invalid(at.field(".pdi.ueIPv6Prefix"), "goes beside an IPv4 ueIPAddress: one address per family")
	}
	forward := far.Action == ActionForward
	if p.waiting() && !forward {
		return nil
	}
	switch p.PDI.SourceInterface {
	case InterfaceAccess, InterfaceCPFunction:
		// Both arrive as G-PDUs on N3: from the gNB, or from the CP
		// function on its way to the UE (N4-u).
		if p.PDI.TEID == 0 {
			return invalid(at.field(".pdi.teid"), "a PDR of GTP-U from access or the CP function needs the local TEID")
		}
		if !removesGTPU(p) {
			return invalid(at.field(".outerHeaderRemoval"), "a PDR of GTP-U from access or the CP function must remove GTP-U/UDP/IP (0, 1 or 6) to forward")
		}
		// The CP function's packets share the downlink FAR (Open5GS), and
		// are dropped while it buffers.
		if far.Action == ActionBuffer && p.PDI.SourceInterface == InterfaceAccess {
			return invalid(at.field(".farId"), "uplink FAR %d buffers: only packets to the UE are buffered", far.ID)
		}
		// From access to access is indirect data forwarding (TS 29.244
		// §8.2.24 NOTE 3): the data path re-tunnels it like a relay.
		if p.PDI.SourceInterface == InterfaceCPFunction && forward && far.DestinationInterface != InterfaceAccess {
			return invalid(at.field(".farId"), "FAR %d of packets from the CP function must forward to access", far.ID)
		}
	case InterfaceCore, InterfaceSGiLAN:
		if !ue.IsValid() && (p.PDI.TEID == 0 || !removesGTPU(p)) {
			return invalid(at.field(".pdi.ueIPAddress"), "a core PDR needs the UE address, or a local F-TEID (N9) and GTP-U/UDP/IP to remove")
		}
		// With a local TEID and GTP-U to remove, it is a PDR of G-PDUs
		// from the core over N9 (an I-UPF's downlink); else of plain IP.
		if r := p.OuterHeaderRemoval; r != nil && *r != RemoveUDPIPv4 && !p.gtpu() {
			return invalid(at.field(".outerHeaderRemoval"), "a core PDR receives plain IP, unless it has a local TEID (N9) and removes GTP-U/UDP/IP (0, 1 or 6)")
		}
		if forward && far.DestinationInterface != InterfaceAccess && far.DestinationInterface != InterfaceCPFunction {
			return invalid(at.field(".farId"), "downlink FAR %d must forward to access or to the CP function", far.ID)
		}
	default:
		return invalid(at.field(".pdi.sourceInterface"), "unsupported source interface %d", p.PDI.SourceInterface)
	}
	return nil
}

// validateSDFFilters checks that each filter is one a flow description
// says, as Parse makes them, and that the data path holds them all: it
// takes each pair of a filter's source and destination port ranges as a
// filter of its own.
func validateSDFFilters(pdr element, filters []SDFFilter) error {
	places := 0
	for i, f := range filters {
		if f.TOS != (sdf.TOS{}) || f.SPI != 0 || f.HasFlowLabel || f.Bidirectional {
			return invalid(pdr.field(fmt.Sprintf(".pdi.sdfFilters[%d]", i)), "only the flow description is supported, not ToS, SPI, flow label or filter ID")
		}
		if _, err := sdf.Parse(f.String()); err != nil {
			return invalid(pdr.field(fmt.Sprintf(".pdi.sdfFilters[%d]", i)), "%v", err)
		}
		places += max(len(f.Src.Ports), 1) * max(len(f.Dst.Ports), 1)
	}
	if places > upfxdp.SDFPerPDR {
		return invalid(pdr.field(".pdi.sdfFilters"), "a PDR holds %d SDF filters, counting one per pair of source and destination port ranges; these are %d",
			upfxdp.SDFPerPDR, places)
	}
	return nil
}

// removesGTPU says a PDR removes the GTP-U/UDP/IP its packets arrive in.
func removesGTPU(p *PDR) bool {
	r := p.OuterHeaderRemoval
	return r != nil && (*r == RemoveGTPUUDPIPv4 || *r == RemoveGTPUUDPIPv6 || *r == RemoveGTPUUDPIP)
}

// gtpu says a PDR detects G-PDUs at its local F-TEID: from access, the CP
// function, or the core over N9, whose PDR has a TEID and removes GTP-U
// or has no UE address to be found by (a core PDR's TEID is otherwise not
// looked at).
func (p *PDR) gtpu() bool {
	switch p.PDI.SourceInterface {
	case InterfaceAccess, InterfaceCPFunction:
		return true
	case InterfaceCore:
		return p.PDI.TEID != 0 && (removesGTPU(p) || !p.PDI.UEAddress.IsValid())
	}
	return false
}

// waiting says a PDR at a local F-TEID waits for the SMF to say what
// outer header to remove: one from access, or from the core without a UE
// address, that removes no GTP-U. Open5GS's V-SMF creates its PDRs so
// (home-routed roaming), their FARs buffering, and adds the removal when
// the H-SMF has answered and the gNB's tunnel is known. Such a PDR owns
// its F-TEID, and its FAR must not forward: XDP drops what it takes.
func (p *PDR) waiting() bool {
	switch p.PDI.SourceInterface {
	case InterfaceAccess:
	case InterfaceCore:
		if p.PDI.UEAddress.IsValid() {
			return false
		}
	default:
		return false
	}
	return p.PDI.TEID != 0 && !removesGTPU(p)
}

// ipv6Prefix says p is an IPv6 prefix a UE may have: /64 or longer.
func ipv6Prefix(p netip.Prefix) bool { return p.Addr().Is6() && p.Bits() >= 64 }

// pdrKeys are the data-path keys a PDR is found by: none, one, or a
// dual-stack UE's two.
type pdrKeys struct {
	key [2]dpKey
	n   int
}

func (k *pdrKeys) all() []dpKey { return k.key[:k.n] }

// keys are the data-path keys a PDR is found by: its local F-TEID for PDRs
// of G-PDUs, the UE address (IPv6: its /64) for other core PDRs, and the
// IPv6 prefix's /64 too for a dual-stack UE. The store gave the F-TEID its
// address (Store.withAddresses).
func (p *PDR) keys() pdrKeys {
	switch {
	case p.gtpu():
		return pdrKeys{key: [2]dpKey{{fteid: upfxdp.FTEID{Addr: p.PDI.LocalAddress, TEID: p.PDI.TEID}}}, n: 1}
	case p.PDI.SourceInterface == InterfaceCore || p.PDI.SourceInterface == InterfaceSGiLAN:
		k := pdrKeys{key: [2]dpKey{{ue: ueKey(p.PDI.UEAddress)}}, n: 1}
		if ue6 := p.PDI.UEIPv6Prefix; ue6.IsValid() {
			k.key[1], k.n = dpKey{ue: ueKey(ue6)}, 2
		}
		return k
	}
	return pdrKeys{}
}

// ueKey is the address the downlink maps are keyed by.
func ueKey(p netip.Prefix) netip.Addr {
	if p.Addr().Is4() {
		return p.Addr()
	}
	return netip.PrefixFrom(p.Addr(), 64).Masked().Addr()
}

// byPrecedence orders PDR indexes highest precedence (lowest value) first,
// ties by PDR ID so the order is stable.
func byPrecedence(pdrs []PDR, idx []int) {
	slices.SortFunc(idx, func(a, b int) int {
		pa, pb := &pdrs[a], &pdrs[b]
		return cmp.Or(cmp.Compare(pa.Precedence, pb.Precedence), cmp.Compare(pa.ID, pb.ID))
	})
}
