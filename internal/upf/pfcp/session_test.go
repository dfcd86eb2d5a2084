package pfcp

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
)

const cpSEIDValue = 0x1122334455667788 // in cpFSEID

func TestSessionRequestsWithoutAssociation(t *testing.T) {
	s, rec := startServer(t, nil)
	m := newSMF(t, s.Addr())

	resp := m.exchange(sessionEstablishmentRequest(0x10))
	resp.check(t, message.MsgTypeSessionEstablishmentResponse, 0x10, map[uint16][]byte{
		ie.Cause:  {ie.CauseNoEstablishedPFCPAssociation},
		ie.NodeID: upfNodeIDValue,
		ie.FSEID:  nil, // no UP F-SEID with a rejection
	})
	// The header carries the CP's SEID from the request's F-SEID.
	if !resp.hasSEID || resp.seid != cpSEIDValue {
		t.Errorf("header SEID %t %#x", resp.hasSEID, resp.seid)
	}

	for _, msgType := range []byte{message.MsgTypeSessionModificationRequest, message.MsgTypeSessionDeletionRequest} {
		resp := m.exchange(sessionRequest(msgType, 0x11))
		resp.check(t, msgType+1, 0x11, map[uint16][]byte{ie.Cause: {ie.CauseNoEstablishedPFCPAssociation}})
		if !resp.hasSEID || resp.seid != 0 {
			t.Errorf("type %d: header SEID %t %#x, want 0", resp.msgType, resp.hasSEID, resp.seid)
		}
	}
	m.exchange(sessionSetDeletionRequest).check(t, message.MsgTypeSessionSetDeletionResponse, 0x40, map[uint16][]byte{
		ie.Cause:  {ie.CauseNoEstablishedPFCPAssociation},
		ie.NodeID: upfNodeIDValue,
	})
	if rec.String() != "[]" {
		t.Errorf("handler called: %v", rec)
	}
}

func TestSessionRequestsReachTheHandler(t *testing.T) {
	s, rec := startServer(t, nil)
	m := newSMF(t, s.Addr())
	m.associate()

	resp := m.exchange(sessionEstablishmentRequest(0x10))
	resp.check(t, message.MsgTypeSessionEstablishmentResponse, 0x10, map[uint16][]byte{
		ie.Cause:  {ie.CauseRequestAccepted},
		ie.NodeID: upfNodeIDValue,
		ie.FSEID:  {0x02, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 192, 0, 2, 1},
	})
	if resp.seid != cpSEIDValue {
		t.Errorf("header SEID %#x", resp.seid)
	}
	// The handler sets the header SEID of a modification response.
	resp = m.exchange(sessionRequest(message.MsgTypeSessionModificationRequest, 0x11))
	resp.check(t, message.MsgTypeSessionModificationResponse, 0x11, map[uint16][]byte{ie.Cause: {ie.CauseRequestAccepted}})
	if resp.seid != cpSEIDValue {
		t.Errorf("header SEID %#x", resp.seid)
	}
	// The test handler gives no deletion response: a System failure.
	m.exchange(sessionRequest(message.MsgTypeSessionDeletionRequest, 0x12)).
		check(t, message.MsgTypeSessionDeletionResponse, 0x12, map[uint16][]byte{ie.Cause: {ie.CauseSystemFailure}})
	m.exchange(sessionSetDeletionRequest).check(t, message.MsgTypeSessionSetDeletionResponse, 0x40, map[uint16][]byte{
		ie.Cause:  {ie.CauseRequestAccepted},
		ie.NodeID: upfNodeIDValue,
	})
	for _, call := range []string{"establish", "modify", "delete", "set-delete"} {
		if rec.count(call+" "+smfName) != 1 {
			t.Errorf("%s not called once: %v", call, rec)
		}
	}
}

