// Package n4 gives PFCP sessions (TS 29.244) their meaning: it turns the
// rules an SMF creates, updates and removes into sessions of the session
// store, and chooses the F-TEIDs and UE addresses the SMF leaves to the UPF.
// A request is applied whole or not at all.
//
// A request takes one path: handler.go receives it; translate.go turns its
// IEs into the session model (a pfcpSession and the change it makes);
// apply.go makes the UPF's choices, has the session checked (validate.go)
// and installed in the store, and commits it; persist.go journals what it
// changed; the response says what the UPF chose. buffering.go and
// reports.go serve sessions between requests: buffered downlink data and
// usage reports.
package n4

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xdp5g/xdp5g/internal/upf/gtpu"
	"github.com/xdp5g/xdp5g/internal/upf/ippool"
	"github.com/xdp5g/xdp5g/internal/upf/n4state"
	"github.com/xdp5g/xdp5g/internal/upf/pfcp"
	"github.com/xdp5g/xdp5g/internal/upf/session"
)

// Config sets up a Handler.
type Config struct {
	Store *session.Store
	// N3 and N9 are the UPF's GTP-U addresses, IPv4 and IPv6. The F-TEID
	// it chooses has one address: the first of a family the request asks
	// for on the PDR's side (see side), N9's if it has one of the family,
	// else N3's.
	N3, N9 []netip.Addr
	// SEIDAddress is the address of the UP F-SEIDs: where SMFs send the
	// session's later requests (TS 29.244 §8.2.37), the UPF's PFCP
	// address. Unset: the first N3 address.
	SEIDAddress netip.Addr
	// N9Instances are the network instances whose F-TEIDs are on N9:
	// a PDR whose PDI names one is on N9 whatever its source interface.
	N9Instances []string
	// UEPool hands out UE IPv4 addresses when an SMF asks (CHV4); nil
	// refuses such requests.
	UEPool *ippool.Pool
	// UEPools are the pools of network instances that have their own, by
	// name: a CHV4 PDR whose PDI names one of them takes its address there,
	// any other from UEPool. No two pools may overlap.
	UEPools map[string]*ippool.Pool
	// Tunnels is the N3 signalling endpoint (a gtpu.Endpoint): the paths to
	// the gNBs that sessions tunnel to are supervised, and End Markers
	// sent; nil does neither.
	Tunnels Tunnels
	// SendReport sends a Session Report Request to an SMF and waits for
	// the response (pfcp.Server.SendSessionReport); nil drops reports.
	SendReport func(context.Context, pfcp.Peer, *message.SessionReportRequest) (*message.SessionReportResponse, error)
	// Buffers takes the buffer limits of the sessions' BARs; nil: the
	// store must not buffer either.
	Buffers BufferLimits
	// TrafficStopAfter is the silence after which a URR's traffic has
	// stopped (STOPT); 0: DefaultTrafficStopAfter.
	TrafficStopAfter time.Duration
	// ForwardingPolicies are the next hops that a FAR's Forwarding Policy
	// (traffic steering, TRST) names by identifier.
	ForwardingPolicies map[string]netip.Addr
	// Journal keeps the sessions across restarts (see persist.go); nil
	// keeps nothing. Restored are the sessions and reports a previous run
	// kept, which the store has taken over (Saved.Kept); nil for none.
	// Repaired are the restored sessions the store installed again in new
	// slots (session.Restored): recorded with those.
	Journal  *n4state.Log
	Restored *Saved
	Repaired []uint64
	// Sequence takes the sequence number of a Session Report Request
	// (pfcp.Server.NextSequence), journaled with it; nil leaves it to
	// SendReport.
	Sequence func() uint32
	Log      *slog.Logger
}

// DefaultTrafficStopAfter is the Config's TrafficStopAfter when unset.
const DefaultTrafficStopAfter = 10 * time.Second

var _ pfcp.SessionHandler = (*Handler)(nil)

// Tunnels is what the handler needs of the N3 signalling endpoint.
type Tunnels interface {
	Watch(gtpu.Path) error
	Unwatch(gtpu.Path)
	SendEndMarker(local, peer netip.Addr, teid uint32) error
}

