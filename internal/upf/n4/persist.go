package n4

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"maps"
	"math"
	"net/netip"
	"runtime"
	"slices"
	"sync"

	"github.com/wmnsk/go-pfcp/message"

	"github.com/xdp5g/xdp5g/internal/upf/gtpu"
	"github.com/xdp5g/xdp5g/internal/upf/n4state"
	"github.com/xdp5g/xdp5g/internal/upf/pfcp"
	"github.com/xdp5g/xdp5g/internal/upf/sdf"
	"github.com/xdp5g/xdp5g/internal/upf/session"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// Persistence (Config.Journal): whatever changes a session — a request, a
// report's answer, a URR's measurement — ends with the session recorded
// as it now is (or as gone) in a transaction: a request's own, which the
// PFCP server writes with its response, or else one of the handler's. A
// session's record has the rules as the SMF wrote them, the UPF's choices,
// its URRs' meters and the slots the store gave its rules, and a version
// that orders it among the records of that session whatever order they
// reach the journal in. A Session Report Request is recorded, with the
// sequence number it goes out with, before it is sent, and recorded as
// done once answered: one a restart catches unanswered is sent again, the
// same request to the SMF, which takes it for a retransmission. Its usage
// reports name the URR sequence numbers (UR-SEQN) too.

// record writes what the handler's call changed into t; under h.mu.
// Reports created meanwhile go to the outbox, to be sent once t is written.
func (h *Handler) record(t *n4state.Txn) {
	for _, seid := range slices.Sorted(maps.Keys(h.touched)) {
		h.version++
		v := h.version
		s := h.sessions[seid]
		if s == nil {
			t.Put(n4state.KindSessionGone, func(e *n4state.Enc) { e.Uint(seid); e.Uint(v) })
			continue
		}
		s.version = v
		t.Put(n4state.KindSession, func(e *n4state.Enc) { // not called without a journal
			slots, _ := h.cfg.Store.Slots(seid)
			at := len(e.B)
			encodeSession(e, s, v, slots)
			s.record = slices.Clone(e.B[at:])
		})
	}
	clear(h.touched)
	for _, id := range h.answered {
		t.Put(n4state.KindReportDone, func(e *n4state.Enc) { e.Uint(id) })
	}
	h.answered = h.answered[:0]
	for _, r := range h.created {
		t.Put(n4state.KindReport, func(e *n4state.Enc) { encodeReport(e, r) })
	}
	lsn := t.LSN()
	for _, r := range h.created {
		r.lsn = lsn
		h.out.put(*r)
	}
	h.created = h.created[:0]
}

// inRequest runs f, a change by the request the PFCP server serves, under
// h.mu, and records it in the request's transaction (one of its own when
// it is not the server's, and called directly).
func (h *Handler) inRequest(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.cfg.Journal.Request()
	if t == nil {
		h.apartLocked(f)
		return
	}
	f()
	h.record(t)
}

// apart runs f, a change of the handler's own, under h.mu and records it
// in a transaction of its own.
func (h *Handler) apart(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.apartLocked(f)
}

func (h *Handler) apartLocked(f func()) {
	t := h.cfg.Journal.Txn()
	f()
	h.record(t)
	t.Commit()
}

