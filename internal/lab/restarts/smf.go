package restarts

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/xdp5g/xdp5g/internal/lab/pfcpwire"
)

// The SMF of the restarts: its PFCP messages are built octet by octet from
// TS 29.244 here, not by go-pfcp, which the daemon decodes them with, and
// it reads the daemon's by hand too. It retransmits its requests as a PFCP
// peer does (§6.4), keeps its answers to the daemon's requests by sequence
// number (a request it gets again is a retransmission: it answers the same
// and counts nothing again), and adds up the usage reports by session and
// URR.

// Message types (§7.3).
const (
	msgHeartbeatRequest        = 1
	msgAssociationSetupRequest = 5
	msgAssociationUpdate       = 7
	msgNodeReportRequest       = 12
	msgEstablishmentRequest    = 50
	msgModificationRequest     = 52
	msgDeletionRequest         = 54
	msgReportRequest           = 56
)

// IE types (§8.1.2).
const (
	ieCreatePDR            = 1
	iePDI                  = 2
	ieCreateFAR            = 3
	ieForwardingParameters = 4
	ieCreateURR            = 6
	ieCreateQER            = 7
	ieCreatedPDR           = 8
	ieUpdateFAR            = 10
	ieUpdateForwarding     = 11
	ieCause                = 19
	ieSourceInterface      = 20
	ieFTEID                = 21
	ieGateStatus           = 25
	iePrecedence           = 29
	ieVolumeThreshold      = 31
	ieReportingTriggers    = 37
	ieDestinationInterface = 42
	ieApplyAction          = 44
	iePFCPSMReqFlags       = 49
	iePDRID                = 56
	ieFSEID                = 57
	ieMeasurementMethod    = 62
	ieMeasurementPeriod    = 64
	ieVolumeMeasurement    = 66
	ieUsageReportModResp   = 78
	ieUsageReportDelResp   = 79
	ieUsageReportReport    = 80
	ieURRID                = 81
	ieCreateBAR            = 85
	ieBARID                = 88
	ieUEIPAddress          = 93
	ieOuterHeaderRemoval   = 95
	ieRecoveryTimeStamp    = 96
	ieURSEQN               = 104
	ieFARID                = 108
	ieQERID                = 109
	ieQFI                  = 124
	ieSuggestedBuffering   = 140
)

const (
	causeAccepted = 1
	pfcpPort      = 8805
	// Apply Action flags (§8.2.26).
	actionFORW = 0x02
	actionBUFF = 0x04
	actionNOCP = 0x08
	// Reporting Triggers (§8.2.19), octet 5.
	triggerPERIO = 0x01
	triggerVOLTH = 0x02
	smReqQAURR   = 0x04 // PFCPSMReq-Flags (§8.2.59): query all URRs
	ntpToUnix    = 2208988800
)

// parsed is a message read by hand: its header and its IEs.
type parsed struct {
	typ     uint8
	seid    uint64
	seq     uint32
	ies     []wireIE
	encoded []byte
}

type wireIE struct {
	typ   uint16
	value []byte
}

func parseMessage(b []byte) (parsed, error) {
	if len(b) < 8 || b[0]>>5 != 1 || int(binary.BigEndian.Uint16(b[2:]))+4 != len(b) {
		return parsed{}, fmt.Errorf("not a PFCP message: % x", b)
	}
	m := parsed{typ: b[1], encoded: b}
	rest := b[4:]
	if b[0]&0x01 != 0 {
		if len(rest) < 12 {
			return parsed{}, errors.New("session header cut short")
		}
		m.seid, rest = binary.BigEndian.Uint64(rest), rest[8:]
	}
	m.seq = uint32(rest[0])<<16 | uint32(rest[1])<<8 | uint32(rest[2])
	var err error
	m.ies, err = parseIEs(rest[4:])
	return m, err
}

func parseIEs(b []byte) ([]wireIE, error) {
	var ies []wireIE
	for len(b) > 0 {
		if len(b) < 4 || len(b) < 4+int(binary.BigEndian.Uint16(b[2:])) {
			return nil, fmt.Errorf("IE cut short: % x", b)
		}
		n := int(binary.BigEndian.Uint16(b[2:]))
		ies = append(ies, wireIE{typ: binary.BigEndian.Uint16(b), value: b[4 : 4+n]})
		b = b[4+n:]
	}
	return ies, nil
}