// Handler is the pfcp.SessionHandler of the UPF.
type Handler struct {
	cfg Config

	mu       sync.Mutex
	sessions map[uint64]*pfcpSession // by UP SEID, the store's SEID
	byCP     cpIndex                 // UP SEIDs by CP F-SEID: see cpindex.go
	chosen   map[uint32]bool         // TEIDs chosen by the UPF, in any session
	timed    map[meterKey]bool       // URRs with clock-driven triggers
	byTunnel *tunnelIndex            // the sessions of each gNB tunnel; nil until needed (tunnels)
	out      outbox

	// What a call changed, for record: the sessions, by UP SEID, and the
	// reports created and answered.
	touched  map[uint64]bool
	created  []*report
	answered []uint64
	// The reports created and not answered yet, by ID; the version of the
	// last session record and the last report's ID.
	unanswered        map[uint64]*report
	version, reportID uint64
}

// pfcpSession is a session as its SMF sees it.
type pfcpSession struct {
	seid, cpSEID uint64
	cpAddrs      [2]netip.Addr // the CP F-SEID's IPv4 and IPv6 addresses, invalid when absent
	smf          pfcp.Peer
	pdrs         []session.PDR // sorted by ID, as the store keeps them: see rulelist.go
	fars         []session.FAR
	qers         []session.QER
	urrs         map[uint32]urr
	meters       map[uint32]*meter // copied before a change: see meter
	chosenTEIDs  []uint32          // mostly one: a slice takes less memory than a set
	ue4          netip.Addr        // allocated by the UPF (CHV4)
	bar          *bar
	notify       map[uint32]bool // FARs whose first buffered packet is reported (NOCP)
	csids        csidSets        // its connection sets, for Session Set Deletion
	version      uint64          // of its last record (persist.go)
	record       []byte          // that record's value, never changed: a compaction copies it
}

// gnbTunnel is a GTP-U tunnel towards a gNB: the TEID it receives on, at
// its address.
type gnbTunnel struct {
	teid uint32
	gnb  netip.Addr
}

// uePool is the pool of a network instance ("" for none): its own, or
// the default one; nil when neither is configured.
func (c *Config) uePool(instance string) *ippool.Pool {
	if p, ok := c.UEPools[instance]; ok {
		return p
	}
	return c.UEPool
}

// gtpuAddresses are the N3 then the N9 addresses.
func (c *Config) gtpuAddresses() []netip.Addr { return append(slices.Clip(c.N3), c.N9...) }

// otherSide says whether a, one of the UPF's GTP-U addresses, is on the
// other side than n9 says, when that side has an address of a's family
// (else the other side's addresses serve it too).
func (c *Config) otherSide(a netip.Addr, n9 bool) bool {
	want := c.N3
	if n9 {
		want = c.N9
	}
	return !slices.Contains(want, a) && slices.ContainsFunc(want, func(w netip.Addr) bool { return w.Is4() == a.Is4() })
}

// chosenTEID and chosenUE say that the UPF chose a PDR's F-TEID or UE
// address.
func (s *pfcpSession) chosenTEID(p *session.PDR) bool {
	return slices.Contains(s.chosenTEIDs, p.PDI.TEID)
}

func (s *pfcpSession) chosenUE(p *session.PDR) bool {
	return s.ue4.IsValid() && p.PDI.UEAddress == netip.PrefixFrom(s.ue4, 32)
}

// setIn sets m[k], making the map first: a session's maps stay nil, and
// take no memory, until it has something to keep in them.
func setIn[K comparable, V any](m *map[K]V, k K, v V) {
	if *m == nil {
		*m = map[K]V{}
	}
	(*m)[k] = v
}

