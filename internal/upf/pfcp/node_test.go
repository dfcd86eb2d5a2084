package pfcp

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xdp5g/xdp5g/internal/testsupport"
)

func TestHeartbeatIsAnsweredWithOrWithoutRecoveryTimeStamp(t *testing.T) {
	s, _ := startServer(t, nil)
	m := newSMF(t, s.Addr())
	ours := s.recovery.Payload

	m.exchange(heartbeatRequest(5, smfRecovery)).
		check(t, message.MsgTypeHeartbeatResponse, 5, map[uint16][]byte{ie.RecoveryTimeStamp: ours})
	m.exchange(heartbeatWithoutRecovery).
		check(t, message.MsgTypeHeartbeatResponse, 7, map[uint16][]byte{ie.RecoveryTimeStamp: ours})

	// The stamp is the server's start, in seconds since 1900.
	got, err := ie.New(ie.RecoveryTimeStamp, ours).RecoveryTimeStamp()
	if err != nil || time.Since(got) > time.Minute || time.Since(got) < -time.Second {
		t.Errorf("Recovery Time Stamp %v (%v), want about now", got, err)
	}
}

func TestAssociationSetupFromSMF(t *testing.T) {
	s, _ := startServer(t, nil)
	m := newSMF(t, s.Addr())

	resp := m.exchange(associationSetupRequest(1, smfRecovery))
	resp.check(t, message.MsgTypeAssociationSetupResponse, 1, map[uint16][]byte{
		ie.Cause:              {ie.CauseRequestAccepted},
		ie.NodeID:             upfNodeIDValue,
		ie.RecoveryTimeStamp:  s.recovery.Payload,
		ie.UPFunctionFeatures: upfFeaturesValue,
	})
	// go-pfcp reads the same features, and no others.
	decoded, err := message.ParseAssociationSetupResponse(resp.raw)
	if err != nil {
		t.Fatal(err)
	}
	f := decoded.UPFunctionFeatures
	if !f.HasFTUP() || !f.HasEMPU() || !f.HasUEIP() || f.HasBUCP() || f.HasPDIU() || f.HasSSET() || f.HasMPAS() {
		t.Errorf("UP Function Features % x", f.Payload)
	}

	assocs := s.Associations()
	if len(assocs) != 1 {
		t.Fatalf("associations %+v", assocs)
	}
	a := assocs[0]
	if a.NodeID != smfName || a.Addr.Addr() != m.addr().Addr() || a.Addr.Port() != DefaultPort ||
		!a.RecoveryTime.Equal(time.Date(2023, 5, 5, 22, 21, 53, 0, time.UTC)) || time.Since(a.Since) > time.Minute {
		t.Errorf("association %+v", a)
	}

	m.exchange(heartbeatRequest(2, smfRecovery))
	if s.Associations()[0].LastHeartbeat.IsZero() {
		t.Error("heartbeat from the associated SMF not recorded")
	}
}

func TestNoFeaturesNoFeaturesIE(t *testing.T) {
	s, _ := startServer(t, func(c *Config) { c.Features = nil })
	newSMF(t, s.Addr()).exchange(associationSetupRequest(1, smfRecovery)).
		check(t, message.MsgTypeAssociationSetupResponse, 1, map[uint16][]byte{ie.UPFunctionFeatures: nil})
}

