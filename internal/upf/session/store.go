package session

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"sync"

	"github.com/xdp5g/xdp5g/internal/platform/slotpool"
	"github.com/xdp5g/xdp5g/internal/upf/buffer"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// ErrNotFound is returned for an unknown SEID.
var ErrNotFound = errors.New("session not found")

// ConflictError says a session would take a key another session owns.
type ConflictError struct{ Msg string }

func (e *ConflictError) Error() string { return e.Msg }

// Nexthops resolves gNB addresses to next-hop slots (the nexthop package).
type Nexthops interface {
	Acquire(dst netip.Addr) (uint32, error)
	Release(dst netip.Addr)
	SetStatic(ip netip.Addr, mac net.HardwareAddr)
	ClearStatic(ip netip.Addr)
	// Adopt is Acquire for a FAR a previous run installed with a slot,
	// which it keeps if it can; ReleasePrevious frees the previous run's
	// slots that no FAR kept.
	Adopt(dst netip.Addr, slot uint32) (uint32, error)
	ReleasePrevious()
}

// Store is the set of installed sessions. Every change is all or nothing:
// a rejected one leaves the maps and the store as they were.
type Store struct {
	mu       sync.Mutex
	dp       *upfxdp.Datapath
	nh       Nexthops
	sessions map[uint64]*installed
	teids    map[upfxdp.FTEID]uint64
	ues      map[netip.Addr]uint64
	statics  map[netip.Addr]*static
	pdrSlots *slotpool.Pool
	qerSlots *slotpool.Pool
	urrSlots *slotpool.Pool
	urrs     map[uint32]urrRef // by slot
	sdfSlots *slotpool.Pool
	bufSlots *slotpool.Pool
	buffers  Buffers // nil: FARs cannot buffer
	changed  func()
}

// Buffers keeps the packets of buffering FARs (the buffer package), each
// in a slot of the data path's buffers.
type Buffers interface {
	// Arm readies a fresh slot for a session's FAR.
	Arm(slot uint32, owner buffer.Owner) error
	// Pending: the slot's FAR buffers, or is releasing what it holds.
	Pending(slot uint32) bool
	// Release sends what the slot holds, then lets its FARs forward;
	// Hold stops that while it is under way.
	Release(slot uint32)
	Hold(slot uint32)
	// Discard drops what the slot holds and forgets it; Drop drops it
	// and keeps the slot.
	Discard(slot uint32) int
	Drop(slot uint32) int
	Stats(slot uint32) (buffer.Stats, bool)
	// Adopt takes over the slots a previous run armed, by slot, and
	// returns how many packets they held in its memory.
	Adopt(owners map[uint32]buffer.Owner) (lost uint64)
}

// urrRef names a URR.
type urrRef struct {
	seid uint64
	id   uint32
}

// installed is a session with the data-path resources it owns.
type installed struct {
	Session
	PDRSlots ruleSlots `json:"pdrSlots"` // each PDR's slot holds its FAR too
	QERSlots ruleSlots `json:"qerSlots,omitempty"`
	URRSlots ruleSlots `json:"urrSlots,omitempty"`
	SDFSlots ruleSlots `json:"sdfSlots,omitempty"` // by PDR ID
	// BufferSlots are the buffers of FARs that buffer, or forward once
	// what they held is out, by FAR ID.
	BufferSlots ruleSlots `json:"bufferSlots,omitempty"`
}

// NewStore returns an empty store over a data path, which has an N3
// address at least. changed, if not nil, is called after every successful
// change of a session of the REST API's, which MarshalState saves
// (persistence).
func NewStore(dp *upfxdp.Datapath, nh Nexthops, changed func()) *Store {
	if changed == nil {
		changed = func() {}
	}
	s := &Store{
		dp: dp, nh: nh, changed: changed,
		sessions: map[uint64]*installed{}, teids: map[upfxdp.FTEID]uint64{}, ues: map[netip.Addr]uint64{},
		statics: map[netip.Addr]*static{},
		urrs:    map[uint32]urrRef{},
		// A PDR slot's counters start at zero: zeroed once the slot is out
		// of use, before it is handed out again, and before its first use
		// unless the maps are new.
		pdrSlots: slotpool.New(slotpool.Config{Name: "PDR", Size: dp.PDRCapacity(), Reset: dp.ZeroPDRCounters, Zeroed: dp.Unused()}),
		qerSlots: slotpool.New(slotpool.Config{Name: "QER", First: 1, Size: dp.QERCapacity()}), // slot 0 stands for no QER
		urrSlots: slotpool.New(slotpool.Config{Name: "URR", First: 1, Size: dp.URRCapacity()}), // and no URR
		sdfSlots: slotpool.New(slotpool.Config{Name: "SDF filter", First: 1, Size: dp.SDFSetCapacity()}),
		bufSlots: slotpool.New(slotpool.Config{Name: "buffer", First: 1, Size: dp.BufferCapacity()}),
	}
	return s
}

