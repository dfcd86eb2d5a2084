package pfcp

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
)

// SessionHandler gives PFCP sessions their meaning. The server calls it
// from one goroutine, one call at a time, in the order requests arrive, and
// only for peers with an established association; it has checked that the
// message's own mandatory IEs are present, but not those inside grouped
// IEs (see MissingIE).
//
// Each method returns the response to send; nil stands for a rejection with
// cause "System failure". The server sets the response's sequence number.
// For Establish it also sets the Node ID and the header SEID (the CP
// F-SEID's SEID, TS 29.244 §7.2.2.4), for SetDelete the Node ID. Modify and
// Delete set the header SEID to the session's CP SEID, or to 0 with cause
// "Session context not found" (§7.2.2.4.2).
type SessionHandler interface {
	Establish(Peer, *message.SessionEstablishmentRequest) *message.SessionEstablishmentResponse
	Modify(Peer, *message.SessionModificationRequest) *message.SessionModificationResponse
	Delete(Peer, *message.SessionDeletionRequest) *message.SessionDeletionResponse
	SetDelete(Peer, *message.SessionSetDeletionRequest) *message.SessionSetDeletionResponse
	// DropPeer deletes every session of a peer whose association was
	// released or replaced, or which restarted (TS 23.007 §19A), but
	// those whose CP F-SEID has an address among keep: the peer asked to
	// retain the sessions of those PFCP entities (TS 29.244 §6.2.6.2.2).
	DropPeer(nodeID string, keep []netip.Addr)
	// SessionPeer returns the Node ID of the peer whose session seid (a
	// UP SEID) is; false for no session.
	SessionPeer(seid uint64) (nodeID string, ok bool)
}

// MissingIE returns the first of the mandatory IE types that ies lacks: the
// Offending IE of a "Mandatory IE missing" rejection (TS 29.244 §7.6).
// Session handlers can use it on grouped IEs' children (ie.IE.ChildIEs).
func MissingIE(ies []*ie.IE, mandatory ...uint16) (ieType uint16, missing bool) {
	for _, t := range mandatory {
		if !containsType(ies, t) {
			return t, true
		}
	}
	return 0, false
}

func containsType(ies []*ie.IE, t uint16) bool {
	for _, i := range ies {
		if i.Type == t {
			return true
		}
	}
	return false
}

func (s *Server) answerSession(req message.Message, from netip.AddrPort) message.Message {
	switch m := req.(type) {
	case *message.SessionEstablishmentRequest:
		return s.establishSession(m, from)
	case *message.SessionModificationRequest:
		// The Node ID is there when another SMF of a set takes over.
		a, rejection := s.sessionPeer(m, m.NodeID, from)
		if rejection != nil {
			return rejection
		}
		return orSystemFailure(s, m, s.handler.Modify(a.peer(), m))
	case *message.SessionDeletionRequest:
		a, rejection := s.sessionPeer(m, nil, from)
		if rejection != nil {
			return rejection
		}
		return orSystemFailure(s, m, s.handler.Delete(a.peer(), m))
	case *message.SessionSetDeletionRequest:
		a, rejection := s.associated(m, m.NodeID, from)
		if rejection != nil {
			return rejection
		}
		resp := s.handler.SetDelete(a.peer(), m)
		if resp == nil {
			return s.reject(m, ie.CauseSystemFailure, 0)
		}
		resp.NodeID = s.nodeID
		return resp
	}
	return nil
}

func (s *Server) establishSession(req *message.SessionEstablishmentRequest, from netip.AddrPort) message.Message {
	a, rejection := s.associated(req, req.NodeID, from)
	if rejection != nil {
		return rejection
	}
	f, err := req.CPFSEID.FSEID()
	if err != nil || !f.HasIPv4() && !f.HasIPv6() {
		return s.reject(req, ie.CauseMandatoryIEIncorrect, ie.FSEID)
	}
	resp := s.handler.Establish(a.peer(), req)
	if resp == nil {
		return s.reject(req, ie.CauseSystemFailure, 0)
	}
	resp.NodeID = s.nodeID
	resp.SetSEID(f.SEID)
	return resp
}

// sessionPeer finds the association of a session request: the one its Node
// ID IE names if it has one, else the one of the session it names if it
// came from that association's peer, else one of the address it came from.
func (s *Server) sessionPeer(req message.Message, nodeIE *ie.IE, from netip.AddrPort) (*association, message.Message) {
	if nodeIE != nil {
		return s.associated(req, nodeIE, from)
	}
	// Several associations may share an address (a peer that set up
	// another under a new Node ID): any of them would not do.
	if nodeID, ok := s.handler.SessionPeer(req.SEID()); ok {
		if a := s.assocs.fromPeer(nodeID, from.Addr()); a != nil {
			return a, nil
		}
	}
	if a := s.assocs.from(from.Addr()); a != nil {
		return a, nil
	}
	return nil, s.reject(req, ie.CauseNoEstablishedPFCPAssociation, 0)
}

// orSystemFailure stands a "System failure" rejection in for a handler's
// nil response.
func orSystemFailure[R interface {
	*M
	message.Message
}, M any](s *Server, req message.Message, resp R) message.Message {
	if resp == nil {
		s.log.Error("PFCP session handler gave no response", "request", req.MessageTypeName())
		return s.reject(req, ie.CauseSystemFailure, 0)
	}
	return resp
}

// cpSEID is the SEID the CP function chose for a session, or 0 when the
// request does not tell.
func cpSEID(req *message.SessionEstablishmentRequest) uint64 {
	if req.CPFSEID == nil {
		return 0
	}
	f, err := req.CPFSEID.FSEID()
	if err != nil {
		return 0
	}
	return f.SEID
}

// SendSessionReport sends a Session Report Request to a peer and returns
// its response, whatever the cause. The caller sets the header SEID (the
// session's CP SEID), and the sequence number if NextSequence gave it one
// (0: the server takes one): a report journaled with its number and sent
// again after a restart is the same request to the peer, which takes it
// for a retransmission. It goes to the address of the peer's association,
// which may have moved since the session was established (an association
// set up again with its sessions kept), and to peer.Addr when there is none.
func (s *Server) SendSessionReport(ctx context.Context, peer Peer, req *message.SessionReportRequest) (*message.SessionReportResponse, error) {
	if a := s.assocs.get(peer.NodeID); a != nil {
		peer.Addr = a.addr
	}
	if req.Sequence() == 0 {
		return call[*message.SessionReportResponse](ctx, s, peer.Addr, req)
	}
	tx, ok := s.tx.startAs(req.Sequence(), peer.Addr.Addr(), req.MessageType())
	if !ok {
		return nil, fmt.Errorf("pfcp: sequence number %d is in use", req.Sequence())
	}
	return exchange[*message.SessionReportResponse](ctx, s, peer.Addr, req, tx)
}

// NextSequence takes a sequence number for a request of the UPF's.
func (s *Server) NextSequence() uint32 {
	s.tx.mu.Lock()
	defer s.tx.mu.Unlock()
	return s.tx.take()
}
