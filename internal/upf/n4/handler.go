// Package n4 gives PFCP sessions (TS 29.244) their meaning: it turns the
// rules an SMF creates, updates and removes into sessions of the session
// store, and chooses the F-TEIDs and UE addresses the SMF leaves to the UPF.
// A request is applied whole or not at all.
package n4

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xdp5g/xdp5g/internal/fielderr"
	"github.com/xdp5g/xdp5g/internal/upf/gtpu"
	"github.com/xdp5g/xdp5g/internal/upf/ippool"
	"github.com/xdp5g/xdp5g/internal/upf/pfcp"
	"github.com/xdp5g/xdp5g/internal/upf/session"
)

// Config sets up a Handler.
type Config struct {
	Store *session.Store
	// N3 are the UPF's GTP-U addresses; the first is the one of the
	// F-TEIDs it chooses.
	N3 []netip.Addr
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
	Log                *slog.Logger
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
	chosen   map[uint32]bool         // TEIDs chosen by the UPF, in any session
	timed    map[meterKey]bool       // URRs with clock-driven triggers
	byTunnel tunnelIndex             // the sessions of each gNB tunnel
	out      outbox
}

// pfcpSession is a session as its SMF sees it.
type pfcpSession struct {
	seid, cpSEID uint64
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
}

// gnbTunnel is a GTP-U tunnel towards a gNB: the TEID it receives on, at
// its address.
type gnbTunnel struct {
	teid uint32
	gnb  netip.Addr
}

// uePool is the pool of a network instance ("" for none): its own, or
// the default one; nil when neither is configured.
func (h *Handler) uePool(instance string) *ippool.Pool {
	if p, ok := h.cfg.UEPools[instance]; ok {
		return p
	}
	return h.cfg.UEPool
}

// releaseUE gives a UE address back to the pool holding it.
func (h *Handler) releaseUE(a netip.Addr) {
	for _, p := range h.cfg.UEPools {
		if p.Prefix().Contains(a) {
			_ = p.Release(a)
			return
		}
	}
	_ = h.cfg.UEPool.Release(a)
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

func (s *pfcpSession) clone() *pfcpSession {
	c := *s
	c.pdrs, c.fars, c.qers = slices.Clone(s.pdrs), slices.Clone(s.fars), slices.Clone(s.qers)
	c.urrs, c.meters = maps.Clone(s.urrs), maps.Clone(s.meters)
	c.chosenTEIDs, c.notify = slices.Clone(s.chosenTEIDs), maps.Clone(s.notify)
	return &c
}

// New returns a handler over a session store.
func New(cfg Config) *Handler {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.TrafficStopAfter == 0 {
		cfg.TrafficStopAfter = DefaultTrafficStopAfter
	}
	return &Handler{cfg: cfg, sessions: map[uint64]*pfcpSession{}, chosen: map[uint32]bool{}, timed: map[meterKey]bool{},
		byTunnel: newTunnelIndex(), out: outbox{wake: make(chan struct{}, 1)}}
}

// txn is one request being applied to a copy of a session; what it
// allocated is given back if the request fails.
type txn struct {
	h      *Handler
	s      *pfcpSession
	choose map[uint8]uint32 // CHOOSE ID to the TEID chosen for it in this request
	teids  []uint32
	ues    []netip.Addr
	now    time.Time
	// reports are the usage reports of the URRs the request removes.
	reports []*ie.IE
	// endMarkers are the tunnels the request moved away from (SNDEM).
	endMarkers []session.OuterHeaderCreation
	// dropBuffered: the request has what the buffers hold dropped (DROBU).
	dropBuffered bool
}

func (t *txn) undo() {
	for _, teid := range t.teids {
		delete(t.h.chosen, teid)
	}
	for _, a := range t.ues {
		t.h.releaseUE(a)
	}
}

// apply runs the request's removals, creations and updates, in that order,
// and installs the result.
func (t *txn) apply(removals, creates, updates []*ie.IE) *refusal {
	for _, g := range removals {
		if r := t.applyRemoval(g); r != nil {
			return r
		}
	}
	for _, g := range slices.Concat(creates, updates) {
		var r *refusal
		switch g.Type {
		case ie.CreateBAR, ie.UpdateBARWithinSessionModificationRequest, ie.UpdateBARWithinSessionReportResponse:
			r = t.applyBAR(g, g.Type == ie.CreateBAR)
		case ie.CreateFAR, ie.UpdateFAR:
			r = t.applyFAR(g, g.Type == ie.CreateFAR)
		case ie.CreateQER, ie.UpdateQER:
			r = t.applyQER(g, g.Type == ie.CreateQER)
		case ie.CreateURR, ie.UpdateURR:
			r = t.applyURR(g, g.Type == ie.CreateURR)
		case ie.CreatePDR, ie.UpdatePDR:
			r = t.applyPDR(g, g.Type == ie.CreatePDR)
		}
		if r != nil {
			return r
		}
	}
	return t.install()
}

// install writes the session into the store, which checks it as a whole.
func (t *txn) install() *refusal {
	sess := t.s.rules()
	for _, p := range sess.PDRs {
		if owner, ok := t.h.cfg.Store.KeyOwner(p); ok && owner != t.s.seid {
			return ruleFailure(rulePDR, uint32(p.ID), "PDR %d: its TEID or UE address belongs to another session", p.ID)
		}
	}
	var err error
	switch _, exists := t.h.cfg.Store.Get(sess.SEID); {
	case !exists:
		err = t.h.cfg.Store.Create(sess)
	case t.dropBuffered:
		err = t.h.cfg.Store.ReplaceDropBuffered(sess)
	default:
		err = t.h.cfg.Store.Replace(sess)
	}
	var invalid *fielderr.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &invalid):
		return t.s.failedRule(sess, invalid)
	default:
		return &refusal{cause: ie.CauseNoResourcesAvailable, msg: err.Error()}
	}
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

