package pfcptest

import (
	"net"
	"net/netip"
	"slices"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
)

// Listen opens the socket where the UPF sends its own requests, at addr
// (port 0: any free one), and answers them until Close. A UPF given the
// address returned as a peer sets up its association there and sends the
// SMF its Session Report Requests: the SMF accepts the association,
// answers heartbeats, and accepts the reports on the sessions it
// established, which Reports then hands on; others it answers with
// "Session context not found". It accepts Node Report Requests too, which
// NodeReports hands on. A retransmitted request gets the same
// response again and is handed on only once.
func (s *SMF) Listen(addr netip.AddrPort) (netip.AddrPort, error) {
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return netip.AddrPort{}, err
	}
	s.listener = conn
	s.serving.Go(func() { s.serve(conn) })
	return conn.LocalAddr().(*net.UDPAddr).AddrPort(), nil
}

// Reports hands on the Session Report Requests the SMF accepted, in the
// order they arrived.
func (s *SMF) Reports() <-chan *message.SessionReportRequest { return s.reports }

// NodeReports hands on the Node Report Requests the SMF accepted, in the
// order they arrived.
func (s *SMF) NodeReports() <-chan *message.NodeReportRequest { return s.nodeReports }

// serve answers the UPF's requests until the socket closes.
func (s *SMF) serve(conn *net.UDPConn) {
	answered := map[uint32][]byte{} // responses by the request's sequence number
	buf := make([]byte, 64<<10)
	for {
		n, from, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return // closed
		}
		req, err := message.Parse(slices.Clone(buf[:n])) // IEs handed on keep pointing into it
		if err != nil {
			continue
		}
		if resp, ok := answered[req.Sequence()]; ok {
			conn.WriteToUDPAddrPort(resp, from)
			continue
		}
		m, accepted := s.answer(req)
		if m == nil {
			continue // a request the SMF does not serve: the UPF gives up on it
		}
		m.SetSequenceNumber(req.Sequence())
		resp, err := AppendMessage(nil, m)
		if err != nil {
			continue
		}
		answered[req.Sequence()] = resp
		conn.WriteToUDPAddrPort(resp, from)
		if !s.handOn(accepted) {
			return
		}
	}
}

// handOn hands an accepted report on to Reports or NodeReports; false if
// the SMF closed first.
func (s *SMF) handOn(report message.Message) bool {
	switch r := report.(type) {
	case *message.SessionReportRequest:
		return put(s.closing, s.reports, r)
	case *message.NodeReportRequest:
		return put(s.closing, s.nodeReports, r)
	}
	return true
}

func put[R any](closing <-chan struct{}, ch chan<- R, r R) bool {
	select {
	case ch <- r:
		return true
	case <-closing:
		return false
	}
}

// answer returns the response to a request of the UPF, nil for one the SMF
// does not serve, and the report it accepted, if any, to hand on.
func (s *SMF) answer(req message.Message) (resp, accepted message.Message) {
	switch m := req.(type) {
	case *message.AssociationSetupRequest:
		return message.NewAssociationSetupResponse(0, s.nodeIDIE(), ie.NewCause(ie.CauseRequestAccepted),
			ie.NewRecoveryTimeStamp(s.start), ie.NewCPFunctionFeatures(0)), nil
	case *message.HeartbeatRequest:
		return message.NewHeartbeatResponse(0, ie.NewRecoveryTimeStamp(s.start)), nil
	case *message.AssociationUpdateRequest:
		if r := m.PFCPAssociationReleaseRequest; r != nil && r.HasSARR() {
			s.releaseAsked.Store(true)
		}
		return message.NewAssociationUpdateResponse(0, s.nodeIDIE(), ie.NewCause(ie.CauseRequestAccepted)), nil
	case *message.SessionReportRequest:
		s.mu.Lock()
		upSEID, ok := s.upSEIDs[m.SEID()]
		s.mu.Unlock()
		if !ok {
			return message.NewSessionReportResponse(0, 0, 0, 0, 0, ie.NewCause(ie.CauseSessionContextNotFound)), nil
		}
		return message.NewSessionReportResponse(0, 0, upSEID, 0, 0, ie.NewCause(ie.CauseRequestAccepted)), m
	case *message.NodeReportRequest:
		return message.NewNodeReportResponse(0, s.nodeIDIE(), ie.NewCause(ie.CauseRequestAccepted), nil), m
	}
	return nil, nil
}
