// Package pfcptest plays an SMF towards the UPF's PFCP interface in tests:
// it sends requests built with go-pfcp and waits for their responses, and
// answers the UPF's own requests (see Listen).
package pfcptest

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
)

// timeout bounds the wait for a response, generously for a busy host; the
// UPF answers over loopback or a veth, so nothing is retransmitted.
const timeout = 15 * time.Second

// Values of the IEs the requests carry.
const (
	// uplinkChooseID is the CHOOSE ID of the uplink F-TEID.
	uplinkChooseID = 1
	ohcGTPUv4      = 0x0100 // Outer Header Creation: GTP-U/UDP/IPv4
	ohcGTPUv6      = 0x0200 // and GTP-U/UDP/IPv6
	forward        = 0x02   // Apply Action: FORW
	dnn            = "internet"
)

// SMF is a PFCP peer of a UPF.
type SMF struct {
	nodeID string
	conn   *net.UDPConn
	seq    uint32
	start  time.Time // the Recovery Time Stamp

	mu      sync.Mutex
	upSEIDs map[uint64]uint64 // of the sessions established, by CP SEID

	listener *net.UDPConn // where the UPF's requests arrive, once Listen opened it
	reports  chan *message.SessionReportRequest
	// nodeReports are the Node Report Requests accepted.
	nodeReports chan *message.NodeReportRequest
	// releaseAsked is set by an Association Update Request with SARR.
	releaseAsked atomic.Bool
	closing      chan struct{}
	serving      sync.WaitGroup
}

// NewSMF opens a socket towards the UPF's PFCP address.
func NewSMF(nodeID string, upf netip.AddrPort) (*SMF, error) {
	conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(upf))
	if err != nil {
		return nil, err
	}
	return &SMF{nodeID: nodeID, conn: conn, start: time.Now(), upSEIDs: map[uint64]uint64{},
		reports: make(chan *message.SessionReportRequest, 64), nodeReports: make(chan *message.NodeReportRequest, 64),
		closing: make(chan struct{})}, nil
}

// Close closes the sockets.
func (s *SMF) Close() error {
	close(s.closing)
	err := s.conn.Close()
	if s.listener != nil {
		err = errors.Join(err, s.listener.Close())
	}
	s.serving.Wait()
	return err
}

// request sends req with the next sequence number and returns the response
// to it, of type R. Requests of the UPF's own go to port 8805, or to where
// the SMF listens (Listen), not here.
func request[R message.Message](s *SMF, req message.Message) (R, error) {
	var none R
	s.seq++
	req.SetSequenceNumber(s.seq)
	b := make([]byte, req.MarshalLen())
	if err := req.MarshalTo(b); err != nil {
		return none, err
	}
	resp, err := s.roundTrip(b, req.MessageTypeName())
	if err != nil {
		return none, err
	}
	r, ok := resp.(R)
	if !ok {
		return none, fmt.Errorf("%s answered with %s", req.MessageTypeName(), resp.MessageTypeName())
	}
	return r, nil
}

// roundTrip sends the encoded request what, numbered s.seq, and returns
// the response to it.
func (s *SMF) roundTrip(b []byte, what string) (message.Message, error) {
	if _, err := s.conn.Write(b); err != nil {
		return nil, err
	}
	if err := s.conn.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := s.conn.Read(buf)
		if err != nil {
			return nil, fmt.Errorf("waiting for the response to %s: %w", what, err)
		}
		resp, err := message.Parse(buf[:n])
		if err != nil {
			return nil, fmt.Errorf("response to %s: %w", what, err)
		}
		if resp.Sequence() == s.seq {
			return resp, nil
		}
		// a late answer to an earlier request
	}
}

// Step sends a step of a session set up by hand (a free5GC ULCL, Open5GS
// home-routed roaming) to its UPF, whose SEID of the session is seid (0
// for its establishment), and returns that SEID.
func (s *SMF) Step(st Step, seid uint64) (uint64, error) {
	seid, _, err := s.StepCreated(st, seid)
	return seid, err
}

