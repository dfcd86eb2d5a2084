package pfcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
)

// mandatoryIEs are the IEs without which a request is refused with cause
// "Mandatory IE missing" (TS 29.244 §7.4, §7.5). A Heartbeat Request without
// its Recovery Time Stamp is still answered: its response has no Cause.
var mandatoryIEs = map[uint8][]uint16{
	message.MsgTypeAssociationSetupRequest:     {ie.NodeID, ie.RecoveryTimeStamp},
	message.MsgTypeAssociationUpdateRequest:    {ie.NodeID},
	message.MsgTypeAssociationReleaseRequest:   {ie.NodeID},
	message.MsgTypeSessionSetDeletionRequest:   {ie.NodeID},
	message.MsgTypeSessionEstablishmentRequest: {ie.NodeID, ie.FSEID, ie.CreatePDR, ie.CreateFAR},
}

// answer serves a request, as a job (see Server.jobs), and returns its
// response, without a sequence number yet.
func (s *Server) answer(req message.Message, body []byte, from netip.AddrPort) message.Message {
	if t, missing := missingTopLevel(body, mandatoryIEs[req.MessageType()]); missing {
		return s.reject(req, ie.CauseMandatoryIEMissing, t)
	}
	switch m := req.(type) {
	case *message.HeartbeatRequest:
		return s.heartbeatRequest(m, from)
	case *message.AssociationSetupRequest:
		return s.associationSetup(m, from)
	case *message.AssociationUpdateRequest:
		return s.associationUpdate(m, from)
	case *message.AssociationReleaseRequest:
		return s.associationRelease(m, from)
	case *message.PFDManagementRequest:
		// Without PFDM advertised an SMF has no reason to send PFDs; one
		// that does learns why nothing applies them rather than retrying.
		return message.NewPFDManagementResponse(0, ie.NewCause(ie.CauseServiceNotSupported), nil)
	default:
		return s.answerSession(req, from)
	}
}

// A Heartbeat Request gets an answer whoever sends it (§6.2.2.2).
func (s *Server) heartbeatRequest(req *message.HeartbeatRequest, from netip.AddrPort) message.Message {
	if a := s.assocs.heartbeatFrom(from.Addr(), req.RecoveryTimeStamp); a != nil {
		s.heard(a, req.RecoveryTimeStamp)
	}
	return message.NewHeartbeatResponse(0, s.recovery)
}

// heard takes note of a heartbeat from or to a's peer, as a job.
func (s *Server) heard(a *association, recovery *ie.IE) {
	wasLost, restarted := s.assocs.heard(a, recovery, time.Now())
	switch {
	case restarted:
		s.peerRestarted(a)
	case wasLost:
		s.log.Info("PFCP peer answers again", "node", a.nodeID)
	}
}

// peerRestarted ends the association with a restarted peer, which lost it,
// and drops its sessions (TS 23.527: the UPF deletes the sessions of a
// restarted SMF).
func (s *Server) peerRestarted(a *association) {
	if !s.assocs.remove(a) {
		return
	}
	s.log.Warn("PFCP peer restarted: association and sessions dropped", "node", a.nodeID)
	s.notify(s.cfg.OnPeerRestarted, a.nodeID)
	s.handler.DropPeer(a.nodeID, nil)
}

func (s *Server) associationSetup(req *message.AssociationSetupRequest, from netip.AddrPort) message.Message {
	nodeID, err := decodeNodeID(req.NodeID)
	if err != nil {
		return s.reject(req, ie.CauseMandatoryIEIncorrect, ie.NodeID)
	}
	recovery, err := recoveryStamp(req.RecoveryTimeStamp)
	if err != nil {
		return s.reject(req, ie.CauseMandatoryIEIncorrect, ie.RecoveryTimeStamp)
	}
	retain, err := retention(req.PFCPSessionRetentionInformation)
	if err != nil {
		s.log.Warn("PFCP Association Setup Request refused: its PFCP Session Retention Information is malformed", "from", from, "err", err)
		return s.reject(req, ie.CauseMandatoryIEIncorrect, ie.PFCPSessionRetentionInformation)
	}
	// Requests go to the PFCP port whatever the source port (§4.2.2).
	_, retained := s.establish(nodeID, netip.AddrPortFrom(from.Addr(), DefaultPort), recovery, true, retain)
	ies := []*ie.IE{ie.NewCause(ie.CauseRequestAccepted), s.recovery}
	if retained {
		ies = append(ies, ie.NewPFCPASRspFlags(flagPSREI))
	}
	return message.NewAssociationSetupResponse(0, s.ownIEs(ies...)...)
}

// flagPSREI (PFCP Session Retained Indication) of the PFCPASRsp-Flags IE
// (§8.2.134): the sessions of the association replaced were kept.
const flagPSREI = 0x01

// retainAll is the retention asked by PFCP Session Retention Information
// that lists no CP PFCP Entity IP Address.
var retainAll = []netip.Addr{}

