package n4

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xdp5g/xdp5g/internal/upf/gtpu"
	"github.com/xdp5g/xdp5g/internal/upf/ippool"
	"github.com/xdp5g/xdp5g/internal/upf/pfcp"
	"github.com/xdp5g/xdp5g/internal/upf/sdf"
	"github.com/xdp5g/xdp5g/internal/upf/session"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// Translation: a request's IEs become the session model in one pass, each
// rule IE the typed rule it creates, changes or removes (a pfcpSession's
// PDRs, FARs, QERs, URRs and BAR). Nothing is allocated or installed here:
// what the request leaves to the UPF (F-TEIDs, the UE address) and what it
// needs of the data path's counters are noted in the change, for apply. The
// first IE that cannot be translated refuses the request, with the cause
// and the Failed Rule ID or Offending IE of TS 29.244 §7.2.3.

// Rule types of the Failed Rule ID IE (TS 29.244 §8.2.80).
const (
	rulePDR uint8 = 0
	ruleFAR uint8 = 1
	ruleQER uint8 = 2
	ruleURR uint8 = 3
	ruleBAR uint8 = 4
)

// Outer Header Creation description bits (§8.2.56), first two octets.
const (
	ohcGTPUv4 = 0x0100
	ohcGTPUv6 = 0x0200
)

// F-TEID flags (§8.2.3).
const (
	fteidV4 = 0x01
	fteidV6 = 0x02
)

// The SDF Filter flag of a Flow Description (§8.2.5), first octet.
const sdfFD = 0x01

// PFCPSEReq-Flags (§8.2.76) and PFCPSMReq-Flags (§8.2.59) the UPF serves.
const (
	seReqRESTI = 0x01 // a restored session: its F-TEIDs are given again
	smReqDROBU = 0x01 // drop what the buffers hold
	smReqSNDEM = 0x02 // send End Markers (in Update Forwarding Parameters)
	smReqQAURR = 0x04 // query all URRs
)

// refusal is why a request cannot be applied: its cause and, for rule
// failures, the rule, or for a missing or wrong IE, the offending type.
type refusal struct {
	cause     uint8
	ruleType  uint8
	ruleID    uint32
	hasRule   bool
	offending uint16
	msg       string
}

func (r *refusal) Error() string { return r.msg }

func ruleFailure(typ uint8, id uint32, format string, args ...any) *refusal {
	return &refusal{cause: ie.CauseRuleCreationModificationFailure, ruleType: typ, ruleID: id, hasRule: true,
		msg: fmt.Sprintf(format, args...)}
}

func missing(t uint16, where string) *refusal {
	return &refusal{cause: ie.CauseMandatoryIEMissing, offending: t, msg: fmt.Sprintf("%s lacks IE type %d", where, t)}
}

func incorrect(t uint16, where string, err error) *refusal {
	return &refusal{cause: ie.CauseMandatoryIEIncorrect, offending: t, msg: fmt.Sprintf("%s: IE type %d: %v", where, t, err)}
}

func noResources(err error) *refusal {
	return &refusal{cause: ie.CauseNoResourcesAvailable, msg: err.Error()}
}

func systemFailure(err error) *refusal {
	return &refusal{cause: ie.CauseSystemFailure, msg: err.Error()}
}

// change is a request translated: the session as the request leaves it,
// and what applying it takes besides installing that session.
type change struct {
	cfg *Config
	old *pfcpSession // nil for an establishment
	s   *pfcpSession // a copy of old that the request changed
	now time.Time

	// The F-TEIDs the UPF chooses (CH), choices of them in all: a PDR
	// takes the TEID of its choice, and PDRs of one CHOOSE ID share one
	// (§5.2.1: the ID is only meaningful within one message).
	teidChoices []teidChoice
	chooseIDs   map[uint8]int // CHOOSE ID to its choice
	choices     int
	// uePool is the pool the session's UE address comes from when the
	// request has the UPF choose it (CHV4), for the PDRs in ueFor.
	uePool *ippool.Pool
	ueFor  []uint16

	removedURRs []uint32         // their final usage reports go in the response
	granted     map[uint32]grant // URRs given quotas anew: their meters start over
	endMarkers  []endMarker      // into the tunnels the request moved away from (SNDEM)
	queried     []uint32         // URRs to report on in the response
	// mod has DROBU and the PDRs and URRs the request created, which
	// count from zero even where they take a removed rule's ID.
	mod session.Modification

	// What applying the change took, given back if it fails (undo), and
	// the usage reports of the URRs it removed.
	teids   []uint32
	ue      netip.Addr
	reports []*ie.IE
}

type teidChoice struct {
	pdr    uint16
	choice int
}

// newChange starts translating a request that turns session old (nil for
// an establishment) into s.
func (h *Handler) newChange(old, s *pfcpSession) change {
	return change{cfg: &h.cfg, old: old, s: s, now: time.Now()}
}

// translateEstablishment translates a Session Establishment Request into
// a new session.
func (h *Handler) translateEstablishment(peer pfcp.Peer, req *message.SessionEstablishmentRequest) (change, *refusal) {
	f, _ := req.CPFSEID.FSEID() // checked by the server
	// Room for the rules created, which come in any order.
	c := h.newChange(nil, &pfcpSession{cpSEID: f.SEID, cpAddrs: fseidAddrs(f), smf: peer, pdrs: slices.Grow([]session.PDR(nil), len(req.CreatePDR)),
		fars: slices.Grow([]session.FAR(nil), len(req.CreateFAR)), qers: slices.Grow([]session.QER(nil), len(req.CreateQER))})
	r := cmp.Or(notServed(slices.Concat(req.CreateTrafficEndpoint, req.CreateMAR, req.CreateSRR, present(req.UserPlaneInactivityTimer,
		req.CreateBridgeInfoForTSC, req.ProvideATSSSControlInformation, req.ProvideRDSConfigurationInformation))),
		unservedFlags(req.PFCPSEReqFlags, (*ie.IE).PFCPSEReqFlags, seReqRESTI), h.cpFSEIDTaken(c.s, nil))
	if r == nil && req.FQCSID != nil {
		c.s.csids, r = fqCSIDs(req.Payload)
	}
	if r == nil {
		r = c.translateRules(nil, slices.Concat(every(req.Payload, req.CreateBAR), req.CreateFAR, req.CreateQER, req.CreateURR, req.CreatePDR), nil)
	}
	return c, r
}