// clone is a copy of s to change; it has no record of its own until one
// is written (a compaction encodes it afresh otherwise).
func (s *pfcpSession) clone() *pfcpSession {
	c := *s
	c.record = nil
	c.pdrs, c.fars, c.qers = slices.Clone(s.pdrs), slices.Clone(s.fars), slices.Clone(s.qers)
	c.urrs, c.meters = maps.Clone(s.urrs), maps.Clone(s.meters)
	c.chosenTEIDs, c.notify = slices.Clone(s.chosenTEIDs), maps.Clone(s.notify)
	return &c
}

// controlledFrom says whether the session's CP F-SEID has an address
// among addrs, or none known.
func (s *pfcpSession) controlledFrom(addrs []netip.Addr) bool {
	if s.cpAddrs == [2]netip.Addr{} {
		return true
	}
	return slices.ContainsFunc(addrs, func(a netip.Addr) bool { return a == s.cpAddrs[0] || a == s.cpAddrs[1] })
}

// rules is the session in the store's terms, each kind of rule by ID.
func (s *pfcpSession) rules() session.Session {
	sess := session.Session{SEID: s.seid, Origin: session.OriginPFCP, PDRs: s.pdrs, FARs: enforced(s.fars), QERs: s.qers}
	for _, id := range slices.Sorted(maps.Keys(s.urrs)) {
		u := s.urrs[id]
		sess.URRs = append(sess.URRs, session.URR{ID: id, Limits: u.limits(s.meters[id]), BeforeQoS: u.beforeQoS})
	}
	return sess
}

// awaitsTunnel says a FAR forwards to access or the CP function before
// the SMF gave it a tunnel: free5GC creates its downlink FAR so, and adds
// the gNB's tunnel once the N2 PDU Session Resource Setup Response came.
func awaitsTunnel(f session.FAR) bool {
	return f.Action == session.ActionForward && f.OuterHeaderCreation == nil &&
		(f.DestinationInterface == session.InterfaceAccess || f.DestinationInterface == session.InterfaceCPFunction)
}

// enforced are the FARs as the store is to apply them: one that awaits its
// tunnel has nowhere to send, and drops.
func enforced(fars []session.FAR) []session.FAR {
	if !slices.ContainsFunc(fars, awaitsTunnel) {
		return fars
	}
	fars = slices.Clone(fars)
	for i := range fars {
		if awaitsTunnel(fars[i]) {
			fars[i].Action = session.ActionDrop
		}
	}
	return fars
}

// paths are the GTP-U paths a session tunnels along, to gNBs and to other
// UPFs, each from the address its tunnels leave from; none for nil.
func (h *Handler) paths(s *pfcpSession) map[gtpu.Path]bool {
	paths := map[gtpu.Path]bool{}
	h.addPaths(paths, s)
	return paths
}

// addPaths adds the paths of a session (nil: none) to paths.
func (h *Handler) addPaths(paths map[gtpu.Path]bool, s *pfcpSession) {
	if s == nil {
		return
	}
	for i := range s.fars {
		if f := &s.fars[i]; f.OuterHeaderCreation != nil && f.Action == session.ActionForward {
			paths[gtpu.Path{Local: h.cfg.Store.TunnelSource(&session.Session{PDRs: s.pdrs}, f), Peer: f.OuterHeaderCreation.Peer}] = true
		}
	}
}

// tunnels are the gNB tunnels a session's FARs send into; none for nil.
func (s *pfcpSession) tunnels() map[gnbTunnel]bool {
	out := map[gnbTunnel]bool{}
	if s != nil {
		for _, f := range s.fars {
			if o := f.OuterHeaderCreation; o != nil {
				out[gnbTunnel{o.TEID, o.Peer}] = true
			}
		}
	}
	return out
}

// New returns a handler over a session store.
func New(cfg Config) *Handler {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.TrafficStopAfter == 0 {
		cfg.TrafficStopAfter = DefaultTrafficStopAfter
	}
	h := &Handler{cfg: cfg, sessions: map[uint64]*pfcpSession{}, byCP: newCPIndex(0), chosen: map[uint32]bool{}, timed: map[meterKey]bool{},
		out:     outbox{wake: make(chan struct{}, 1)},
		touched: map[uint64]bool{}, unanswered: map[uint64]*report{}}
	if cfg.Restored != nil {
		h.restore(cfg.Restored)
	}
	if len(cfg.Repaired) > 0 {
		// Else the journal names their old slots, and every later start
		// installs them again.
		h.apart(func() {
			for _, seid := range cfg.Repaired {
				if s := h.sessions[seid]; s != nil {
					h.touched[seid] = true
					h.rebaseMeters(s)
				}
			}
		})
	}
	return h
}