// FTEID is a local F-TEID the UPF chose: its TEID at its address.
type FTEID struct {
	TEID uint32
	Addr netip.Addr
}

// StepCreated is Step, returning also the F-TEIDs of an establishment's
// Created PDRs, by PDR ID.
func (s *SMF) StepCreated(st Step, seid uint64) (uint64, map[uint16]FTEID, error) {
	s.seq++
	resp, err := s.roundTrip(st.Message(seid, s.seq), st.Name)
	if err != nil {
		return 0, nil, err
	}
	switch r := resp.(type) {
	case *message.SessionEstablishmentResponse:
		if err := Accepted(st.Name, r.Cause); err != nil {
			return 0, nil, err
		}
		if r.UPFSEID == nil {
			return 0, nil, fmt.Errorf("%s: no UP F-SEID", st.Name)
		}
		f, err := r.UPFSEID.FSEID()
		if err != nil {
			return 0, nil, fmt.Errorf("%s: UP F-SEID: %w", st.Name, err)
		}
		fteids := map[uint16]FTEID{}
		for _, c := range r.CreatedPDR {
			id, err := c.PDRID()
			if err != nil {
				return 0, nil, fmt.Errorf("%s: Created PDR: %w", st.Name, err)
			}
			if ft, err := c.FTEID(); err == nil {
				a, _ := netip.AddrFromSlice(ft.IPv4Address.To4())
				if !ft.HasIPv4() {
					a, _ = netip.AddrFromSlice(ft.IPv6Address)
				}
				fteids[id] = FTEID{ft.TEID, a}
			}
		}
		return f.SEID, fteids, nil
	case *message.SessionModificationResponse:
		return seid, nil, Accepted(st.Name, r.Cause)
	}
	return 0, nil, fmt.Errorf("%s answered with %s", st.Name, resp.MessageTypeName())
}

// Heartbeat sends a Heartbeat Request.
func (s *SMF) Heartbeat() (*message.HeartbeatResponse, error) {
	return request[*message.HeartbeatResponse](s, s.HeartbeatRequest())
}

// HeartbeatRequest is a Heartbeat Request of the SMF.
func (s *SMF) HeartbeatRequest() *message.HeartbeatRequest {
	return message.NewHeartbeatRequest(0, ie.NewRecoveryTimeStamp(s.start), nil)
}

// Associate sets up an association, and fails unless the UPF accepts it.
func (s *SMF) Associate() (*message.AssociationSetupResponse, error) {
	resp, err := s.AssociationSetup()
	if err != nil {
		return nil, err
	}
	return resp, Accepted("association setup", resp.Cause)
}

// AssociationSetup sends an Association Setup Request with more IEs after
// the SMF's own, such as PFCP Session Retention Information, and returns
// the response, whatever its cause.
func (s *SMF) AssociationSetup(more ...*ie.IE) (*message.AssociationSetupResponse, error) {
	return request[*message.AssociationSetupResponse](s, message.NewAssociationSetupRequest(0,
		append([]*ie.IE{s.nodeIDIE(), ie.NewRecoveryTimeStamp(s.start), ie.NewCPFunctionFeatures(0)}, more...)...))
}

// ReleaseAsked says whether the UPF asked the SMF to release the
// association (SARR in an Association Update Request).
func (s *SMF) ReleaseAsked() bool { return s.releaseAsked.Load() }

// Release releases the association, and fails unless the UPF accepts it.
func (s *SMF) Release() error {
	resp, err := request[*message.AssociationReleaseResponse](s, message.NewAssociationReleaseRequest(0, s.nodeIDIE()))
	if err != nil {
		return err
	}
	return Accepted("association release", resp.Cause)
}

