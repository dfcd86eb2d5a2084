package pfcp

import (
	"context"
	"errors"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
)

// fast are timers that keep peer tests short: a peer is lost 3 × 20 ms
// after an unanswered heartbeat.
func fast(c *Config) {
	c.HeartbeatInterval = 30 * time.Millisecond
	c.T1 = 20 * time.Millisecond
	c.N1 = 2
}

// startWithPeer starts a server with fast timers, configured to associate
// with a test SMF; adjust may change its configuration further.
func startWithPeer(t *testing.T, adjust func(*Config)) (*Server, *recorder, *smf) {
	t.Helper()
	// The SMF needs the server's address, the server the SMF's: the SMF
	// socket comes first and learns the server's address afterwards.
	m := newSMF(t, netip.AddrPort{})
	s, rec := startServer(t, func(c *Config) {
		fast(c)
		c.Peers = []string{m.addr().String()}
		if adjust != nil {
			adjust(c)
		}
	})
	m.upf = s.Addr()
	return s, rec, m
}

// acceptSetup answers the UPF's Association Setup Request.
func (m *smf) acceptSetup() wire {
	m.t.Helper()
	req := parseWire(m.t, m.recv())
	req.check(m.t, message.MsgTypeAssociationSetupRequest, req.seq, map[uint16][]byte{
		ie.NodeID:             upfNodeIDValue,
		ie.UPFunctionFeatures: upfFeaturesValue,
	})
	if len(req.ies[ie.RecoveryTimeStamp]) != 4 {
		m.t.Fatalf("no Recovery Time Stamp: % x", req.raw)
	}
	m.send(reply(req, associationSetupResponse))
	return req
}

// nextHeartbeat skips retransmissions to the next Heartbeat Request.
func (m *smf) nextHeartbeat(after uint32) wire {
	m.t.Helper()
	for {
		req := parseWire(m.t, m.recv())
		if req.msgType == message.MsgTypeHeartbeatRequest && req.seq != after {
			return req
		}
	}
}

// answerHeartbeats answers Heartbeat Requests with response until done
// holds: with short timers, a slow test may answer a request too late.
func (m *smf) answerHeartbeats(response []byte, what string, done func() bool) {
	m.t.Helper()
	for deadline := time.Now().Add(2 * time.Second); !done(); {
		if time.Now().After(deadline) {
			m.t.Fatalf("timed out waiting for %s", what)
		}
		m.send(reply(m.nextHeartbeat(0), response))
		time.Sleep(5 * time.Millisecond)
	}
}

func TestUPFInitiatedAssociation(t *testing.T) {
	s, _, m := startWithPeer(t, nil)
	m.acceptSetup()
	waitFor(t, "the association", func() bool { return len(s.Associations()) == 1 })
	if a := s.Associations()[0]; a.NodeID != smfName || a.Addr != m.addr() {
		t.Errorf("association %+v", a)
	}
	// Heartbeats follow, and the answers are recorded.
	hb := m.nextHeartbeat(0)
	hb.check(t, message.MsgTypeHeartbeatRequest, hb.seq, map[uint16][]byte{ie.RecoveryTimeStamp: s.recovery.Payload})
	m.answerHeartbeats(heartbeatResponse, "the heartbeat recorded", func() bool { return !s.Associations()[0].LastHeartbeat.IsZero() })
}

func TestSetupIsRetried(t *testing.T) {
	_, _, m := startWithPeer(t, nil)
	first := parseWire(t, m.recv())
	// Unanswered, the request is retransmitted N1 times, then tried again
	// as a new request.
	for range 2 {
		if again := parseWire(t, m.recv()); again.seq != first.seq {
			t.Fatalf("retransmission with sequence %d, want %d", again.seq, first.seq)
		}
	}
	if next := parseWire(t, m.recv()); next.msgType != message.MsgTypeAssociationSetupRequest || next.seq == first.seq {
		t.Fatalf("after giving up: type %d sequence %d", next.msgType, next.seq)
	}
}

// Both ends set the association up at once: the SMF's own setup, made while
// the UPF's request waited for its answer, stands when that answer comes, with
// the sessions established meanwhile.
func TestSetupAnsweredAfterThePeersOwn(t *testing.T) {
	s, rec, m := startWithPeer(t, func(c *Config) { c.HeartbeatInterval, c.T1 = time.Second, time.Second })
	upfs := parseWire(t, m.recv())
	upfs.check(t, message.MsgTypeAssociationSetupRequest, upfs.seq, map[uint16][]byte{ie.NodeID: upfNodeIDValue})
	m.associate()
	waitFor(t, "the SMF's association", func() bool { return len(s.Associations()) == 1 })
	since := s.Associations()[0].Since

	m.send(reply(upfs, associationSetupResponse))
	for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if rec.count("drop "+smfName) != 0 {
			t.Fatalf("the answer to the UPF's setup dropped the sessions of the SMF's association: %v", rec)
		}
	}
	if a := s.Associations(); len(a) != 1 || !a[0].Since.Equal(since) {
		t.Errorf("associations %+v, want the SMF's of %v", a, since)
	}
}

