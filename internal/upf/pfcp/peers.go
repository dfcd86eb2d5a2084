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

// keepAssociated keeps an association with a configured peer: it sets one
// up, retrying every heartbeat interval, and sets it up again once it ends,
// unless the UPF asked for its release.
func (s *Server) keepAssociated(peer string) {
	for {
		a, err := s.associate(peer)
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			s.log.Warn("PFCP association setup failed", "peer", peer, "err", err)
		} else {
			select {
			case <-a.ended:
			case <-s.ctx.Done():
				return
			}
			if a.releaseAsked.Load() {
				s.log.Info("PFCP association released as asked: not set up again until the UPF restarts", "peer", peer)
				return
			}
		}
		if !sleep(s.ctx, s.cfg.HeartbeatInterval) {
			return
		}
	}
}

// associate sets up an association with a peer (TS 29.244 §6.2.6.3), unless
// the peer has set one up itself.
func (s *Server) associate(peer string) (*association, error) {
	udp, err := net.ResolveUDPAddr("udp", peer)
	if err != nil {
		return nil, err
	}
	addr := netip.AddrPortFrom(udp.AddrPort().Addr().Unmap(), udp.AddrPort().Port())
	s.peerAddrs.Store(addr.Addr(), struct{}{}) // for its answers, and its requests
	if a := s.assocs.from(addr.Addr()); a != nil {
		return a, nil
	}
	req := message.NewAssociationSetupRequest(0, s.ownIEs(s.recovery)...)
	sent := time.Now()
	resp, err := call[*message.AssociationSetupResponse](s.ctx, s, addr, req)
	if err != nil {
		return nil, err
	}
	if err := accepted(req, resp.Cause); err != nil {
		return nil, err
	}
	nodeID, err := decodeNodeID(resp.NodeID)
	if err != nil {
		return nil, fmt.Errorf("pfcp: %s answered with %w", peer, err)
	}
	recovery, err := recoveryStamp(resp.RecoveryTimeStamp)
	if err != nil {
		return nil, fmt.Errorf("pfcp: %s answered with %w", peer, err)
	}
	var a *association
	setUp := func() {
		// The peer set one up itself while this request waited for its
		// answer: that later setup stands, and so do the sessions
		// established since, which a replacement would drop.
		if a = s.assocs.get(nodeID); a != nil && a.since.After(sent) {
			return
		}
		// The stamp in a setup response tells of no restart (TS 23.007 §19A).
		a, _ = s.establish(nodeID, addr, recovery, false, sessionRetention{})
	}
	if !s.onWorker(setUp) {
		return nil, fmt.Errorf("pfcp: association with %s not recorded", peer)
	}
	return a, nil
}

// sendHeartbeats checks that an associated peer is alive (§6.2.2) until the
// association ends. A peer that answers no heartbeat is lost until it
// answers again.
func (s *Server) sendHeartbeats(ctx context.Context, a *association) {
	for sleep(ctx, s.cfg.HeartbeatInterval) {
		resp, err := call[*message.HeartbeatResponse](ctx, s, a.addr, message.NewHeartbeatRequest(0, s.recovery, nil))
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if s.assocs.markLost(a) {
				s.log.Warn("PFCP peer lost: heartbeats unanswered", "node", a.nodeID, "err", err)
				s.onWorker(func() { s.notify(s.cfg.OnPeerLost, a.nodeID) })
			}
		default:
			s.onWorker(func() { s.heard(a, resp.RecoveryTimeStamp) })
		}
	}
}

// sleep waits d; false when ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// UpdateAssociation sends an Association Update Request (§6.2.7.3) with the
// UPF's Node ID and UP Function Features, followed by ies.
func (s *Server) UpdateAssociation(ctx context.Context, nodeID string, ies ...*ie.IE) error {
	a := s.assocs.get(nodeID)
	if a == nil {
		return fmt.Errorf("%w with %s", ErrNoAssociation, nodeID)
	}
	req := message.NewAssociationUpdateRequest(0, append(s.ownIEs(), ies...)...)
	resp, err := call[*message.AssociationUpdateResponse](ctx, s, a.addr, req)
	if err != nil {
		return err
	}
	return accepted(req, resp.Cause)
}

// RequestRelease asks a peer to release its association. Only the CP
// function releases one; the UP function asks it to with the SARR flag of
// an Association Update Request (§6.2.8.1, §8.2.77).
func (s *Server) RequestRelease(ctx context.Context, nodeID string) error {
	a := s.assocs.get(nodeID)
	if a == nil {
		return fmt.Errorf("%w with %s", ErrNoAssociation, nodeID)
	}
	// Set before asking: the peer may release before the answer arrives.
	a.releaseAsked.Store(true)
	err := s.UpdateAssociation(ctx, nodeID, ie.NewPFCPAssociationReleaseRequest(1, 0))
	if err != nil {
		a.releaseAsked.Store(false)
	}
	return err
}

// Node Report Type flags (§8.2.69).
const (
	nodeReportUPFR = 0x01 // User Plane Path Failure Report
	nodeReportUPRR = 0x02 // User Plane Path Recovery Report
)

// ReportPath tells every associated peer that the GTP-U path to peer
// failed, or recovered (§5.10), in a Node Report Request; it returns the
// peers that did not accept it.
func (s *Server) ReportPath(ctx context.Context, peer netip.Addr, failed bool) error {
	typ, report := uint8(nodeReportUPRR), ie.UserPlanePathRecoveryReport
	if failed {
		typ, report = nodeReportUPFR, ie.UserPlanePathFailureReport
	}
	flags, v4, v6 := uint8(0x02), peer.String(), "" // V4
	if peer.Is6() {
		flags, v4, v6 = 0x01, "", peer.String()
	}
	var errs []error
	for _, a := range s.assocs.list() {
		req := message.NewNodeReportRequest(0, s.nodeID, ie.NewNodeReportType(typ),
			ie.NewGroupedIE(report, ie.NewRemoteGTPUPeer(flags, v4, v6, 0, "")))
		resp, err := call[*message.NodeReportResponse](ctx, s, a.Addr, req)
		if err == nil {
			err = accepted(req, resp.Cause)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a.NodeID, err))
		}
	}
	return errors.Join(errs...)
}