// cpFSEIDTaken refuses a request that would give s the CP F-SEID of
// another session, one that old (s before a modification; nil for an
// establishment) did not share already: the SMF names each session by its
// own (a new request, not a retransmission, which the PFCP server answers
// again), and the UPF could not tell them apart.
func (h *Handler) cpFSEIDTaken(s, old *pfcpSession) *refusal {
	owner, taken := h.cpOwner(s, old)
	if !taken {
		return nil
	}
	return &refusal{cause: ie.CauseMandatoryIEIncorrect, offending: ie.FSEID,
		msg: fmt.Sprintf("CP F-SEID %#x names session %d already", s.cpSEID, owner)}
}

// fseidAddrs are an F-SEID's IPv4 and IPv6 addresses, invalid when absent.
func fseidAddrs(f *ie.FSEIDFields) (addrs [2]netip.Addr) {
	if a, ok := netip.AddrFromSlice(f.IPv4Address); ok {
		addrs[0] = a.Unmap()
	}
	if a, ok := netip.AddrFromSlice(f.IPv6Address); ok {
		addrs[1] = a
	}
	return addrs
}

// translateModification translates a Session Modification Request of
// session old.
func (h *Handler) translateModification(old *pfcpSession, req *message.SessionModificationRequest) (change, *refusal) {
	c := h.newChange(old, old.clone())
	if req.CPFSEID != nil { // the SMF moved the session to another address or SEID
		if f, err := req.CPFSEID.FSEID(); err == nil {
			c.s.cpSEID, c.s.cpAddrs = f.SEID, fseidAddrs(f)
		}
	}
	r := cmp.Or(h.cpFSEIDTaken(c.s, old), notServed(slices.Concat(req.RemoveTrafficEndpoint, req.CreateTrafficEndpoint, req.UpdateTrafficEndpoint,
		req.RemoveMAR, req.UpdateMAR, req.CreateMAR, req.RemoveSRR, req.CreateSRR, req.UpdateSRR,
		req.AccessAvailabilityInformation, req.QueryPacketRateStatus, present(req.UserPlaneInactivityTimer,
			req.TSCManagementInformation, req.ProvideATSSSControlInformation, req.EthernetContextInformation))),
		unservedFlags(req.PFCPSMReqFlags, (*ie.IE).PFCPSMReqFlags, smReqDROBU|smReqSNDEM|smReqQAURR))
	c.mod.DropBuffered = req.PFCPSMReqFlags != nil && req.PFCPSMReqFlags.HasDROBU()
	if r == nil && req.FQCSID != nil { // the SMF moved the session to other sets
		c.s.csids, r = fqCSIDs(req.Payload)
	}
	if r == nil {
		c.queried, r = c.s.queried(req)
	}
	if r == nil {
		r = c.translateRules(slices.Concat(req.RemovePDR, req.RemoveFAR, req.RemoveQER, req.RemoveURR, every(req.Payload, req.RemoveBAR)),
			slices.Concat(every(req.Payload, req.CreateBAR), req.CreateFAR, req.CreateQER, req.CreateURR, req.CreatePDR),
			slices.Concat(every(req.Payload, req.UpdateBAR), req.UpdateFAR, req.UpdateQER, req.UpdateURR, req.UpdatePDR))
	}
	return c, r
}

// translateRules translates rule IEs: removals, creations and updates, in
// that order.
func (c *change) translateRules(removals, creates, updates []*ie.IE) *refusal {
	for _, g := range removals {
		if r := c.translateRemoval(g); r != nil {
			return r
		}
	}
	for _, g := range slices.Concat(creates, updates) {
		var r *refusal
		switch g.Type {
		case ie.CreateBAR, ie.UpdateBARWithinSessionModificationRequest, ie.UpdateBARWithinSessionReportResponse:
			r = c.translateBAR(g, g.Type == ie.CreateBAR)
		case ie.CreateFAR, ie.UpdateFAR:
			r = c.translateFAR(g, g.Type == ie.CreateFAR)
		case ie.CreateQER, ie.UpdateQER:
			r = c.translateQER(g, g.Type == ie.CreateQER)
		case ie.CreateURR, ie.UpdateURR:
			r = c.translateURR(g, g.Type == ie.CreateURR)
		case ie.CreatePDR, ie.UpdatePDR:
			r = c.translatePDR(g, g.Type == ie.CreatePDR)
		}
		if r != nil {
			return r
		}
	}
	return nil
}

// notServed refuses a request with the first of ies: top-level IEs that ask
// for a service the UPF does not give (ATSSS, TSC bridges, traffic
// endpoints, session reporting rules, user plane inactivity reports...),
// with Service not supported and the IE as the Offending IE. IEs that only
// describe the session (PDN type, DNN, S-NSSAI, user ID, trace
// information) are not among them, nor are IEs of unknown types, which a
// receiver ignores.
func notServed(ies []*ie.IE) *refusal {
	if len(ies) == 0 {
		return nil
	}
	return &refusal{cause: ie.CauseServiceNotSupported, offending: ies[0].Type,
		msg: fmt.Sprintf("IE type %d asks for a service the UPF does not give", ies[0].Type)}
}

// unservedFlags refuses a flags IE (nil: none) with a flag that is not
// among served.
func unservedFlags(flags *ie.IE, read func(*ie.IE) (uint8, error), served uint8) *refusal {
	if flags == nil {
		return nil
	}
	v, err := read(flags)
	if err != nil {
		return incorrect(flags.Type, "request", err)
	}
	if extra := v &^ served; extra != 0 {
		return &refusal{cause: ie.CauseServiceNotSupported, offending: flags.Type,
			msg: fmt.Sprintf("IE type %d: flags %#02x are not supported", flags.Type, extra)}
	}
	return nil
}

// present are the IEs that are not nil: a message's single IEs.
func present(ies ...*ie.IE) []*ie.IE {
	var out []*ie.IE
	for _, i := range ies {
		if i != nil {
			out = append(out, i)
		}
	}
	return out
}

// every returns each top-level IE of a request's body of kept's type, kept
// being the one go-pfcp holds: of an IE a request may have once (a BAR), it
// keeps the last, and the others must not vanish unseen (a second Create
// BAR is refused). None when kept is nil.
func every(body []byte, kept *ie.IE) []*ie.IE {
	if kept == nil {
		return nil
	}
	ies, err := ie.ParseMultiIEs(body)
	if err != nil {
		return []*ie.IE{kept} // the server parsed the same body: not reached
	}
	return slices.DeleteFunc(ies, func(i *ie.IE) bool { return i.Type != kept.Type })
}

// first returns the first child of type t, or nil.
func first(ies []*ie.IE, t uint16) *ie.IE {
	for _, i := range ies {
		if i.Type == t {
			return i
		}
	}
	return nil
}