// Session is what an accepted establishment tells the SMF.
type Session struct {
	SEID uint64     // the UPF's
	TEID uint32     // the uplink F-TEID the UPF chose
	N3   netip.Addr // and its address
	UE   netip.Addr // the UE address the UPF chose; invalid when the SMF gave it
}

// EstablishPDUSession establishes an IPv4 PDU session shaped as Open5GS's
// SMF sends it (PDUSessionRequest), with the F-TEID and the UE address left
// to the UPF.
func (s *SMF) EstablishPDUSession(cpSEID uint64, gnb netip.Addr, gnbTEID uint32, qfi uint8) (Session, error) {
	return s.Establish(s.PDUSessionRequest(cpSEID, netip.Addr{}, gnb, gnbTEID, qfi))
}

// Establish sends a Session Establishment Request shaped as
// PDUSessionRequest's, with PDR 1 uplink, and reads what the UPF chose. The
// SMF then accepts the session's reports (Listen).
func (s *SMF) Establish(req *message.SessionEstablishmentRequest) (Session, error) {
	if req.CPFSEID == nil {
		return Session{}, errors.New("session establishment without a CP F-SEID")
	}
	cp, err := req.CPFSEID.FSEID()
	if err != nil {
		return Session{}, fmt.Errorf("CP F-SEID: %w", err)
	}
	resp, err := request[*message.SessionEstablishmentResponse](s, req)
	if err != nil {
		return Session{}, err
	}
	sess, err := established(cp.SEID, resp)
	if err == nil {
		s.mu.Lock()
		s.upSEIDs[cp.SEID] = sess.SEID
		s.mu.Unlock()
	}
	return sess, err
}

// SendEstablishment sends a Session Establishment Request, of a session
// whose F-TEID the SMF chose, say, and returns the response as it is.
func (s *SMF) SendEstablishment(req *message.SessionEstablishmentRequest) (*message.SessionEstablishmentResponse, error) {
	return request[*message.SessionEstablishmentResponse](s, req)
}

// established checks the response to the establishment of a session with
// cpSEID and reads what the UPF chose for it.
func established(cpSEID uint64, resp *message.SessionEstablishmentResponse) (Session, error) {
	if err := Accepted("session establishment", resp.Cause); err != nil {
		return Session{}, err
	}
	if resp.SEID() != cpSEID {
		return Session{}, fmt.Errorf("the response's header SEID is %#x, not the CP SEID %#x", resp.SEID(), cpSEID)
	}
	return created(resp)
}

// PDUSessionRequest is an IPv4 PDU session's Session Establishment Request
// shaped as Open5GS's SMF sends it, with the F-TEID left to the UPF, and
// the UE address too unless ue is valid: uplink PDR 1 to FAR 1 forwarding
// to the core and downlink PDR 2 to FAR 2 forwarding to the access side in
// a tunnel to gnb with gnbTEID, as PDRPair makes them, and the PDRs of the
// SMF's own traffic with the UE (N4-u): PDR 5 from the CP function on its
// own F-TEID to FAR 2, and PDR 6, router solicitations on the uplink
// F-TEID, to FAR 3, a tunnel to the SMF's address with the low half of
// cpSEID as TEID.
func (s *SMF) PDUSessionRequest(cpSEID uint64, ue, gnb netip.Addr, gnbTEID uint32, qfi uint8) *message.SessionEstablishmentRequest {
	return s.pduSessionRequest(cpSEID, ie.PDNTypeIPv4, singleUE(ue), gnb, gnbTEID, qfi)
}