// Establish creates a session from a Session Establishment Request.
func (h *Handler) Establish(peer pfcp.Peer, req *message.SessionEstablishmentRequest) (resp *message.SessionEstablishmentResponse) {
	h.inRequest(func() { resp = h.establish(peer, req) })
	return resp
}

func (h *Handler) establish(peer pfcp.Peer, req *message.SessionEstablishmentRequest) *message.SessionEstablishmentResponse {
	c, r := h.translateEstablishment(peer, req)
	if r := h.settle(&c, r, "establishment", "peer", peer.NodeID, "cp_seid", c.s.cpSEID); r != nil {
		return message.NewSessionEstablishmentResponse(0, 0, 0, 0, 0, r.ies()...)
	}
	ies := []*ie.IE{ie.NewCause(ie.CauseRequestAccepted), h.upFSEID(c.s.seid)}
	ies = append(ies, h.createdPDRs(c.s, req.CreatePDR)...)
	return message.NewSessionEstablishmentResponse(0, 0, 0, 0, 0, ies...)
}

// settle applies a translated request's change unless translation refused
// it (r), and logs a refusal of either; args say whose request it was.
func (h *Handler) settle(c *change, r *refusal, request string, args ...any) *refusal {
	if r == nil {
		r = h.apply(c)
	}
	if r != nil {
		h.cfg.Log.Info("PFCP session "+request+" refused", append(args, "reason", r.msg)...)
	}
	return r
}

// Modify applies a Session Modification Request.
func (h *Handler) Modify(peer pfcp.Peer, req *message.SessionModificationRequest) (resp *message.SessionModificationResponse) {
	h.inRequest(func() { resp = h.modify(peer, req) })
	return resp
}

func (h *Handler) modify(peer pfcp.Peer, req *message.SessionModificationRequest) *message.SessionModificationResponse {
	old := h.sessionOf(peer, req.SEID())
	if old == nil {
		return message.NewSessionModificationResponse(0, 0, 0, 0, 0, ie.NewCause(ie.CauseSessionContextNotFound))
	}
	c, r := h.translateModification(old, req)
	if r := h.settle(&c, r, "modification", "peer", peer.NodeID, "seid", old.seid); r != nil {
		return message.NewSessionModificationResponse(0, 0, old.cpSEID, 0, 0, r.ies()...)
	}
	ies := append([]*ie.IE{ie.NewCause(ie.CauseRequestAccepted)}, h.createdPDRs(c.s, req.CreatePDR)...)
	ies = append(ies, c.updatedPDRs(req.UpdatePDR)...)
	ies = append(ies, c.reports...)
	for _, id := range c.queried {
		if _, kept := c.s.urrs[id]; kept { // a removed one has its report already
			if rep := h.queryReport(c.s, id, c.now, req.QueryURRReference); rep != nil {
				ies = append(ies, rep)
			}
		}
	}
	return message.NewSessionModificationResponse(0, 0, c.s.cpSEID, 0, 0, ies...)
}

// Delete removes a session.
func (h *Handler) Delete(peer pfcp.Peer, req *message.SessionDeletionRequest) (resp *message.SessionDeletionResponse) {
	h.inRequest(func() { resp = h.delete(peer, req) })
	return resp
}

