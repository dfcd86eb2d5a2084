package pfcp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
)

// The UPF under test: Node ID 192.0.2.1, advertising FTUP (octet 5 bit 5),
// EMPU (octet 6 bit 1) and UEIP (octet 7 bit 3).
var (
	upfNodeID   = "192.0.2.1"
	upfFeatures = []UPFeature{FeatureFTUP, FeatureEMPU, FeatureUEIP}
	// upfNodeIDValue is its Node ID IE value: type 0 (IPv4), 192.0.2.1.
	upfNodeIDValue = []byte{0x00, 0xc0, 0x00, 0x02, 0x01}
	// upfFeaturesValue is its UP Function Features IE value, octets 5 to 7.
	upfFeaturesValue = []byte{0x10, 0x01, 0x04}
)

const smfName = "smf.example"

// recorder is the session handler and peer callbacks of the server under
// test: it records calls as "method node-ID" strings.
type recorder struct {
	mu          sync.Mutex
	calls       []string
	panicModify bool
	// unencodableModify answers modifications with a response whose
	// encoding panics: a Created PDR with a nil child.
	unencodableModify bool
	// modifyTakes is how long a modification takes; modified are the
	// sequence numbers of the modifications, in the order served;
	// overlapped says two modifications ran at once.
	modifyTakes time.Duration
	modified    []uint32
	modifying   atomic.Bool
	overlapped  atomic.Bool
}

func (r *recorder) record(call string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call)
}

func (r *recorder) count(call string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.calls {
		if c == call {
			n++
		}
	}
	return n
}

func (r *recorder) Establish(p Peer, _ *message.SessionEstablishmentRequest) *message.SessionEstablishmentResponse {
	r.record("establish " + p.NodeID)
	return message.NewSessionEstablishmentResponse(0, 0, 0, 0, 0,
		ie.NewCause(ie.CauseRequestAccepted), ie.NewFSEID(0x0102030405060708, net.ParseIP(upfNodeID), nil))
}

func (r *recorder) Modify(p Peer, req *message.SessionModificationRequest) *message.SessionModificationResponse {
	if r.modifying.Swap(true) {
		r.overlapped.Store(true)
	}
	defer r.modifying.Store(false)
	time.Sleep(r.modifyTakes)
	r.record("modify " + p.NodeID)
	r.mu.Lock()
	r.modified = append(r.modified, req.Sequence())
	r.mu.Unlock()
	if r.panicModify {
		panic("handler bug")
	}
	resp := message.NewSessionModificationResponse(0, 0, 0x1122334455667788, 0, 0, ie.NewCause(ie.CauseRequestAccepted))
	if r.unencodableModify {
		created := ie.NewCreatedPDR(ie.NewPDRID(1))
		created.ChildIEs = append(created.ChildIEs, nil)
		resp.CreatedPDR = []*ie.IE{created}
	}
	return resp
}

func (r *recorder) Delete(p Peer, _ *message.SessionDeletionRequest) *message.SessionDeletionResponse {
	r.record("delete " + p.NodeID)
	return nil // stands for a System failure
}

func (r *recorder) SetDelete(p Peer, _ *message.SessionSetDeletionRequest) *message.SessionSetDeletionResponse {
	r.record("set-delete " + p.NodeID)
	return message.NewSessionSetDeletionResponse(0, nil, ie.NewCause(ie.CauseRequestAccepted), nil)
}

func (r *recorder) DropPeer(nodeID string) { r.record("drop " + nodeID) }

func (r *recorder) DropPeerExcept(nodeID string, entities []netip.Addr) {
	r.record(fmt.Sprintf("drop %s %s", nodeID, strings.Trim(fmt.Sprint(entities), "[]")))
}

func (r *recorder) SessionPeer(uint64) (string, bool) { return "", false }

