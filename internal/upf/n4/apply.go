package n4

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"slices"

	"github.com/wmnsk/go-pfcp/ie"

	"github.com/xdp5g/xdp5g/internal/upf/gtpu"
	"github.com/xdp5g/xdp5g/internal/upf/ippool"
	"github.com/xdp5g/xdp5g/internal/upf/session"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// apply carries out a translated request, all or nothing: the UPF makes
// the choices the request left to it (they are part of the keys the
// session is checked by), reads the counters the request needs, checks
// the session, installs it with one call into the store, and makes it the
// one its SMF sees.
func (h *Handler) apply(c *change) *refusal {
	r := h.choose(c)
	if r == nil {
		r = h.settleURRs(c)
	}
	var sess session.Session
	if r == nil {
		sess = c.s.rules()
		r = h.validate(c.s.seid, sess)
	}
	if r == nil {
		r = h.install(c, sess)
	}
	if r != nil {
		h.undo(c)
		return r
	}
	h.commit(c)
	return nil
}

// choose makes the choices a request leaves to the UPF: a new session's
// SEID, the F-TEIDs of PDRs (CH) and the session's UE address (CHV4).
func (h *Handler) choose(c *change) *refusal {
	if c.old == nil {
		c.s.seid = h.allocateSEID()
	}
	// The PDRs of a choice share its first PDR's F-TEID, address and all.
	teids := make([]upfxdp.FTEID, c.choices)
	for _, tc := range c.teidChoices {
		i, _ := pdrRules.find(c.s.pdrs, uint32(tc.pdr))
		pdi := &c.s.pdrs[i].PDI
		if teids[tc.choice].TEID == 0 {
			teid, err := h.allocateTEID(pdi.LocalAddress)
			if err != nil {
				return noResources(err)
			}
			teids[tc.choice] = upfxdp.FTEID{Addr: pdi.LocalAddress, TEID: teid}
			c.teids = append(c.teids, teid)
			c.s.chosenTEIDs = append(c.s.chosenTEIDs, teid)
		}
		pdi.LocalAddress, pdi.TEID = teids[tc.choice].Addr, teids[tc.choice].TEID
	}
	if c.uePool == nil {
		return nil
	}
	a, err := h.unusedUEAddress(c.uePool)
	if err != nil {
		return noResources(err)
	}
	c.ue, c.s.ue4 = a, a
	for _, id := range c.ueFor {
		i, _ := pdrRules.find(c.s.pdrs, uint32(id))
		c.s.pdrs[i].PDI.UEAddress = netip.PrefixFrom(a, 32)
	}
	return nil
}

// unusedUEAddress allocates from pool an address no session holds: one
// that an SMF or a REST session gave a session itself stays with it, back
// in the pool's queue to be tried again once the never-used ones are gone.
func (h *Handler) unusedUEAddress(pool *ippool.Pool) (netip.Addr, error) {
	var held []netip.Addr
	defer func() {
		for _, a := range held {
			pool.Release(a)
		}
	}()
	for {
		a, err := pool.Allocate()
		if err != nil {
			return a, err
		}
		core := session.PDR{PDI: session.PDI{SourceInterface: session.InterfaceCore, UEAddress: netip.PrefixFrom(a, a.BitLen())}}
		if _, used := h.cfg.Store.KeyOwner(core); !used {
			return a, nil
		}
		held = append(held, a)
	}
}

// settleURRs reads the counters a request needs before the store changes
// its URRs: those of the URRs it removes, for their final usage reports,
// and those of the URRs given quotas anew, from which their meters start
// over.
func (h *Handler) settleURRs(c *change) *refusal {
	if len(c.removedURRs) > 0 {
		reports, err := h.finalReports(c.old, ie.UsageReportWithinSessionModificationResponse, c.removedURRs, c.now)
		if err != nil {
			return systemFailure(err)
		}
		c.reports = reports
	}
	for id, g := range c.granted {
		usage, err := h.cfg.Store.URRUsage(c.s.seid, id)
		if err != nil {
			return systemFailure(err)
		}
		m := *c.s.meters[id] // a copy: the request may still fail
		if g.volume {        // a new quota counts from now
			m.quotaBase, m.exhausted = usage.Bytes, false
		}
		if g.time {
			m.timeQuotaStart, m.blocked = c.now, 0
		}
		// A quota granted anew is valid for the validity time from now.
		m.quotaGiven, m.expired = c.now, false
		setIn(&c.s.meters, id, &m)
	}
	return nil
}

// install writes the session into the store: a new one, or in place of
// the old one without a gap.
func (h *Handler) install(c *change, sess session.Session) *refusal {
	var err error
	if c.old == nil {
		err = h.cfg.Store.Create(sess)
	} else {
		err = h.cfg.Store.Modify(sess, c.mod)
	}
	return refusalOf(sess, err)
}

// undo gives back what a refused change chose.
func (h *Handler) undo(c *change) {
	for _, teid := range c.teids {
		delete(h.chosen, teid)
	}
	if c.ue.IsValid() {
		h.releaseUE(c.ue)
	}
}

