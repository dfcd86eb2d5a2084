package pfcp

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
)

var (
	// ErrNoResponse: the peer answered neither a request nor its N1
	// retransmissions.
	ErrNoResponse = errors.New("the PFCP peer did not answer")
	// ErrClosed: the server was closed.
	ErrClosed = errors.New("the PFCP server is closed")
	// ErrNoAssociation: the UPF has no association with the node.
	ErrNoAssociation = errors.New("no PFCP association")
)

// CauseError is a peer's refusal of a request.
type CauseError struct {
	Request string
	Cause   uint8
}

func (e *CauseError) Error() string {
	return fmt.Sprintf("the PFCP peer refused the %s with cause %d", e.Request, e.Cause)
}

// accepted checks a response's Cause IE.
func accepted(req message.Message, cause *ie.IE) error {
	if cause == nil {
		return fmt.Errorf("the PFCP response to %s has no Cause", req.MessageTypeName())
	}
	if v, err := cause.Cause(); err != nil || v != ie.CauseRequestAccepted {
		return &CauseError{Request: req.MessageTypeName(), Cause: v}
	}
	return nil
}

const maxSeq = 1<<24 - 1 // sequence numbers have three octets

// transactions are the UPF's requests waiting for a response, by sequence
// number.
type transactions struct {
	mu   sync.Mutex
	last uint32
	open map[uint32]*transaction
}

type transaction struct {
	peer    netip.Addr // only the peer may answer
	reqType uint8
	reply   chan message.Message
}

func newTransactions() *transactions {
	// A random start keeps a restarted UPF from reusing the numbers its
	// peers still hold responses for in their caches.
	return &transactions{last: rand.Uint32() & maxSeq, open: map[uint32]*transaction{}}
}

func (t *transactions) start(peer netip.Addr, reqType uint8) (uint32, *transaction) {
	t.mu.Lock()
	defer t.mu.Unlock()
	seq := t.take()
	return seq, t.open1(seq, peer, reqType)
}

// take is the next sequence number no transaction has, never 0; under mu.
func (t *transactions) take() uint32 {
	for {
		t.last = (t.last + 1) & maxSeq
		if _, busy := t.open[t.last]; !busy && t.last != 0 {
			return t.last
		}
	}
}

func (t *transactions) open1(seq uint32, peer netip.Addr, reqType uint8) *transaction {
	tx := &transaction{peer: peer, reqType: reqType, reply: make(chan message.Message, 1)}
	t.open[seq] = tx
	return tx
}

// startAs opens the transaction of a request whose number the caller took
// before (NextSequence); false while another has it.
func (t *transactions) startAs(seq uint32, peer netip.Addr, reqType uint8) (*transaction, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, busy := t.open[seq]; busy {
		return nil, false
	}
	return t.open1(seq, peer, reqType), true
}

func (t *transactions) end(seq uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.open, seq)
}

// deliver hands a response to the request it answers; false when it
// answers none.
func (t *transactions) deliver(from netip.Addr, resp message.Message) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	tx, ok := t.open[resp.Sequence()]
	if !ok || tx.peer != from {
		return false
	}
	// Every response type is its request's plus one (§7.3).
	if resp.MessageType() != tx.reqType+1 && resp.MessageType() != message.MsgTypeVersionNotSupportedResponse {
		return false
	}
	select {
	case tx.reply <- resp:
	default: // a duplicate: the first response counts
	}
	return true
}

// call sends a request and waits for its response, retransmitting it every
// T1 up to N1 times (TS 29.244 §6.4).
func call[R message.Message](ctx context.Context, s *Server, to netip.AddrPort, req message.Message) (R, error) {
	seq, tx := s.tx.start(to.Addr(), req.MessageType())
	req.SetSequenceNumber(seq)
	return exchange[R](ctx, s, to, req, tx)
}

// exchange is call for a request whose transaction is open; it ends it.
func exchange[R message.Message](ctx context.Context, s *Server, to netip.AddrPort, req message.Message, tx *transaction) (R, error) {
	var none R
	defer s.tx.end(req.Sequence())
	b, err := encode(req)
	if err != nil {
		return none, fmt.Errorf("pfcp: encoding %s: %w", req.MessageTypeName(), err)
	}
	name := messageTypeName(req.MessageType())
	s.metrics.sent(b, false)
	timer := time.NewTimer(s.cfg.T1)
	defer timer.Stop()
	for attempt := range s.cfg.N1 + 1 {
		if attempt > 0 {
			s.metrics.retransmissionsSent.WithLabelValues(name).Inc()
		}
		s.send(b, to)
		sent := time.Now()
		timer.Reset(s.cfg.T1)
		select {
		case resp := <-tx.reply:
			if attempt == 0 { // else which copy it answers is unknown
				s.metrics.roundTrip.WithLabelValues(name).Observe(time.Since(sent).Seconds())
			}
			if r, ok := resp.(R); ok {
				return r, nil
			}
			return none, fmt.Errorf("pfcp: %s does not support PFCP version 1", to)
		case <-timer.C:
		case <-ctx.Done():
			return none, ctx.Err()
		case <-s.ctx.Done():
			return none, ErrClosed
		}
	}
	s.metrics.unanswered.WithLabelValues(name).Inc()
	return none, fmt.Errorf("%w %s sent to %s", ErrNoResponse, req.MessageTypeName(), to)
}