// Snapshot writes the handler's part of the state into a compaction of
// its journal (n4state.Log.Compact): every session and unanswered report.
// A session's record is the value of its last one, taken under h.mu a
// thousand sessions at a time and copied after, so that requests wait
// little for h.mu; a session restored and not recorded since is encoded
// afresh, with the slots its rules hold now. The records go in the order
// of their versions, the order the sessions last changed in, which is
// mostly that of the data path's slots their rules took: a restore reads
// those slots in that order. A thousand sessions an entry.
func (h *Handler) Snapshot(l *n4state.Log) {
	type taken struct {
		version uint64
		record  []byte
	}
	var records []taken
	// Not even the sessions' keys are taken at once: at a million
	// sessions that held requests back for tens of milliseconds. A
	// session established meanwhile may be left out: its own entry,
	// after the snapshot began, records it.
	h.mu.Lock()
	next, stop := iter.Pull2(maps.All(h.sessions))
	h.mu.Unlock()
	defer stop()
	for more := true; more; {
		h.mu.Lock()
		for range 1000 {
			seid, s, ok := next()
			if !ok {
				more = false
				break
			}
			if s.record == nil {
				slots, _ := h.cfg.Store.Slots(seid)
				var e n4state.Enc
				encodeSession(&e, s, s.version, slots)
				s.record = e.B
			}
			records = append(records, taken{s.version, s.record})
		}
		h.mu.Unlock()
	}
	slices.SortFunc(records, func(a, b taken) int { return cmp.Compare(a.version, b.version) })
	values := make([][]byte, len(records))
	for i, r := range records {
		values[i] = r.record
	}
	// Reserved after a later record of the same session, maybe: the
	// versions order them.
	l.PutValues(n4state.KindSession, values)
	t := l.Txn()
	h.mu.Lock()
	for _, r := range h.unanswered {
		t.Put(n4state.KindReport, func(e *n4state.Enc) { encodeReport(e, r) })
	}
	h.mu.Unlock()
	l.Wait(t.Commit())
}

// Saved is the sessions and reports of a previous run's journal: replay the
// journal into it, Finish, have the store take the sessions over (Kept),
// then give it to New (Config.Restored).
//
// The sessions' records are read on every CPU: each shard of them, by UP
// SEID, reads its records in the journal's order on a goroutine of its own
// (a million take seconds on one).
type Saved struct {
	shards   []*shard
	reading  sync.WaitGroup // the shards' goroutines, once started
	started  bool
	reports  map[uint64]*report
	reportID uint64
	version  uint64 // of the last session record, once Finish read them
	// The handler's index of the sessions, which Kept starts building
	// while the store takes them over: by UP SEID and CP F-SEID, the URRs with clock
	// triggers, and the sessions with a UE address or a buffer limit.
	indexing sync.Once
	bySEID   map[uint64]*pfcpSession
	byCP     cpIndex
	timed    []meterKey
	reserved []*pfcpSession
}

type savedSession struct {
	s     *pfcpSession
	slots session.Slots
}

// shard reads the records of the sessions whose UP SEID it is given.
// It keeps them in the order it read them, which is the order they are in
// memory: the store and the handler go through them so, a million
// sessions' memory taking far longer to read in any other order.
type shard struct {
	batches chan batch
	filling batch
	peers   map[string][]pfcp.Peer // by Node ID: one copy of each
	filters map[string]sdf.Filter  // by flow description: parsed once
	order   []savedSession         // as read; those replaced since or gone are zero
	at      map[uint64]int         // the index in order of each session
	gone    map[uint64]uint64      // version of the record of a session gone
	version uint64
	err     error
}

// sessions calls f with the shard's sessions, in the order it read them.
func (sh *shard) sessions(f func(savedSession)) {
	for _, ss := range sh.order {
		if ss.s != nil {
			f(ss)
		}
	}
}

// saved is the session with UP SEID seid; zero when none.
func (sh *shard) saved(seid uint64) savedSession {
	if i, ok := sh.at[seid]; ok {
		return sh.order[i]
	}
	return savedSession{}
}

// batch is records for a shard: their kinds and values, one after another.
type batch struct {
	kinds  []byte
	values [][]byte
}

const batchRecords = 256

// NewSaved returns a Saved to replay a journal into.
func NewSaved() *Saved {
	sv := &Saved{reports: map[uint64]*report{}}
	for range runtime.GOMAXPROCS(0) {
		sh := &shard{batches: make(chan batch, 4), peers: map[string][]pfcp.Peer{}, filters: map[string]sdf.Filter{},
			at: map[uint64]int{}, gone: map[uint64]uint64{}}
		sv.shards = append(sv.shards, sh)
	}
	return sv
}