// DualStackPDUSessionRequest is PDUSessionRequest's for an IPv4v6 PDU
// session, as Open5GS's SMF sends it: the UE IP Address of PDRs 1 and 2
// has both families, the IPv4 address ue4 (CHV4 when invalid: the UPF
// chooses it) and the IPv6 prefix ue6, whose /64 Open5GS gives without a
// prefix length.
func (s *SMF) DualStackPDUSessionRequest(cpSEID uint64, ue4 netip.Addr, ue6 netip.Prefix, gnb netip.Addr, gnbTEID uint32, qfi uint8) *message.SessionEstablishmentRequest {
	ueIE := func(sd uint8) *ie.IE {
		if ue4.IsValid() {
			return ie.NewUEIPAddress(ueV4|ueV6|sd, ue4.String(), ue6.Addr().String(), 0, 0)
		}
		return ie.NewUEIPAddress(ueV4|ueV6|ueCHV4|sd, "", ue6.Addr().String(), 0, 0)
	}
	return s.pduSessionRequest(cpSEID, ie.PDNTypeIPv4v6, ueIE, gnb, gnbTEID, qfi)
}

// Flags of the UE IP Address IE (TS 29.244 8.2.62).
const ueV6, ueV4, ueDst, ueCHV4 = 0x01, 0x02, 0x04, 0x10

// singleUE makes the UE IP Address of a PDR, with its S/D flag, of the
// address ue, or CHV4 when ue is invalid.
func singleUE(ue netip.Addr) func(sd uint8) *ie.IE {
	return func(sd uint8) *ie.IE {
		switch {
		case ue.Is6():
			return ie.NewUEIPAddress(ueV6|sd, "", ue.String(), 0, 0)
		case ue.IsValid():
			return ie.NewUEIPAddress(ueV4|sd, ue.String(), "", 0, 0)
		}
		return ie.NewUEIPAddress(ueV4|ueCHV4|sd, "", "", 0, 0)
	}
}

func (s *SMF) pduSessionRequest(cpSEID uint64, pdnType uint8, ueIE func(sd uint8) *ie.IE, gnb netip.Addr, gnbTEID uint32, qfi uint8) *message.SessionEstablishmentRequest {
	const (
		ohrGTPUv4      = 0
		fteidChoose    = 0x01 | 0x02 | 0x04 // V4, V6 and CH: the UPF picks of what it has, as Open5GS's SMF asks
		chid           = 0x08
		cpPrecedence   = 255   // OGS_PFCP_UP2CP_PDR_PRECEDENCE, OGS_PFCP_CP2UP_PDR_PRECEDENCE
		userPrecedence = 65535 // OGS_PFCP_DEFAULT_PDR_PRECEDENCE
	)
	self := s.conn.LocalAddr().(*net.UDPAddr).IP
	ies := []*ie.IE{s.nodeIDIE(), ie.NewFSEID(cpSEID, self.To4(), nil), ie.NewPDNType(pdnType)}
	ies = append(ies, pdrPair(1, 2, userPrecedence, ueIE, qfi)...)
	ies = append(ies,
		ie.NewCreateFAR(
			ie.NewFARID(1),
			ie.NewApplyAction(forward),
			ie.NewForwardingParameters(
				ie.NewDestinationInterface(ie.DstInterfaceCore),
				ie.NewNetworkInstance(dnn),
			),
		),
		ie.NewCreateFAR(
			ie.NewFARID(2),
			ie.NewApplyAction(forward),
			ie.NewForwardingParameters(
				ie.NewDestinationInterface(ie.DstInterfaceAccess),
				ie.NewNetworkInstance(dnn),
				gtpuTunnel(gnbTEID, gnb),
			),
		),
	)
	ies = append(ies,
		ie.NewCreatePDR(
			ie.NewPDRID(5),
			ie.NewPrecedence(cpPrecedence),
			ie.NewPDI(ie.NewSourceInterface(ie.SrcInterfaceCPFunction), ie.NewFTEID(fteidChoose, 0, nil, nil, 0)),
			ie.NewOuterHeaderRemoval(ohrGTPUv4, 0),
			ie.NewFARID(2),
		),
		ie.NewCreatePDR(
			ie.NewPDRID(6),
			ie.NewPrecedence(cpPrecedence),
			ie.NewPDI(
				ie.NewSourceInterface(ie.SrcInterfaceAccess),
				ie.NewFTEID(fteidChoose|chid, 0, nil, nil, uplinkChooseID),
				ie.NewSDFFilter("permit out 58 from ff02::2/128 to assigned", "", "", "", 0),
			),
			ie.NewOuterHeaderRemoval(ohrGTPUv4, 0),
			ie.NewFARID(3),
		),
		ie.NewCreateFAR(
			ie.NewFARID(3),
			ie.NewApplyAction(forward),
			ie.NewForwardingParameters(
				ie.NewDestinationInterface(ie.DstInterfaceCPFunction),
				ie.NewOuterHeaderCreation(ohcGTPUv4, uint32(cpSEID), self.String(), "", 0, 0, 0),
			),
		),
	)
	return message.NewSessionEstablishmentRequest(0, 0, 0, 0, 0, ies...)
}