func TestAssociationUpdateAndRelease(t *testing.T) {
	s, rec := startServer(t, nil)
	m := newSMF(t, s.Addr())

	for _, msgType := range []byte{message.MsgTypeAssociationUpdateRequest, message.MsgTypeAssociationReleaseRequest} {
		m.exchange(associationRequest(msgType, 2)).check(t, msgType+1, 2, map[uint16][]byte{
			ie.Cause:  {ie.CauseNoEstablishedPFCPAssociation},
			ie.NodeID: upfNodeIDValue,
		})
	}

	m.associate()
	m.exchange(associationRequest(message.MsgTypeAssociationUpdateRequest, 3)).
		check(t, message.MsgTypeAssociationUpdateResponse, 3, map[uint16][]byte{
			ie.Cause:              {ie.CauseRequestAccepted},
			ie.NodeID:             upfNodeIDValue,
			ie.UPFunctionFeatures: upfFeaturesValue,
		})
	if len(s.Associations()) != 1 || rec.count("drop "+smfName) != 0 {
		t.Fatalf("after update: %+v, calls %v", s.Associations(), rec)
	}

	m.exchange(associationRequest(message.MsgTypeAssociationReleaseRequest, 4)).
		check(t, message.MsgTypeAssociationReleaseResponse, 4, map[uint16][]byte{
			ie.Cause:  {ie.CauseRequestAccepted},
			ie.NodeID: upfNodeIDValue,
		})
	if len(s.Associations()) != 0 || rec.count("drop "+smfName) != 1 {
		t.Fatalf("after release: %+v, calls %v", s.Associations(), rec)
	}
}

func TestNewAssociationFromSameNodeDropsItsSessions(t *testing.T) {
	s, rec := startServer(t, nil)
	m := newSMF(t, s.Addr())
	m.associate()

	// Same Recovery Time Stamp: the old association and its sessions go
	// all the same (TS 23.007 §19A), but that is no restart.
	m.exchange(associationSetupRequest(2, smfRecovery))
	if rec.count("drop "+smfName) != 1 || rec.count("restarted "+smfName) != 0 {
		t.Fatalf("calls %v", rec)
	}
	m.exchange(associationSetupRequest(3, smfRecoveryAfterRestart))
	if rec.count("drop "+smfName) != 2 || rec.count("restarted "+smfName) != 1 {
		t.Fatalf("calls %v", rec)
	}
	if len(s.Associations()) != 1 {
		t.Errorf("associations %+v", s.Associations())
	}
}

func TestHeartbeatShowsRestart(t *testing.T) {
	s, rec := startServer(t, nil)
	m := newSMF(t, s.Addr())
	m.associate()

	m.exchange(heartbeatRequest(2, smfRecovery))
	if rec.count("drop "+smfName) != 0 {
		t.Fatalf("calls %v", rec)
	}
	// The restarted SMF lost the association: it goes with the sessions.
	m.exchange(heartbeatRequest(3, smfRecoveryAfterRestart)).
		check(t, message.MsgTypeHeartbeatResponse, 3, nil)
	if rec.count("restarted "+smfName) != 1 || rec.count("drop "+smfName) != 1 || len(s.Associations()) != 0 {
		t.Fatalf("calls %v, associations %+v", rec, s.Associations())
	}
}

// Two SMFs behind one address, under two Node IDs: a heartbeat names no
// node, so its Recovery Time Stamp tells whose it is, and one SMF's never
// reads as the other's restart.
func TestHeartbeatsFromASharedAddress(t *testing.T) {
	s, rec := startServer(t, nil)
	m := newSMF(t, s.Addr())
	m.associate() // smf.example, smfRecovery
	m.exchange(cat([]byte{
		0x20,       // version 1
		0x05,       // message type 5: Association Setup Request
		0x00, 0x15, // length 21: 4 (sequence number, spare) + 9 (Node ID) + 8 (Recovery Time Stamp)
		0x00, 0x00, 0x02, // sequence number 2
		0x00,       // spare
		0x00, 0x3c, // type 60: Node ID
		0x00, 0x05, // length 5
		0x00, 192, 0, 2, 7, // type 0: IPv4 192.0.2.7
	}, smfRecoveryAfterRestart)).check(t, message.MsgTypeAssociationSetupResponse, 2, map[uint16][]byte{ie.Cause: {ie.CauseRequestAccepted}})
	for seq := byte(3); seq < 23; seq++ {
		recovery := smfRecovery
		if seq%2 == 0 {
			recovery = smfRecoveryAfterRestart
		}
		m.exchange(heartbeatRequest(seq, recovery)).check(t, message.MsgTypeHeartbeatResponse, uint32(seq), nil)
	}
	if strings.Contains(rec.String(), "restarted") || len(s.Associations()) != 2 {
		t.Errorf("calls %v, associations %+v", rec, s.Associations())
	}
}