// Sessions is the number of sessions saved.
func (sv *Saved) Sessions() int {
	n := 0
	for _, sh := range sv.shards {
		n += len(sh.at)
	}
	return n
}

// each calls f with every session saved.
func (sv *Saved) each(f func(savedSession)) {
	for _, sh := range sv.shards {
		sh.sessions(f)
	}
}

// Peers are the Node IDs of the SMFs the sessions are of.
func (sv *Saved) Peers() map[string]bool {
	peers := map[string]bool{}
	sv.each(func(ss savedSession) { peers[ss.s.smf.NodeID] = true })
	return peers
}

// Replay reads an op of the journal; false for one of another owner's kind.
func (sv *Saved) Replay(kind byte, value []byte) (bool, error) {
	d := n4state.NewDec(value)
	switch kind {
	case n4state.KindSession, n4state.KindSessionGone: // both begin with the UP SEID
		sh := sv.shards[d.Uint()%uint64(len(sv.shards))]
		if d.Err != nil {
			return true, d.Err
		}
		sh.filling.kinds = append(sh.filling.kinds, kind)
		sh.filling.values = append(sh.filling.values, slices.Clone(value))
		if len(sh.filling.kinds) == batchRecords {
			sv.send(sh)
		}
		return true, nil
	case n4state.KindReport:
		r := decodeReport(d)
		sv.reports[r.id] = r
		sv.reportID = max(sv.reportID, r.id)
	case n4state.KindReportDone:
		delete(sv.reports, d.Uint())
	default:
		return false, nil
	}
	return true, d.Done()
}

// send hands a shard the records it was given, starting the shards'
// goroutines first.
func (sv *Saved) send(sh *shard) {
	if !sv.started {
		sv.started = true
		for _, sh := range sv.shards {
			sv.reading.Go(sh.read)
		}
	}
	sh.batches <- sh.filling
	sh.filling = batch{}
}

// Finish reads what the shards were given; it returns the first record
// that could not be read.
func (sv *Saved) Finish() error {
	var errs []error
	for _, sh := range sv.shards {
		if len(sh.filling.kinds) > 0 {
			sv.send(sh)
		}
	}
	if sv.started {
		for _, sh := range sv.shards {
			close(sh.batches)
		}
		sv.reading.Wait()
	}
	for _, sh := range sv.shards {
		errs = append(errs, sh.err)
		sv.version = max(sv.version, sh.version)
	}
	return errors.Join(errs...)
}

// read reads the records the shard is given, in their order: the last
// version of a session is the one it keeps.
func (sh *shard) read() {
	for b := range sh.batches {
		for i, kind := range b.kinds {
			if sh.err == nil {
				sh.err = sh.record(kind, b.values[i])
			}
		}
	}
}

func (sh *shard) record(kind byte, value []byte) error {
	d := n4state.NewDec(value)
	if kind == n4state.KindSessionGone {
		seid, v := d.Uint(), d.Uint()
		if v > sh.saved(seid).version() {
			sh.forget(seid)
			sh.gone[seid] = v
		}
		sh.version = max(sh.version, v)
		return d.Done()
	}
	s, v, slots := decodeSession(d, sh)
	if err := d.Done(); err != nil {
		return fmt.Errorf("session record: %w", err)
	}
	if v > sh.saved(s.seid).version() && v > sh.gone[s.seid] {
		sh.forget(s.seid)
		sh.at[s.seid] = len(sh.order)
		sh.order = append(sh.order, savedSession{s, slots})
	}
	sh.version = max(sh.version, v)
	return nil
}

// forget drops the session with UP SEID seid, if read.
func (sh *shard) forget(seid uint64) {
	if i, ok := sh.at[seid]; ok {
		sh.order[i] = savedSession{}
		delete(sh.at, seid)
	}
}