// failedRule names the rule of a store validation error: its field starts
// with pdrs[i], fars[i], qers[i] or urrs[i], indexes into sess.
func (s *pfcpSession) failedRule(sess session.Session, e *fielderr.Error) *refusal {
	var i int
	if _, err := fmt.Sscanf(e.Field, "pdrs[%d]", &i); err == nil && i < len(sess.PDRs) {
		return ruleFailure(rulePDR, uint32(sess.PDRs[i].ID), "%v", e)
	}
	if _, err := fmt.Sscanf(e.Field, "fars[%d]", &i); err == nil && i < len(sess.FARs) {
		return ruleFailure(ruleFAR, sess.FARs[i].ID, "%v", e)
	}
	if _, err := fmt.Sscanf(e.Field, "qers[%d]", &i); err == nil && i < len(sess.QERs) {
		return ruleFailure(ruleQER, sess.QERs[i].ID, "%v", e)
	}
	if _, err := fmt.Sscanf(e.Field, "urrs[%d]", &i); err == nil && i < len(sess.URRs) {
		return ruleFailure(ruleURR, sess.URRs[i].ID, "%v", e)
	}
	return &refusal{cause: ie.CauseRequestRejected, msg: e.Error()}
}

// dropUnusedChosen forgets the TEIDs s chose that none of its PDRs uses
// any more, and returns them.
func (s *pfcpSession) dropUnusedChosen() (unused []uint32) {
	s.chosenTEIDs = slices.DeleteFunc(s.chosenTEIDs, func(teid uint32) bool {
		used := slices.ContainsFunc(s.pdrs, func(p session.PDR) bool { return p.PDI.TEID == teid })
		if !used {
			unused = append(unused, teid)
		}
		return !used
	})
	return unused
}

// allocateTEID picks a TEID that neither the UPF chose nor a session uses.
func (h *Handler) allocateTEID() (uint32, error) {
	for range 1 << 16 {
		teid := rand.Uint32()
		if teid == 0 || h.chosen[teid] {
			continue
		}
		if _, used := h.cfg.Store.KeyOwner(session.PDR{PDI: session.PDI{SourceInterface: session.InterfaceAccess, TEID: teid}}); used {
			continue
		}
		h.chosen[teid] = true
		return teid, nil
	}
	return 0, errors.New("no free TEID found")
}

func (h *Handler) isN3(a netip.Addr) bool { return slices.Contains(h.cfg.N3, a) }