// unsupported returns the first child whose type is not among the
// implemented ones: what the UPF cannot do must be refused, not ignored.
func unsupported(ies []*ie.IE, implemented ...uint16) *ie.IE {
	for _, i := range ies {
		if !slices.Contains(implemented, i.Type) {
			return i
		}
	}
	return nil
}

// ruleID reads the mandatory ID of a grouped rule IE.
func ruleID[T uint8 | uint16 | uint32](group *ie.IE, idType uint16, read func(*ie.IE) (T, error)) (T, *refusal) {
	id := first(group.ChildIEs, idType)
	if id == nil {
		return 0, missing(idType, fmt.Sprintf("IE type %d", group.Type))
	}
	v, err := read(id)
	if err != nil {
		return 0, incorrect(idType, fmt.Sprintf("IE type %d", group.Type), err)
	}
	return v, nil
}

// ruleIE is a Create or Update rule IE being translated.
type ruleIE struct {
	group  *ie.IE
	create bool
	typ    uint8  // the rule type of its Failed Rule ID
	name   string // PDR, FAR, QER, URR or BAR
	id     uint32
}

// fail refuses the request for this rule.
func (r ruleIE) fail(format string, args ...any) *refusal {
	return ruleFailure(r.typ, r.id, format, args...)
}

// check refuses a Create of a rule that exists, an Update of one that does
// not, a Create without one of the mandatory IEs, and a child IE the UPF
// does not implement.
func (r ruleIE) check(exists bool, mandatory []uint16, implemented ...uint16) *refusal {
	switch {
	case r.create && exists:
		return r.fail("%s %d exists", r.name, r.id)
	case !r.create && !exists:
		return r.fail("no %s %d to update", r.name, r.id)
	}
	if r.create {
		for _, m := range mandatory {
			if first(r.group.ChildIEs, m) == nil {
				return missing(m, fmt.Sprintf("Create %s %d", r.name, r.id))
			}
		}
	}
	if bad := unsupported(r.group.ChildIEs, implemented...); bad != nil {
		return r.fail("%s %d: IE type %d is not supported", r.name, r.id, bad.Type)
	}
	return nil
}

// translatePDR writes a Create PDR (create) or Update PDR into the session.
func (c *change) translatePDR(group *ie.IE, create bool) *refusal {
	id, r := ruleID(group, ie.PDRID, (*ie.IE).PDRID)
	if r != nil {
		return r
	}
	rule := ruleIE{group: group, create: create, typ: rulePDR, name: "PDR", id: uint32(id)}
	p, exists := pdrRules.get(c.s.pdrs, rule.id)
	if r := rule.check(exists, []uint16{ie.Precedence, ie.PDI},
		ie.PDRID, ie.Precedence, ie.PDI, ie.OuterHeaderRemoval, ie.FARID, ie.QERID, ie.URRID); r != nil {
		return r
	}
	if create {
		p = session.PDR{ID: id}
		c.mod.CreatedPDRs = append(c.mod.CreatedPDRs, id)
	}
	fail := rule.fail
	// The QERs and URRs named replace the PDR's.
	if first(group.ChildIEs, ie.QERID) != nil {
		p.QERIDs = nil
	}
	if first(group.ChildIEs, ie.URRID) != nil {
		p.URRIDs = nil
	}
	for _, ch := range group.ChildIEs {
		var err error
		switch ch.Type {
		case ie.Precedence:
			p.Precedence, err = ch.Precedence()
		case ie.FARID:
			p.FARID, err = ch.FARID()
		case ie.QERID:
			var qer uint32
			qer, err = ch.QERID()
			p.QERIDs = append(p.QERIDs, qer)
		case ie.URRID:
			var urr uint32
			urr, err = ch.URRID()
			p.URRIDs = append(p.URRIDs, urr)
		case ie.OuterHeaderRemoval:
			var desc uint8
			desc, err = ch.OuterHeaderRemovalDescription()
			p.OuterHeaderRemoval = &desc
		case ie.PDI:
			if r := c.translatePDI(&p, ch); r != nil {
				return r
			}
		}
		if err != nil {
			return fail("PDR %d: IE type %d: %v", id, ch.Type, err)
		}
	}
	if create && first(group.ChildIEs, ie.FARID) == nil {
		return fail("PDR %d has no FAR", id)
	}
	c.s.pdrs = pdrRules.put(c.s.pdrs, p)
	return nil
}

// translatePDI replaces p's PDI; an F-TEID or UE address the UPF is to
// choose is noted for apply.
func (c *change) translatePDI(p *session.PDR, group *ie.IE) *refusal {
	fail := func(format string, args ...any) *refusal { return ruleFailure(rulePDR, uint32(p.ID), format, args...) }
	pdi := group.ChildIEs
	if first(pdi, ie.SourceInterface) == nil {
		return missing(ie.SourceInterface, fmt.Sprintf("PDI of PDR %d", p.ID))
	}
	if bad := unsupported(pdi, ie.SourceInterface, ie.FTEID, ie.NetworkInstance, ie.UEIPAddress, ie.QFI, ie.SDFFilter,
		ie.TGPPInterfaceType); bad != nil {
		return fail("PDR %d: PDI IE type %d is not supported", p.ID, bad.Type)
	}
	p.PDI = session.PDI{}
	c.forgetChoices(p.ID) // of a PDI the request gave the PDR before
	for _, ch := range pdi {
		switch ch.Type {
		case ie.SourceInterface:
			v, err := ch.SourceInterface()
			if err != nil {
				return fail("PDR %d: source interface: %v", p.ID, err)
			}
			p.PDI.SourceInterface = session.Interface(v)
		case ie.QFI:
			v, err := ch.QFI()
			if err != nil {
				return fail("PDR %d: QFI: %v", p.ID, err)
			}
			p.PDI.QFI = v
		case ie.SDFFilter:
			f, r := sdfFilter(p.ID, ch)
			if r != nil {
				return r
			}
			p.PDI.SDFFilters = append(p.PDI.SDFFilters, f)
		}
	}
	instance := ""
	if n := first(pdi, ie.NetworkInstance); n != nil {
		instance = instanceName(n)
	}
	if ch := first(pdi, ie.FTEID); ch != nil {
		s, r := c.side(p, pdi, instance)
		if r != nil {
			return r
		}
		if r := c.localFTEID(p, ch, s); r != nil {
			return r
		}
	}
	if ch := first(pdi, ie.UEIPAddress); ch != nil {
		if r := c.ueAddress(p, ch, instance); r != nil {
			return r
		}
	}
	return nil
}