// filter reads an SDF filter, whose flow description other sessions' PDRs
// mostly have too.
func (sh *shard) filter(d *n4state.Dec) sdf.Filter {
	desc := d.Bytes()
	f, ok := sh.filters[string(desc)]
	if !ok {
		var err error
		if f, err = sdf.Parse(string(desc)); err != nil {
			d.Fail(err)
			return f
		}
		sh.filters[string(desc)] = f
	}
	f.TOS, f.SPI = sdf.TOS{Value: d.Uint8(), Mask: d.Uint8()}, d.Uint32()
	f.HasFlowLabel, f.FlowLabel = d.Bool(), d.Uint32()
	f.Bidirectional, f.ID = d.Bool(), d.Uint32()
	return f
}

// peer reads a session's SMF: its Node ID and address, which the sessions
// of an SMF share.
func (sh *shard) peer(d *n4state.Dec) pfcp.Peer {
	id := d.Bytes()
	addr := d.AddrPort()
	peers := sh.peers[string(id)]
	if i := slices.IndexFunc(peers, func(p pfcp.Peer) bool { return p.Addr == addr }); i >= 0 {
		return peers[i]
	}
	p := pfcp.Peer{NodeID: string(id), Addr: addr}
	sh.peers[p.NodeID] = append(peers, p)
	return p
}

func (ss savedSession) version() uint64 {
	if ss.s == nil {
		return 0
	}
	return ss.s.version
}

// Kept are the sessions as the store takes them over.
func (sv *Saved) Kept() []session.Kept {
	kept := make([][]session.Kept, len(sv.shards))
	var wg sync.WaitGroup
	for i, sh := range sv.shards {
		wg.Go(func() {
			kept[i] = make([]session.Kept, 0, len(sh.at))
			sh.sessions(func(ss savedSession) {
				kept[i] = append(kept[i], session.Kept{Session: ss.s.rules(), Slots: ss.slots})
			})
		})
	}
	wg.Wait()
	go sv.index()
	return slices.Concat(kept...)
}

// index builds the handler's index of the sessions, once.
func (sv *Saved) index() {
	sv.indexing.Do(func() {
		sv.bySEID = make(map[uint64]*pfcpSession, sv.Sessions())
		sv.byCP = newCPIndex(sv.Sessions())
		sv.each(func(ss savedSession) {
			s := ss.s
			sv.bySEID[s.seid] = s
			for _, k := range cpKeys(s.cpSEID, s.cpAddrs) {
				sv.byCP.add(k, s.seid)
			}
			for id, u := range s.urrs {
				if u.timed() {
					sv.timed = append(sv.timed, meterKey{s.seid, id})
				}
			}
			if s.ue4.IsValid() || s.bufferLimit() != 0 {
				sv.reserved = append(sv.reserved, s)
			}
		})
	})
}

// restore takes up the sessions and reports of a previous run, which the
// store has taken over: the TEIDs and UE addresses they chose are taken
// again, their gNBs' paths supervised, their buffer limits set, and the
// reports not answered sent again. The index of gNB tunnels is built when
// an Error Indication needs it.
func (h *Handler) restore(sv *Saved) {
	h.version, h.reportID = sv.version, sv.reportID
	// The paths on every CPU, a map for each shard, while the index is
	// done.
	shardPaths := make([]map[gtpu.Path]bool, len(sv.shards))
	var wg sync.WaitGroup
	for i, sh := range sv.shards {
		wg.Go(func() {
			shardPaths[i] = map[gtpu.Path]bool{}
			sh.sessions(func(ss savedSession) {
				h.addPaths(shardPaths[i], ss.s) // as supervise would file them, without their sets
			})
		})
	}
	sv.index()
	// The TEIDs the sessions chose need no entry in h.chosen: their keys
	// in the store keep them from being chosen again.
	h.sessions, h.byCP = sv.bySEID, sv.byCP
	h.warnSharedCP()
	for _, k := range sv.timed {
		h.timed[k] = true
	}
	for _, s := range sv.reserved {
		if s.ue4.IsValid() {
			if err := h.reserveUE(s.ue4); err != nil {
				h.cfg.Log.Warn("a restored session's UE address is not in a pool any more", "seid", s.seid, "ue", s.ue4, "err", err)
			}
		}
		if h.cfg.Buffers != nil && s.bufferLimit() != 0 {
			h.cfg.Buffers.SetLimit(s.seid, s.bufferLimit())
		}
	}
	wg.Wait()
	paths := map[gtpu.Path]bool{}
	for _, p := range shardPaths {
		maps.Copy(paths, p)
	}
	h.supervise(paths, nil)
	for _, id := range slices.Sorted(maps.Keys(sv.reports)) {
		r := sv.reports[id]
		if h.sessions[r.seid] == nil {
			continue // its session's deletion took it back
		}
		h.unanswered[id] = r
		h.out.put(*r)
	}
}