// first is the value of the first IE of a type; nil for none.
func first(ies []wireIE, typ uint16) []byte {
	for _, i := range ies {
		if i.typ == typ {
			return i.value
		}
	}
	return nil
}

func cause(ies []wireIE) int {
	if c := first(ies, ieCause); len(c) == 1 {
		return int(c[0])
	}
	return -1
}

// usage is what a Usage Report says.
type usage struct {
	urr, seqn uint32
	volume    uint64 // total octets
}

func parseUsage(v []byte) (usage, error) {
	ies, err := parseIEs(v)
	if err != nil {
		return usage{}, err
	}
	var u usage
	id, seqn, vol := first(ies, ieURRID), first(ies, ieURSEQN), first(ies, ieVolumeMeasurement)
	if len(id) != 4 || len(seqn) != 4 {
		return u, fmt.Errorf("usage report without URR ID or UR-SEQN: % x", v)
	}
	u.urr, u.seqn = binary.BigEndian.Uint32(id), binary.BigEndian.Uint32(seqn)
	if len(vol) >= 9 && vol[0]&0x01 != 0 { // TOVOL, first
		u.volume = binary.BigEndian.Uint64(vol[1:])
	}
	return u, nil
}

// smf is the SMF: one socket, on its address's PFCP port, for its requests
// and the daemon's.
type smf struct {
	conn     *net.UDPConn
	addr     netip.Addr
	upf      netip.AddrPort
	recovery uint32 // its Recovery Time Stamp, NTP seconds
	t1       time.Duration
	n1       int

	mu      sync.Mutex
	seq     uint32
	waiting map[uint32]chan parsed
	// answered are the responses to the daemon's requests, by sequence
	// number; usage adds up what the reports said, by CP SEID and URR, and
	// seqns the UR-SEQNs counted.
	answered map[uint32][]byte
	usage    map[uint64]map[uint32]uint64
	seqns    map[[2]uint64]bool
	problems []string
	reports  int
	resent   int
	closed   chan struct{}
	done     chan struct{}
}

func newSMF(addr netip.Addr, upf netip.AddrPort) (*smf, error) {
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, pfcpPort)))
	if err != nil {
		return nil, err
	}
	s := &smf{conn: conn, addr: addr, upf: upf, recovery: uint32(time.Now().Unix() + ntpToUnix),
		t1: 300 * time.Millisecond, n1: 40, waiting: map[uint32]chan parsed{}, answered: map[uint32][]byte{},
		usage: map[uint64]map[uint32]uint64{}, seqns: map[[2]uint64]bool{}, closed: make(chan struct{}), done: make(chan struct{})}
	go s.read()
	return s, nil
}

func (s *smf) close() {
	close(s.closed)
	s.conn.Close()
	<-s.done
}

func (s *smf) nodeID() []byte { return pfcpwire.NodeID(s.addr) }

// request sends a request and returns its response, retransmitting it
// every T1, N1 times at most.
func (s *smf) request(typ uint8, session bool, seid uint64, ies ...[]byte) (parsed, error) {
	s.mu.Lock()
	s.seq = (s.seq + 1) & 0xffffff
	seq := s.seq
	reply := make(chan parsed, 1)
	s.waiting[seq] = reply
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.waiting, seq)
		s.mu.Unlock()
	}()
	b := pfcpwire.Message(typ, session, seid, seq, ies...)
	for range s.n1 + 1 {
		if _, err := s.conn.WriteToUDPAddrPort(b, s.upf); err != nil {
			return parsed{}, err
		}
		select {
		case m := <-reply:
			if m.typ != typ+1 {
				return m, fmt.Errorf("request of type %d answered with type %d", typ, m.typ)
			}
			return m, nil
		case <-time.After(s.t1):
		case <-s.closed:
			return parsed{}, errors.New("the SMF closed")
		}
	}
	return parsed{}, fmt.Errorf("request of type %d not answered", typ)
}