// PDRPair is a pair of Create PDRs as Open5GS's SMF sends them, with
// precedence: uplink PDR uplinkID from the access side (F-TEID CHOOSE,
// the UE address as source, QFI, GTP-U removal) to FAR 1, and downlink
// PDR downlinkID from the core (the UE address as destination, QFI) to
// FAR 2. Both PDIs hold pdi too, such as SDF filters. The UE address is
// ue if valid, else the one the UPF chooses for the session; the F-TEID
// is the one it chooses for CHOOSE ID 1.
func PDRPair(uplinkID, downlinkID uint16, precedence uint32, ue netip.Addr, qfi uint8, pdi ...*ie.IE) []*ie.IE {
	return pdrPair(uplinkID, downlinkID, precedence, singleUE(ue), qfi, pdi...)
}

// pdrPair is PDRPair's with the UE IP Address ueIE makes: the UE address
// is the source of uplink packets, the destination (S/D) of downlink ones.
func pdrPair(uplinkID, downlinkID uint16, precedence uint32, ueIE func(sd uint8) *ie.IE, qfi uint8, pdi ...*ie.IE) []*ie.IE {
	const (
		ohrGTPUv4        = 0
		fteidV4, fteidV6 = 0x01, 0x02
		fteidCH, chid    = 0x04, 0x08
	)
	return []*ie.IE{
		ie.NewCreatePDR(
			ie.NewPDRID(uplinkID),
			ie.NewPrecedence(precedence),
			ie.NewPDI(append([]*ie.IE{
				ie.NewSourceInterface(ie.SrcInterfaceAccess),
				ie.NewFTEID(fteidV4|fteidV6|fteidCH|chid, 0, nil, nil, uplinkChooseID),
				ie.NewNetworkInstance(dnn),
				ueIE(0),
				ie.NewQFI(qfi),
			}, pdi...)...),
			ie.NewOuterHeaderRemoval(ohrGTPUv4, 0),
			ie.NewFARID(1),
		),
		ie.NewCreatePDR(
			ie.NewPDRID(downlinkID),
			ie.NewPrecedence(precedence),
			ie.NewPDI(append([]*ie.IE{
				ie.NewSourceInterface(ie.SrcInterfaceCore),
				ie.NewNetworkInstance(dnn),
				ueIE(ueDst),
				ie.NewQFI(qfi),
			}, pdi...)...),
			ie.NewFARID(2),
		),
	}
}

