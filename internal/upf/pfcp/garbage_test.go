package pfcp

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/wmnsk/go-pfcp/message"
)

// maxUDPv4 is the largest UDP payload over IPv4: 65535 less the IPv4 and
// UDP headers.
const maxUDPv4 = 65535 - 20 - 8

// malformed are datagrams the server drops, each for the reason its
// metrics name (Server.Metrics).
var malformed = []struct {
	name, reason string
	datagram     []byte
}{
	{name: "empty", reason: "truncated", datagram: nil},
	{name: "3 octets", reason: "truncated", datagram: []byte{0x20, 0x01, 0x00}},
	{name: "7 octets", reason: "truncated", datagram: []byte{0x20, 0x01, 0x00, 0x04, 0x00, 0x00, 0x01}},
	{name: "session header cut to 8 octets", reason: "bad_length", datagram: []byte{
		0x21,       // version 1, S flag
		0x32,       // Session Establishment Request
		0x00, 0x04, // length 4: too short for the SEID
		0x00, 0x00, 0x01, 0x00, // what would be a sequence number
	}},
	{name: "length past the datagram", reason: "bad_length", datagram: []byte{
		0x20,       // version 1
		0x01,       // Heartbeat Request
		0x00, 0x0c, // length 12, but only 4 follow
		0x00, 0x00, 0x01, 0x00, // sequence number 1, spare
	}},
	{name: "bytes after the message without FO", reason: "bad_length", datagram: append(heartbeatRequest(1, smfRecovery), 0xde, 0xad)},
	// A 64 KiB datagram whose length field promises more than it holds.
	{name: "huge", reason: "bad_length", datagram: func() []byte {
		huge := make([]byte, maxUDPv4)
		copy(huge, []byte{
			0x20,       // version 1
			0x01,       // Heartbeat Request
			0xff, 0xff, // length 65535: 4 octets past the datagram's end
		})
		return huge
	}()},
	{name: "version 2 with a length that does not fit", reason: "bad_version", datagram: []byte{
		0x40,       // version 2
		0x01,       // Heartbeat Request
		0x00, 0x08, // length 8, but only 4 follow: not answered
		0x00, 0x00, 0x01, 0x00, // sequence number 1, spare
	}},
	{name: "unknown type", reason: "unknown_type", datagram: []byte{
		0x20,       // version 1
		0x63,       // message type 99: unassigned
		0x00, 0x04, // length 4
		0x00, 0x00, 0x01, 0x00, // sequence number 1, spare
	}},
	{name: "S flag on a node message", reason: "bad_header", datagram: []byte{
		0x21,       // version 1, S flag
		0x01,       // Heartbeat Request
		0x00, 0x0c, // length 12
		0, 0, 0, 0, 0, 0, 0, 0, // SEID
		0x00, 0x00, 0x01, 0x00, // sequence number 1, spare
	}},
	{name: "IE past the message", reason: "undecodable", datagram: []byte{
		0x20,       // version 1
		0x01,       // Heartbeat Request
		0x00, 0x0c, // length 12
		0x00, 0x00, 0x01, 0x00, // sequence number 1, spare
		0x00, 0x60, 0x00, 0x08, // Recovery Time Stamp, length 8: 4 octets past the end
		0xe8, 0x00, 0x00, 0x01,
	}},
	// go-pfcp reads an IE header that ends what holds it as an IE without
	// a value, whatever its length says.
	{name: "IE header ending the message", reason: "undecodable", datagram: []byte{
		0x20,       // version 1
		0x01,       // Heartbeat Request
		0x00, 0x10, // length 16
		0x00, 0x00, 0x01, 0x00, // sequence number 1, spare
		0x00, 0x60, 0x00, 0x04, 0xe8, 0x00, 0x00, 0x01, // Recovery Time Stamp
		0x00, 0x60, 0x00, 0x04, // Recovery Time Stamp, length 4: its value missing
	}},
	{name: "IE header ending a grouped IE", reason: "undecodable", datagram: []byte{
		0x21,       // version 1, S flag
		0x36,       // Session Deletion Request
		0x00, 0x14, // length 20
		0, 0, 0, 0, 0, 0, 0, 1, // SEID
		0x00, 0x00, 0x01, 0x00, // sequence number 1, spare
		0x00, 0x01, 0x00, 0x04, // Create PDR, length 4:
		0x00, 0x38, 0x00, 0x02, // PDR ID, length 2: its value missing
	}},
	{name: "unexpected response", reason: "unmatched_response", datagram: reply(wire{seq: 5}, heartbeatResponse)},
}