// A burst of requests is served one at a time, in order, whether by the
// reader (the first, found alone) or by the worker (those queued behind).
func TestBurstIsServedAloneInOrder(t *testing.T) {
	s, rec := startServer(t, func(c *Config) { c.Handler.(*recorder).modifyTakes = 200 * time.Microsecond })
	m := newSMF(t, s.Addr())
	m.associate()

	const burst = 100
	for seq := range byte(burst) {
		m.send(sessionRequest(message.MsgTypeSessionModificationRequest, seq))
	}
	for seq := range uint32(burst) { // responses keep the order too
		parseWire(t, m.recv()).check(t, message.MsgTypeSessionModificationResponse, seq,
			map[uint16][]byte{ie.Cause: {ie.CauseRequestAccepted}})
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i, seq := range rec.modified {
		if seq != uint32(i) {
			t.Fatalf("modifications served in the order %v", rec.modified)
		}
	}
	if len(rec.modified) != burst || rec.overlapped.Load() {
		t.Errorf("%d modifications served, overlapping: %t", len(rec.modified), rec.overlapped.Load())
	}
}

// nothingToRead, which lets the reader serve a request itself, sees a
// datagram waiting on the socket.
func TestNothingToRead(t *testing.T) {
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rawConn, err := conn.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{rawConn: rawConn}
	if !s.nothingToRead() {
		t.Fatal("a datagram waits on a fresh socket")
	}
	if _, err := conn.WriteToUDP([]byte{1}, conn.LocalAddr().(*net.UDPAddr)); err != nil {
		t.Fatal(err)
	}
	if s.nothingToRead() {
		t.Error("the datagram sent over loopback does not wait on the socket")
	}
}

func TestMissingMandatorySessionIE(t *testing.T) {
	for _, c := range []struct {
		name    string
		req     []byte
		seq     uint32
		missing uint16
	}{
		{name: "Create FAR", req: establishmentWithoutFAR, seq: 0x21, missing: ie.CreateFAR},
		{name: "Create PDR", req: establishmentWithoutPDR, seq: 0x22, missing: ie.CreatePDR},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, rec := startServer(t, nil)
			m := newSMF(t, s.Addr())
			m.associate()

			resp := m.exchange(c.req)
			resp.check(t, message.MsgTypeSessionEstablishmentResponse, c.seq, map[uint16][]byte{
				ie.Cause:       {ie.CauseMandatoryIEMissing},
				ie.OffendingIE: {byte(c.missing >> 8), byte(c.missing)},
				ie.NodeID:      upfNodeIDValue,
			})
			decoded, err := message.ParseSessionEstablishmentResponse(resp.raw)
			if err != nil {
				t.Fatal(err)
			}
			if off, err := decoded.OffendingIE.OffendingIE(); err != nil || off != c.missing {
				t.Errorf("go-pfcp reads Offending IE %d, %v", off, err)
			}
			if rec.count("establish "+smfName) != 0 {
				t.Errorf("handler called: %v", rec)
			}
		})
	}
}

func TestMissingIE(t *testing.T) {
	pdr := []*ie.IE{ie.NewPDRID(1), ie.NewPrecedence(100)}
	if typ, missing := MissingIE(pdr, ie.PDRID, ie.Precedence, ie.PDI); !missing || typ != ie.PDI {
		t.Errorf("MissingIE = %d, %t; want PDI", typ, missing)
	}
	if _, missing := MissingIE(pdr, ie.PDRID, ie.Precedence); missing {
		t.Error("MissingIE found a present IE missing")
	}
}

func TestRetransmittedRequestIsAnsweredFromCache(t *testing.T) {
	s, rec := startServer(t, nil)
	m := newSMF(t, s.Addr())
	m.associate()

	first := m.exchange(sessionEstablishmentRequest(0x10))
	again := m.exchange(sessionEstablishmentRequest(0x10))
	if !bytes.Equal(first.raw, again.raw) {
		t.Errorf("retransmission answered differently:\n% x\n% x", first.raw, again.raw)
	}
	if n := rec.count("establish " + smfName); n != 1 {
		t.Errorf("handler called %d times", n)
	}
	// Another sequence number is another request.
	m.exchange(sessionEstablishmentRequest(0x11))
	if n := rec.count("establish " + smfName); n != 2 {
		t.Errorf("handler called %d times", n)
	}
	if st := s.Stats(); st.Retransmissions != 1 {
		t.Errorf("stats %+v", st)
	}
}