// reserveUE takes a restored session's UE address in the pool holding it.
func (h *Handler) reserveUE(a netip.Addr) error {
	for _, p := range h.cfg.UEPools {
		if p.Prefix().Contains(a) {
			return p.Reserve(a)
		}
	}
	if h.cfg.UEPool == nil {
		return fmt.Errorf("no pool holds %s", a)
	}
	return h.cfg.UEPool.Reserve(a)
}

func encodeReport(e *n4state.Enc, r *report) {
	e.Uint(r.id)
	e.Uint(r.seid)
	e.String(r.smf.NodeID)
	e.AddrPort(r.smf.Addr)
	e.Bytes(r.encoded)
}

func decodeReport(d *n4state.Dec) *report {
	r := &report{id: d.Uint(), seid: d.Uint(), smf: pfcp.Peer{NodeID: d.String(), Addr: d.AddrPort()}, encoded: slices.Clone(d.Bytes())}
	if d.Err != nil {
		return r
	}
	req, err := message.ParseSessionReportRequest(r.encoded)
	if err != nil {
		d.Fail(err)
		return r
	}
	r.req = req
	return r
}

// encodeSession writes a session at version v, with the slots of its rules.
func encodeSession(e *n4state.Enc, s *pfcpSession, v uint64, slots session.Slots) {
	e.Uint(s.seid)
	e.Uint(v)
	e.Uint(s.cpSEID)
	e.String(s.smf.NodeID)
	e.AddrPort(s.smf.Addr)
	e.Uint(uint64(len(s.pdrs)))
	for i := range s.pdrs {
		encodePDR(e, &s.pdrs[i])
	}
	e.Uint(uint64(len(s.fars)))
	for i := range s.fars {
		encodeFAR(e, &s.fars[i])
	}
	e.Uint(uint64(len(s.qers)))
	for i := range s.qers {
		encodeQER(e, &s.qers[i])
	}
	e.Uint(uint64(len(s.urrs)))
	for _, id := range slices.Sorted(maps.Keys(s.urrs)) {
		u := s.urrs[id]
		encodeURR(e, &u)
		encodeMeter(e, s.meters[id])
	}
	encodeUints(e, s.chosenTEIDs)
	e.Addr(s.ue4)
	e.Bool(s.bar != nil)
	if s.bar != nil {
		e.Uint(uint64(s.bar.id))
		e.Uint(uint64(s.bar.suggested))
		e.Duration(s.bar.ddnDelay)
	}
	encodeUints(e, slices.Sorted(maps.Keys(s.notify)))
	e.Uint(uint64(len(s.csids)))
	for n, ids := range s.csids {
		e.Uint(uint64(n.typ))
		e.String(n.addr)
		encodeUints(e, ids)
	}
	for _, slots := range [][]session.RuleSlot{slots.PDR, slots.QER, slots.URR, slots.SDF, slots.Buffer} {
		e.Uint(uint64(len(slots)))
		for _, r := range slots {
			e.Uint(uint64(r.ID))
			e.Uint(uint64(r.Slot))
		}
	}
	e.Addr(s.cpAddrs[0])
	e.Addr(s.cpAddrs[1])
}