func TestMissingMandatoryNodeIE(t *testing.T) {
	s, _ := startServer(t, nil)
	newSMF(t, s.Addr()).exchange(associationSetupWithoutRecovery).
		check(t, message.MsgTypeAssociationSetupResponse, 0x30, map[uint16][]byte{
			ie.Cause:       {ie.CauseMandatoryIEMissing},
			ie.OffendingIE: {0x00, 0x60}, // Recovery Time Stamp
			ie.NodeID:      upfNodeIDValue,
		})
	if len(s.Associations()) != 0 {
		t.Errorf("associations %+v", s.Associations())
	}
}

// PFD Management is not advertised (PFDM): a request for it is refused
// with a cause, whoever sends it, and reaches no handler.
func TestPFDManagementIsNotSupported(t *testing.T) {
	s, rec := startServer(t, nil)
	req := []byte{
		0x20,       // version 1
		0x03,       // message type 3: PFD Management Request
		0x00, 0x10, // length 16: 4 (sequence number, spare) + 12 (Application ID's PFDs)
		0x00, 0x00, 0x32, // sequence number 50
		0x00,       // spare
		0x00, 0x3a, // type 58: Application ID's PFDs
		0x00, 0x08, // length 8
		0x00, 0x18, 0x00, 0x04, 'a', 'p', 'p', '1', // type 24: Application ID "app1"
	}
	newSMF(t, s.Addr()).exchange(req).check(t, message.MsgTypePFDManagementResponse, 0x32, map[uint16][]byte{
		ie.Cause: {ie.CauseServiceNotSupported},
	})
	if rec.String() != "[]" {
		t.Errorf("handler called: %v", rec)
	}
}

func TestMalformedNodeID(t *testing.T) {
	s, _ := startServer(t, nil)
	req := cat([]byte{
		0x20,       // version 1; FO, MP and S flags clear
		0x05,       // message type 5: Association Setup Request
		0x00, 0x13, // length 19: 4 (sequence number, spare) + 7 (Node ID) + 8 (Recovery Time Stamp)
		0x00, 0x00, 0x31, // sequence number 49
		0x00,       // spare
		0x00, 0x3c, // type 60: Node ID
		0x00, 0x03, // length 3
		0x00, 192, 0, // type 0, IPv4, with two of its four octets
	}, smfRecovery)
	newSMF(t, s.Addr()).exchange(req).check(t, message.MsgTypeAssociationSetupResponse, 0x31, map[uint16][]byte{
		ie.Cause:       {ie.CauseMandatoryIEIncorrect},
		ie.OffendingIE: {0x00, 0x3c}, // Node ID
	})
}

func TestCheckNodeID(t *testing.T) {
	for s, valid := range map[string]bool{
		"192.0.2.1": true, "2001:db8::1": true, "upf.example": true, "UPF-1.example.": true,
		"": false, "fe80::1%eth0": false, "192.0.2": false, "-upf.example": false, "upf..example": false,
		"upf_1.example": false,
	} {
		if err := CheckNodeID(s); (err == nil) != valid {
			t.Errorf("CheckNodeID(%q) = %v", s, err)
		}
	}
}