// sendDropped sends datagrams the server drops, each followed by a
// heartbeat: datagrams are served in order, so once the heartbeat is
// answered the datagram was dropped. The pacing also keeps the socket
// buffer from overflowing.
func (m *smf) sendDropped(datagrams [][]byte) {
	m.t.Helper()
	for i, d := range datagrams {
		m.send(d)
		m.exchange(heartbeatRequest(byte(i), smfRecovery)).check(m.t, message.MsgTypeHeartbeatResponse, uint32(i), nil)
	}
}

func TestGarbageIsCountedAndDropped(t *testing.T) {
	s, rec := startServer(t, nil)
	m := newSMF(t, s.Addr())

	var garbage [][]byte
	random := rand.New(rand.NewPCG(1, 2))
	for range 100 {
		b := make([]byte, random.IntN(200))
		for i := range b {
			b[i] = byte(random.Uint32())
		}
		garbage = append(garbage, b)
	}
	for _, c := range malformed {
		garbage = append(garbage, c.datagram)
	}
	m.sendDropped(garbage)

	st := s.Stats()
	want := Stats{Truncated: 3, BadLength: 4, BadVersion: 1, BadHeader: 1, UnknownType: 1, Undecodable: 3, UnmatchedResponses: 1}
	dropped := st.Truncated + st.BadLength + st.BadVersion + st.BadHeader + st.UnknownType + st.Undecodable + st.UnmatchedResponses
	if st.Received != 2*uint64(len(garbage)) || dropped != uint64(len(garbage)) || st.Panics != 0 ||
		st.Truncated < want.Truncated || st.BadLength < want.BadLength || st.BadVersion < want.BadVersion ||
		st.BadHeader < want.BadHeader || st.UnknownType < want.UnknownType || st.Undecodable < want.Undecodable ||
		st.UnmatchedResponses < want.UnmatchedResponses {
		t.Errorf("stats %+v, want at least %+v", st, want)
	}
	if rec.String() != "[]" {
		t.Errorf("handler called: %v", rec)
	}
}

func TestLargestDatagramIsServed(t *testing.T) {
	s, _ := startServer(t, nil)
	b := make([]byte, maxUDPv4)
	copy(b, heartbeatRequest(3, smfRecovery))
	binary.BigEndian.PutUint16(b[2:4], maxUDPv4-4) // length: all after the first 4 octets
	// The rest is one IE of an unassigned type, which go-pfcp keeps aside.
	binary.BigEndian.PutUint16(b[16:18], 0x7fff)        // IE type 32767
	binary.BigEndian.PutUint16(b[18:20], maxUDPv4-16-4) // IE length: the rest
	newSMF(t, s.Addr()).exchange(b).check(t, message.MsgTypeHeartbeatResponse, 3, nil)
}

func TestBundledMessages(t *testing.T) {
	s, _ := startServer(t, nil)
	m := newSMF(t, s.Addr())
	first := heartbeatRequest(1, smfRecovery)
	first[0] |= 0x04 // FO: another message follows (§7.2.2.1)
	m.send(cat(first, heartbeatRequest(2, smfRecovery)))
	parseWire(t, m.recv()).check(t, message.MsgTypeHeartbeatResponse, 1, nil)
	parseWire(t, m.recv()).check(t, message.MsgTypeHeartbeatResponse, 2, nil)
}

// A request of another PFCP version gets a Version Not Supported Response
// (§7.4.4.7) with its sequence number, and reaches no handler.
func TestOtherVersionIsNotSupported(t *testing.T) {
	s, rec := startServer(t, nil)
	m := newSMF(t, s.Addr())
	for _, c := range []struct {
		name    string
		request []byte
		seq     uint32
	}{
		{name: "version 2 Heartbeat Request", request: []byte{
			0x40,       // version 2
			0x01,       // Heartbeat Request
			0x00, 0x04, // length 4
			0x0a, 0x0b, 0x0c, 0x00, // sequence number, spare
		}, seq: 0x0a0b0c},
		{name: "version 3 Session Deletion Request", request: []byte{
			0x61,       // version 3, S flag
			0x36,       // Session Deletion Request
			0x00, 0x0c, // length 12
			0, 0, 0, 0, 0, 0, 0, 9, // SEID
			0x00, 0x01, 0x02, 0x00, // sequence number, spare
		}, seq: 0x000102},
	} {
		got := m.exchange(c.request)
		got.check(t, message.MsgTypeVersionNotSupportedResponse, c.seq, nil)
		if len(got.raw) != 8 || got.hasSEID {
			t.Errorf("%s: response % x, want a bare node header", c.name, got.raw)
		}
	}
	if st := s.Stats(); st.BadVersion != 2 {
		t.Errorf("stats %+v, want 2 of another version", st)
	}
	if rec.String() != "[]" {
		t.Errorf("handler called: %v", rec)
	}
}