// fteidSide is the side of the UPF a PDR's local F-TEID is on, and what
// says so.
type fteidSide struct {
	n9  bool
	why string // the PDI's 3GPP Interface Type or Network Instance; "" when only its source interface says
}

// The 3GPP Interface Types (§8.2.118) of each side: N9 and S5/S8-U, its
// counterpart between an SGW-U and a PGW-U, towards other UPFs; N3 and
// S1-U towards the RAN. The others (N6, SGi, the data-forwarding types of
// the SGW/UPF, …) say nothing of the side.
var (
	n9InterfaceTypes = map[uint8]string{1: "S5/S8-U", 15: "N9", 19: "S8-U", 21: "N9 for roaming", 23: "N9 for data forwarding"}
	n3InterfaceTypes = map[uint8]string{0: "S1-U", 11: "N3 3GPP Access", 12: "N3 Trusted Non-3GPP Access",
		13: "N3 Untrusted Non-3GPP Access", 14: "N3 for data forwarding"}
)

// side says on which side a PDR's local F-TEID is: N9 when its PDI's 3GPP
// Interface Type is an N9 one or its Network Instance one of N9Instances,
// N3 when the type is an N3 one, else N9 for a PDR from the core (an
// I-UPF's downlink from the PSA) and N3 otherwise.
func (c *change) side(p *session.PDR, pdi []*ie.IE, instance string) (fteidSide, *refusal) {
	n9Instance := slices.Contains(c.cfg.N9Instances, instance) // none is named ""
	if ch := first(pdi, ie.TGPPInterfaceType); ch != nil {
		v, err := ch.TGPPInterfaceType()
		if err != nil {
			return fteidSide{}, ruleFailure(rulePDR, uint32(p.ID), "PDR %d: 3GPP interface type: %v", p.ID, err)
		}
		if name, ok := n9InterfaceTypes[v]; ok {
			return fteidSide{n9: true, why: "3GPP interface type " + name}, nil
		}
		if name, ok := n3InterfaceTypes[v]; ok && !n9Instance {
			return fteidSide{why: "3GPP interface type " + name}, nil
		}
	}
	if n9Instance {
		return fteidSide{n9: true, why: fmt.Sprintf("network instance %q", instance)}, nil
	}
	return fteidSide{n9: p.PDI.SourceInterface == session.InterfaceCore}, nil
}

// instanceName reads a Network Instance IE's name. SMFs write it as a
// plain string or encoded as an APN (§8.2.4: length-prefixed labels, as
// Open5GS does): the labels are joined with dots, so that both match
// the name in the configuration.
func instanceName(c *ie.IE) string {
	b := c.Payload
	var labels []string
	for len(b) > 0 {
		n := int(b[0])
		if n == 0 || n >= len(b) {
			return string(c.Payload)
		}
		labels, b = append(labels, string(b[1:1+n])), b[1+n:]
	}
	return strings.Join(labels, ".")
}

// sdfFilter reads an SDF Filter IE of PDR id: its flow description, as
// written (the store turns it around for uplink PDRs). The fields that
// restrict a match further are refused. A filter ID (BID) is accepted
// along with a flow description, and dropped: it only lets later PDRs name
// the filter instead of repeating it, and without a description it names
// one this UPF does not keep.
func sdfFilter(id uint16, c *ie.IE) (session.SDFFilter, *refusal) {
	fail := func(why string) *refusal {
		return ruleFailure(rulePDR, uint32(id), "PDR %d: SDF filter: %s", id, why)
	}
	f, err := sdf.ParseIE(c.Payload)
	switch {
	case err != nil:
		return session.SDFFilter{}, fail(err.Error())
	case f.TOS.Mask != 0 || f.SPI != 0 || f.HasFlowLabel:
		return session.SDFFilter{}, fail("only the flow description is supported, not ToS, SPI or flow label")
	case f.Bidirectional && c.Payload[0]&sdfFD == 0:
		return session.SDFFilter{}, fail(fmt.Sprintf("filter ID %d without a flow description is not supported", f.ID))
	}
	f.TOS, f.ID, f.Bidirectional = sdf.TOS{}, 0, false
	return session.SDFFilter{Filter: f}, nil
}

// localFTEID sets the F-TEID the UPF receives on: the SMF's, at one of
// its N3 or N9 addresses (on side s when the PDI says which), or one for
// the UPF to choose (CH) on side s, the same for the PDRs of the request
// with the same CHOOSE ID.
func (c *change) localFTEID(p *session.PDR, ch *ie.IE, s fteidSide) *refusal {
	f, err := ch.FTEID()
	if err != nil {
		return ruleFailure(rulePDR, uint32(p.ID), "PDR %d: F-TEID: %v", p.ID, err)
	}
	if !f.HasCh() {
		// One address, ours: G-PDUs are matched by TEID and the address
		// they are sent to.
		var a netip.Addr
		switch {
		case f.HasIPv4() && f.HasIPv6():
			return ruleFailure(rulePDR, uint32(p.ID), "PDR %d: F-TEID with an IPv4 and an IPv6 address: G-PDUs are matched by one", p.ID)
		case f.HasIPv4():
			a = addr4(f.IPv4Address)
		case f.HasIPv6():
			a = addr4(f.IPv6Address)
		default:
			return ruleFailure(rulePDR, uint32(p.ID), "PDR %d: F-TEID without an address", p.ID)
		}
		if !slices.Contains(c.cfg.N3, a) && !slices.Contains(c.cfg.N9, a) {
			return ruleFailure(rulePDR, uint32(p.ID), "PDR %d: F-TEID %v is not an N3 or N9 address of this UPF", p.ID, a)
		}
		if s.why != "" && c.cfg.otherSide(a, s.n9) {
			return ruleFailure(rulePDR, uint32(p.ID), "PDR %d: F-TEID %v is not an %s address of this UPF, as its %s says",
				p.ID, a, map[bool]string{false: "N3", true: "N9"}[s.n9], s.why)
		}
		if f.TEID == 0 {
			return ruleFailure(rulePDR, uint32(p.ID), "PDR %d: F-TEID with TEID 0", p.ID)
		}
		p.PDI.TEID, p.PDI.LocalAddress = f.TEID, a
		return nil
	}
	// The first address of a family asked for (V4, V6, both; the order of
	// the addresses decides between them) on side s, N3's when N9 has none.
	fits := func(a netip.Addr) bool { return a.Is4() && f.HasIPv4() || a.Is6() && f.HasIPv6() }
	if p.PDI.LocalAddress = session.SideAddress(c.cfg.N3, c.cfg.N9, s.n9, fits); !p.PDI.LocalAddress.IsValid() {
		return &refusal{cause: ie.CauseInvalidFTEIDAllocationOption,
			msg: fmt.Sprintf("PDR %d: no N3 or N9 address of the family the F-TEID is to be chosen of (V4, V6)", p.ID)}
	}
	n, shared := c.chooseIDs[f.ChooseID]
	if !f.HasChID() || !shared {
		n = c.choices
		c.choices++
		if f.HasChID() {
			setIn(&c.chooseIDs, f.ChooseID, n)
		}
	}
	if c.teidChoices == nil {
		c.teidChoices = make([]teidChoice, 0, 4) // room for a session's usual PDRs
	}
	c.teidChoices = append(c.teidChoices, teidChoice{p.ID, n})
	return nil
}

