package n4

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xdp5g/xdp5g/internal/upf/gtpu"
	"github.com/xdp5g/xdp5g/internal/upf/pfcp"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// tickInterval is how often the clock-driven triggers are checked: well
// inside the one-second resolution of the PFCP time IEs.
const tickInterval = 100 * time.Millisecond

// meterKey names a URR of a session.
type meterKey struct {
	seid uint64
	id   uint32
}

// report is a Session Report Request waiting to be sent, once entry lsn of
// the journal, which records it, is written.
type report struct {
	id      uint64
	smf     pfcp.Peer
	seid    uint64 // UP SEID
	req     *message.SessionReportRequest
	encoded []byte // req, as journaled
	lsn     uint64
}

// outbox holds reports until the sender takes them: the handler's lock is
// never held across a network round trip.
type outbox struct {
	mu      sync.Mutex
	pending []report
	wake    chan struct{}
}

func (o *outbox) put(r report) {
	o.mu.Lock()
	o.pending = append(o.pending, r)
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// next takes the oldest report. The sender takes one at a time, so that
// the others stay withdrawable while it waits for an answer.
func (o *outbox) next() (report, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.pending) == 0 {
		return report{}, false
	}
	r := o.pending[0]
	o.pending = o.pending[1:]
	return r, true
}

// withdraw takes the reports of a session out, oldest first.
func (o *outbox) withdraw(seid uint64) []report {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []report
	o.pending = slices.DeleteFunc(o.pending, func(r report) bool {
		if r.seid == seid {
			out = append(out, r)
			return true
		}
		return false
	})
	return out
}

// Run measures usage and sends Session Reports until ctx ends: it follows
// the data path's URR events, checks the clock-driven triggers, and sends
// what they report.
func (h *Handler) Run(ctx context.Context, events *upfxdp.URREventReader) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		h.sendReports(ctx)
	}()
	go func() {
		defer wg.Done()
		for {
			ev, err := events.Read()
			if errors.Is(err, os.ErrClosed) {
				return
			}
			if err != nil {
				h.cfg.Log.Error("reading URR events", "err", err)
				continue
			}
			h.usageEvent(ev, time.Now())
		}
	}()
	t := time.NewTicker(tickInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			events.Close()
			wg.Wait()
			return
		case now := <-t.C:
			h.tick(now)
		}
	}
}

// usageEvent handles what the data path said of a URR's counters.
func (h *Handler) usageEvent(ev upfxdp.URREvent, now time.Time) {
	seid, id, ok := h.cfg.Store.URRBySlot(ev.Slot)
	if !ok {
		return // the URR went meanwhile
	}
	h.apart(func() {
		s := h.sessions[seid]
		if s == nil || s.meters[id] == nil {
			return // changed meanwhile
		}
		var fired uint32
		if ev.Kind == upfxdp.URREventQuota && !s.meters[id].exhausted {
			fired = trigVOLQU
		}
		h.measure(s, id, fired, now)
	})
}

// tick checks the clock-driven triggers of every URR that has some.
func (h *Handler) tick(now time.Time) {
	h.apart(func() {
		for k := range h.timed {
			s := h.sessions[k.seid]
			if s == nil || !s.urrs[k.id].timed() {
				delete(h.timed, k)
				continue
			}
			h.measure(s, k.id, 0, now)
		}
	})
}

// measure reads a URR's counters and reports what fired (fired, and what
// the counters and the clock raise), then gives the data path the limits
// of the next measurement.
func (h *Handler) measure(s *pfcpSession, id uint32, fired uint32, now time.Time) {
	u, m := s.urrs[id], s.meters[id]
	if m == nil {
		return
	}
	usage, ok := h.usage(s, id)
	if !ok {
		return
	}
	fired |= u.crossed(m, usage) | u.due(m, usage, now, h.cfg.TrafficStopAfter)
	if fired == 0 {
		return
	}
	h.touched[s.seid] = true
	u.note(m, fired, usage, now)
	if reported := fired & u.triggers; reported != 0 {
		h.send(s, u.report(ie.UsageReportWithinSessionReportRequest, m, usage, reported, now))
	}
	h.rearm(s, id)
}

// usage reads a URR's counters; false, logged, when it cannot.
func (h *Handler) usage(s *pfcpSession, id uint32) (upfxdp.URRUsage, bool) {
	usage, err := h.cfg.Store.URRUsage(s.seid, id)
	if err != nil {
		h.cfg.Log.Error("reading a URR", "seid", s.seid, "urr", id, "err", err)
	}
	return usage, err == nil
}

// rearm gives the data path the limits of a URR's next measurement.
func (h *Handler) rearm(s *pfcpSession, id uint32) {
	u := s.urrs[id]
	if err := h.cfg.Store.SetURRLimits(s.seid, id, u.limits(s.meters[id])); err != nil {
		h.cfg.Log.Error("re-arming a URR", "seid", s.seid, "urr", id, "err", err)
	}
}

// send queues a Session Report Request with usage reports.
func (h *Handler) send(s *pfcpSession, usage ...*ie.IE) {
	h.newReport(s, append([]*ie.IE{ie.NewReportType(0, 0, 1, 0)}, usage...)...)
}

