package n4

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xdp5g/xdp5g/internal/upf/sdf"
	"github.com/xdp5g/xdp5g/internal/upf/session"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// Rule types of the Failed Rule ID IE (TS 29.244 §8.2.80).
const (
	rulePDR uint8 = 0
	ruleFAR uint8 = 1
	ruleQER uint8 = 2
	ruleURR uint8 = 3
	ruleBAR uint8 = 4
)

// Outer Header Creation description bits (§8.2.56), first two octets.
const ohcGTPUv4 = 0x0100

// The SDF Filter flag of a Flow Description (§8.2.5), first octet.
const sdfFD = 0x01

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

// PFCPSEReq-Flags (§8.2.76) and PFCPSMReq-Flags (§8.2.59) the UPF serves.
const (
	seReqRESTI = 0x01 // a restored session: its F-TEIDs are given again
	smReqDROBU = 0x01 // drop what the buffers hold
	smReqSNDEM = 0x02 // send End Markers (in Update Forwarding Parameters)
	smReqQAURR = 0x04 // query all URRs
)

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

// applyPDR writes a Create PDR (create) or Update PDR into s.
func (t *txn) applyPDR(group *ie.IE, create bool) *refusal {
	id, r := ruleID(group, ie.PDRID, (*ie.IE).PDRID)
	if r != nil {
		return r
	}
	fail := func(format string, args ...any) *refusal { return ruleFailure(rulePDR, uint32(id), format, args...) }
	p, exists := pdrRules.get(t.s.pdrs, uint32(id))
	if r := presence(create, exists, fail, "PDR", uint32(id)); r != nil {
		return r
	}
	if create {
		for _, m := range []uint16{ie.Precedence, ie.PDI} {
			if first(group.ChildIEs, m) == nil {
				return missing(m, fmt.Sprintf("Create PDR %d", id))
			}
		}
		p = session.PDR{ID: id}
	}
	if bad := unsupported(group.ChildIEs, ie.PDRID, ie.Precedence, ie.PDI, ie.OuterHeaderRemoval, ie.FARID, ie.QERID, ie.URRID); bad != nil {
		return fail("PDR %d: IE type %d is not supported", id, bad.Type)
	}
	// The QERs and URRs named replace the PDR's.
	if first(group.ChildIEs, ie.QERID) != nil {
		p.QERIDs = nil
	}
	if first(group.ChildIEs, ie.URRID) != nil {
		p.URRIDs = nil
	}
	for _, c := range group.ChildIEs {
		var err error
		switch c.Type {
		case ie.Precedence:
			p.Precedence, err = c.Precedence()
		case ie.FARID:
			p.FARID, err = c.FARID()
		case ie.QERID:
			var qer uint32
			qer, err = c.QERID()
			p.QERIDs = append(p.QERIDs, qer)
		case ie.URRID:
			var urr uint32
			urr, err = c.URRID()
			p.URRIDs = append(p.URRIDs, urr)
		case ie.OuterHeaderRemoval:
			var desc uint8
			desc, err = c.OuterHeaderRemovalDescription()
			p.OuterHeaderRemoval = &desc
		case ie.PDI:
			if r := t.applyPDI(&p, c); r != nil {
				return r
			}
		}
		if err != nil {
			return fail("PDR %d: IE type %d: %v", id, c.Type, err)
		}
	}
	if create && first(group.ChildIEs, ie.FARID) == nil {
		return fail("PDR %d has no FAR", id)
	}
	t.s.pdrs = pdrRules.put(t.s.pdrs, p)
	return nil
}

// presence checks that a rule to create is new and one to update exists.
func presence(create, exists bool, fail func(string, ...any) *refusal, kind string, id uint32) *refusal {
	switch {
	case create && exists:
		return fail("%s %d exists", kind, id)
	case !create && !exists:
		return fail("no %s %d to update", kind, id)
	}
	return nil
}