func (s *Store) changedOrigin(o Origin) {
	if o != OriginPFCP {
		s.changed()
	}
}

// SetBuffers lets FARs buffer; call before any session is installed.
func (s *Store) SetBuffers(b Buffers) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buffers = b
}

// BufferStats are the figures of a session's buffers, by FAR ID.
func (s *Store) BufferStats(seid uint64) map[uint32]buffer.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.sessions[seid]
	if in == nil || s.buffers == nil {
		return nil
	}
	stats := map[uint32]buffer.Stats{}
	for _, e := range in.BufferSlots {
		if st, ok := s.buffers.Stats(e.Slot); ok {
			stats[e.ID] = st
		}
	}
	return stats
}

// BufferSlot is the buffer slot of a session's FAR; false when it has none.
func (s *Store) BufferSlot(seid uint64, farID uint32) (uint32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.sessions[seid]
	if in == nil {
		return 0, false
	}
	slot, ok := in.BufferSlots.lookup(farID)
	return slot, ok
}

// DropBuffered drops what a session's buffers hold (PFCP's DROBU) and
// returns how many packets that was.
func (s *Store) DropBuffered(seid uint64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.sessions[seid]
	if in == nil {
		return 0
	}
	return s.dropHeld(in)
}

func (s *Store) dropHeld(in *installed) int {
	n := 0
	for _, e := range in.BufferSlots {
		n += s.buffers.Drop(e.Slot)
	}
	return n
}

// Create installs a new session. The store keeps its rule slices: the
// caller must not write into them any more.
func (s *Store) Create(sess Session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sessions[sess.SEID]; ok {
		return &ConflictError{fmt.Sprintf("session %d exists", sess.SEID)}
	}
	return s.install(sess, nil, nil, Modification{})
}

// Replace swaps a session's rules for new ones without a gap: packets see
// either the old rules or the new ones. A PDR or URR the old session had
// (by its ID) keeps its counts. The store keeps the rule slices, as Create
// does.
func (s *Store) Replace(sess Session) error { return s.Modify(sess, Modification{}) }

// Modification is what a Modify does beyond a Replace.
type Modification struct {
	// DropBuffered drops what the session's buffers hold (PFCP's DROBU),
	// before a FAR that forwards again could send any of it.
	DropBuffered bool
	// CreatedPDRs, CreatedURRs and CreatedFARs are rules created anew: one
	// that takes the ID of a rule the old session had (removed and created
	// again in one request) is another rule: it counts from zero, and a FAR
	// gets a buffer of its own, the old one's packets going with the old.
	CreatedPDRs []uint16
	CreatedURRs []uint32
	CreatedFARs []uint32
}

// Modify is Replace with m.
func (s *Store) Modify(sess Session, m Modification) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.sessions[sess.SEID]
	if !ok {
		return ErrNotFound
	}
	return s.install(sess, old, old, m)
}

// Delete removes a session and frees what it owned.
func (s *Store) Delete(seid uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.sessions[seid]
	if !ok {
		return ErrNotFound
	}
	keys := s.keysOf(&old.Session)
	for i, k := range keys {
		if err := s.deleteKey(k); err != nil {
			s.restoreKeys(keys[:i], old)
			return fmt.Errorf("session %d: removing %v: %w", seid, k, err)
		}
	}
	s.forget(old, nil)
	delete(s.sessions, seid)
	s.changedOrigin(old.Origin)
	return nil
}

// Get returns a session. Its rule slices are the store's, and those the
// store was given: nobody writes into them.
func (s *Store) Get(seid uint64) (Session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.sessions[seid]
	if !ok {
		return Session{}, false
	}
	return in.Session, true
}

// List returns every session, by SEID.
func (s *Store) List() []Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Session, 0, len(s.sessions))
	for _, in := range s.sessions {
		out = append(out, in.Session)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].SEID < out[b].SEID })
	return out
}

// Len is the number of sessions.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// PDRCounters returns the live packet and byte counts of a session's PDRs.
func (s *Store) PDRCounters(seid uint64) (map[uint16]upfxdp.Counter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.sessions[seid]
	if !ok {
		return nil, ErrNotFound
	}
	out := map[uint16]upfxdp.Counter{}
	for _, e := range in.PDRSlots {
		c, err := s.dp.PDRCounter(e.Slot)
		if err != nil {
			return nil, err
		}
		out[uint16(e.ID)] = c
	}
	return out, nil
}