func (h *Handler) delete(peer pfcp.Peer, req *message.SessionDeletionRequest) *message.SessionDeletionResponse {
	s := h.sessionOf(peer, req.SEID())
	if s == nil {
		return message.NewSessionDeletionResponse(0, 0, 0, 0, 0, ie.NewCause(ie.CauseSessionContextNotFound))
	}
	// Read before the URRs go: what they counted since their last report.
	final, err := h.finalReports(s, ie.UsageReportWithinSessionDeletionResponse, slices.Sorted(maps.Keys(s.urrs)), time.Now())
	var unsent []report
	if err == nil {
		unsent, err = h.remove(s)
	}
	if err != nil {
		h.cfg.Log.Error("PFCP session deletion failed", "seid", s.seid, "err", err)
		return message.NewSessionDeletionResponse(0, 0, s.cpSEID, 0, 0, ie.NewCause(ie.CauseSystemFailure))
	}
	// Usage reports still queued would reach an SMF that no longer knows
	// the session: they go in the response, before the final ones.
	ies := []*ie.IE{ie.NewCause(ie.CauseRequestAccepted)}
	for _, r := range unsent {
		for _, u := range r.req.UsageReport {
			ies = append(ies, ie.NewUsageReport(ie.UsageReportWithinSessionDeletionResponse, u.ChildIEs...))
		}
	}
	ies = append(ies, final...)
	return message.NewSessionDeletionResponse(0, 0, s.cpSEID, 0, 0, ies...)
}

// SetDelete removes the sessions of the requesting SMF that belong to the
// connection sets its FQ-CSIDs name (a partial failure, TS 23.007), or
// every one of its sessions when it names none.
func (h *Handler) SetDelete(peer pfcp.Peer, req *message.SessionSetDeletionRequest) *message.SessionSetDeletionResponse {
	var sets csidSets
	if req.FQCSID != nil {
		var r *refusal
		if sets, r = fqCSIDs(req.Payload); r != nil {
			return message.NewSessionSetDeletionResponse(0, nil, ie.NewCause(r.cause), ie.NewOffendingIE(r.offending))
		}
	}
	cause := ie.CauseRequestAccepted
	if err := h.dropPeer(peer.NodeID, func(s *pfcpSession) bool { return sets == nil || sets.meets(s.csids) }); err != nil {
		h.cfg.Log.Error("PFCP session set deletion failed", "peer", peer.NodeID, "err", err)
		cause = ie.CauseSystemFailure
	}
	return message.NewSessionSetDeletionResponse(0, nil, ie.NewCause(cause), nil)
}

// DropPeer removes every session of an SMF.
func (h *Handler) DropPeer(nodeID string) {
	h.logDropped(nodeID, h.dropPeer(nodeID, func(*pfcpSession) bool { return true }))
}

// DropPeerExcept removes an SMF's sessions but those whose CP F-SEID has an
// address among entities (PFCP session retention, TS 29.244 §6.2.6.2.2); a
// session restored from a record that does not have its CP F-SEID's
// address is kept too.
func (h *Handler) DropPeerExcept(nodeID string, entities []netip.Addr) {
	h.logDropped(nodeID, h.dropPeer(nodeID, func(s *pfcpSession) bool { return !s.controlledFrom(entities) }))
}

func (h *Handler) logDropped(nodeID string, err error) {
	if err != nil {
		h.cfg.Log.Error("removing the sessions of a PFCP peer", "peer", nodeID, "err", err)
	}
}

// dropPeer removes the SMF's sessions that drop says.
func (h *Handler) dropPeer(nodeID string, drop func(*pfcpSession) bool) error {
	var errs []error
	h.inRequest(func() {
		for _, s := range h.sessions {
			if s.smf.NodeID == nodeID && drop(s) {
				_, err := h.remove(s)
				errs = append(errs, err)
			}
		}
	})
	return errors.Join(errs...)
}

// Owns reports whether the store's session seid was created over PFCP and
// is still the SMF's to change.
func (h *Handler) Owns(seid uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.sessions[seid]
	return ok
}

// SessionPeer returns the Node ID of the SMF of session seid.
func (h *Handler) SessionPeer(seid uint64) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.sessions[seid]
	if !ok {
		return "", false
	}
	return s.smf.NodeID, true
}