// allocateSEID picks a UP SEID no session of the store has.
func (h *Handler) allocateSEID() uint64 {
	for {
		seid := rand.Uint64()
		if _, used := h.cfg.Store.Get(seid); seid != 0 && !used {
			return seid
		}
	}
}

// Establish creates a session from a Session Establishment Request.
func (h *Handler) Establish(peer pfcp.Peer, req *message.SessionEstablishmentRequest) *message.SessionEstablishmentResponse {
	h.mu.Lock()
	defer h.mu.Unlock()
	f, _ := req.CPFSEID.FSEID() // checked by the server
	// Room for the rules created, which come in any order.
	s := &pfcpSession{seid: h.allocateSEID(), cpSEID: f.SEID, smf: peer, pdrs: slices.Grow([]session.PDR(nil), len(req.CreatePDR)),
		fars: slices.Grow([]session.FAR(nil), len(req.CreateFAR)), qers: slices.Grow([]session.QER(nil), len(req.CreateQER))}
	t := &txn{h: h, s: s, choose: map[uint8]uint32{}, now: time.Now()}
	r := cmp.Or(notServed(slices.Concat(req.CreateTrafficEndpoint, req.CreateMAR, req.CreateSRR, present(req.UserPlaneInactivityTimer,
		req.CreateBridgeInfoForTSC, req.ProvideATSSSControlInformation, req.ProvideRDSConfigurationInformation))),
		unservedFlags(req.PFCPSEReqFlags, (*ie.IE).PFCPSEReqFlags, seReqRESTI))
	if r == nil && req.FQCSID != nil {
		s.csids, r = fqCSIDs(req.Payload)
	}
	if r == nil {
		r = t.apply(nil, slices.Concat(present(req.CreateBAR), req.CreateFAR, req.CreateQER, req.CreateURR, req.CreatePDR), nil)
	}
	if r != nil {
		t.undo()
		h.cfg.Log.Info("PFCP session establishment refused", "peer", peer.NodeID, "cp_seid", f.SEID, "reason", r.msg)
		return message.NewSessionEstablishmentResponse(0, 0, 0, 0, 0, r.ies()...)
	}
	h.commit(nil, s)
	ies := []*ie.IE{ie.NewCause(ie.CauseRequestAccepted), ie.NewFSEID(s.seid, h.n3IP(), nil)}
	ies = append(ies, h.createdPDRs(s, req.CreatePDR)...)
	return message.NewSessionEstablishmentResponse(0, 0, 0, 0, 0, ies...)
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

// Modify applies a Session Modification Request.
func (h *Handler) Modify(peer pfcp.Peer, req *message.SessionModificationRequest) *message.SessionModificationResponse {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.sessionOf(peer, req.SEID())
	if old == nil {
		return message.NewSessionModificationResponse(0, 0, 0, 0, 0, ie.NewCause(ie.CauseSessionContextNotFound))
	}
	t := &txn{h: h, s: old.clone(), choose: map[uint8]uint32{}, now: time.Now()}
	if req.CPFSEID != nil { // the SMF moved the session to another address or SEID
		if f, err := req.CPFSEID.FSEID(); err == nil {
			t.s.cpSEID = f.SEID
		}
	}
	r := cmp.Or(notServed(slices.Concat(req.RemoveTrafficEndpoint, req.CreateTrafficEndpoint, req.UpdateTrafficEndpoint,
		req.RemoveMAR, req.UpdateMAR, req.CreateMAR, req.RemoveSRR, req.CreateSRR, req.UpdateSRR,
		req.AccessAvailabilityInformation, req.QueryPacketRateStatus, present(req.UserPlaneInactivityTimer,
			req.TSCManagementInformation, req.ProvideATSSSControlInformation, req.EthernetContextInformation))),
		unservedFlags(req.PFCPSMReqFlags, (*ie.IE).PFCPSMReqFlags, smReqDROBU|smReqSNDEM|smReqQAURR))
	t.dropBuffered = req.PFCPSMReqFlags != nil && req.PFCPSMReqFlags.HasDROBU()
	if r == nil && req.FQCSID != nil { // the SMF moved the session to other sets
		t.s.csids, r = fqCSIDs(req.Payload)
	}
	var queried []uint32
	if r == nil {
		queried, r = t.s.queried(req)
	}
	if r == nil {
		r = t.apply(slices.Concat(req.RemovePDR, req.RemoveFAR, req.RemoveQER, req.RemoveURR, present(req.RemoveBAR)),
			slices.Concat(present(req.CreateBAR), req.CreateFAR, req.CreateQER, req.CreateURR, req.CreatePDR),
			slices.Concat(present(req.UpdateBAR), req.UpdateFAR, req.UpdateQER, req.UpdateURR, req.UpdatePDR))
	}
	if r != nil {
		t.undo()
		h.cfg.Log.Info("PFCP session modification refused", "peer", peer.NodeID, "seid", old.seid, "reason", r.msg)
		return message.NewSessionModificationResponse(0, 0, old.cpSEID, 0, 0, r.ies()...)
	}
	h.commit(old, t.s)
	for _, o := range t.endMarkers {
		if err := h.endMarker(o); err != nil {
			h.cfg.Log.Warn("sending an End Marker", "peer", o.Peer, "teid", o.TEID, "err", err)
		}
	}
	ies := append([]*ie.IE{ie.NewCause(ie.CauseRequestAccepted)}, h.createdPDRs(t.s, req.CreatePDR)...)
	ies = append(ies, t.reports...)
	for _, id := range queried {
		if _, kept := t.s.urrs[id]; kept { // a removed one has its report already
			if rep := h.queryReport(t.s, id, t.now, req.QueryURRReference); rep != nil {
				ies = append(ies, rep)
			}
		}
	}
	return message.NewSessionModificationResponse(0, 0, t.s.cpSEID, 0, 0, ies...)
}

// Delete removes a session.
func (h *Handler) Delete(peer pfcp.Peer, req *message.SessionDeletionRequest) *message.SessionDeletionResponse {
	h.mu.Lock()
	defer h.mu.Unlock()
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
	if err := h.dropPeer(peer.NodeID, sets); err != nil {
		h.cfg.Log.Error("PFCP session set deletion failed", "peer", peer.NodeID, "err", err)
		cause = ie.CauseSystemFailure
	}
	return message.NewSessionSetDeletionResponse(0, nil, ie.NewCause(cause), nil)
}

// DropPeer removes every session of an SMF.
func (h *Handler) DropPeer(nodeID string) {
	if err := h.dropPeer(nodeID, nil); err != nil {
		h.cfg.Log.Error("removing the sessions of a PFCP peer", "peer", nodeID, "err", err)
	}
}

// dropPeer removes an SMF's sessions: those in sets, or all for nil.
func (h *Handler) dropPeer(nodeID string, sets csidSets) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var errs []error
	for _, s := range h.sessions {
		if s.smf.NodeID == nodeID && (sets == nil || sets.meets(s.csids)) {
			_, err := h.remove(s)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// commit makes a session, installed in the store, the one its SMF sees,
// in place of old (nil for a new one).
func (h *Handler) commit(old, s *pfcpSession) {
	// A TEID chosen for a PDR that the request removed or moved, or for a
	// PDI that a later one replaced (a PDR given two PDIs), is no PDR's.
	for _, teid := range s.dropUnusedChosen() {
		delete(h.chosen, teid)
	}
	h.sessions[s.seid] = s
	if h.cfg.Buffers != nil && s.bufferLimit() != old.bufferLimit() {
		h.cfg.Buffers.SetLimit(s.seid, s.bufferLimit())
	}
	h.supervise(s.gnbs(), old.gnbs())
	h.index(s.seid, s.tunnels(), old.tunnels())
	for id, u := range s.urrs {
		if u.timed() {
			h.timed[meterKey{s.seid, id}] = true
		}
	}
}

// queryReport is the usage report of a URR the SMF queried, nil when its
// counters cannot be read; the next measurement starts with it. ref is the
// request's Query URR Reference, which the report carries; nil for none.
func (h *Handler) queryReport(s *pfcpSession, id uint32, now time.Time, ref *ie.IE) *ie.IE {
	usage, ok := h.usage(s, id)
	if !ok {
		return nil
	}
	u := s.urrs[id]
	rep := u.report(ie.UsageReportWithinSessionModificationResponse, s.meters[id], usage, reportIMMER, now, present(ref)...)
	h.rearm(s, id)
	return rep
}

// gnbs are the gNBs a session tunnels to; none for nil.
func (s *pfcpSession) gnbs() map[netip.Addr]bool {
	peers := map[netip.Addr]bool{}
	if s != nil {
		for _, f := range s.fars {
			if o := f.OuterHeaderCreation; o != nil && f.Action == session.ActionForward {
				peers[o.Peer] = true
			}
		}
	}
	return peers
}

// supervise starts watching the paths to the gNBs in now and not in
// before, and stops watching those only in before.
func (h *Handler) supervise(now, before map[netip.Addr]bool) {
	if h.cfg.Tunnels == nil {
		return
	}
	for peer := range now {
		if !before[peer] {
			if err := h.cfg.Tunnels.Watch(gtpu.Path{Local: h.cfg.N3[0], Peer: peer}); err != nil {
				h.cfg.Log.Warn("supervising a GTP-U path", "peer", peer, "err", err)
			}
		}
	}
	for peer := range before {
		if !now[peer] {
			h.cfg.Tunnels.Unwatch(gtpu.Path{Local: h.cfg.N3[0], Peer: peer})
		}
	}
}

func (h *Handler) endMarker(o session.OuterHeaderCreation) error {
	if h.cfg.Tunnels == nil {
		return nil
	}
	return h.cfg.Tunnels.SendEndMarker(h.cfg.N3[0], o.Peer, o.TEID)
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

// index files session seid under the tunnels in now instead of those in
// before.
func (h *Handler) index(seid uint64, now, before map[gnbTunnel]bool) {
	for t := range before {
		h.byTunnel.remove(t, seid)
	}
	for t := range now {
		h.byTunnel.add(t, seid)
	}
}

// ErrorIndication reports a gNB's GTP-U Error Indication to the SMFs of
// the sessions that tunnel to the TEID it names (§5.10.2).
func (h *Handler) ErrorIndication(ei gtpu.ErrorIndication) {
	peer := ei.PeerAddr
	if !peer.IsValid() {
		peer = ei.From
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, seid := range h.byTunnel.sessions(gnbTunnel{ei.TEID, peer}) {
		s := h.sessions[seid]
		ies := []*ie.IE{ie.NewReportType(0, 1, 0, 0),
			ie.NewErrorIndicationReport(ie.NewFTEID(0x01, ei.TEID, net.IP(peer.AsSlice()), nil, 0))}
		h.out.put(report{smf: s.smf, seid: s.seid, req: message.NewSessionReportRequest(0, 0, s.cpSEID, 0, 0, ies...)})
	}
}

// remove deletes a session from the store, gives back what it chose and
// takes back its reports not sent yet.
func (h *Handler) remove(s *pfcpSession) (unsent []report, err error) {
	if err := h.cfg.Store.Delete(s.seid); err != nil && !errors.Is(err, session.ErrNotFound) {
		return nil, err
	}
	for _, teid := range s.chosenTEIDs {
		delete(h.chosen, teid)
	}
	if s.ue4.IsValid() {
		h.releaseUE(s.ue4)
	}
	delete(h.sessions, s.seid)
	if h.cfg.Buffers != nil {
		h.cfg.Buffers.SetLimit(s.seid, 0)
	}
	h.supervise(nil, s.gnbs())
	h.index(s.seid, nil, s.tunnels())
	return h.out.withdraw(s.seid), nil
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
		children := []*ie.IE{ie.NewPDRID(id)}
		if chosenTEID {
			children = append(children, ie.NewFTEID(0x01, p.PDI.TEID, h.n3IP(), nil, 0))
		}
		if chosenUE {
			children = append(children, ie.NewUEIPAddress(0x02|sdFlag(&p), p.PDI.UEAddress.Addr().String(), "", 0, 0))
		}
		out = append(out, ie.NewCreatedPDR(children...))
	}
	return out
}

// sdFlag is the S/D bit of the UE IP Address IE of a PDR (§8.2.62).
func sdFlag(p *session.PDR) uint8 {
	if p.PDI.SourceInterface == session.InterfaceAccess {
		return 0
	}
	return 0x04
}

func (h *Handler) n3IP() net.IP { return net.IP(h.cfg.N3[0].AsSlice()) }

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