// newReport creates a Session Report Request of a session with its
// sequence number, which record journals and then queues; under h.mu.
func (h *Handler) newReport(s *pfcpSession, ies ...*ie.IE) {
	req := message.NewSessionReportRequest(0, 0, s.cpSEID, 0, 0, ies...)
	if h.cfg.Sequence != nil {
		req.SetSequenceNumber(h.cfg.Sequence())
	}
	h.reportID++
	r := &report{id: h.reportID, smf: s.smf, seid: s.seid, req: req}
	if h.cfg.Journal != nil {
		var err error
		if r.encoded, err = req.Marshal(); err != nil {
			h.cfg.Log.Error("a Session Report Request not encodable", "seid", s.seid, "err", err)
			return
		}
	}
	h.unanswered[r.id] = r
	h.created = append(h.created, r)
}

// done takes note that a report was answered, or will not be; under h.mu.
func (h *Handler) done(id uint64) {
	delete(h.unanswered, id)
	h.answered = append(h.answered, id)
}

// sendReports sends the queued reports one by one until ctx ends, each
// once its record is written. An SMF that no longer knows the session has
// it deleted (§6.3.3 / TS 23.527). A report the SMF did not answer before
// ctx ended stays unanswered in the journal: the next run sends it again.
func (h *Handler) sendReports(ctx context.Context) {
	for {
		for r, ok := h.out.next(); ok; r, ok = h.out.next() {
			if h.cfg.SendReport == nil {
				h.apart(func() { h.done(r.id) })
				continue
			}
			h.cfg.Journal.Wait(r.lsn)
			resp, err := h.cfg.SendReport(ctx, r.smf, r.req)
			switch {
			case ctx.Err() != nil || errors.Is(err, pfcp.ErrClosed):
				return
			case err != nil:
				h.cfg.Log.Warn("PFCP session report not answered", "peer", r.smf.NodeID, "seid", r.seid, "err", err)
				h.apart(func() { h.done(r.id) })
			default:
				h.reportAnswered(r, resp)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-h.out.wake:
		}
	}
}

// reportAnswered takes note of an SMF's answer to a report and applies
// what an acceptance asks: a changed BAR, and dropping what the session's
// buffers hold (DROBU, as when the UE cannot be paged). An SMF that does
// not know the session has it deleted.
func (h *Handler) reportAnswered(r report, resp *message.SessionReportResponse) {
	h.apart(func() {
		h.done(r.id)
		s := h.sessions[r.seid]
		if s == nil || resp.Cause == nil {
			return
		}
		switch c, _ := resp.Cause.Cause(); c {
		case ie.CauseSessionContextNotFound:
			h.cfg.Log.Info("deleting a session its SMF does not know", "peer", s.smf.NodeID, "seid", s.seid)
			if _, err := h.remove(s); err != nil {
				h.cfg.Log.Error("deleting a session", "seid", s.seid, "err", err)
			}
		case ie.CauseRequestAccepted:
			h.applyAnswer(s, resp)
		}
	})
}

// applyAnswer applies what an SMF's acceptance of a report asks; under
// h.mu.
func (h *Handler) applyAnswer(s *pfcpSession, resp *message.SessionReportResponse) {
	seid := s.seid
	if resp.UpdateBAR != nil {
		c := h.newChange(s, s.clone())
		r := c.translateRules(nil, nil, []*ie.IE{resp.UpdateBAR})
		if r == nil {
			r = h.apply(&c)
		}
		if r != nil {
			h.cfg.Log.Warn("a report's response updates the BAR: not applied", "seid", seid, "reason", r.msg)
		}
	}
	if resp.PFCPSRRspFlags != nil && resp.PFCPSRRspFlags.HasDROBU() {
		n := h.cfg.Store.DropBuffered(seid)
		h.cfg.Log.Debug("buffered packets dropped as the SMF asked", "seid", seid, "packets", n)
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
	h.touched[s.seid] = true
	h.rearm(s, id)
	return rep
}

// ErrorIndication reports a gNB's GTP-U Error Indication to the SMFs of
// the sessions that tunnel to the TEID it names (§5.10.2).
func (h *Handler) ErrorIndication(ei gtpu.ErrorIndication) {
	peer := ei.PeerAddr
	if !peer.IsValid() {
		peer = ei.From
	}
	h.apart(func() { h.errorIndication(ei, peer) })
}

func (h *Handler) errorIndication(ei gtpu.ErrorIndication, peer netip.Addr) {
	for _, seid := range h.tunnelIndex().sessions(gnbTunnel{ei.TEID, peer}) {
		s := h.sessions[seid]
		ies := []*ie.IE{ie.NewReportType(0, 1, 0, 0), ie.NewErrorIndicationReport(remoteFTEID(ei.TEID, peer))}
		h.newReport(s, ies...)
	}
}

// remoteFTEID is the F-TEID of a peer's tunnel, of the peer's family.
func remoteFTEID(teid uint32, peer netip.Addr) *ie.IE {
	if peer.Is6() {
		return ie.NewFTEID(fteidV6, teid, nil, net.IP(peer.AsSlice()), 0)
	}
	return ie.NewFTEID(fteidV4, teid, net.IP(peer.AsSlice()), nil, 0)
}

// finalReports are the usage reports of URRs that end (removed, or their
// session deleted): what they measured since their last report.
func (h *Handler) finalReports(s *pfcpSession, typ uint16, ids []uint32, now time.Time) ([]*ie.IE, error) {
	var out []*ie.IE
	for _, id := range ids {
		usage, err := h.cfg.Store.URRUsage(s.seid, id)
		if err != nil {
			return nil, err
		}
		m := *s.meters[id]
		u := s.urrs[id]
		out = append(out, u.report(typ, &m, usage, reportTERMR, now))
	}
	return out, nil
}