// accepted sends a request whose response must accept it.
func (s *smf) accepted(what string, typ uint8, session bool, seid uint64, ies ...[]byte) (parsed, error) {
	m, err := s.request(typ, session, seid, ies...)
	if err == nil && cause(m.ies) != causeAccepted {
		err = fmt.Errorf("cause %d", cause(m.ies))
	}
	if err != nil {
		return m, fmt.Errorf("%s: %w", what, err)
	}
	return m, nil
}

// read serves the socket: responses go to their requests, the daemon's
// requests are answered.
func (s *smf) read() {
	defer close(s.done)
	buf := make([]byte, 64<<10)
	for {
		n, from, err := s.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			select {
			case <-s.closed:
				return
			default:
				continue
			}
		}
		m, err := parseMessage(append([]byte(nil), buf[:n]...))
		if err != nil {
			s.problem("%v", err)
			continue
		}
		switch m.typ {
		case msgHeartbeatRequest, msgAssociationUpdate, msgNodeReportRequest, msgReportRequest:
			s.answer(m, from)
		default:
			s.mu.Lock()
			if reply := s.waiting[m.seq]; reply != nil {
				select {
				case reply <- m:
				default: // an answer to a retransmission
				}
			}
			s.mu.Unlock()
		}
	}
}

// answer answers a request of the daemon's: a retransmitted one as it was
// answered the first time.
func (s *smf) answer(m parsed, to netip.AddrPort) {
	s.mu.Lock()
	resp, again := s.answered[m.seq]
	if again {
		s.resent++
	} else {
		resp = s.respond(m)
		s.answered[m.seq] = resp
	}
	s.mu.Unlock()
	s.conn.WriteToUDPAddrPort(resp, to)
}

// respond makes the response to a request seen for the first time, and
// counts the usage it reports; under mu.
func (s *smf) respond(m parsed) []byte {
	accepted := pfcpwire.IE(ieCause, pfcpwire.U8(causeAccepted))
	switch m.typ {
	case msgHeartbeatRequest:
		return pfcpwire.Message(m.typ+1, false, 0, m.seq, pfcpwire.IE(ieRecoveryTimeStamp, pfcpwire.U32(s.recovery)))
	case msgReportRequest:
		s.reports++
		s.count(m.seid, m.ies, ieUsageReportReport)
		return pfcpwire.Message(m.typ+1, true, m.seid, m.seq, accepted)
	}
	return pfcpwire.Message(m.typ+1, false, 0, m.seq, s.nodeID(), accepted)
}

// count adds the usage reports of type typ among ies to a session's; a
// URR sequence number seen already is a report counted twice. Under mu.
func (s *smf) count(cpSEID uint64, ies []wireIE, typ uint16) {
	for _, i := range ies {
		if i.typ != typ {
			continue
		}
		u, err := parseUsage(i.value)
		if err != nil {
			s.problems = append(s.problems, err.Error())
			continue
		}
		key := [2]uint64{cpSEID, uint64(u.urr)<<32 | uint64(u.seqn)}
		if s.seqns[key] {
			s.problems = append(s.problems, fmt.Sprintf("session %#x, URR %d: UR-SEQN %d reported twice", cpSEID, u.urr, u.seqn))
			continue
		}
		s.seqns[key] = true
		if s.usage[cpSEID] == nil {
			s.usage[cpSEID] = map[uint32]uint64{}
		}
		s.usage[cpSEID][u.urr] += u.volume
	}
}

// countResponse adds the usage reports of a response to a request.
func (s *smf) countResponse(cpSEID uint64, m parsed, typ uint16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count(cpSEID, m.ies, typ)
}

func (s *smf) problem(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
}

// reported is what the reports said a session's URR counted.
func (s *smf) reported(cpSEID uint64, urr uint32) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usage[cpSEID][urr]
}

// associate sets up the association (§7.4.4.1).
func (s *smf) associate() error {
	_, err := s.accepted("association setup", msgAssociationSetupRequest, false, 0, s.nodeID(), pfcpwire.IE(ieRecoveryTimeStamp, pfcpwire.U32(s.recovery)))
	return err
}