// applyPDI replaces p's PDI, choosing an F-TEID or UE address where asked.
func (t *txn) applyPDI(p *session.PDR, group *ie.IE) *refusal {
	fail := func(format string, args ...any) *refusal { return ruleFailure(rulePDR, uint32(p.ID), format, args...) }
	pdi := group.ChildIEs
	if first(pdi, ie.SourceInterface) == nil {
		return missing(ie.SourceInterface, fmt.Sprintf("PDI of PDR %d", p.ID))
	}
	// The 3GPP Interface Type (§8.2.118) only names the interface the
	// packets come from (Open5GS sends it since 2.7.3): nothing to enforce.
	if bad := unsupported(pdi, ie.SourceInterface, ie.FTEID, ie.NetworkInstance, ie.UEIPAddress, ie.QFI, ie.SDFFilter,
		ie.TGPPInterfaceType); bad != nil {
		return fail("PDR %d: PDI IE type %d is not supported", p.ID, bad.Type)
	}
	p.PDI = session.PDI{}
	for _, c := range pdi {
		switch c.Type {
		case ie.SourceInterface:
			v, err := c.SourceInterface()
			if err != nil {
				return fail("PDR %d: source interface: %v", p.ID, err)
			}
			p.PDI.SourceInterface = session.Interface(v)
		case ie.QFI:
			v, err := c.QFI()
			if err != nil {
				return fail("PDR %d: QFI: %v", p.ID, err)
			}
			p.PDI.QFI = v
		case ie.SDFFilter:
			f, r := sdfFilter(p.ID, c)
			if r != nil {
				return r
			}
			p.PDI.SDFFilters = append(p.PDI.SDFFilters, f)
		}
	}
	if c := first(pdi, ie.FTEID); c != nil {
		if r := t.localFTEID(p, c); r != nil {
			return r
		}
	}
	if c := first(pdi, ie.UEIPAddress); c != nil {
		instance := ""
		if n := first(pdi, ie.NetworkInstance); n != nil {
			instance = instanceName(n)
		}
		if r := t.ueAddress(p, c, instance); r != nil {
			return r
		}
	}
	return nil
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

// localFTEID sets the TEID the UPF receives on: the SMF's, or one the UPF
// chooses (CH), shared by the PDRs of the same request with the same CHOOSE
// ID (§5.2.1: the ID is only meaningful within one message).
func (t *txn) localFTEID(p *session.PDR, c *ie.IE) *refusal {
	f, err := c.FTEID()
	if err != nil {
		return ruleFailure(rulePDR, uint32(p.ID), "PDR %d: F-TEID: %v", p.ID, err)
	}
	if !f.HasCh() {
		if !f.HasIPv4() || !t.h.isN3(addr4(f.IPv4Address)) {
			return ruleFailure(rulePDR, uint32(p.ID), "PDR %d: F-TEID %v is not an N3 address of this UPF", p.ID, f.IPv4Address)
		}
		if f.TEID == 0 {
			return ruleFailure(rulePDR, uint32(p.ID), "PDR %d: F-TEID with TEID 0", p.ID)
		}
		p.PDI.TEID = f.TEID
		return nil
	}
	if !f.HasIPv4() {
		return &refusal{cause: ie.CauseInvalidFTEIDAllocationOption, msg: fmt.Sprintf("PDR %d: only IPv4 F-TEIDs can be chosen", p.ID)}
	}
	if f.HasChID() {
		if teid, ok := t.choose[f.ChooseID]; ok {
			p.PDI.TEID = teid
			return nil
		}
	}
	teid, err := t.h.allocateTEID()
	if err != nil {
		return &refusal{cause: ie.CauseNoResourcesAvailable, msg: err.Error()}
	}
	t.teids = append(t.teids, teid)
	t.s.chosenTEIDs = append(t.s.chosenTEIDs, teid)
	if f.HasChID() {
		t.choose[f.ChooseID] = teid
	}
	p.PDI.TEID = teid
	return nil
}

// ueAddress sets the PDR's UE address: the SMF's, or for CHV4 the
// session's address from the pool of the PDI's network instance,
// allocated once per session.
func (t *txn) ueAddress(p *session.PDR, c *ie.IE, instance string) *refusal {
	fail := func(format string, args ...any) *refusal { return ruleFailure(rulePDR, uint32(p.ID), format, args...) }
	f, err := c.UEIPAddress()
	if err != nil {
		return fail("PDR %d: UE IP address: %v", p.ID, err)
	}
	// The UE address is the source of uplink packets and the destination
	// of downlink ones (S/D flag, §8.2.62).
	wantSD := p.PDI.SourceInterface != session.InterfaceAccess
	if c.HasSD() != wantSD {
		return fail("PDR %d: the UE address of a PDR from interface %d must be its %s (S/D flag)", p.ID, p.PDI.SourceInterface,
			map[bool]string{false: "source", true: "destination"}[wantSD])
	}
	switch {
	case c.HasCHV6():
		return fail("PDR %d: IPv6 UE prefixes are not allocated by this UPF", p.ID)
	case c.HasCHV4():
		pool := t.h.uePool(instance)
		switch {
		case pool == nil:
			return fail("PDR %d: no UE address pool is configured for network instance %q (CHV4)", p.ID, instance)
		case !t.s.ue4.IsValid():
			a, err := pool.Allocate()
			if err != nil {
				return &refusal{cause: ie.CauseNoResourcesAvailable, msg: err.Error()}
			}
			t.ues = append(t.ues, a)
			t.s.ue4 = a
		case !pool.Prefix().Contains(t.s.ue4):
			return fail("PDR %d: the session's UE address %v is not of network instance %q's pool %v (CHV4)",
				p.ID, t.s.ue4, instance, pool.Prefix())
		}
		p.PDI.UEAddress = netip.PrefixFrom(t.s.ue4, 32)
	case f.IPv4Address != nil:
		p.PDI.UEAddress = netip.PrefixFrom(addr4(f.IPv4Address), 32)
	case f.IPv6Address != nil:
		bits := 64
		if c.HasIP6PL() {
			bits = int(f.IPv6PrefixLength)
		}
		a, _ := netip.AddrFromSlice(f.IPv6Address)
		p.PDI.UEAddress = netip.PrefixFrom(a, bits)
	default:
		return fail("PDR %d: UE IP address IE without an address", p.ID)
	}
	return nil
}

// applyFAR writes a Create FAR (create) or Update FAR into s.
func (t *txn) applyFAR(group *ie.IE, create bool) *refusal {
	id, r := ruleID(group, ie.FARID, (*ie.IE).FARID)
	if r != nil {
		return r
	}
	fail := func(format string, args ...any) *refusal { return ruleFailure(ruleFAR, id, format, args...) }
	f, exists := farRules.get(t.s.fars, id)
	if r := presence(create, exists, fail, "FAR", id); r != nil {
		return r
	}
	if create {
		if first(group.ChildIEs, ie.ApplyAction) == nil {
			return missing(ie.ApplyAction, fmt.Sprintf("Create FAR %d", id))
		}
		f = session.FAR{ID: id}
	}
	params := ie.ForwardingParameters
	if !create {
		params = ie.UpdateForwardingParameters
	}
	if bad := unsupported(group.ChildIEs, ie.FARID, ie.ApplyAction, params, ie.BARID); bad != nil {
		return fail("FAR %d: IE type %d is not supported", id, bad.Type)
	}
	if r := t.checkBARID(id, group); r != nil {
		return r
	}
	if c := first(group.ChildIEs, ie.ApplyAction); c != nil {
		forw, drop, buff := c.HasFORW(), c.HasDROP(), c.HasBUFF()
		switch {
		case c.HasDUPL():
			return fail("FAR %d: duplication (DUPL) is not supported", id)
		case forw && !drop && !buff:
			f.Action = session.ActionForward
		case drop && !forw && !buff:
			f.Action = session.ActionDrop
		case buff && !forw && !drop:
			f.Action = session.ActionBuffer
		default:
			return fail("FAR %d: apply action must be one of FORW, DROP and BUFF", id)
		}
		// NOCP: the SMF wants to hear of the first packet buffered.
		if buff && c.HasNOCP() {
			setIn(&t.s.notify, id, true)
		} else {
			delete(t.s.notify, id)
		}
	}
	if c := first(group.ChildIEs, params); c != nil {
		old := f.OuterHeaderCreation
		if r := forwarding(&f, c.ChildIEs, create, t.h.cfg.ForwardingPolicies); r != nil {
			return r
		}
		// SNDEM: the gNB moved; the old one learns that nothing more comes
		// on the old tunnel (§5.2.1, TS 29.281 §7.3.2).
		if flags := first(c.ChildIEs, ie.PFCPSMReqFlags); flags != nil && flags.HasSNDEM() && old != nil &&
			(f.OuterHeaderCreation == nil || *old != *f.OuterHeaderCreation) {
			t.endMarkers = append(t.endMarkers, *old)
		}
	}
	if f.Action == session.ActionForward && create && first(group.ChildIEs, params) == nil {
		return fail("FAR %d forwards without forwarding parameters", id)
	}
	t.s.fars = farRules.put(t.s.fars, f)
	return nil
}

// forwarding applies (Update) Forwarding Parameters to f.
func forwarding(f *session.FAR, params []*ie.IE, create bool, policies map[string]netip.Addr) *refusal {
	fail := func(format string, args ...any) *refusal { return ruleFailure(ruleFAR, f.ID, format, args...) }
	if create && first(params, ie.DestinationInterface) == nil {
		return missing(ie.DestinationInterface, fmt.Sprintf("forwarding parameters of FAR %d", f.ID))
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
			if o.OuterHeaderCreationDescription != ohcGTPUv4 {
				return fail("FAR %d: only GTP-U/UDP/IPv4 outer headers can be created", f.ID)
			}
			f.OuterHeaderCreation = &session.OuterHeaderCreation{TEID: o.TEID, Peer: addr4(o.IPv4Address), Port: o.PortNumber}
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

// applyRemoval removes a PDR, FAR, QER or URR by its ID; a URR's final
// usage report goes into the response.
func (t *txn) applyRemoval(group *ie.IE) *refusal {
	switch group.Type {
	case ie.RemovePDR:
		id, r := ruleID(group, ie.PDRID, (*ie.IE).PDRID)
		if r != nil {
			return r
		}
		return removeRule(pdrRules, &t.s.pdrs, uint32(id), rulePDR, "PDR")
	case ie.RemoveFAR:
		id, r := ruleID(group, ie.FARID, (*ie.IE).FARID)
		if r != nil {
			return r
		}
		delete(t.s.notify, id)
		return removeRule(farRules, &t.s.fars, id, ruleFAR, "FAR")
	case ie.RemoveBAR:
		return t.removeBAR(group)
	case ie.RemoveQER:
		id, r := ruleID(group, ie.QERID, (*ie.IE).QERID)
		if r != nil {
			return r
		}
		return removeRule(qerRules, &t.s.qers, id, ruleQER, "QER")
	default:
		id, r := ruleID(group, ie.URRID, (*ie.IE).URRID)
		if r != nil {
			return r
		}
		if _, ok := t.s.urrs[id]; !ok {
			return ruleFailure(ruleURR, id, "no URR %d to remove", id)
		}
		reports, err := t.h.finalReports(t.s, ie.UsageReportWithinSessionModificationResponse, []uint32{id}, t.now)
		if err != nil {
			return &refusal{cause: ie.CauseSystemFailure, msg: err.Error()}
		}
		t.reports = append(t.reports, reports...)
		delete(t.s.meters, id)
		delete(t.s.urrs, id)
		return nil
	}
}

// applyURR writes a Create URR (create) or Update URR into s. Its meter
// is a copy: the request may still fail.
func (t *txn) applyURR(group *ie.IE, create bool) *refusal {
	id, r := ruleID(group, ie.URRID, (*ie.IE).URRID)
	if r != nil {
		return r
	}
	u, exists := t.s.urrs[id]
	if r := presence(create, exists, func(format string, args ...any) *refusal {
		return ruleFailure(ruleURR, id, format, args...)
	}, "URR", id); r != nil {
		return r
	}
	if create {
		u = urr{id: id}
	}
	g, r := parseURR(&u, group, create)
	if r != nil {
		return r
	}
	if create {
		setIn(&t.s.meters, id, newMeter(upfxdp.URRUsage{}, t.now)) // a new URR's counters start at 0
	} else if g.volume || g.time || g.validity {
		usage, err := t.h.cfg.Store.URRUsage(t.s.seid, id)
		if err != nil {
			return &refusal{cause: ie.CauseSystemFailure, msg: err.Error()}
		}
		m := *t.s.meters[id]
		if g.volume { // a new quota counts from now
			m.quotaBase, m.exhausted = usage.Bytes, false
		}
		if g.time {
			m.timeQuotaStart, m.blocked = t.now, 0
		}
		// A quota granted anew is valid for the validity time from now.
		m.quotaGiven, m.expired = t.now, false
		setIn(&t.s.meters, id, &m)
	}
	setIn(&t.s.urrs, id, u)
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

func removeRule[T any](kind ruleKind[T], rules *[]T, id uint32, typ uint8, name string) *refusal {
	var removed bool
	if *rules, removed = kind.remove(*rules, id); !removed {
		return ruleFailure(typ, id, "no %s %d to remove", name, id)
	}
	return nil
}

// applyQER writes a Create QER (create) or Update QER into s.
func (t *txn) applyQER(group *ie.IE, create bool) *refusal {
	id, r := ruleID(group, ie.QERID, (*ie.IE).QERID)
	if r != nil {
		return r
	}
	fail := func(format string, args ...any) *refusal { return ruleFailure(ruleQER, id, format, args...) }
	q, exists := qerRules.get(t.s.qers, id)
	if r := presence(create, exists, fail, "QER", id); r != nil {
		return r
	}
	if create {
		if first(group.ChildIEs, ie.GateStatus) == nil {
			return missing(ie.GateStatus, fmt.Sprintf("Create QER %d", id))
		}
		q = session.QER{ID: id}
	}
	// A QER Correlation ID would share the rates with other sessions;
	// packet rates, flow level marking and the rest are not enforced.
	if bad := unsupported(group.ChildIEs, ie.QERID, ie.GateStatus, ie.MBR, ie.GBR, ie.QFI, ie.RQI); bad != nil {
		return fail("QER %d: IE type %d is not supported", id, bad.Type)
	}
	for _, c := range group.ChildIEs {
		var err error
		switch c.Type {
		case ie.GateStatus:
			var ul, dl uint8
			if ul, dl, err = c.GateStatusULDL(); err == nil && (ul > ie.GateStatusClosed || dl > ie.GateStatusClosed) {
				err = fmt.Errorf("spare gate status value")
			}
			q.GateULClosed, q.GateDLClosed = ul == ie.GateStatusClosed, dl == ie.GateStatusClosed
		case ie.MBR:
			q.MBRUL, q.MBRDL, err = bitRates(c.MBRUL, c.MBRDL)
		case ie.GBR:
			q.GBRUL, q.GBRDL, err = bitRates(c.GBRUL, c.GBRDL)
		case ie.QFI:
			q.QFI, err = c.QFI()
		case ie.RQI:
			_, err = c.RQI()
			q.RQI = c.HasRQI()
		}
		if err != nil {
			return fail("QER %d: IE type %d: %v", id, c.Type, err)
		}
	}
	t.s.qers = qerRules.put(t.s.qers, q)
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

func addr4(ip []byte) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}