// ueAddress sets the PDR's UE address: the SMF's, or for CHV4 the
// session's address from the pool of the PDI's network instance, which
// the UPF chooses once per session.
func (c *change) ueAddress(p *session.PDR, ch *ie.IE, instance string) *refusal {
	fail := func(format string, args ...any) *refusal { return ruleFailure(rulePDR, uint32(p.ID), format, args...) }
	f, err := ch.UEIPAddress()
	if err != nil {
		return fail("PDR %d: UE IP address: %v", p.ID, err)
	}
	// The UE address is the source of uplink packets and the destination
	// of downlink ones (S/D flag, §8.2.62).
	wantSD := p.PDI.SourceInterface != session.InterfaceAccess
	if ch.HasSD() != wantSD {
		return fail("PDR %d: the UE address of a PDR from interface %d must be its %s (S/D flag)", p.ID, p.PDI.SourceInterface,
			map[bool]string{false: "source", true: "destination"}[wantSD])
	}
	if ch.HasCHV6() {
		return fail("PDR %d: IPv6 UE prefixes are not allocated by this UPF", p.ID)
	}
	// A dual-stack UE's IE has both families (Open5GS's for an IPv4v6
	// PDU session): the IPv6 prefix goes beside the IPv4 address, given
	// or chosen.
	var ue6 netip.Prefix
	if f.IPv6Address != nil {
		bits := 64
		if ch.HasIP6PL() {
			bits = int(f.IPv6PrefixLength)
		}
		a, _ := netip.AddrFromSlice(f.IPv6Address)
		ue6 = netip.PrefixFrom(a, bits)
	}
	switch {
	case ch.HasCHV4():
		p.PDI.UEIPv6Prefix = ue6
		pool := c.cfg.uePool(instance)
		switch {
		case pool == nil:
			return fail("PDR %d: no UE address pool is configured for network instance %q (CHV4)", p.ID, instance)
		case c.s.ue4.IsValid():
			if !pool.Prefix().Contains(c.s.ue4) {
				return fail("PDR %d: the session's UE address %v is not of network instance %q's pool %v (CHV4)",
					p.ID, c.s.ue4, instance, pool.Prefix())
			}
			p.PDI.UEAddress = netip.PrefixFrom(c.s.ue4, 32)
			return nil
		case c.uePool == nil:
			if pool.Allocated() >= pool.Size() {
				return noResources(pool.Exhausted())
			}
			c.uePool = pool
		case c.uePool != pool: // pools do not overlap
			return fail("PDR %d: the session's UE address, of pool %v, is not of network instance %q's pool %v (CHV4)",
				p.ID, c.uePool.Prefix(), instance, pool.Prefix())
		}
		c.ueFor = append(c.ueFor, p.ID)
	case f.IPv4Address != nil:
		p.PDI.UEAddress, p.PDI.UEIPv6Prefix = netip.PrefixFrom(addr4(f.IPv4Address), 32), ue6
	case ue6.IsValid():
		p.PDI.UEAddress = ue6
	default:
		return fail("PDR %d: UE IP address IE without an address", p.ID)
	}
	return nil
}

// forgetChoices forgets the F-TEID and UE address choices noted for a
// PDR, whose PDI is being replaced.
func (c *change) forgetChoices(pdr uint16) {
	c.teidChoices = slices.DeleteFunc(c.teidChoices, func(t teidChoice) bool { return t.pdr == pdr })
	c.ueFor = slices.DeleteFunc(c.ueFor, func(id uint16) bool { return id == pdr })
}

// translateFAR writes a Create FAR (create) or Update FAR into the session.
func (c *change) translateFAR(group *ie.IE, create bool) *refusal {
	id, r := ruleID(group, ie.FARID, (*ie.IE).FARID)
	if r != nil {
		return r
	}
	rule := ruleIE{group: group, create: create, typ: ruleFAR, name: "FAR", id: id}
	params := ie.ForwardingParameters
	if !create {
		params = ie.UpdateForwardingParameters
	}
	dupParams := ie.DuplicatingParameters
	if !create {
		dupParams = ie.UpdateDuplicatingParameters
	}
	f, exists := farRules.get(c.s.fars, id)
	if r := rule.check(exists, []uint16{ie.ApplyAction}, ie.FARID, ie.ApplyAction, params, dupParams, ie.BARID); r != nil {
		return r
	}
	if create {
		f = session.FAR{ID: id}
		c.mod.CreatedFARs = append(c.mod.CreatedFARs, id)
	}
	fail := rule.fail
	if r := c.checkBARID(id, group); r != nil {
		return r
	}
	dupl := f.Duplicating != nil
	if ch := first(group.ChildIEs, ie.ApplyAction); ch != nil {
		forw, drop, buff := ch.HasFORW(), ch.HasDROP(), ch.HasBUFF()
		dupl = ch.HasDUPL() // with any of the three (§8.2.26)
		switch {
		case forw && !drop && !buff:
			f.Action = session.ActionForward
		case drop && !forw && !buff:
			f.Action = session.ActionDrop
		case buff && !forw && !drop:
			f.Action = session.ActionBuffer
		default:
			return fail("FAR %d: apply action must be one of FORW, DROP and BUFF, with DUPL or without", id)
		}
		// NOCP: the SMF wants to hear of the first packet buffered.
		if buff && ch.HasNOCP() {
			setIn(&c.s.notify, id, true)
		} else {
			delete(c.s.notify, id)
		}
	}
	if ch := first(group.ChildIEs, params); ch != nil {
		old := f.OuterHeaderCreation
		if r := forwarding(&f, ch.ChildIEs, create, "forwarding", c.cfg.ForwardingPolicies, c.cfg.gtpuAddresses()); r != nil {
			return r
		}
		// SNDEM: the gNB moved; the old one learns that nothing more comes
		// on the old tunnel (§5.2.1, TS 29.281 §7.3.2).
		if flags := first(ch.ChildIEs, ie.PFCPSMReqFlags); flags != nil && flags.HasSNDEM() && old != nil &&
			(f.OuterHeaderCreation == nil || *old != *f.OuterHeaderCreation) {
			// Along the old tunnel's path: from where the session's rules
			// before the request sent it.
			src := c.cfg.Store.TunnelSource(&session.Session{PDRs: c.old.pdrs}, &session.FAR{Forwarding: session.Forwarding{DestinationInterface: f.DestinationInterface, OuterHeaderCreation: old}})
			c.endMarkers = append(c.endMarkers, endMarker{gtpu.Path{Local: src, Peer: old.Peer}, old.TEID})
		}
	}
	if f.Action == session.ActionForward && create && first(group.ChildIEs, params) == nil {
		return fail("FAR %d forwards without forwarding parameters", id)
	}
	if r := duplicating(&f, group.ChildIEs, dupParams, dupl, c.cfg.ForwardingPolicies, c.cfg.gtpuAddresses()); r != nil {
		return r
	}
	c.s.fars = farRules.put(c.s.fars, f)
	return nil
}