// heartbeat returns the daemon's Recovery Time Stamp.
func (s *smf) heartbeat() (uint32, error) {
	m, err := s.request(msgHeartbeatRequest, false, 0, pfcpwire.IE(ieRecoveryTimeStamp, pfcpwire.U32(s.recovery)))
	if err != nil {
		return 0, err
	}
	ts := first(m.ies, ieRecoveryTimeStamp)
	if len(ts) != 4 {
		return 0, errors.New("heartbeat response without a Recovery Time Stamp")
	}
	return binary.BigEndian.Uint32(ts), nil
}

// sessionSpec is a session as the restarts establish it: an uplink PDR on
// a TEID (0: the UPF chooses) and a downlink one on a UE address (invalid:
// the UPF chooses), each with the session's QER and URR; a FAR to the core
// and one to the gNB, which buffers (and notifies, under a BAR) until the
// session is moved to forward.
type sessionSpec struct {
	cpSEID  uint64
	teid    uint32
	ue      netip.Addr
	gnbTEID uint32
	buffer  bool
}

// URR and rule IDs of every session.
const (
	urrID        = 1
	uplinkFAR    = 1
	downlinkFAR  = 2
	barID        = 5
	threshold    = 200_000 // octets
	periodSecond = 2
)

// established is what the UPF chose for a session.
type established struct {
	upSEID uint64
	teid   uint32
	ue     netip.Addr
}

func (s *smf) establish(spec sessionSpec, n3, gnb netip.Addr) (established, error) {
	fteid := pfcpwire.IE(ieFTEID, pfcpwire.U8(0x05)) // V4, CH
	if spec.teid != 0 {
		fteid = pfcpwire.FTEID(spec.teid, n3)
	}
	uplinkUE, downlinkUE := pfcpwire.IE(ieUEIPAddress, pfcpwire.U8(0x12)), pfcpwire.IE(ieUEIPAddress, pfcpwire.U8(0x16)) // V4, CHV4; S/D
	if spec.ue.IsValid() {
		uplinkUE, downlinkUE = pfcpwire.UEIPAddress(spec.ue, false), pfcpwire.UEIPAddress(spec.ue, true)
	}
	action := []byte{actionFORW, 0}
	gnbFAR := []byte(nil)
	if spec.buffer {
		action = []byte{actionBUFF | actionNOCP, 0}
		gnbFAR = pfcpwire.IE(ieBARID, pfcpwire.U8(barID))
	}
	m, err := s.accepted("establishment", msgEstablishmentRequest, true, 0, s.nodeID(),
		pfcpwire.FSEID(spec.cpSEID, s.addr),
		pfcpwire.IE(ieCreatePDR, pfcpwire.IE(iePDRID, pfcpwire.U16(1)), pfcpwire.IE(iePrecedence, pfcpwire.U32(255)),
			pfcpwire.IE(iePDI, pfcpwire.IE(ieSourceInterface, pfcpwire.U8(0)), fteid, uplinkUE, pfcpwire.IE(ieQFI, pfcpwire.U8(9))),
			pfcpwire.IE(ieOuterHeaderRemoval, pfcpwire.U8(0)), pfcpwire.IE(ieFARID, pfcpwire.U32(uplinkFAR)), pfcpwire.IE(ieQERID, pfcpwire.U32(1)), pfcpwire.IE(ieURRID, pfcpwire.U32(urrID))),
		pfcpwire.IE(ieCreatePDR, pfcpwire.IE(iePDRID, pfcpwire.U16(2)), pfcpwire.IE(iePrecedence, pfcpwire.U32(255)),
			pfcpwire.IE(iePDI, pfcpwire.IE(ieSourceInterface, pfcpwire.U8(1)), downlinkUE),
			pfcpwire.IE(ieFARID, pfcpwire.U32(downlinkFAR)), pfcpwire.IE(ieQERID, pfcpwire.U32(1)), pfcpwire.IE(ieURRID, pfcpwire.U32(urrID))),
		pfcpwire.IE(ieCreateFAR, pfcpwire.IE(ieFARID, pfcpwire.U32(uplinkFAR)), pfcpwire.IE(ieApplyAction, []byte{actionFORW, 0}),
			pfcpwire.IE(ieForwardingParameters, pfcpwire.IE(ieDestinationInterface, pfcpwire.U8(1)))),
		pfcpwire.IE(ieCreateFAR, pfcpwire.IE(ieFARID, pfcpwire.U32(downlinkFAR)), pfcpwire.IE(ieApplyAction, action),
			pfcpwire.IE(ieForwardingParameters, pfcpwire.IE(ieDestinationInterface, pfcpwire.U8(0)),
				pfcpwire.OuterHeaderCreation(spec.gnbTEID, gnb)), gnbFAR),
		pfcpwire.IE(ieCreateQER, pfcpwire.IE(ieQERID, pfcpwire.U32(1)), pfcpwire.IE(ieGateStatus, pfcpwire.U8(0)),
			pfcpwire.MBR(10_000_000, 10_000_000), pfcpwire.IE(ieQFI, pfcpwire.U8(9))),
		pfcpwire.IE(ieCreateURR, pfcpwire.IE(ieURRID, pfcpwire.U32(urrID)), pfcpwire.IE(ieMeasurementMethod, pfcpwire.U8(0x02)),
			pfcpwire.IE(ieReportingTriggers, pfcpwire.U8(triggerPERIO|triggerVOLTH), pfcpwire.U8(0), pfcpwire.U8(0)),
			pfcpwire.IE(ieMeasurementPeriod, pfcpwire.U32(periodSecond)), pfcpwire.IE(ieVolumeThreshold, pfcpwire.U8(0x01), pfcpwire.U64(threshold))),
		pfcpwire.IE(ieCreateBAR, pfcpwire.IE(ieBARID, pfcpwire.U8(barID)), pfcpwire.IE(ieSuggestedBuffering, pfcpwire.U8(16))))
	if err != nil {
		return established{}, err
	}
	fseid := first(m.ies, ieFSEID)
	if len(fseid) < 9 || m.seid != spec.cpSEID {
		return established{}, fmt.Errorf("establishment answered without the UP F-SEID, or to SEID %#x", m.seid)
	}
	e := established{upSEID: binary.BigEndian.Uint64(fseid[1:]), teid: spec.teid, ue: spec.ue}
	for _, i := range m.ies {
		if i.typ != ieCreatedPDR {
			continue
		}
		created, err := parseIEs(i.value)
		if err != nil {
			return e, err
		}
		if f := first(created, ieFTEID); len(f) >= 5 {
			e.teid = binary.BigEndian.Uint32(f[1:])
		}
		if u := first(created, ieUEIPAddress); len(u) >= 5 {
			e.ue = netip.AddrFrom4([4]byte(u[1:5]))
		}
	}
	if e.teid == 0 || !e.ue.IsValid() {
		return e, errors.New("establishment answered without the F-TEID or UE address the UPF chose")
	}
	return e, nil
}