// A panic, in the handler or in encoding its response on the sender, is
// contained: counted, later requests still answered, and the request served
// again when retransmitted.
func TestPanicIsContained(t *testing.T) {
	for where, fault := range map[string]func(*recorder){
		"handler":  func(r *recorder) { r.panicModify = true },
		"encoding": func(r *recorder) { r.unencodableModify = true },
	} {
		t.Run(where, func(t *testing.T) {
			s, rec := startServer(t, func(c *Config) { fault(c.Handler.(*recorder)) })
			m := newSMF(t, s.Addr())
			m.associate()

			m.send(sessionRequest(message.MsgTypeSessionModificationRequest, 0x11))
			m.silent(50 * time.Millisecond)
			m.exchange(heartbeatRequest(2, smfRecovery)).check(t, message.MsgTypeHeartbeatResponse, 2, nil)
			if st := s.Stats(); st.Panics != 1 {
				t.Errorf("stats %+v", st)
			}
			// Unanswered, the request is served again when retransmitted.
			m.send(sessionRequest(message.MsgTypeSessionModificationRequest, 0x11))
			waitFor(t, "the retransmission served", func() bool { return rec.count("modify "+smfName) == 2 })
		})
	}
}

func TestSendSessionReport(t *testing.T) {
	// Retransmissions come fast, and the test has time to answer one.
	s, _ := startServer(t, func(c *Config) { c.T1, c.N1 = 20*time.Millisecond, 50 })
	m := newSMF(t, s.Addr())

	type result struct {
		resp *message.SessionReportResponse
		err  error
	}
	done := make(chan result)
	go func() {
		req := message.NewSessionReportRequest(0, 0, cpSEIDValue, 0, 0, ie.NewReportType(0, 0, 1, 0))
		resp, err := s.SendSessionReport(context.Background(), Peer{NodeID: smfName, Addr: m.addr()}, req)
		done <- result{resp: resp, err: err}
	}()

	first := parseWire(t, m.recv())
	first.check(t, message.MsgTypeSessionReportRequest, first.seq, map[uint16][]byte{ie.ReportType: {0x02}})
	if first.seid != cpSEIDValue {
		t.Errorf("header SEID %#x", first.seid)
	}
	// Unanswered, the request comes again after T1, with the same number.
	if again := parseWire(t, m.recv()); !bytes.Equal(again.raw, first.raw) {
		t.Errorf("retransmission differs:\n% x\n% x", again.raw, first.raw)
	}
	m.send(sessionReportResponse(first.seq))
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if c, err := r.resp.Cause.Cause(); err != nil || c != ie.CauseRequestAccepted {
		t.Errorf("cause %d, %v", c, err)
	}
}

func TestSendSessionReportGivesUp(t *testing.T) {
	s, _ := startServer(t, func(c *Config) { c.T1, c.N1 = 10*time.Millisecond, 2 })
	m := newSMF(t, s.Addr())
	req := message.NewSessionReportRequest(0, 0, cpSEIDValue, 0, 0, ie.NewReportType(0, 0, 1, 0))
	_, err := s.SendSessionReport(context.Background(), Peer{Addr: m.addr()}, req)
	if err == nil || !errors.Is(err, ErrNoResponse) {
		t.Fatalf("err %v", err)
	}
	if want := "Session Report Request sent to " + m.addr().String(); !strings.Contains(err.Error(), want) {
		t.Errorf("err %q; want it to say %q", err, want)
	}
	for range 3 { // the request and N1 retransmissions
		m.recv()
	}
	m.silent(30 * time.Millisecond)
}

// A GTP-U path failure goes to every associated SMF in a Node Report
// Request (§7.4.5.1): Node ID, Node Report Type UPFR, and the peer in a User
// Plane Path Failure Report.
func TestReportPathFailure(t *testing.T) {
	s, _ := startServer(t, nil)
	// Requests go to a peer's port 8805: this SMF has a loopback address
	// of its own for it.
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.7:8805")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	m := &smf{t: t, conn: conn, upf: s.Addr()}
	m.associate()
	done := make(chan error)
	go func() { done <- s.ReportPath(context.Background(), netip.MustParseAddr("192.0.2.50"), true) }()
	req := parseWire(t, m.recv())
	// Remote GTP-U Peer (§8.2.70): type 103, length 5, flags V4, address.
	peer := []byte{0, 103, 0, 5, 0x02, 192, 0, 2, 50}
	req.check(t, message.MsgTypeNodeReportRequest, req.seq, map[uint16][]byte{
		ie.NodeReportType: {0x01}, ie.UserPlanePathFailureReport: peer, ie.NodeID: upfNodeIDValue})
	body := cat([]byte{byte(req.seq >> 16), byte(req.seq >> 8), byte(req.seq), 0}, smfNodeID, []byte{0, byte(ie.Cause), 0, 1, ie.CauseRequestAccepted})
	m.send(cat([]byte{0x20, message.MsgTypeNodeReportResponse, 0, byte(len(body))}, body))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