// Messages from outside the allowed peers are dropped unanswered, counted,
// and change nothing: a Heartbeat goes unanswered, and an Association Setup
// or Release naming an associated SMF leaves its association and sessions
// be.
func TestOnlyAllowedPeersAreServed(t *testing.T) {
	s, rec := startServer(t, func(c *Config) { c.AllowedPeers = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")} })
	m := newSMF(t, s.Addr())
	m.associate()
	stranger := newSMFAt(t, s.Addr(), "127.0.0.2:0")
	stranger.send(heartbeatRequest(1, smfRecovery))
	stranger.send(associationSetupRequest(2, smfRecoveryAfterRestart))
	stranger.send(associationRequest(message.MsgTypeAssociationReleaseRequest, 3))
	stranger.silent(100 * time.Millisecond)
	waitFor(t, "three datagrams dropped", func() bool { return s.Stats().NotAllowed == 3 })
	if a := s.Associations(); len(a) != 1 || a[0].Addr.Addr() != m.addr().Addr() || rec.String() != "[]" {
		t.Errorf("associations %+v, calls %v; want the SMF's alone, untouched", a, rec)
	}
	m.exchange(heartbeatRequest(4, smfRecovery)).check(t, message.MsgTypeHeartbeatResponse, 4, nil)
	if n := s.Stats().NotAllowed; n != 3 {
		t.Errorf("%d datagrams not allowed, want 3", n)
	}
	testsupport.HasLines(t, testsupport.Exposition(t, s.Metrics()), `xdp5g_pfcp_messages_dropped_total{reason="not_allowed"} 3`)
}

// The addresses of the configured peers are allowed whatever AllowedPeers
// says.
func TestConfiguredPeersAreAllowed(t *testing.T) {
	s, _, m := startWithPeer(t, func(c *Config) { c.AllowedPeers = []netip.Prefix{} })
	m.acceptSetup()
	waitFor(t, "the association", func() bool { return len(s.Associations()) == 1 })
	other := newSMFAt(t, s.Addr(), "127.0.0.2:0")
	other.send(heartbeatRequest(1, smfRecovery))
	waitFor(t, "the stranger's heartbeat dropped", func() bool { return s.Stats().NotAllowed == 1 })
}

// An Association Setup for a Node ID associated from another address
// replaces the association (TS 29.244 §6.2.6.2.2): with PFCP Session
// Retention Information the sessions of the CP PFCP entity it lists stay
// (the others go), the response says so (PSREI) and the sessions' reports
// go to the new address; without, they all go.
func TestSetupFromAnotherAddress(t *testing.T) {
	s, rec := startServer(t, nil)
	m := newSMF(t, s.Addr())
	m.associate()
	// Where the UPF sends its requests: the PFCP port of the new address.
	at := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.3"), DefaultPort)
	if c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(at)); err != nil {
		t.Skipf("%s is busy: %v", at, err)
	} else {
		c.Close()
	}
	moved := newSMFAt(t, s.Addr(), at.String())
	moved.exchange(associationSetupRetaining(2)).check(t, message.MsgTypeAssociationSetupResponse, 2, map[uint16][]byte{
		ie.Cause:          {ie.CauseRequestAccepted},
		ie.PFCPASRspFlags: {0x01},
	})
	if a := s.Associations(); len(a) != 1 || a[0].Addr != moved.addr() || rec.String() != "[drop "+smfName+" 192.0.2.30]" {
		t.Fatalf("associations %+v, calls %v; want the SMF's at %s, the sessions of 192.0.2.30 kept", a, rec, moved.addr())
	}
	go s.SendSessionReport(t.Context(), Peer{NodeID: smfName, Addr: m.addr()}, message.NewSessionReportRequest(0, 0, 7, 0, 0))
	if report := parseWire(t, moved.recv()); report.msgType != message.MsgTypeSessionReportRequest || report.seid != 7 {
		t.Errorf("the new address got % x, want the Session Report Request of CP SEID 7", report.raw)
	}

	again := newSMFAt(t, s.Addr(), "127.0.0.4:0")
	again.exchange(associationSetupRequest(3, smfRecoveryAfterRestart)).check(t, message.MsgTypeAssociationSetupResponse, 3, map[uint16][]byte{
		ie.Cause:          {ie.CauseRequestAccepted},
		ie.PFCPASRspFlags: nil,
	})
	if a := s.Associations(); len(a) != 1 || a[0].Addr.Addr() != again.addr().Addr() || rec.count("drop "+smfName) != 1 {
		t.Errorf("associations %+v, calls %v; want the SMF's at %s, its sessions dropped", a, rec, again.addr().Addr())
	}
}

// What PFCP Session Retention Information asks of an association set up
// again (TS 29.244 §6.2.6.2.2, §7.4.4.1): the sessions whose CP F-SEID has
// one of the CP PFCP Entity IP Addresses listed kept and the others
// dropped, or all kept when it lists none, with PSREI in the response; one
// that is malformed is refused with cause 69 naming it, and changes
// nothing. For a Node ID not associated yet there is nothing to retain.
func TestSetupRetention(t *testing.T) {
	entity := func(v4, v6 string) *ie.IE {
		return ie.NewCPPFCPEntityIPAddress(net.ParseIP(v4), net.ParseIP(v6))
	}
	retaining := func(entities ...*ie.IE) *ie.IE {
		return ie.NewGroupedIE(ie.PFCPSessionRetentionInformation, entities...)
	}
	for _, c := range []struct {
		name       string
		associated bool // before the request
		info       *ie.IE
		cause      uint8
		flags      []byte // PFCPASRsp-Flags, nil for none
		calls      string
	}{
		{name: "listing entities", associated: true, info: retaining(entity("192.0.2.30", ""), entity("192.0.2.31", "2001:db8::31")),
			cause: ie.CauseRequestAccepted, flags: []byte{flagPSREI}, calls: "[drop " + smfName + " 192.0.2.30 192.0.2.31 2001:db8::31]"},
		{name: "listing none", associated: true, info: retaining(), cause: ie.CauseRequestAccepted, flags: []byte{flagPSREI}, calls: "[]"},
		{name: "not associated", info: retaining(entity("192.0.2.30", "")), cause: ie.CauseRequestAccepted, calls: "[]"},
		{name: "without, restarted", associated: true, cause: ie.CauseRequestAccepted, calls: "[restarted " + smfName + ", drop " + smfName + "]"},
		{name: "an address short of its flags", associated: true, info: retaining(ie.New(ie.CPPFCPEntityIPAddress, []byte{0x02, 192, 0, 2})),
			cause: ie.CauseMandatoryIEIncorrect, calls: "[]"},
		{name: "an address of neither version", associated: true, info: retaining(ie.New(ie.CPPFCPEntityIPAddress, []byte{0x00, 192, 0, 2, 30})),
			cause: ie.CauseMandatoryIEIncorrect, calls: "[]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, rec := startServer(t, nil)
			m := newSMF(t, s.Addr())
			if c.associated {
				m.associate()
			}
			before := s.Associations()
			ies := []*ie.IE{ie.NewNodeID("", "", smfName), ie.NewRecoveryTimeStamp(time.Unix(1700000000, 0))}
			if c.info != nil {
				ies = append(ies, c.info)
			}
			req, err := message.NewAssociationSetupRequest(2, ies...).Marshal()
			if err != nil {
				t.Fatal(err)
			}
			want := map[uint16][]byte{ie.Cause: {c.cause}, ie.PFCPASRspFlags: c.flags, ie.OffendingIE: nil}
			if c.cause != ie.CauseRequestAccepted {
				want[ie.OffendingIE] = []byte{0x00, 0xb7} // PFCP Session Retention Information
			}
			m.exchange(req).check(t, message.MsgTypeAssociationSetupResponse, 2, want)
			if rec.String() != c.calls {
				t.Errorf("calls %v, want %s", rec, c.calls)
			}
			if after := s.Associations(); c.cause != ie.CauseRequestAccepted && !slices.Equal(after, before) {
				t.Errorf("the refused request changed the associations: %+v, were %+v", after, before)
			}
		})
	}
}