// URRUsage returns what a session's URR has counted.
func (s *Store) URRUsage(seid uint64, urrID uint32) (upfxdp.URRUsage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, slot, err := s.urrSlot(seid, urrID)
	if err != nil {
		return upfxdp.URRUsage{}, err
	}
	return s.dp.URRUsage(slot)
}

// SetURRLimits changes the limits of a session's URR, keeping its counts.
func (s *Store) SetURRLimits(seid uint64, urrID uint32, l upfxdp.URRLimits) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, slot, err := s.urrSlot(seid, urrID)
	if err != nil {
		return err
	}
	if err := s.dp.SetURRLimits(slot, l); err != nil {
		return err
	}
	// A copy: the old slice may be a caller's (Create, Get).
	in.URRs = slices.Clone(in.URRs)
	for i := range in.URRs {
		if in.URRs[i].ID == urrID {
			in.URRs[i].Limits = l
		}
	}
	s.changedOrigin(in.Origin)
	return nil
}

func (s *Store) urrSlot(seid uint64, urrID uint32) (*installed, uint32, error) {
	in, ok := s.sessions[seid]
	if !ok {
		return nil, 0, ErrNotFound
	}
	slot, ok := in.URRSlots.lookup(urrID)
	if !ok {
		return nil, 0, fmt.Errorf("URR %d of session %d: %w", urrID, seid, ErrNotFound)
	}
	return in, slot, nil
}

// URRBySlot names the URR in a data-path slot, for its events.
func (s *Store) URRBySlot(slot uint32) (seid uint64, urrID uint32, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.urrs[slot]
	return r.seid, r.id, ok
}

// dpKey is a data-path key: a local F-TEID, or a UE address when ue is
// valid.
type dpKey struct {
	fteid upfxdp.FTEID
	ue    netip.Addr
}

func (k dpKey) String() string {
	if k.ue.IsValid() {
		return fmt.Sprintf("UE address %s", k.ue)
	}
	return k.fteid.String()
}

// keysOf are the distinct keys of a session's PDRs, canonical.
func (s *Store) keysOf(sess *Session) []dpKey {
	keys := make([]dpKey, 0, len(sess.PDRs))
	for i := range sess.PDRs {
		pk := sess.PDRs[i].keys()
		for _, k := range pk.all() {
			if k = s.canonical(k); !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// canonical is a key with its F-TEID's address given (localAddress).
func (s *Store) canonical(k dpKey) dpKey {
	if !k.ue.IsValid() {
		k.fteid.Addr = s.localAddress(k.fteid.Addr)
	}
	return k
}

// localAddress is the address of a local F-TEID at a: a, or the first N3
// address, of either family, when a is none.
func (s *Store) localAddress(a netip.Addr) netip.Addr {
	if n3 := s.dp.N3Addresses(); !a.IsValid() && len(n3) > 0 {
		return n3[0]
	}
	return a
}

func (s *Store) deleteKey(k dpKey) error {
	if k.ue.IsValid() {
		return s.dp.DeleteDownlink(k.ue)
	}
	return s.dp.DeleteUplink(k.fteid)
}

func (s *Store) getKey(k dpKey) (upfxdp.PDRSet, error) {
	if k.ue.IsValid() {
		return s.dp.Downlink(k.ue)
	}
	return s.dp.Uplink(k.fteid)
}

func (s *Store) putKey(k dpKey, set upfxdp.PDRSet, fromCPFunction bool) error {
	switch {
	case k.ue.IsValid():
		return s.dp.PutDownlink(k.ue, set)
	case fromCPFunction:
		// The SMF's few packets to the UE leave the records' places to
		// subscribers' traffic.
		return s.dp.PutUnrecordedUplink(k.fteid, set)
	}
	return s.dp.PutUplink(k.fteid, set)
}

// KeyOwner returns a session that owns a data-path key of p (its local
// F-TEID, or a UE address), if any.
func (s *Store) KeyOwner(p PDR) (uint64, bool) {
	pk := p.keys()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range pk.all() {
		if seid, ok := s.owner(s.canonical(k)); ok {
			return seid, true
		}
	}
	return 0, false
}

// owner returns the session that owns a key, if any.
func (s *Store) owner(k dpKey) (seid uint64, found bool) {
	if k.ue.IsValid() {
		seid, found = s.ues[k.ue]
	} else {
		seid, found = s.teids[k.fteid]
	}
	return seid, found
}

func (s *Store) setOwner(k dpKey, seid uint64) {
	if k.ue.IsValid() {
		s.ues[k.ue] = seid
	} else {
		s.teids[k.fteid] = seid
	}
}

func (s *Store) dropOwner(k dpKey) {
	if k.ue.IsValid() {
		delete(s.ues, k.ue)
	} else {
		delete(s.teids, k.fteid)
	}
}
