package pfcp

import (
	"context"
	"net/netip"
	"slices"
	"time"

	"github.com/wmnsk/go-pfcp/ie"

	"github.com/xdp5g/xdp5g/internal/upf/n4state"
)

// What a Server keeps in its journal (Config.Journal), so that a restarted
// UPF is the node its peers knew: its Recovery Time Stamp, its
// associations, and the responses to the requests that changed the state,
// which a peer that did not get one gets again when it retransmits. The
// associations' own records are written as they change (associations.put
// and remove, in the transaction of the job that changes them).

// State is a server's state as a previous run kept it: Config.Restored.
type State struct {
	// Recovery is the Recovery Time Stamp as sent, 0 for none.
	Recovery     uint32
	associations map[string]*association
	responses    map[cacheKey]cachedResponse
}

// NewState returns a State to replay a journal into.
func NewState() *State {
	return &State{associations: map[string]*association{}, responses: map[cacheKey]cachedResponse{}}
}

// Associations is the number of associations the state has.
func (st *State) Associations() int { return len(st.associations) }

// Has says whether the state has an association with nodeID.
func (st *State) Has(nodeID string) bool { return st.associations[nodeID] != nil }

// Replay reads an op of the journal into the state; false for an op of
// another owner's kind.
func (st *State) Replay(kind byte, value []byte) (bool, error) {
	d := n4state.NewDec(value)
	switch kind {
	case n4state.KindRecovery:
		st.Recovery = d.Uint32()
	case n4state.KindAssociation:
		a := decodeAssociation(d)
		st.associations[a.nodeID] = a
	case n4state.KindAssociationGone:
		delete(st.associations, d.String())
	case n4state.KindResponse:
		k := cacheKey{from: d.AddrPort(), seq: d.Uint32(), msgType: d.Uint8()}
		expires, encoded := d.Time(), d.Bytes()
		if time.Now().Before(expires) { // else no peer asks for it again
			st.responses[k] = cachedResponse{expires: expires, encoded: slices.Clone(encoded)}
		}
	default:
		return false, nil
	}
	return true, d.Done()
}

func encodeAssociation(e *n4state.Enc, a *association) {
	e.String(a.nodeID)
	e.AddrPort(a.addr)
	e.Uint(uint64(a.recovery))
	e.Time(a.since)
	e.Uint(uint64(len(a.sources)))
	for ip := range a.sources {
		e.Addr(ip)
	}
}

func decodeAssociation(d *n4state.Dec) *association {
	a := &association{nodeID: d.String(), addr: d.AddrPort(), recovery: d.Uint32(), since: d.Time(), sources: map[netip.Addr]bool{}}
	for n := d.Uint(); n > 0 && d.Err == nil; n-- {
		a.sources[d.Addr()] = true
	}
	return a
}

// putAssociation and dropAssociation record an association's change in
// the transaction of the job that makes it; under associations.mu.
func (t *associations) putAssociation(a *association) {
	t.journal(func(txn *n4state.Txn) {
		txn.Put(n4state.KindAssociation, func(e *n4state.Enc) { encodeAssociation(e, a) })
	})
}

func (t *associations) dropAssociation(a *association) {
	t.journal(func(txn *n4state.Txn) {
		txn.Put(n4state.KindAssociationGone, func(e *n4state.Enc) { e.String(a.nodeID) })
	})
}

// journal writes in the job's transaction; outside a job (none is: every
// change of the associations is a job's) in one of its own.
func (t *associations) journal(put func(*n4state.Txn)) {
	if t.log == nil {
		return
	}
	if txn := t.log.Request(); txn != nil {
		put(txn)
		return
	}
	txn := t.log.Txn()
	put(txn)
	txn.Commit()
}

// restore takes up a state a previous run kept: its Recovery Time Stamp,
// its associations (whose heartbeats start again) and the responses its
// peers may still ask for again.
func (s *Server) restore(st *State) {
	s.recovery = ie.NewRecoveryTimeStamp(recoveryTime(st.Recovery))
	s.assocs.mu.Lock()
	for _, a := range st.associations {
		ctx, stop := context.WithCancel(s.ctx)
		a.stopHeartbeats, a.ended = stop, make(chan struct{})
		s.assocs.byNode[a.nodeID] = a
		s.wg.Go(func() { s.sendHeartbeats(ctx, a) })
	}
	s.assocs.mu.Unlock()
	s.cache.keep(st.responses, time.Now())
}

// snapshot writes the server's part of the state, for compaction. The
// responses cached (hundreds of thousands while SMFs establish sessions at
// full speed) are encoded before they are written, a thousand an entry: in
// one entry, filled as they were encoded, they held back every request's
// response until the last was encoded.
func (s *Server) snapshot(l *n4state.Log) {
	txn := l.Txn()
	ts, _ := recoveryStamp(s.recovery)
	txn.Put(n4state.KindRecovery, func(e *n4state.Enc) { e.Uint(uint64(ts)) })
	s.assocs.mu.Lock()
	for _, a := range s.assocs.byNode {
		txn.Put(n4state.KindAssociation, func(e *n4state.Enc) { encodeAssociation(e, a) })
	}
	s.assocs.mu.Unlock()
	txn.Commit()
	txn.Wait()
	var responses [][]byte
	s.cache.each(func(k cacheKey, r cachedResponse) {
		var e n4state.Enc
		encodeResponse(&e, k, r)
		responses = append(responses, e.B)
	})
	l.PutValues(n4state.KindResponse, responses)
}

func encodeResponse(e *n4state.Enc, k cacheKey, r cachedResponse) {
	e.AddrPort(k.from)
	e.Uint(uint64(k.seq))
	e.Uint(uint64(k.msgType))
	e.Time(r.expires)
	e.Bytes(r.encoded)
}