// forward moves a session's downlink FAR to forward to a gNB tunnel.
func (s *smf) forward(upSEID uint64, gnbTEID uint32, gnb netip.Addr) error {
	_, err := s.accepted("modification", msgModificationRequest, true, upSEID,
		pfcpwire.IE(ieUpdateFAR, pfcpwire.IE(ieFARID, pfcpwire.U32(downlinkFAR)), pfcpwire.IE(ieApplyAction, []byte{actionFORW, 0}),
			pfcpwire.IE(ieUpdateForwarding, pfcpwire.IE(ieDestinationInterface, pfcpwire.U8(0)),
				pfcpwire.OuterHeaderCreation(gnbTEID, gnb))))
	return err
}

// query asks for a session's usage now (QAURR) and counts it.
func (s *smf) query(cpSEID, upSEID uint64) error {
	m, err := s.accepted("query", msgModificationRequest, true, upSEID, pfcpwire.IE(iePFCPSMReqFlags, pfcpwire.U8(smReqQAURR)))
	if err == nil {
		s.countResponse(cpSEID, m, ieUsageReportModResp)
	}
	return err
}

// remove deletes a session and counts its final usage.
func (s *smf) remove(cpSEID, upSEID uint64) error {
	m, err := s.accepted("deletion", msgDeletionRequest, true, upSEID)
	if err == nil {
		s.countResponse(cpSEID, m, ieUsageReportDelResp)
	}
	return err
}