func decodeSession(d *n4state.Dec, sh *shard) (*pfcpSession, uint64, session.Slots) {
	s := &pfcpSession{seid: d.Uint()}
	v := d.Uint()
	s.version = v
	s.cpSEID = d.Uint()
	s.smf = sh.peer(d)
	s.pdrs = decodeList(d, func(d *n4state.Dec) session.PDR { return decodePDR(d, sh) })
	s.fars = decodeList(d, decodeFAR)
	s.qers = decodeList(d, decodeQER)
	for n := d.Uint(); n > 0 && d.Err == nil; n-- {
		u := decodeURR(d)
		setIn(&s.urrs, u.id, u)
		setIn(&s.meters, u.id, decodeMeter(d))
	}
	s.chosenTEIDs = decodeUints[uint32](d)
	s.ue4 = d.Addr()
	if d.Bool() {
		s.bar = &bar{id: d.Uint8(), suggested: d.Uint8(), ddnDelay: d.Duration()}
	}
	for _, far := range decodeUints[uint32](d) {
		setIn(&s.notify, far, true)
	}
	for n := d.Uint(); n > 0 && d.Err == nil; n-- {
		if s.csids == nil {
			s.csids = csidSets{}
		}
		s.csids[csidNode{typ: d.Uint8(), addr: d.String()}] = decodeUints[uint16](d)
	}
	var slots session.Slots
	for _, to := range []*[]session.RuleSlot{&slots.PDR, &slots.QER, &slots.URR, &slots.SDF, &slots.Buffer} {
		*to = decodeList(d, func(d *n4state.Dec) session.RuleSlot { return session.RuleSlot{ID: d.Uint32(), Slot: d.Uint32()} })
	}
	if d.Len() > 0 { // records of earlier versions end before
		s.cpAddrs = [2]netip.Addr{d.Addr(), d.Addr()}
	}
	return s, v, slots
}

// decodeList reads a count, then as many values (nil for none).
func decodeList[T any](d *n4state.Dec, decode func(*n4state.Dec) T) []T {
	n := d.Uint()
	if n > uint64(d.Len()) { // each value takes an octet at least
		d.Fail(n4state.ErrCorrupt)
		return nil
	}
	var out []T
	if n > 0 {
		out = make([]T, 0, n)
	}
	for ; n > 0 && d.Err == nil; n-- {
		out = append(out, decode(d))
	}
	return out
}

func encodeUints[T uint16 | uint32](e *n4state.Enc, vs []T) {
	e.Uint(uint64(len(vs)))
	for _, v := range vs {
		e.Uint(uint64(v))
	}
}

func decodeUints[T uint16 | uint32](d *n4state.Dec) []T {
	return decodeList(d, func(d *n4state.Dec) T {
		v := d.Uint()
		if v > uint64(^T(0)) {
			d.Fail(n4state.ErrCorrupt)
		}
		return T(v)
	})
}

// dualStack, beside a PDR's source interface, says its UE's IPv6 prefix
// follows its UE address: records of single-address PDRs read as before.
const dualStack = 1 << 8