// duplicating applies the (Update) Duplicating Parameters of a FAR's IEs,
// of type typ, to f: dupl says whether its Apply Action has DUPL. Copies
// go to one destination.
func duplicating(f *session.FAR, ies []*ie.IE, typ uint16, dupl bool, policies map[string]netip.Addr, gtpu []netip.Addr) *refusal {
	var groups []*ie.IE
	for _, i := range ies {
		if i.Type == typ {
			groups = append(groups, i)
		}
	}
	switch {
	case len(groups) > 1:
		return ruleFailure(ruleFAR, f.ID, "FAR %d: copies go to one destination, not %d", f.ID, len(groups))
	case !dupl && len(groups) > 0:
		return ruleFailure(ruleFAR, f.ID, "FAR %d: duplicating parameters without DUPL in its apply action", f.ID)
	case !dupl:
		f.Duplicating = nil
		return nil
	case len(groups) == 0 && f.Duplicating == nil:
		// §7.5.2.3: present when the Apply Action asks for duplication.
		return &refusal{cause: ie.CauseConditionalIEMissing, offending: ie.DuplicatingParameters,
			msg: fmt.Sprintf("FAR %d duplicates without duplicating parameters", f.ID)}
	case len(groups) == 0:
		return nil
	}
	params := groups[0].ChildIEs
	if bad := unsupported(params, ie.DestinationInterface, ie.OuterHeaderCreation, ie.TransportLevelMarking,
		ie.ForwardingPolicy); bad != nil {
		return ruleFailure(ruleFAR, f.ID, "FAR %d: duplicating parameter IE type %d is not supported", f.ID, bad.Type)
	}
	// The parameters are those of forwarding, read into a FAR of their own.
	was := session.FAR{ID: f.ID}
	if d := f.Duplicating; d != nil {
		was.Forwarding = *d
	}
	if r := forwarding(&was, params, f.Duplicating == nil, "duplicating", policies, gtpu); r != nil {
		return r
	}
	f.Duplicating = &was.Forwarding
	return nil
}

// forwarding applies (Update) Forwarding Parameters, or the Duplicating
// Parameters (what names which), to f; gtpu are the UPF's GTP-U addresses.
func forwarding(f *session.FAR, params []*ie.IE, create bool, what string, policies map[string]netip.Addr, gtpu []netip.Addr) *refusal {
	fail := func(format string, args ...any) *refusal { return ruleFailure(ruleFAR, f.ID, format, args...) }
	if create && first(params, ie.DestinationInterface) == nil {
		return missing(ie.DestinationInterface, fmt.Sprintf("%s parameters of FAR %d", what, f.ID))
	}
	// The 3GPP Interface Type only names the destination's interface.
	if bad := unsupported(params, ie.DestinationInterface, ie.NetworkInstance, ie.OuterHeaderCreation, ie.PFCPSMReqFlags,
		ie.TransportLevelMarking, ie.ForwardingPolicy, ie.TGPPInterfaceType); bad != nil {
		return fail("FAR %d: forwarding parameter IE type %d is not supported", f.ID, bad.Type)
	}
	for _, c := range params {
		switch c.Type {
		case ie.DestinationInterface:
			v, err := c.DestinationInterface()
			if err != nil {
				return fail("FAR %d: destination interface: %v", f.ID, err)
			}
			f.DestinationInterface = session.Interface(v)
		case ie.OuterHeaderCreation:
			o, err := c.OuterHeaderCreation()
			if err != nil {
				return fail("FAR %d: outer header creation: %v", f.ID, err)
			}
			peer, ok := ohcPeer(o, gtpu)
			if !ok {
				return fail("FAR %d: only GTP-U/UDP/IPv4 and GTP-U/UDP/IPv6 outer headers can be created", f.ID)
			}
			f.OuterHeaderCreation = &session.OuterHeaderCreation{TEID: o.TEID, Peer: peer, Port: o.PortNumber}
		case ie.TransportLevelMarking:
			// ToS octet and its mask (§8.2.12): the DSCP is what the
			// mask keeps of the upper six bits.
			v, err := c.TransportLevelMarking()
			if err != nil {
				return fail("FAR %d: transport level marking: %v", f.ID, err)
			}
			f.DSCP = uint8(v>>8) & uint8(v) >> 2
		case ie.ForwardingPolicy:
			id, err := c.ForwardingPolicyIdentifier()
			if err != nil {
				return fail("FAR %d: forwarding policy: %v", f.ID, err)
			}
			hop, ok := policies[id]
			if !ok {
				return fail("FAR %d: no forwarding policy %q is configured", f.ID, id)
			}
			f.NextHop = hop
		}
	}
	return nil
}

// ohcPeer is the peer of an Outer Header Creation of GTP-U over IPv4,
// IPv6 or, both bits set (a dual-stack peer), IPv4 when the UPF has an
// IPv4 GTP-U address of gtpu; false for another description.
func ohcPeer(o *ie.OuterHeaderCreationFields, gtpu []netip.Addr) (netip.Addr, bool) {
	switch o.OuterHeaderCreationDescription {
	case ohcGTPUv4:
		return addr4(o.IPv4Address), true
	case ohcGTPUv6:
		return addr4(o.IPv6Address), true
	case ohcGTPUv4 | ohcGTPUv6:
		if slices.ContainsFunc(gtpu, netip.Addr.Is4) {
			return addr4(o.IPv4Address), true
		}
		return addr4(o.IPv6Address), true
	}
	return netip.Addr{}, false
}