// commit makes the installed session the one its SMF sees, in place of
// the old one, with what follows: the session's buffer limit, the
// supervision of the paths to its gNBs, the End Markers it asked for.
func (h *Handler) commit(c *change) {
	old, s := c.old, c.s
	// A TEID chosen for a PDR that the request removed or moved, or for a
	// PDI that a later one replaced (a PDR given two PDIs), is no PDR's.
	for _, teid := range s.dropUnusedChosen() {
		delete(h.chosen, teid)
	}
	h.sessions[s.seid] = s
	h.indexCP(s, old)
	h.touched[s.seid] = true
	if h.cfg.Buffers != nil && s.bufferLimit() != old.bufferLimit() {
		h.cfg.Buffers.SetLimit(s.seid, s.bufferLimit())
	}
	h.supervise(h.paths(s), h.paths(old))
	h.index(s.seid, s.tunnels(), old.tunnels())
	for id, u := range s.urrs {
		if u.timed() {
			h.timed[meterKey{s.seid, id}] = true
		}
	}
	for _, m := range c.endMarkers {
		if err := h.endMarker(m); err != nil {
			h.cfg.Log.Warn("sending an End Marker", "peer", m.Peer, "teid", m.teid, "err", err)
		}
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
	h.indexCP(nil, s)
	if h.cfg.Buffers != nil {
		h.cfg.Buffers.SetLimit(s.seid, 0)
	}
	h.supervise(nil, h.paths(s))
	h.index(s.seid, nil, s.tunnels())
	h.touched[s.seid] = true
	unsent = h.out.withdraw(s.seid)
	for _, r := range unsent {
		h.done(r.id)
	}
	return unsent, nil
}

// allocateSEID picks a UP SEID no session of the store has.
func (h *Handler) allocateSEID() uint64 {
	for {
		// At most 2^53 - 1: the REST API and its client print SEIDs as
		// JSON numbers, which jq and JavaScript read exactly only so far.
		seid := rand.Uint64N(1 << 53)
		if _, used := h.cfg.Store.Get(seid); seid != 0 && !used {
			return seid
		}
	}
}

// allocateTEID picks a TEID that the UPF has not chosen, at any address,
// and no session uses at address at.
func (h *Handler) allocateTEID(at netip.Addr) (uint32, error) {
	for range 1 << 16 {
		teid := rand.Uint32()
		if teid == 0 || h.chosen[teid] {
			continue
		}
		if _, used := h.cfg.Store.KeyOwner(session.PDR{PDI: session.PDI{SourceInterface: session.InterfaceAccess, TEID: teid, LocalAddress: at}}); used {
			continue
		}
		h.chosen[teid] = true
		return teid, nil
	}
	return 0, errors.New("no free TEID found")
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

// supervise starts watching the paths in now and not in before, and stops
// watching those only in before.
func (h *Handler) supervise(now, before map[gtpu.Path]bool) {
	if h.cfg.Tunnels == nil {
		return
	}
	for p := range now {
		if !before[p] {
			if err := h.cfg.Tunnels.Watch(p); err != nil {
				h.cfg.Log.Warn("supervising a GTP-U path", "local", p.Local, "peer", p.Peer, "err", err)
			}
		}
	}
	for p := range before {
		if !now[p] {
			h.cfg.Tunnels.Unwatch(p)
		}
	}
}

// endMarker is an End Marker to send into a tunnel a request moved away
// from, along the path the tunnel took.
type endMarker struct {
	gtpu.Path
	teid uint32
}

func (h *Handler) endMarker(m endMarker) error {
	if h.cfg.Tunnels == nil {
		return nil
	}
	return h.cfg.Tunnels.SendEndMarker(m.Local, m.Peer, m.teid)
}

// EndMarker passes on an End Marker that ends the tunnel to a session's
// F-TEID, into the tunnel of each FAR forwarding that F-TEID's packets: an
// I-UPF passes the PSA's on to the source gNB, a UPF forwarding indirectly
// the source gNB's to the target (TS 23.502 §4.9.1). It leaves from where
// the FAR's packets leave.
func (h *Handler) EndMarker(m gtpu.EndMarker) {
	h.apart(func() {
		seid, ok := h.cfg.Store.KeyOwner(session.PDR{PDI: session.PDI{SourceInterface: session.InterfaceAccess, TEID: m.TEID, LocalAddress: m.Local}})
		s := h.sessions[seid]
		if !ok || s == nil {
			return
		}
		sent := map[session.OuterHeaderCreation]bool{}
		for _, p := range s.pdrs {
			f, _ := farRules.get(s.fars, p.FARID)
			o := f.OuterHeaderCreation
			if p.PDI.TEID != m.TEID || p.PDI.LocalAddress != m.Local || f.Action != session.ActionForward || o == nil || sent[*o] {
				continue
			}
			sent[*o] = true
			src := h.cfg.Store.TunnelSource(&session.Session{PDRs: s.pdrs}, &f)
			if err := h.endMarker(endMarker{gtpu.Path{Local: src, Peer: o.Peer}, o.TEID}); err != nil {
				h.cfg.Log.Warn("passing an End Marker on", "peer", o.Peer, "teid", o.TEID, "err", err)
			}
		}
	})
}

// index files session seid under the tunnels in now instead of those in
// before, once the index is built.
func (h *Handler) index(seid uint64, now, before map[gnbTunnel]bool) {
	if h.byTunnel == nil {
		return
	}
	for t := range before {
		h.byTunnel.remove(t, seid)
	}
	for t := range now {
		h.byTunnel.add(t, seid)
	}
}

// tunnelIndex is the index of the sessions by gNB tunnel, built on first
// use: Error Indications are rare, restored sessions many.
func (h *Handler) tunnelIndex() *tunnelIndex {
	if h.byTunnel == nil {
		x := newTunnelIndex()
		for seid, s := range h.sessions {
			for t := range s.tunnels() {
				x.add(t, seid)
			}
		}
		h.byTunnel = &x
	}
	return h.byTunnel
}
