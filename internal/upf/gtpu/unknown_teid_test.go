package gtpu

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/testsupport"
)

const knownTEID = 0x5e55

// teidKnown knows knownTEID at every address.
func teidKnown(_ netip.Addr, teid uint32) bool { return teid == knownTEID }

// gpduTo is a G-PDU to teid carrying a few octets.
func gpduTo(t *testing.T, teid uint32) []byte {
	return serialize(t, &layers.GTPv1U{MessageType: MsgGPDU, TEID: teid}, []byte{0x45, 0, 0, 20})
}

// expectErrorIndication reads, on the gNB's GTP-U port, the Error
// Indication for a G-PDU to teid at local: from local's GTP-U port,
// TEID 0 and a sequence number, TEID Data I and the GTP-U Peer Address,
// and the G-PDU's source port in a UDP Port extension header unless it was
// the GTP-U port.
func expectErrorIndication(t *testing.T, gnb *net.UDPConn, local netip.Addr, teid uint32, srcPort uint16) {
	t.Helper()
	g, from, err := testsupport.ReceiveGTPU(gnb, timeout)
	if err != nil {
		t.Fatalf("no Error Indication for TEID %#x: %v", teid, err)
	}
	var ext []layers.GTPExtensionHeader
	if srcPort != Port {
		ext = []layers.GTPExtensionHeader{{Type: 0x40, Content: binary.BigEndian.AppendUint16(nil, srcPort)}}
	}
	want := append(teidDataI(teid), peerAddress(local)...)
	if from != netip.AddrPortFrom(local, Port) || g.MessageType != MsgErrorIndication || g.TEID != 0 ||
		!g.SequenceNumberFlag || !bytes.Equal(g.Payload, want) || len(g.GTPExtensionHeaders) != len(ext) ||
		len(ext) == 1 && (g.GTPExtensionHeaders[0].Type != ext[0].Type || !bytes.Equal(g.GTPExtensionHeaders[0].Content, ext[0].Content)) {
		t.Errorf("from %v: %+v; want an Error Indication from %v:%d with IEs % x and extension headers %+v",
			from, g, local, Port, want, ext)
	}
}

// A G-PDU to a TEID no session has, whole (the data path passed it up),
// is answered with an Error Indication to the gNB's GTP-U port, which
// names the port it came from if another; one to a known TEID is not.
func TestUnknownTEIDAnswered(t *testing.T) {
	for _, tc := range []struct {
		name     string
		bits     int
		gnb, upf netip.Addr
	}{
		{"IPv4", 24, gnbAddr, n3Addr},
		{"IPv6", 64, netip.MustParseAddr("2001:db8:205::1"), netip.MustParseAddr("2001:db8:205::2")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newN3Of(t, tc.bits, tc.gnb, tc.upf)
			e := l.open(t, Config{Local: []netip.Addr{tc.upf}, TEIDKnown: teidKnown, ErrorIndicationRate: 10})
			gnb, other := l.gnbSocket(t, Port), l.gnbSocket(t, 0)
			to := netip.AddrPortFrom(tc.upf, Port)
			// Handled in order: an answer to the known TEID would come first.
			for _, teid := range []uint32{knownTEID, 0xbad} {
				if _, err := gnb.WriteToUDPAddrPort(gpduTo(t, teid), to); err != nil {
					t.Fatal(err)
				}
			}
			expectErrorIndication(t, gnb, tc.upf, 0xbad, Port)
			if _, err := other.WriteToUDPAddrPort(gpduTo(t, 0xbad2), to); err != nil {
				t.Fatal(err)
			}
			expectErrorIndication(t, gnb, tc.upf, 0xbad2, uint16(other.LocalAddr().(*net.UDPAddr).Port))
			waitStats(t, e, func(s Stats) bool { return s.ErrorIndicationsSent == 2 && s.Received[MsgGPDU] == 3 })
		})
	}
}

// A flood of G-PDUs to unknown TEIDs gets as many Error Indications a
// second as the rate says; the others are counted as suppressed. A rate of
// 0 sends none.
func TestErrorIndicationRate(t *testing.T) {
	l := newN3(t)
	const rate, flood = 3, 20
	e := l.open(t, Config{Local: []netip.Addr{n3Addr}, TEIDKnown: teidKnown, ErrorIndicationRate: rate})
	gnb := l.gnbSocket(t, Port)
	start := time.Now()
	for teid := range uint32(flood) {
		send(t, gnb, gpduTo(t, 0x1000+teid))
	}
	waitStats(t, e, func(s Stats) bool { return s.Received[MsgGPDU] == flood })
	s := e.Stats()
	seconds := uint64(time.Since(start)/time.Second) + 1 // normally 1: the flood takes milliseconds
	if s.ErrorIndicationsSent < rate || s.ErrorIndicationsSent > rate*seconds || s.ErrorIndicationsSent+s.ErrorIndicationsSuppressed != flood {
		t.Errorf("%d sent and %d suppressed of %d in %d s; want %d a second", s.ErrorIndicationsSent, s.ErrorIndicationsSuppressed, flood, seconds, rate)
	}
	for range s.ErrorIndicationsSent {
		if _, _, err := testsupport.ReceiveGTPU(gnb, timeout); err != nil {
			t.Fatal(err)
		}
	}
	if g, _, err := testsupport.ReceiveGTPU(gnb, 200*time.Millisecond); err == nil {
		t.Errorf("more than the %d counted sent: %+v", s.ErrorIndicationsSent, g)
	}

	off := newN3(t)
	e = off.open(t, Config{Local: []netip.Addr{n3Addr}, TEIDKnown: teidKnown})
	gnb = off.gnbSocket(t, Port)
	send(t, gnb, gpduTo(t, 0xbad))
	waitStats(t, e, func(s Stats) bool { return s.Received[MsgGPDU] == 1 })
	if g, _, err := testsupport.ReceiveGTPU(gnb, 200*time.Millisecond); err == nil {
		t.Errorf("an Error Indication at rate 0: %+v", g)
	}
}

// waitStats waits until the endpoint's stats are done.
func waitStats(t *testing.T, e *Endpoint, done func(Stats) bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !done(e.Stats()); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v", e.Stats())
		}
	}
}