// sessionOf is the session a peer's request names by its UP SEID; nil for
// an unknown SEID or another peer's session.
func (h *Handler) sessionOf(peer pfcp.Peer, seid uint64) *pfcpSession {
	if s, ok := h.sessions[seid]; ok && s.smf.NodeID == peer.NodeID {
		return s
	}
	return nil
}

// createdPDRs reports what the UPF chose for the PDRs a request created.
func (h *Handler) createdPDRs(s *pfcpSession, creates []*ie.IE) []*ie.IE {
	var out []*ie.IE
	ids := make([]uint16, 0, len(creates))
	for _, g := range creates {
		if id, r := ruleID(g, ie.PDRID, (*ie.IE).PDRID); r == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		p, ok := pdrRules.get(s.pdrs, uint32(id))
		chosenTEID, chosenUE := ok && s.chosenTEID(&p), ok && s.chosenUE(&p)
		if !chosenTEID && !chosenUE {
			continue
		}
		out = append(out, ie.NewCreatedPDR(choices(&p, chosenTEID, chosenUE)...))
	}
	return out
}

// updatedPDRs reports what the UPF chose for the PDRs a request gave a new
// PDI that asks for a choice (CH, CHV4): an Updated PDR (§7.5.5.1) is the
// SMF's only way to learn a PDR's new F-TEID.
func (c *change) updatedPDRs(updates []*ie.IE) []*ie.IE {
	var out []*ie.IE
	for _, g := range updates {
		id, r := ruleID(g, ie.PDRID, (*ie.IE).PDRID)
		if r != nil {
			continue
		}
		chosenTEID := slices.ContainsFunc(c.teidChoices, func(t teidChoice) bool { return t.pdr == id })
		chosenUE := slices.Contains(c.ueFor, id)
		if p, ok := pdrRules.get(c.s.pdrs, uint32(id)); ok && (chosenTEID || chosenUE) {
			out = append(out, ie.NewUpdatedPDR(choices(&p, chosenTEID, chosenUE)...))
		}
	}
	return out
}

// choices are a Created or Updated PDR's children: PDR p's ID, and its
// F-TEID and UE address when the UPF chose them.
func choices(p *session.PDR, teid, ue bool) []*ie.IE {
	children := []*ie.IE{ie.NewPDRID(p.ID)}
	if teid {
		children = append(children, chosenFTEID(p))
	}
	if ue {
		children = append(children, ie.NewUEIPAddress(0x02|sdFlag(p), p.PDI.UEAddress.Addr().String(), "", 0, 0))
	}
	return children
}

// sdFlag is the S/D bit of the UE IP Address IE of a PDR (§8.2.62).
func sdFlag(p *session.PDR) uint8 {
	if p.PDI.SourceInterface == session.InterfaceAccess {
		return 0
	}
	return 0x04
}

// chosenFTEID is the F-TEID the UPF chose for PDR p: its TEID at its one
// address, of either family.
func chosenFTEID(p *session.PDR) *ie.IE {
	a := p.PDI.LocalAddress
	if a.Is6() {
		return ie.NewFTEID(fteidV6, p.PDI.TEID, nil, net.IP(a.AsSlice()), 0)
	}
	return ie.NewFTEID(fteidV4, p.PDI.TEID, net.IP(a.AsSlice()), nil, 0)
}

// upFSEID is the UP F-SEID of session seid, at SEIDAddress.
func (h *Handler) upFSEID(seid uint64) *ie.IE {
	addr := h.cfg.SEIDAddress
	if !addr.IsValid() {
		addr = h.cfg.N3[0]
	}
	a := net.IP(addr.AsSlice())
	if addr.Is6() {
		return ie.NewFSEID(seid, nil, a)
	}
	return ie.NewFSEID(seid, a, nil)
}

// ies are the IEs of a rejection: the cause, and what it concerns.
func (r *refusal) ies() []*ie.IE {
	ies := []*ie.IE{ie.NewCause(r.cause)}
	if r.offending != 0 {
		ies = append(ies, ie.NewOffendingIE(r.offending))
	}
	if r.hasRule {
		ies = append(ies, ie.NewFailedRuleID(r.ruleType, r.ruleID))
	}
	return ies
}