func encodePDR(e *n4state.Enc, p *session.PDR) {
	e.Uint(uint64(p.ID))
	e.Uint(uint64(p.Precedence))
	e.Uint(uint64(p.FARID))
	iface := uint64(p.PDI.SourceInterface)
	if p.PDI.UEIPv6Prefix.IsValid() {
		iface |= dualStack
	}
	e.Uint(iface)
	e.Uint(uint64(p.PDI.TEID))
	e.Addr(p.PDI.LocalAddress)
	e.Prefix(p.PDI.UEAddress)
	if iface&dualStack != 0 {
		e.Prefix(p.PDI.UEIPv6Prefix)
	}
	e.Uint(uint64(p.PDI.QFI))
	e.Uint(uint64(len(p.PDI.SDFFilters)))
	for _, f := range p.PDI.SDFFilters {
		e.String(f.String())
		e.Uint(uint64(f.TOS.Value))
		e.Uint(uint64(f.TOS.Mask))
		e.Uint(uint64(f.SPI))
		e.Bool(f.HasFlowLabel)
		e.Uint(uint64(f.FlowLabel))
		e.Bool(f.Bidirectional)
		e.Uint(uint64(f.ID))
	}
	e.Bool(p.OuterHeaderRemoval != nil)
	if p.OuterHeaderRemoval != nil {
		e.Uint(uint64(*p.OuterHeaderRemoval))
	}
	encodeUints(e, p.QERIDs)
	encodeUints(e, p.URRIDs)
}

func decodePDR(d *n4state.Dec, sh *shard) session.PDR {
	p := session.PDR{ID: d.Uint16(), Precedence: d.Uint32(), FARID: d.Uint32()}
	iface := d.Uint()
	if iface > math.MaxUint8|dualStack {
		d.Fail(n4state.ErrCorrupt)
	}
	p.PDI = session.PDI{SourceInterface: session.Interface(iface), TEID: d.Uint32(), LocalAddress: d.Addr(), UEAddress: d.Prefix()}
	if iface&dualStack != 0 {
		p.PDI.UEIPv6Prefix = d.Prefix()
	}
	p.PDI.QFI = d.Uint8()
	p.PDI.SDFFilters = decodeList(d, func(d *n4state.Dec) session.SDFFilter { return session.SDFFilter{Filter: sh.filter(d)} })
	if d.Bool() {
		p.OuterHeaderRemoval = &outerHeaderRemovals[d.Uint8()]
	}
	p.QERIDs = decodeUints[uint32](d)
	p.URRIDs = decodeUints[uint32](d)
	return p
}

// outerHeaderRemovals are the values a PDR's Outer Header Removal points
// at once read back, which nobody writes: one copy each.
var outerHeaderRemovals [256]uint8

func init() {
	for i := range outerHeaderRemovals {
		outerHeaderRemovals[i] = uint8(i)
	}
}

func encodeFAR(e *n4state.Enc, f *session.FAR) {
	e.Uint(uint64(f.ID))
	e.Uint(uint64(f.Action))
	encodeForwarding(e, &f.Forwarding)
	e.Bool(f.Duplicating != nil)
	if d := f.Duplicating; d != nil {
		encodeForwarding(e, d)
	}
}

// encodeForwarding encodes where a FAR, or its copies, go.
func encodeForwarding(e *n4state.Enc, f *session.Forwarding) {
	e.Uint(uint64(f.DestinationInterface))
	e.Bool(f.OuterHeaderCreation != nil)
	if o := f.OuterHeaderCreation; o != nil {
		encodeOHC(e, o)
	}
	e.Uint(uint64(f.DSCP))
	e.Addr(f.NextHop)
}

// decodeForwarding decodes what encodeForwarding encoded.
func decodeForwarding(d *n4state.Dec) session.Forwarding {
	f := session.Forwarding{DestinationInterface: session.Interface(d.Uint8())}
	if d.Bool() {
		f.OuterHeaderCreation = decodeOHC(d)
	}
	f.DSCP, f.NextHop = d.Uint8(), d.Addr()
	return f
}

func encodeOHC(e *n4state.Enc, o *session.OuterHeaderCreation) {
	e.Uint(uint64(o.TEID))
	e.Addr(o.Peer)
	e.Uint(uint64(o.Port))
}

func decodeOHC(d *n4state.Dec) *session.OuterHeaderCreation {
	return &session.OuterHeaderCreation{TEID: d.Uint32(), Peer: d.Addr(), Port: d.Uint16()}
}