// retention is what PFCP Session Retention Information (§7.4.4.1) asks to
// retain: nil without it, the sessions whose CP F-SEID has one of the CP
// PFCP Entity IP Addresses it lists, or all of them (retainAll) when it
// lists none. An address without V4 or V6, or shorter than its flags say,
// makes it malformed.
func retention(info *ie.IE) ([]netip.Addr, error) {
	if info == nil {
		return nil, nil
	}
	children, err := info.PFCPSessionRetentionInformation()
	if err != nil {
		return nil, err
	}
	addrs := retainAll
	for _, child := range children {
		if child.Type != ie.CPPFCPEntityIPAddress {
			continue // an IE of a later release
		}
		f, err := child.CPPFCPEntityIPAddress()
		if err != nil {
			return nil, fmt.Errorf("CP PFCP Entity IP Address: %w", err)
		}
		if !f.HasIPv4() && !f.HasIPv6() {
			return nil, errors.New("CP PFCP Entity IP Address with neither an IPv4 nor an IPv6 address")
		}
		for _, ip := range []net.IP{f.IPv4Address, f.IPv6Address} {
			if a, ok := netip.AddrFromSlice(ip); ok {
				addrs = append(addrs, a.Unmap())
			}
		}
	}
	return addrs, nil
}

// establish records an association, as a job. An association the peer
// already had is replaced, whatever the Recovery Time Stamp (TS 29.244
// §6.2.6.2.2, TS 23.007 §19A): with retain (see retention) the sessions it
// names are kept, and retained says so, the others dropped; without, all
// are dropped and, when the stamp changed and the caller wants it
// compared, the peer restarted.
func (s *Server) establish(nodeID string, addr netip.AddrPort, recovery uint32, compareRecovery bool, retain []netip.Addr) (_ *association, retained bool) {
	ctx, stop := context.WithCancel(s.ctx)
	a := &association{
		nodeID:         nodeID,
		addr:           addr,
		sources:        map[netip.Addr]bool{},
		recovery:       recovery,
		since:          time.Now(),
		stopHeartbeats: stop,
		ended:          make(chan struct{}),
	}
	old := s.assocs.put(a)
	s.wg.Go(func() { s.sendHeartbeats(ctx, a) })
	s.log.Info("PFCP association established", "node", nodeID, "addr", addr)
	switch {
	case old == nil:
	case len(retain) > 0:
		s.log.Info("PFCP association replaced: the sessions of the CP PFCP entities listed kept, the others dropped, as the request asked",
			"node", nodeID, "old_addr", old.addr, "addr", addr, "cp_pfcp_entities", retain)
		s.handler.DropPeer(nodeID, retain)
		return a, true
	case retain != nil:
		s.log.Info("PFCP association replaced: its sessions kept, as the request asked", "node", nodeID, "old_addr", old.addr, "addr", addr)
		return a, true
	default:
		s.log.Warn("PFCP association replaced: its sessions dropped", "node", nodeID, "old_addr", old.addr, "addr", addr)
		if compareRecovery && old.recovery != recovery {
			s.notify(s.cfg.OnPeerRestarted, nodeID)
		}
		s.handler.DropPeer(nodeID, nil)
	}
	return a, false
}

func (s *Server) associationUpdate(req *message.AssociationUpdateRequest, from netip.AddrPort) message.Message {
	a, rejection := s.associated(req, req.NodeID, from)
	if rejection != nil {
		return rejection
	}
	// Nothing the SMF updates (its features, a graceful release) changes
	// what the UPF does.
	s.log.Info("PFCP association updated", "node", a.nodeID)
	return message.NewAssociationUpdateResponse(0, s.ownIEs(ie.NewCause(ie.CauseRequestAccepted))...)
}

// associationRelease drops the sessions, then the association (§6.2.8.2).
func (s *Server) associationRelease(req *message.AssociationReleaseRequest, from netip.AddrPort) message.Message {
	a, rejection := s.associated(req, req.NodeID, from)
	if rejection != nil {
		return rejection
	}
	s.handler.DropPeer(a.nodeID, nil)
	s.assocs.remove(a)
	s.log.Info("PFCP association released", "node", a.nodeID)
	return message.NewAssociationReleaseResponse(0, s.nodeID, ie.NewCause(ie.CauseRequestAccepted))
}

// associated finds the association a request names in its Node ID IE, or
// returns the rejection to send.
func (s *Server) associated(req message.Message, nodeIE *ie.IE, from netip.AddrPort) (*association, message.Message) {
	nodeID, err := decodeNodeID(nodeIE)
	if err != nil {
		return nil, s.reject(req, ie.CauseMandatoryIEIncorrect, ie.NodeID)
	}
	a := s.assocs.named(nodeID, from.Addr())
	if a == nil {
		return nil, s.reject(req, ie.CauseNoEstablishedPFCPAssociation, 0)
	}
	return a, nil
}

// ownIEs are the UPF's Node ID, then ies, then its UP Function Features if
// it has any.
func (s *Server) ownIEs(ies ...*ie.IE) []*ie.IE {
	own := append([]*ie.IE{s.nodeID}, ies...)
	if s.features != nil {
		own = append(own, s.features)
	}
	return own
}