// checkBARID refuses a FAR that names a BAR the session does not have.
func (c *change) checkBARID(f uint32, group *ie.IE) *refusal {
	ch := first(group.ChildIEs, ie.BARID)
	if ch == nil {
		return nil
	}
	id, err := ch.BARID()
	if err != nil {
		return ruleFailure(ruleFAR, f, "FAR %d: BAR ID: %v", f, err)
	}
	if c.s.bar == nil || c.s.bar.id != id {
		return ruleFailure(ruleFAR, f, "FAR %d names BAR %d, which the session does not have", f, id)
	}
	return nil
}

// translateQER writes a Create QER (create) or Update QER into the session.
func (c *change) translateQER(group *ie.IE, create bool) *refusal {
	id, r := ruleID(group, ie.QERID, (*ie.IE).QERID)
	if r != nil {
		return r
	}
	rule := ruleIE{group: group, create: create, typ: ruleQER, name: "QER", id: id}
	q, exists := qerRules.get(c.s.qers, id)
	// A QER Correlation ID would share the rates with other sessions;
	// packet rates, flow level marking and the rest are not enforced.
	if r := rule.check(exists, []uint16{ie.GateStatus}, ie.QERID, ie.GateStatus, ie.MBR, ie.GBR, ie.QFI, ie.RQI); r != nil {
		return r
	}
	if create {
		q = session.QER{ID: id}
	}
	fail := rule.fail
	for _, ch := range group.ChildIEs {
		var err error
		switch ch.Type {
		case ie.GateStatus:
			var ul, dl uint8
			if ul, dl, err = ch.GateStatusULDL(); err == nil && (ul > ie.GateStatusClosed || dl > ie.GateStatusClosed) {
				err = fmt.Errorf("spare gate status value")
			}
			q.GateULClosed, q.GateDLClosed = ul == ie.GateStatusClosed, dl == ie.GateStatusClosed
		case ie.MBR:
			q.MBRUL, q.MBRDL, err = bitRates(ch.MBRUL, ch.MBRDL)
		case ie.GBR:
			q.GBRUL, q.GBRDL, err = bitRates(ch.GBRUL, ch.GBRDL)
		case ie.QFI:
			q.QFI, err = ch.QFI()
		case ie.RQI:
			_, err = ch.RQI()
			q.RQI = ch.HasRQI()
		}
		if err != nil {
			return fail("QER %d: IE type %d: %v", id, ch.Type, err)
		}
	}
	c.s.qers = qerRules.put(c.s.qers, q)
	return nil
}

// bitRates reads the uplink and downlink rates of an MBR or GBR IE, in
// kilobits per second on the wire (§8.2.8), as bits per second.
func bitRates(ul, dl func() (uint64, error)) (uint64, uint64, error) {
	u, err := ul()
	if err != nil {
		return 0, 0, err
	}
	d, err := dl()
	return u * 1000, d * 1000, err
}

// translateURR writes a Create URR (create) or Update URR into the session.
// A new URR's meter starts at zero; one given quotas anew starts over from
// its counters, which apply reads.
func (c *change) translateURR(group *ie.IE, create bool) *refusal {
	id, r := ruleID(group, ie.URRID, (*ie.IE).URRID)
	if r != nil {
		return r
	}
	rule := ruleIE{group: group, create: create, typ: ruleURR, name: "URR", id: id}
	u, exists := c.s.urrs[id]
	if r := rule.check(exists, []uint16{ie.MeasurementMethod, ie.ReportingTriggers},
		ie.URRID, ie.MeasurementMethod, ie.ReportingTriggers, ie.MeasurementPeriod, ie.VolumeThreshold, ie.VolumeQuota,
		ie.TimeThreshold, ie.TimeQuota, ie.QuotaValidityTime, ie.MeasurementInformation); r != nil {
		return r
	}
	if create {
		u = urr{id: id}
	}
	g, r := parseURR(&u, rule)
	if r != nil {
		return r
	}
	if create {
		c.mod.CreatedURRs = append(c.mod.CreatedURRs, id)
		setIn(&c.s.meters, id, newMeter(upfxdp.URRUsage{}, c.now))
	} else if g != (grant{}) {
		prev := c.granted[id]
		setIn(&c.granted, id, grant{prev.volume || g.volume, prev.time || g.time, prev.validity || g.validity})
	}
	setIn(&c.s.urrs, id, u)
	return nil
}

// grant says which quotas, or a validity time for them, a Create or Update
// URR gave.
type grant struct{ volume, time, validity bool }

// parseURR reads a Create URR (into a zero urr) or an Update URR (into the
// current one), checked already for its presence and its IEs' types.
func parseURR(u *urr, rule ruleIE) (g grant, r *refusal) {
	fail := rule.fail
	for _, c := range rule.group.ChildIEs {
		var err error
		switch c.Type {
		case ie.MeasurementMethod:
			if _, err = c.MeasurementMethod(); err == nil && c.HasEVENT() {
				err = fmt.Errorf("event measurement is not supported")
			}
			u.volume, u.duration = c.HasVOLUM(), c.HasDURAT()
		case ie.ReportingTriggers:
			var rt []byte
			if rt, err = c.ReportingTriggers(); err == nil {
				u.triggers = 0
				for i, b := range rt[:min(len(rt), 3)] {
					u.triggers |= uint32(b) << (8 * i)
				}
				if extra := u.triggers &^ implementedTriggers; extra != 0 {
					err = fmt.Errorf("reporting triggers %#06x are not supported", extra)
				}
			}
		case ie.MeasurementPeriod:
			u.period, err = c.MeasurementPeriod()
		case ie.VolumeThreshold:
			var f *ie.VolumeThresholdFields
			if f, err = c.VolumeThreshold(); err == nil {
				u.volThreshold = volumes(f.Flags, f.TotalVolume, f.UplinkVolume, f.DownlinkVolume)
			}
		case ie.VolumeQuota:
			var f *ie.VolumeQuotaFields
			if f, err = c.VolumeQuota(); err == nil {
				u.volQuota, g.volume = volumes(f.Flags, f.TotalVolume, f.UplinkVolume, f.DownlinkVolume), true
			}
		case ie.TimeThreshold:
			u.timeThreshold, err = c.TimeThreshold()
		case ie.TimeQuota:
			u.timeQuota, err = c.TimeQuota()
			g.time = true
		case ie.QuotaValidityTime:
			u.quotaValidity, err = c.QuotaValidityTime()
			g.validity = true
		case ie.MeasurementInformation:
			var mi uint8
			if mi, err = c.MeasurementInformation(); err == nil && mi&^(miMBQE|miISTM|miMNOP) != 0 {
				err = fmt.Errorf("measurement information %#02x is not supported", mi&^(miMBQE|miISTM|miMNOP))
			}
			u.beforeQoS, u.immediateStart, u.countPackets = mi&miMBQE != 0, mi&miISTM != 0, mi&miMNOP != 0
		}
		if err != nil {
			return g, fail("URR %d: IE type %d: %v", u.id, c.Type, err)
		}
	}
	return g, u.check(fail)
}