func TestPeerLostAndBack(t *testing.T) {
	s, rec, m := startWithPeer(t, nil)
	m.acceptSetup()

	hb := m.nextHeartbeat(0)
	for range 2 { // N1 retransmissions, unanswered
		if again := parseWire(t, m.recv()); again.seq != hb.seq {
			t.Fatalf("retransmission with sequence %d, want %d", again.seq, hb.seq)
		}
	}
	rec.waitCall(t, "lost "+smfName)
	if a := s.Associations(); len(a) != 1 || !a[0].Lost {
		t.Fatalf("associations %+v", a)
	}
	if rec.count("drop "+smfName) != 0 {
		t.Errorf("a lost peer keeps its sessions: %v", rec)
	}

	m.answerHeartbeats(heartbeatResponse, "the peer back", func() bool { return !s.Associations()[0].Lost })
	if n := rec.count("lost " + smfName); n != 1 {
		t.Errorf("lost reported %d times", n)
	}
}

func TestHeartbeatResponseShowsRestart(t *testing.T) {
	s, rec, m := startWithPeer(t, nil)
	m.acceptSetup()
	m.answerHeartbeats(heartbeatResponseAfterRestart, "the restart", func() bool { return rec.count("drop "+smfName) > 0 })
	if rec.count("restarted "+smfName) != 1 {
		t.Errorf("calls %v", rec)
	}
	// The restarted SMF gets a new association.
	m.acceptSetup()
	waitFor(t, "the new association", func() bool { return len(s.Associations()) == 1 })
}

// The UPF asks the SMF to release the association; once released, it does
// not set it up again (the operator is taking it out of service).
func TestRequestRelease(t *testing.T) {
	// Time for the test to answer.
	s, rec, m := startWithPeer(t, func(c *Config) { c.HeartbeatInterval, c.T1 = 50*time.Millisecond, time.Second })
	m.acceptSetup()
	waitFor(t, "the association", func() bool { return len(s.Associations()) == 1 })

	done := make(chan error)
	go func() { done <- s.RequestRelease(context.Background(), smfName) }()
	update := m.nextMessage()
	update.check(t, message.MsgTypeAssociationUpdateRequest, update.seq, map[uint16][]byte{
		ie.NodeID:                        upfNodeIDValue,
		ie.PFCPAssociationReleaseRequest: {0x01}, // SARR
	})
	m.send(reply(update, associationUpdateResponse))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The SMF then releases the association.
	m.send(associationRequest(message.MsgTypeAssociationReleaseRequest, 9))
	m.nextMessage().check(t, message.MsgTypeAssociationReleaseResponse, 9, map[uint16][]byte{ie.Cause: {ie.CauseRequestAccepted}})
	rec.waitCall(t, "drop "+smfName)
	if err := s.RequestRelease(context.Background(), smfName); !errors.Is(err, ErrNoAssociation) {
		t.Errorf("release requested without an association: %v", err)
	}
	// Ten heartbeat intervals: no new setup.
	for deadline := time.Now().Add(500 * time.Millisecond); time.Now().Before(deadline); {
		m.conn.SetReadDeadline(deadline)
		b := make([]byte, maxDatagram)
		n, _, err := m.conn.ReadFromUDPAddrPort(b)
		if err != nil {
			break
		}
		if w := parseWire(t, b[:n]); w.msgType != message.MsgTypeHeartbeatRequest {
			t.Fatalf("type %d message after the release", w.msgType)
		}
	}
	if len(s.Associations()) != 0 {
		t.Errorf("associations %+v after the release", s.Associations())
	}
}

// nextMessage answers Heartbeat Requests until another message comes.
func (m *smf) nextMessage() wire {
	m.t.Helper()
	for {
		w := parseWire(m.t, m.recv())
		if w.msgType != message.MsgTypeHeartbeatRequest {
			return w
		}
		m.send(reply(w, heartbeatResponse))
	}
}

func TestCloseStopsEverything(t *testing.T) {
	before := runtime.NumGoroutine()
	s, rec, m := startWithPeer(t, nil)
	m.acceptSetup()
	m.nextHeartbeat(0)

	// A request in flight ends with the server.
	done := make(chan error)
	go func() {
		_, err := s.SendSessionReport(context.Background(), Peer{Addr: m.addr()}, message.NewSessionReportRequest(0, 0, 1, 0, 0))
		done <- err
	}()
	for parseWire(t, m.recv()).msgType != message.MsgTypeSessionReportRequest { // skip heartbeats
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != ErrClosed {
		t.Errorf("request in flight: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
	if rec.count("drop "+smfName) != 0 {
		t.Errorf("Close dropped sessions: %v", rec)
	}
}
