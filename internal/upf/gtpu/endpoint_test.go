package gtpu

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

var (
	gnbAddr = netip.MustParseAddr("10.203.0.1")
	n3Addr  = netip.MustParseAddr("10.203.0.2")
	n3Addr2 = netip.MustParseAddr("10.203.0.3")
)

const timeout = 5 * time.Second // for what must happen, on a loaded machine

// n3 is a gNB and a UPF namespace joined by a veth pair, with no XDP: the
// kernel delivers GTP-U to the sockets as the data path's XDP_PASS would.
type n3 struct {
	gnb, upf *namespace.Netns
	gnbAddr  netip.Addr
}

func newN3(t *testing.T) n3 { return newN3Of(t, 24, gnbAddr, n3Addr, n3Addr2) }

// newN3Of is newN3 with the gNB's address and the UPF's, of a subnet of
// bits.
func newN3Of(t *testing.T, bits int, gnb netip.Addr, upf ...netip.Addr) n3 {
	l := n3{gnb: testsupport.Netns(t, "gtpu-gnb"), upf: testsupport.Netns(t, "gtpu-upf"), gnbAddr: gnb}
	errs := []error{namespace.Veth(l.gnb, "n3", l.upf, "n3"), l.gnb.AddAddr("n3", netip.PrefixFrom(gnb, bits).String())}
	for _, a := range upf {
		errs = append(errs, l.upf.AddAddr("n3", netip.PrefixFrom(a, bits).String()))
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// open opens an endpoint in the UPF namespace.
func (l n3) open(t *testing.T, cfg Config) *Endpoint {
	var e *Endpoint
	err := l.upf.Do(func() (err error) {
		e, err = Open(cfg)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// gnbSocket is a plain UDP socket of the gNB, at port 0 for an ephemeral
// one.
func (l n3) gnbSocket(t *testing.T, port uint16) *net.UDPConn {
	var conn *net.UDPConn
	err := l.gnb.Do(func() (err error) {
		conn, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(l.gnbAddr, port)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func send(t *testing.T, conn *net.UDPConn, b []byte) {
	t.Helper()
	if _, err := conn.WriteToUDPAddrPort(b, netip.AddrPortFrom(n3Addr, Port)); err != nil {
		t.Fatal(err)
	}
}

func TestErrorIndication(t *testing.T) {
	l := newN3(t)
	got := make(chan ErrorIndication, 1)
	e := l.open(t, Config{Local: []netip.Addr{n3Addr}, OnErrorIndication: func(ind ErrorIndication) { got <- ind }})
	gnb := l.gnbSocket(t, Port)

	// Datagrams are handled in order: when the valid one has been
	// reported, the malformed ones before it have been counted.
	for _, b := range malformed {
		send(t, gnb, b)
	}
	peer := netip.MustParseAddr("10.203.9.9")
	send(t, gnb, errorIndication(t, 0x1234abcd, peer, udpPortExtension))
	select {
	case ind := <-got:
		if want := (ErrorIndication{From: gnbAddr, TEID: 0x1234abcd, PeerAddr: peer}); ind != want {
			t.Errorf("got %+v, want %+v", ind, want)
		}
	case <-time.After(timeout):
		t.Fatal("no Error Indication reported")
	}
	s := e.Stats()
	if s.Malformed != uint64(len(malformed)) || s.Received[MsgErrorIndication] != 1 {
		t.Errorf("stats %+v, want %d malformed and 1 Error Indication", s, len(malformed))
	}
}

// A flood of Error Indications (a gNB that lost its contexts answers every
// G-PDU with one) is counted and reported, each, but logged at debug level
// only: nothing at INFO.
func TestErrorIndicationFloodIsNotLogged(t *testing.T) {
	l := newN3(t)
	const flood = 200
	got := make(chan ErrorIndication, flood)
	var logged bytes.Buffer // written before each report: read once all are in
	e := l.open(t, Config{Local: []netip.Addr{n3Addr}, OnErrorIndication: func(ind ErrorIndication) { got <- ind },
		Log: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	gnb := l.gnbSocket(t, Port)
	for teid := range uint32(flood) {
		send(t, gnb, errorIndication(t, teid+1, gnbAddr, nil))
	}
	for n := range flood {
		select {
		case <-got:
		case <-time.After(timeout):
			t.Fatalf("%d of %d Error Indications reported", n, flood)
		}
	}
	if s := e.Stats(); s.Received[MsgErrorIndication] != flood {
		t.Errorf("%d Error Indications counted, want %d", s.Received[MsgErrorIndication], flood)
	}
	if logged.Len() != 0 {
		t.Errorf("logged at INFO:\n%s", logged.String())
	}
}

// An End Marker that reaches an N3 address names the tunnel it ends: its
// TEID at that address.
func TestEndMarkerReceived(t *testing.T) {
	l := newN3(t)
	got := make(chan EndMarker, 1)
	l.open(t, Config{Local: []netip.Addr{n3Addr}, OnEndMarker: func(m EndMarker) { got <- m }})
	send(t, l.gnbSocket(t, Port), serialize(t, &layers.GTPv1U{MessageType: MsgEndMarker, TEID: 0x1234abcd}, nil))
	select {
	case m := <-got:
		if want := (EndMarker{Local: n3Addr, TEID: 0x1234abcd}); m != want {
			t.Errorf("got %+v, want %+v", m, want)
		}
	case <-time.After(timeout):
		t.Fatal("no End Marker reported")
	}
}

// TestEchoRequest: one that the data path passed up is answered, to the
// port it came from.
func TestEchoRequest(t *testing.T) {
	l := newN3(t)
	e := l.open(t, Config{Local: []netip.Addr{n3Addr}})
	gnb := l.gnbSocket(t, 0)
	send(t, gnb, serialize(t, &layers.GTPv1U{MessageType: MsgEchoRequest, SequenceNumberFlag: true, SequenceNumber: 0x4242}, nil))
	g, from, err := testsupport.ReceiveGTPU(gnb, timeout)
	if err != nil {
		t.Fatal(err)
	}
	if from != netip.AddrPortFrom(n3Addr, Port) || g.MessageType != MsgEchoResponse || !g.SequenceNumberFlag ||
		g.SequenceNumber != 0x4242 || g.TEID != 0 || !bytes.Equal(g.Payload, recovery) {
		t.Errorf("from %v: %+v", from, g)
	}
	// The response is counted once sent: it may arrive first.
	for deadline := time.Now().Add(timeout); ; time.Sleep(time.Millisecond) {
		s := e.Stats()
		if s.Received[MsgEchoRequest] == 1 && s.EchoResponsesSent == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v", s)
		}
	}
}

// An address that cannot be bound (another socket holds its port) has no
// socket and says why; the others serve as if it were not there.
func TestAddressBindsOnItsOwn(t *testing.T) {
	l := newN3Of(t, 24, gnbAddr, n3Addr, n3Addr2)
	taken := n3Addr2
	var holder *net.UDPConn
	if err := l.upf.Do(func() (err error) {
		holder, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(taken, Port)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	got := make(chan ErrorIndication, 1)
	e := l.open(t, Config{Local: []netip.Addr{taken, n3Addr}, OnErrorIndication: func(ind ErrorIndication) { got <- ind }})
	unbound := e.Unbound()
	if err := unbound[taken]; len(unbound) != 1 || !errors.Is(err, unix.EADDRINUSE) {
		t.Errorf("unbound %v, want %v alone, in use", unbound, taken)
	}

	gnb := l.gnbSocket(t, Port)
	send(t, gnb, serialize(t, &layers.GTPv1U{MessageType: MsgEchoRequest, SequenceNumberFlag: true, SequenceNumber: 7}, nil))
	if g, from, err := testsupport.ReceiveGTPU(gnb, timeout); err != nil || g.MessageType != MsgEchoResponse || from != netip.AddrPortFrom(n3Addr, Port) {
		t.Errorf("the Echo Request to %v: %+v from %v, %v", n3Addr, g, from, err)
	}
	send(t, gnb, errorIndication(t, 0x99, n3Addr, udpPortExtension))
	select {
	case <-got:
	case <-time.After(timeout):
		t.Error("no Error Indication reported")
	}
	if err := e.SendEndMarker(n3Addr, gnbAddr, 0x77); err != nil {
		t.Error(err)
	}
	if g, _, err := testsupport.ReceiveGTPU(gnb, timeout); err != nil || g.MessageType != MsgEndMarker || g.TEID != 0x77 {
		t.Errorf("End Marker from %v: %+v, %v", n3Addr, g, err)
	}

	// From the unbound address nothing goes out: an End Marker fails
	// naming it, a path is not supervised and is no error.
	if err := e.SendEndMarker(taken, gnbAddr, 0x77); err == nil || !strings.Contains(err.Error(), taken.String()) {
		t.Errorf("End Marker from %v: %v", taken, err)
	}
	if err := e.Watch(Path{Local: taken, Peer: gnbAddr}); err != nil {
		t.Error(err)
	}
	if err := e.Watch(Path{Local: netip.MustParseAddr("10.203.0.10"), Peer: gnbAddr}); err == nil {
		t.Error("a path from an address not of the endpoint watched")
	}
}

// An address on no interface yet (a virtual address that keepalived or a
// Kubernetes service adds later) binds all the same, and once it is added
// the endpoint answers Echo Requests to it, reports Error Indications,
// sends End Markers from it and takes the G-PDUs the kernel put together
// from fragments, over IPv4 and IPv6.
func TestAddressBindsBeforeItIsLocal(t *testing.T) {
	for _, c := range []struct {
		bits       int
		gnb, local netip.Addr
	}{
		{24, gnbAddr, netip.MustParseAddr("10.203.0.7")},
		{64, netip.MustParseAddr("2001:db8:203::1"), netip.MustParseAddr("2001:db8:203::7")},
	} {
		t.Run(c.local.String(), func(t *testing.T) {
			l := newN3Of(t, c.bits, c.gnb)
			indications, gpdus := make(chan ErrorIndication, 1), make(chan int, 1)
			e := l.open(t, Config{Local: []netip.Addr{c.local},
				OnErrorIndication: func(ind ErrorIndication) { indications <- ind },
				OnGPDU:            func(_ netip.Addr, _ netip.AddrPort, _ int, datagram []byte) { gpdus <- len(datagram) }})
			if unbound := e.Unbound(); len(unbound) != 0 {
				t.Fatalf("unbound %v: an address on no interface yet did not bind", unbound)
			}
			if err := l.upf.AddAddr("n3", netip.PrefixFrom(c.local, c.bits).String()); err != nil {
				t.Fatal(err)
			}

			gnb, to := l.gnbSocket(t, Port), netip.AddrPortFrom(c.local, Port)
			sendTo := func(b []byte) {
				t.Helper()
				if _, err := gnb.WriteToUDPAddrPort(b, to); err != nil {
					t.Fatal(err)
				}
			}
			sendTo(serialize(t, &layers.GTPv1U{MessageType: MsgEchoRequest, SequenceNumberFlag: true, SequenceNumber: 0x7777}, nil))
			if g, from, err := testsupport.ReceiveGTPU(gnb, timeout); err != nil || from != to || g.MessageType != MsgEchoResponse || g.SequenceNumber != 0x7777 {
				t.Fatalf("Echo Response from %v: %+v, %v", from, g, err)
			}
			sendTo(errorIndication(t, 0x1007, c.gnb, nil))
			select {
			case ind := <-indications:
				if ind.TEID != 0x1007 {
					t.Errorf("Error Indication %+v", ind)
				}
			case <-time.After(timeout):
				t.Error("no Error Indication reported")
			}
			if err := e.SendEndMarker(c.local, c.gnb, 0x1008); err != nil {
				t.Fatal(err)
			}
			if g, from, err := testsupport.ReceiveGTPU(gnb, timeout); err != nil || from != to || g.MessageType != MsgEndMarker || g.TEID != 0x1008 {
				t.Fatalf("End Marker from %v: %+v, %v", from, g, err)
			}
			// Three fragments on the veth's 1500-octet MTU.
			gpdu := serialize(t, &layers.GTPv1U{MessageType: MsgGPDU, TEID: 0x1009}, make([]byte, 4000))
			sendTo(gpdu)
			select {
			case n := <-gpdus:
				if n != len(gpdu) {
					t.Errorf("a G-PDU of %d octets put together, want %d", n, len(gpdu))
				}
			case <-time.After(timeout):
				t.Error("the fragmented G-PDU was not taken")
			}
		})
	}
}

// gNB behaviours towards Echo Requests in TestPathSupervision.
const (
	answer         = iota
	answerWrongSeq // as if to some other request
)

// echoSeen is an Echo Request as the gNB saw it.
type echoSeen struct {
	seq      uint16
	at       time.Time
	answered bool
}

func TestPathSupervision(t *testing.T) {
	const interval, retries = 150 * time.Millisecond, 3
	l := newN3(t)
	failures, recoveries := make(chan time.Time, 4), make(chan Path, 4)
	path := Path{Local: n3Addr, Peer: gnbAddr}
	e := l.open(t, Config{
		Local:        []netip.Addr{n3Addr},
		EchoInterval: interval,
		EchoRetries:  retries,
		OnPathFailure: func(p Path) {
			if p != path {
				t.Errorf("%v failed, want %v", p, path)
			}
			failures <- time.Now()
		},
		OnPathRecovery: func(p Path) { recoveries <- p },
	})
	gnb := l.gnbSocket(t, Port)

	var behaviour atomic.Int32 // answer or answerWrongSeq
	requests := make(chan echoSeen, 1000)
	gnbDone := make(chan struct{})
	go func() {
		defer close(gnbDone)
		for {
			g, from, err := testsupport.ReceiveGTPU(gnb, time.Hour)
			if err != nil {
				return // closed
			}
			at := time.Now()
			if from != netip.AddrPortFrom(n3Addr, Port) || g.MessageType != MsgEchoRequest || !g.SequenceNumberFlag || g.TEID != 0 {
				t.Errorf("not an Echo Request from %v: %v: %+v", n3Addr, from, g)
				continue
			}
			seq, answered := g.SequenceNumber, behaviour.Load() == answer
			if !answered {
				seq += 1000
			}
			gnb.WriteToUDPAddrPort(echoResponseFromPeer(t, seq), from)
			requests <- echoSeen{seq: g.SequenceNumber, at: at, answered: answered}
		}
	}()
	t.Cleanup(func() { gnb.Close(); <-gnbDone })

	var last echoSeen
	seen := 0
	nextRequest := func() echoSeen {
		t.Helper()
		select {
		case r := <-requests:
			if seen > 0 && r.seq != last.seq+1 {
				t.Errorf("Echo Request %d follows %d", r.seq, last.seq)
			}
			last = r
			seen++
			return r
		case <-time.After(timeout):
			t.Fatal("no Echo Request")
			return echoSeen{}
		}
	}

	if err := e.Watch(path); err != nil {
		t.Fatal(err)
	}
	for range 2 * retries {
		nextRequest()
	}
	if len(failures) > 0 {
		t.Fatal("path failed while the gNB answered")
	}

	// Answers to no request sent do not keep the path up: it fails when
	// the last of EchoRetries requests has had its interval.
	behaviour.Store(answerWrongSeq)
	firstUnanswered := nextRequest()
	for firstUnanswered.answered {
		firstUnanswered = nextRequest()
	}
	select {
	case failed := <-failures:
		if elapsed := failed.Sub(firstUnanswered.at); elapsed < retries*interval-interval/2 || elapsed > retries*interval+interval/2 {
			t.Errorf("path failed %v after the first unanswered Echo Request, want %d intervals of %v", elapsed, retries, interval)
		}
	case <-time.After(timeout):
		t.Fatal("no path failure")
	}
	testsupport.HasLines(t, testsupport.Exposition(t, e.Metrics()), `xdp5g_gtpu_paths{state="failed"} 1`,
		`xdp5g_gtpu_paths{state="up"} 0`, "xdp5g_gtpu_path_failures_total 1", "xdp5g_gtpu_path_recoveries_total 0")

	behaviour.Store(answer)
	select {
	case p := <-recoveries:
		if p != path {
			t.Errorf("%v recovered, want %v", p, path)
		}
	case <-time.After(timeout):
		t.Fatal("no path recovery")
	}

	// Watches are counted: the path stays watched until the last Unwatch.
	if err := e.Watch(path); err != nil {
		t.Fatal(err)
	}
	e.Unwatch(path)
	for len(requests) > 0 {
		nextRequest()
	}
	nextRequest()
	nextRequest()
	e.Unwatch(path)
	time.Sleep(interval / 2) // for a request already on its way
	for len(requests) > 0 {
		nextRequest()
	}
	select {
	case r := <-requests:
		t.Errorf("Echo Request %d after Unwatch", r.seq)
	case <-time.After(3 * interval):
	}

	s := e.Stats()
	if s.PathFailures != 1 || s.PathRecoveries != 1 || s.EchoRequestsSent != uint64(seen) || s.EchoRequestsAnswered == 0 ||
		s.Received[MsgEchoResponse] <= s.EchoRequestsAnswered || s.Malformed != 0 {
		t.Errorf("stats %+v after %d Echo Requests", s, seen)
	}
	metrics := testsupport.Exposition(t, e.Metrics())
	testsupport.HasLines(t, metrics, `xdp5g_gtpu_paths{state="failed"} 0`, `xdp5g_gtpu_paths{state="up"} 0`,
		"xdp5g_gtpu_path_recoveries_total 1", fmt.Sprintf("xdp5g_gtpu_echo_requests_sent_total %d", seen))
	if n, _ := testsupport.Value(metrics, `xdp5g_gtpu_messages_received_total{message_type="echo_response"}`); n != float64(s.Received[MsgEchoResponse]) {
		t.Errorf("%g Echo Responses received, the stats say %d", n, s.Received[MsgEchoResponse])
	}
}

func TestEndMarker(t *testing.T) {
	l := newN3(t)
	e := l.open(t, Config{Local: []netip.Addr{n3Addr, n3Addr2}})
	gnb := l.gnbSocket(t, Port)
	if err := e.SendEndMarker(n3Addr2, gnbAddr, 0xfeed0001); err != nil {
		t.Fatal(err)
	}
	g, from, err := testsupport.ReceiveGTPU(gnb, timeout)
	if err != nil {
		t.Fatal(err)
	}
	if from != netip.AddrPortFrom(n3Addr2, Port) || g.MessageType != MsgEndMarker || g.TEID != 0xfeed0001 ||
		g.MessageLength != 0 || len(g.Payload) != 0 || g.SequenceNumberFlag || g.ExtensionHeaderFlag || g.NPDUFlag {
		t.Errorf("from %v: %+v", from, g)
	}
	if s := e.Stats(); s.EndMarkersSent != 1 {
		t.Errorf("stats %+v", s)
	}

	other := netip.MustParseAddr("10.203.0.99")
	if err := e.SendEndMarker(other, gnbAddr, 1); err == nil {
		t.Error("End Marker sent from an address not the endpoint's")
	}
	if err := e.Watch(Path{Local: other, Peer: gnbAddr}); err == nil {
		t.Error("path watched from an address not the endpoint's")
	}
}