// check refuses a URR whose triggers lack what they need.
func (u *urr) check(fail func(string, ...any) *refusal) *refusal {
	switch {
	case !u.volume && !u.duration:
		return fail("URR %d measures neither volume nor duration", u.id)
	case u.triggers&trigPERIO != 0 && u.period <= 0:
		return fail("URR %d: periodic reporting without a measurement period", u.id)
	case u.triggers&trigVOLTH != 0 && u.volThreshold == [3]uint64{}:
		return fail("URR %d: volume threshold trigger without a volume threshold", u.id)
	case u.triggers&trigTIMTH != 0 && u.timeThreshold <= 0:
		return fail("URR %d: time threshold trigger without a time threshold", u.id)
	case u.triggers&trigQUVTI != 0 && u.quotaValidity <= 0:
		return fail("URR %d: quota validity time trigger without a quota validity time", u.id)
	case (u.volQuota != [3]uint64{} || u.triggers&trigVOLTH != 0) && !u.volume:
		return fail("URR %d: volume limits without volume measurement", u.id)
	}
	return nil
}

// volumes orders the volumes of a Volume Threshold or Quota (§8.2.13,
// §8.2.50) as the data path does, 0 for the absent ones.
func volumes(flags uint8, total, ul, dl uint64) (v [3]uint64) {
	for i, x := range [3]uint64{total, ul, dl} {
		if flags&(1<<i) != 0 { // TOVOL, ULVOL, DLVOL
			v[i] = x
		}
	}
	return v
}

// translateBAR writes a Create BAR (create) or Update BAR into the session.
func (c *change) translateBAR(group *ie.IE, create bool) *refusal {
	id, r := ruleID(group, ie.BARID, (*ie.IE).BARID)
	if r != nil {
		return r
	}
	fail := ruleIE{group: group, create: create, typ: ruleBAR, name: "BAR", id: uint32(id)}.fail
	switch {
	case create && c.s.bar != nil:
		return fail("BAR %d: the session has BAR %d already", id, c.s.bar.id)
	case !create && (c.s.bar == nil || c.s.bar.id != id):
		return fail("no BAR %d to update", id)
	}
	if bad := unsupported(group.ChildIEs, ie.BARID, ie.SuggestedBufferingPacketsCount, ie.DownlinkDataNotificationDelay); bad != nil {
		return fail("BAR %d: IE type %d is not supported", id, bad.Type)
	}
	b := bar{id: id}
	if c.s.bar != nil {
		b = *c.s.bar
	}
	for _, ch := range group.ChildIEs {
		var err error
		switch ch.Type {
		case ie.SuggestedBufferingPacketsCount:
			b.suggested, err = ch.SuggestedBufferingPacketsCount()
		case ie.DownlinkDataNotificationDelay:
			b.ddnDelay, err = ch.DownlinkDataNotificationDelay()
		}
		if err != nil {
			return fail("BAR %d: IE type %d: %v", id, ch.Type, err)
		}
	}
	c.s.bar = &b
	return nil
}

// translateRemoval removes a PDR, FAR, QER, URR or the BAR by its ID; a
// URR's final usage report goes in the response.
func (c *change) translateRemoval(group *ie.IE) *refusal {
	switch group.Type {
	case ie.RemovePDR:
		id, r := ruleID(group, ie.PDRID, (*ie.IE).PDRID)
		if r != nil {
			return r
		}
		return removeRule(pdrRules, &c.s.pdrs, uint32(id), rulePDR, "PDR")
	case ie.RemoveFAR:
		id, r := ruleID(group, ie.FARID, (*ie.IE).FARID)
		if r != nil {
			return r
		}
		delete(c.s.notify, id)
		return removeRule(farRules, &c.s.fars, id, ruleFAR, "FAR")
	case ie.RemoveQER:
		id, r := ruleID(group, ie.QERID, (*ie.IE).QERID)
		if r != nil {
			return r
		}
		return removeRule(qerRules, &c.s.qers, id, ruleQER, "QER")
	case ie.RemoveBAR:
		id, r := ruleID(group, ie.BARID, (*ie.IE).BARID)
		if r != nil {
			return r
		}
		if c.s.bar == nil || c.s.bar.id != id {
			return ruleFailure(ruleBAR, uint32(id), "no BAR %d to remove", id)
		}
		c.s.bar = nil
		return nil
	default:
		id, r := ruleID(group, ie.URRID, (*ie.IE).URRID)
		if r != nil {
			return r
		}
		if _, ok := c.s.urrs[id]; !ok {
			return ruleFailure(ruleURR, id, "no URR %d to remove", id)
		}
		c.removedURRs = append(c.removedURRs, id)
		delete(c.s.meters, id)
		delete(c.s.urrs, id)
		return nil
	}
}

func removeRule[T any](kind ruleKind[T], rules *[]T, id uint32, typ uint8, name string) *refusal {
	var removed bool
	if *rules, removed = kind.remove(*rules, id); !removed {
		return ruleFailure(typ, id, "no %s %d to remove", name, id)
	}
	return nil
}

// queried are the URRs a modification asks to report on now: those of
// its Query URR IEs, or all of them (QAURR flag, §8.2.41).
func (s *pfcpSession) queried(req *message.SessionModificationRequest) ([]uint32, *refusal) {
	if req.PFCPSMReqFlags != nil && req.PFCPSMReqFlags.HasQAURR() {
		return slices.Sorted(maps.Keys(s.urrs)), nil
	}
	var ids []uint32
	for _, g := range req.QueryURR {
		id, r := ruleID(g, ie.URRID, (*ie.IE).URRID)
		if r != nil {
			return nil, r
		}
		if _, ok := s.urrs[id]; !ok {
			return nil, ruleFailure(ruleURR, id, "no URR %d to query", id)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// addr4 reads an address of an IE: four octets, or sixteen for IPv6.
func addr4(ip []byte) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}