func decodeFAR(d *n4state.Dec) session.FAR {
	f := session.FAR{ID: d.Uint32(), Action: session.Action(d.Uint8())}
	f.Forwarding = decodeForwarding(d)
	if d.Bool() {
		dup := decodeForwarding(d)
		f.Duplicating = &dup
	}
	return f
}

func encodeQER(e *n4state.Enc, q *session.QER) {
	e.Uint(uint64(q.ID))
	e.Bool(q.GateULClosed)
	e.Bool(q.GateDLClosed)
	for _, r := range []uint64{q.MBRUL, q.MBRDL, q.GBRUL, q.GBRDL} {
		e.Uint(r)
	}
	e.Uint(uint64(q.QFI))
	e.Bool(q.RQI)
}

func decodeQER(d *n4state.Dec) session.QER {
	return session.QER{ID: d.Uint32(), GateULClosed: d.Bool(), GateDLClosed: d.Bool(), MBRUL: d.Uint(), MBRDL: d.Uint(),
		GBRUL: d.Uint(), GBRDL: d.Uint(), QFI: d.Uint8(), RQI: d.Bool()}
}

func encodeURR(e *n4state.Enc, u *urr) {
	e.Uint(uint64(u.id))
	e.Bool(u.volume)
	e.Bool(u.duration)
	e.Uint(uint64(u.triggers))
	e.Duration(u.period)
	encodeVolumes(e, u.volThreshold)
	encodeVolumes(e, u.volQuota)
	e.Duration(u.timeThreshold)
	e.Duration(u.timeQuota)
	e.Duration(u.quotaValidity)
	e.Bool(u.beforeQoS)
	e.Bool(u.immediateStart)
	e.Bool(u.countPackets)
}

func decodeURR(d *n4state.Dec) urr {
	return urr{id: d.Uint32(), volume: d.Bool(), duration: d.Bool(), triggers: d.Uint32(), period: d.Duration(),
		volThreshold: decodeVolumes(d), volQuota: decodeVolumes(d), timeThreshold: d.Duration(), timeQuota: d.Duration(),
		quotaValidity: d.Duration(), beforeQoS: d.Bool(), immediateStart: d.Bool(), countPackets: d.Bool()}
}

func encodeMeter(e *n4state.Enc, m *meter) {
	e.Time(m.start)
	encodeVolumes(e, m.base.Bytes)
	encodeVolumes(e, m.base.Packets)
	e.Time(m.base.FirstPacket)
	e.Time(m.base.LastPacket)
	e.Time(m.periodStart)
	e.Uint(uint64(m.seqn))
	e.Bool(m.started)
	e.Uint(m.idlePackets)
	encodeVolumes(e, m.quotaBase)
	e.Bool(m.exhausted)
	e.Time(m.timeQuotaStart)
	e.Uint(m.blocked)
	e.Time(m.quotaGiven)
	e.Bool(m.expired)
}

func decodeMeter(d *n4state.Dec) *meter {
	m := &meter{start: d.Time()}
	m.base = upfxdp.URRUsage{Bytes: decodeVolumes(d), Packets: decodeVolumes(d), FirstPacket: d.Time(), LastPacket: d.Time()}
	m.periodStart, m.seqn, m.started, m.idlePackets = d.Time(), d.Uint32(), d.Bool(), d.Uint()
	m.quotaBase, m.exhausted, m.timeQuotaStart, m.blocked = decodeVolumes(d), d.Bool(), d.Time(), d.Uint()
	m.quotaGiven, m.expired = d.Time(), d.Bool()
	return m
}

func encodeVolumes(e *n4state.Enc, v [3]uint64) {
	for _, x := range v {
		e.Uint(x)
	}
}

func decodeVolumes(d *n4state.Dec) [3]uint64 { return [3]uint64{d.Uint(), d.Uint(), d.Uint()} }