// created reads the UP F-SEID and what the Created PDR of the uplink PDR
// reports.
func created(resp *message.SessionEstablishmentResponse) (Session, error) {
	var sess Session
	if resp.UPFSEID == nil {
		return sess, errors.New("no UP F-SEID")
	}
	f, err := resp.UPFSEID.FSEID()
	if err != nil {
		return sess, fmt.Errorf("UP F-SEID: %w", err)
	}
	sess.SEID = f.SEID
	for _, c := range resp.CreatedPDR {
		if id, err := c.PDRID(); err != nil || id != 1 {
			continue
		}
		fteid, err := c.FTEID()
		if err != nil {
			return sess, fmt.Errorf("Created PDR 1: F-TEID: %w", err)
		}
		sess.TEID = fteid.TEID
		sess.N3, _ = netip.AddrFromSlice(fteid.IPv4Address.To4())
		if !fteid.HasIPv4() {
			sess.N3, _ = netip.AddrFromSlice(fteid.IPv6Address)
		}
		ue, err := c.UEIPAddress()
		switch {
		case err == nil:
			sess.UE, _ = netip.AddrFromSlice(ue.IPv4Address.To4())
		case !errors.Is(err, ie.ErrIENotFound):
			return sess, fmt.Errorf("Created PDR 1: UE IP address: %w", err)
		}
		return sess, nil
	}
	return sess, errors.New("no Created PDR for PDR 1")
}

// gtpuTunnel is the Outer Header Creation of a GTP-U tunnel to peer, over
// the peer's family.
func gtpuTunnel(teid uint32, peer netip.Addr) *ie.IE {
	if peer.Is6() {
		return ie.NewOuterHeaderCreation(ohcGTPUv6, teid, "", peer.String(), 0, 0, 0)
	}
	return ie.NewOuterHeaderCreation(ohcGTPUv4, teid, peer.String(), "", 0, 0, 0)
}

// HandoverRequest is the Session Modification Request that moves the
// downlink tunnel of a session PDUSessionRequest established, by the UPF's
// SEID, to gnb and gnbTEID.
func HandoverRequest(seid uint64, gnb netip.Addr, gnbTEID uint32) *message.SessionModificationRequest {
	return message.NewSessionModificationRequest(0, 0, seid, 0, 0,
		ie.NewUpdateFAR(
			ie.NewFARID(2),
			ie.NewApplyAction(forward),
			ie.NewUpdateForwardingParameters(
				ie.NewDestinationInterface(ie.DstInterfaceAccess),
				gtpuTunnel(gnbTEID, gnb),
			),
		),
	)
}

// Modify sends a Session Modification Request and returns its response.
func (s *SMF) Modify(req *message.SessionModificationRequest) (*message.SessionModificationResponse, error) {
	return request[*message.SessionModificationResponse](s, req)
}

// DeletionRequest is the Session Deletion Request of a session by the
// UPF's SEID.
func DeletionRequest(seid uint64) *message.SessionDeletionRequest {
	return message.NewSessionDeletionRequest(0, 0, seid, 0, 0)
}

// Delete deletes a session by the UPF's SEID.
func (s *SMF) Delete(seid uint64) error {
	_, err := s.DeleteUsage(seid)
	return err
}

// DeleteUsage deletes a session by the UPF's SEID and returns the Usage
// Report IEs of the response: what each URR measured since its last report.
func (s *SMF) DeleteUsage(seid uint64) ([]*ie.IE, error) {
	resp, err := request[*message.SessionDeletionResponse](s, DeletionRequest(seid))
	if err != nil {
		return nil, err
	}
	return resp.UsageReport, Accepted("session deletion", resp.Cause)
}

func (s *SMF) nodeIDIE() *ie.IE {
	if a, err := netip.ParseAddr(s.nodeID); err == nil && a.Is4() {
		return ie.NewNodeID(s.nodeID, "", "")
	}
	return ie.NewNodeID("", "", s.nodeID)
}

// Accepted fails unless a Cause IE says "Request accepted".
func Accepted(what string, cause *ie.IE) error {
	if cause == nil {
		return fmt.Errorf("%s: no cause in the response", what)
	}
	v, err := cause.Cause()
	if err != nil {
		return fmt.Errorf("%s: cause: %w", what, err)
	}
	if v != ie.CauseRequestAccepted {
		return fmt.Errorf("%s refused with cause %d", what, v)
	}
	return nil
}