// startServer starts a server on a loopback port, closed when the test
// ends; adjust may change its configuration.
func startServer(t *testing.T, adjust func(*Config)) (*Server, *recorder) {
	t.Helper()
	rec := &recorder{}
	cfg := Config{
		Listen:          "127.0.0.1:0",
		NodeID:          upfNodeID,
		Features:        upfFeatures,
		Handler:         rec,
		OnPeerRestarted: func(n string) { rec.record("restarted " + n) },
		OnPeerLost:      func(n string) { rec.record("lost " + n) },
	}
	if adjust != nil {
		adjust(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, rec
}

// smf is a UDP socket playing the SMF.
type smf struct {
	t    *testing.T
	conn *net.UDPConn
	upf  netip.AddrPort
}

func newSMF(t *testing.T, upf netip.AddrPort) *smf {
	t.Helper()
	return newSMFAt(t, upf, "127.0.0.1:0")
}

// newSMFAt is an SMF whose socket is bound to local.
func newSMFAt(t *testing.T, upf netip.AddrPort, local string) *smf {
	t.Helper()
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(local)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &smf{t: t, conn: conn, upf: upf}
}

func (m *smf) addr() netip.AddrPort { return m.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

func (m *smf) send(b []byte) {
	m.t.Helper()
	if _, err := m.conn.WriteToUDPAddrPort(b, m.upf); err != nil {
		m.t.Fatal(err)
	}
}

// recv returns the next datagram, from whichever port of the UPF.
func (m *smf) recv() []byte {
	m.t.Helper()
	buf := make([]byte, maxDatagram)
	m.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, from, err := m.conn.ReadFromUDPAddrPort(buf)
	if err != nil {
		m.t.Fatal(err)
	}
	if from.Addr().Unmap() != m.upf.Addr() {
		m.t.Fatalf("datagram from %s", from)
	}
	return buf[:n]
}

// silent checks that nothing arrives for a while.
func (m *smf) silent(d time.Duration) {
	m.t.Helper()
	m.conn.SetReadDeadline(time.Now().Add(d))
	if n, _, err := m.conn.ReadFromUDPAddrPort(make([]byte, maxDatagram)); err == nil {
		m.t.Fatalf("unexpected %d-byte datagram", n)
	}
}

func (m *smf) exchange(req []byte) wire {
	m.t.Helper()
	m.send(req)
	return parseWire(m.t, m.recv())
}

// wire is a message decoded by hand (TS 29.244 §7.2.2, §8.1.1), apart from
// go-pfcp.
type wire struct {
	raw     []byte
	msgType uint8
	seid    uint64
	hasSEID bool
	seq     uint32
	ies     map[uint16][]byte // the first IE of each type, by value
}

func parseWire(t *testing.T, b []byte) wire {
	t.Helper()
	if len(b) < 8 || b[0]>>5 != 1 || int(binary.BigEndian.Uint16(b[2:4]))+4 != len(b) {
		t.Fatalf("bad PFCP header: % x", b)
	}
	w := wire{raw: b, msgType: b[1], hasSEID: b[0]&1 != 0, ies: map[uint16][]byte{}}
	rest := b[4:]
	if w.hasSEID {
		w.seid = binary.BigEndian.Uint64(rest)
		rest = rest[8:]
	}
	w.seq = uint32(rest[0])<<16 | uint32(rest[1])<<8 | uint32(rest[2])
	for body := rest[4:]; len(body) > 0; {
		n := int(binary.BigEndian.Uint16(body[2:4]))
		typ := binary.BigEndian.Uint16(body)
		if _, dup := w.ies[typ]; !dup {
			w.ies[typ] = body[4 : 4+n]
		}
		body = body[4+n:]
	}
	return w
}

// check compares a message with what a test expects: type, sequence number
// and the values of some IEs; nil expects an IE absent.
func (w wire) check(t *testing.T, msgType uint8, seq uint32, ies map[uint16][]byte) {
	t.Helper()
	if w.msgType != msgType || w.seq != seq {
		t.Fatalf("got type %d sequence %d, want type %d sequence %d: % x", w.msgType, w.seq, msgType, seq, w.raw)
	}
	for typ, want := range ies {
		got, ok := w.ies[typ]
		if want == nil && ok || want != nil && !bytes.Equal(got, want) {
			t.Errorf("type %d message: IE %d = % x (present %t), want % x", msgType, typ, got, ok, want)
		}
	}
}

// reply builds a response to req from a template whose sequence number
// octets (4 to 6 of a node message header) are left zero.
func reply(req wire, template []byte) []byte {
	b := slices.Clone(template)
	b[4], b[5], b[6] = byte(req.seq>>16), byte(req.seq>>8), byte(req.seq)
	return b
}

func cat(parts ...[]byte) []byte { return slices.Concat(parts...) }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (r *recorder) waitCall(t *testing.T, call string) {
	t.Helper()
	waitFor(t, call, func() bool { return r.count(call) > 0 })
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("[%s]", strings.Join(r.calls, ", "))
}

// associate sets up the association of smf.example with the UPF.
func (m *smf) associate() {
	m.t.Helper()
	m.exchange(associationSetupRequest(1, smfRecovery)).
		check(m.t, message.MsgTypeAssociationSetupResponse, 1, map[uint16][]byte{ie.Cause: {ie.CauseRequestAccepted}})
}
