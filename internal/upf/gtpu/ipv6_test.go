package gtpu

import (
	"bytes"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// GTP-U signalling over IPv6: Echo Requests answered, Error Indications
// with an IPv6 GTP-U Peer Address reported, End Markers sent and paths
// supervised from an IPv6 N3 address.
func TestSignallingOverIPv6(t *testing.T) {
	gnb6, upf6 := netip.MustParseAddr("2001:db8:203::1"), netip.MustParseAddr("2001:db8:203::2")
	l := newN3Of(t, 64, gnb6, upf6)
	got := make(chan ErrorIndication, 1)
	const interval = 100 * time.Millisecond
	e := l.open(t, Config{Local: []netip.Addr{upf6}, EchoInterval: interval, OnErrorIndication: func(ind ErrorIndication) { got <- ind }})
	gnb := l.gnbSocket(t, Port)
	to := netip.AddrPortFrom(upf6, Port)

	echo := serialize(t, &layers.GTPv1U{MessageType: MsgEchoRequest, SequenceNumberFlag: true, SequenceNumber: 0x6666}, nil)
	if _, err := gnb.WriteToUDPAddrPort(echo, to); err != nil {
		t.Fatal(err)
	}
	g, from, err := testsupport.ReceiveGTPU(gnb, timeout)
	if err != nil || from != to || g.MessageType != MsgEchoResponse || g.SequenceNumber != 0x6666 || !bytes.Equal(g.Payload, recovery) {
		t.Fatalf("Echo Response from %v: %+v, %v", from, g, err)
	}

	peer := netip.MustParseAddr("2001:db8:203::99")
	if _, err := gnb.WriteToUDPAddrPort(errorIndication(t, 0x600d, peer, nil), to); err != nil {
		t.Fatal(err)
	}
	select {
	case ind := <-got:
		if want := (ErrorIndication{From: gnb6, TEID: 0x600d, PeerAddr: peer}); ind != want {
			t.Errorf("got %+v, want %+v", ind, want)
		}
	case <-time.After(timeout):
		t.Fatal("no Error Indication reported")
	}

	if err := e.SendEndMarker(upf6, gnb6, 0xfeed0006); err != nil {
		t.Fatal(err)
	}
	if g, from, err := testsupport.ReceiveGTPU(gnb, timeout); err != nil || from != to || g.MessageType != MsgEndMarker || g.TEID != 0xfeed0006 {
		t.Fatalf("End Marker from %v: %+v, %v", from, g, err)
	}

	if err := e.Watch(Path{Local: upf6, Peer: gnb6}); err != nil {
		t.Fatal(err)
	}
	defer e.Unwatch(Path{Local: upf6, Peer: gnb6})
	if g, from, err := testsupport.ReceiveGTPU(gnb, interval+timeout); err != nil || from != to || g.MessageType != MsgEchoRequest {
		t.Fatalf("Echo Request from %v: %+v, %v", from, g, err)
	}
}

// An IPv6 address still tentative (duplicate address detection under way)
// binds, and serves once the detection is done.
func TestTentativeIPv6AddressBinds(t *testing.T) {
	gnb6, upf6 := netip.MustParseAddr("2001:db8:204::1"), netip.MustParseAddr("2001:db8:204::2")
	l := newN3Of(t, 64, gnb6)
	if out, err := exec.Command("ip", "-n", l.upf.Name, "addr", "add", upf6.String()+"/64", "dev", "n3").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	e := l.open(t, Config{Local: []netip.Addr{upf6}})
	if unbound := e.Unbound(); len(unbound) != 0 {
		t.Fatalf("unbound %v: a tentative address did not bind", unbound)
	}
	gnb, to := l.gnbSocket(t, Port), netip.AddrPortFrom(upf6, Port)
	echo := serialize(t, &layers.GTPv1U{MessageType: MsgEchoRequest, SequenceNumberFlag: true, SequenceNumber: 0x7e7e}, nil)
	for deadline := time.Now().Add(timeout); ; {
		if _, err := gnb.WriteToUDPAddrPort(echo, to); err != nil {
			t.Fatal(err)
		}
		g, from, err := testsupport.ReceiveGTPU(gnb, 200*time.Millisecond)
		if err == nil && from == to && g.MessageType == MsgEchoResponse && g.SequenceNumber == 0x7e7e {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Echo Response from %v once its detection was done: %+v, %v", upf6, g, err)
		}
	}
}
