package e2e

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/demo/demotest"
	"github.com/xdp5g/xdp5g/internal/lab/pfcptest"
)

const (
	gtpuPort = 2152 // TS 29.281 §4.4.2
	// The GTP-U echo of the tests: a path fails about 600 ms after its
	// gNB stops answering.
	echoInterval = 200 * time.Millisecond
	echoRetries  = 3
)

// A gNB's GTP-U Error Indication on N3 reaches the SMF of the session
// whose downlink tunnel it names, in a Session Report Request with Report
// Type ERIR and an Error Indication Report holding the tunnel's remote
// F-TEID; one naming no session's tunnel is reported to no one.
func TestErrorIndicationIsReported(t *testing.T) {
	tb := demotest.Testbed(t)
	smf, _, stop := reportingSMF(t, tb)
	const cpSEID = 0x5eed
	if _, err := smf.EstablishPDUSession(cpSEID, demo.GNBAddr, demo.DownlinkTEID, demo.QFI); err != nil {
		t.Fatal(err)
	}
	gnb := gnbSocket(t, tb)
	n3 := net.UDPAddrFromAddrPort(netip.AddrPortFrom(demo.N3Addr, gtpuPort))
	// The UPF handles them in order: a report of the first would come first.
	for _, teid := range []uint32{demo.DownlinkTEID + 1, demo.DownlinkTEID} {
		if _, err := gnb.WriteToUDP(errorIndication(teid, demo.GNBAddr), n3); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case req := <-smf.Reports():
		// Report Type (§8.2.21): ERIR. Remote F-TEID (§8.2.3): type 21,
		// length 9, V4, the TEID, the address.
		fteid := binary.BigEndian.AppendUint32([]byte{0, 21, 0, 9, 0x01}, demo.DownlinkTEID)
		fteid = append(fteid, demo.GNBAddr.AsSlice()...)
		if req.SEID() != cpSEID || !bytes.Equal(payload(req.ReportType), []byte{0x04}) ||
			!bytes.Equal(payload(req.ErrorIndicationReport), fteid) {
			t.Errorf("Session Report Request for SEID %#x, Report Type % x, Error Indication Report % x; want %#x, 04, % x",
				req.SEID(), payload(req.ReportType), payload(req.ErrorIndicationReport), cpSEID, fteid)
		}
	case <-time.After(reportWait):
		t.Fatalf("no Session Report Request in %v", reportWait)
	}
	if err := stop(); err != nil {
		t.Error(err)
	}
}

// The UPF watches the path to the gNB of a session's downlink tunnel with
// GTP-U echo: while the gNB answers the path stays up; once it stops, the
// SMF receives a Node Report Request with a User Plane Path Failure Report
// naming the gNB, and when it answers again one with a User Plane Path
// Recovery Report.
func TestPathFailureIsReported(t *testing.T) {
	tb := demotest.Testbed(t)
	// The gNB's stack answers the Echo Requests: no sink may drop them.
	if err := tb.GNBSink.Close(); err != nil {
		t.Fatal(err)
	}
	tb.GNBSink = nil
	var answered atomic.Int64
	stopAnswering := answerEchoes(t, tb, &answered)
	smf, _, stop := reportingSMF(t, tb, fmt.Sprintf("gtpu_echo_interval: %s", echoInterval),
		fmt.Sprintf("gtpu_echo_retries: %d", echoRetries))
	if _, err := smf.EstablishPDUSession(0x5eed, demo.GNBAddr, demo.DownlinkTEID, demo.QFI); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(reportWait); answered.Load() <= echoRetries; time.Sleep(echoInterval / 4) {
		if time.Now().After(deadline) {
			t.Fatalf("the gNB answered %d Echo Requests in %v, want more than %d", answered.Load(), reportWait, echoRetries)
		}
	}
	for len(smf.NodeReports()) > 0 {
		if req := <-smf.NodeReports(); namesGNB(req) {
			t.Fatalf("Node Report Type % x about the gNB while it answered", payload(req.NodeReportType))
		}
	}

	stopAnswering()
	const upfr, uprr = 0x01, 0x02 // Node Report Type (§8.2.69)
	if req := gnbNodeReport(t, smf, "the path failure"); !bytes.Equal(payload(req.NodeReportType), []byte{upfr}) ||
		!bytes.Equal(payload(req.UserPlanePathFailureReport), gnbPeer) {
		t.Errorf("Node Report Type % x, User Plane Path Failure Report % x; want %02x, % x",
			payload(req.NodeReportType), payload(req.UserPlanePathFailureReport), upfr, gnbPeer)
	}
	answerEchoes(t, tb, &answered)
	if req := gnbNodeReport(t, smf, "the path recovery"); !bytes.Equal(payload(req.NodeReportType), []byte{uprr}) ||
		!bytes.Equal(payload(req.UserPlanePathRecoveryReport), gnbPeer) {
		t.Errorf("Node Report Type % x, User Plane Path Recovery Report % x; want %02x, % x",
			payload(req.NodeReportType), payload(req.UserPlanePathRecoveryReport), uprr, gnbPeer)
	}
	if err := stop(); err != nil {
		t.Error(err)
	}
}

// With its N3 endpoint open, a UE pool and a forwarding policy, the UPF
// advertises exactly the UP Function Features it implements.
func TestAssociationAdvertisesFeatures(t *testing.T) {
	tb := demotest.Testbed(t)
	cfg := pfcpConfig(t, tb, uePool, "forwarding_policies: {to-dn: "+demo.DNAddr.String()+"}")
	_, stop := startDaemon(t, cfg)
	resp, err := newSMF(t, cfg).Associate()
	if err != nil {
		t.Fatal(err)
	}
	// Where TS 29.244 §8.2.25 puts each: octet from 5, bit from 1.
	features := []struct {
		name       string
		octet, bit int
	}{
		{name: "BUCP", octet: 5, bit: 1}, {name: "DDND", octet: 5, bit: 2}, {name: "TRST", octet: 5, bit: 4}, {name: "FTUP", octet: 5, bit: 5},
		{name: "EMPU", octet: 6, bit: 1}, {name: "UEIP", octet: 7, bit: 3}, {name: "MNOP", octet: 7, bit: 5}, {name: "VTIME", octet: 8, bit: 3},
	}
	got := payload(resp.UPFunctionFeatures)
	want := make([]byte, max(len(got), 4))
	for _, f := range features {
		i, mask := f.octet-5, byte(1)<<(f.bit-1)
		want[i] |= mask
		if i >= len(got) || got[i]&mask == 0 {
			t.Errorf("%s not advertised", f.name)
		}
	}
	if !bytes.Equal(got, want) {
		t.Errorf("UP Function Features % x, want % x", got, want)
	}
	if err := stop(); err != nil {
		t.Error(err)
	}
}

// payload is an IE's value, nil for none.
func payload(i *ie.IE) []byte {
	if i == nil {
		return nil
	}
	return i.Payload
}

// errorIndication is a gNB's Error Indication (TS 29.281 §7.3.1) for a
// G-PDU that came to it on teid at its address peer: TEID 0, a sequence
// number, the UDP Port extension header (§5.2.2.1) with the G-PDU's
// source port, and the TEID Data I (§8.3, TV) and GTP-U Peer Address
// (§8.4, TLV) IEs.
func errorIndication(teid uint32, peer netip.Addr) []byte {
	ies := binary.BigEndian.AppendUint32([]byte{16}, teid)
	ies = append(append(ies, 133, 0, byte(len(peer.AsSlice()))), peer.AsSlice()...)
	const udpPort = 0x40
	gtp := &layers.GTPv1U{Version: 1, ProtocolType: 1, MessageType: 26, SequenceNumberFlag: true,
		GTPExtensionHeaders: []layers.GTPExtensionHeader{{Type: udpPort, Content: binary.BigEndian.AppendUint16(nil, gtpuPort)}}}
	return demo.Serialize(false, gtp, gopacket.Payload(ies))
}

// gnbSocket is a socket of the gNB's stack on its GTP-U port, closed when
// the test ends.
func gnbSocket(t *testing.T, tb *demo.Testbed) *net.UDPConn {
	t.Helper()
	// The gNB's sink drops ARP replies too.
	if err := tb.GNB.SetNeigh(demo.N3, demo.N3Addr.String(), tb.N3MAC); err != nil {
		t.Fatal(err)
	}
	var conn *net.UDPConn
	err := tb.GNB.Do(func() (err error) {
		conn, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(demo.GNBAddr, gtpuPort)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// answerEchoes has the gNB answer Echo Requests, counting them in
// answered, until stop: an Echo Response (TS 29.281 §7.2.2) with the
// request's sequence number and a Recovery IE (§8.2).
func answerEchoes(t *testing.T, tb *demo.Testbed, answered *atomic.Int64) (stop func()) {
	conn := gnbSocket(t, tb)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return // closed
			}
			if n < 12 || buf[0]&0x02 == 0 || buf[1] != 1 { // an Echo Request has a sequence number
				continue
			}
			if _, err := conn.WriteToUDPAddrPort([]byte{0x32, 2, 0, 6, 0, 0, 0, 0, buf[8], buf[9], 0, 0, 14, 0}, from); err == nil {
				answered.Add(1)
			}
		}
	}()
	return func() {
		conn.Close()
		<-done
	}
}

// gnbPeer is how path reports name the gNB: a Remote GTP-U Peer (TS 29.244
// §8.2.70), type 103, length 5, V4, the address.
var gnbPeer = append([]byte{0, 103, 0, 5, 0x02}, demo.GNBAddr.AsSlice()...)

// namesGNB tells whether a Node Report Request is about the path to the
// gNB. The sessions of pfcptest.PDUSessionRequest also tunnel to the SMF's
// own address (FAR 3, N4-u), a path that nothing answers here.
func namesGNB(req *message.NodeReportRequest) bool {
	return bytes.Equal(payload(req.UserPlanePathFailureReport), gnbPeer) ||
		bytes.Equal(payload(req.UserPlanePathRecoveryReport), gnbPeer)
}

// gnbNodeReport is the next Node Report Request about the gNB that the SMF
// receives.
func gnbNodeReport(t *testing.T, smf *pfcptest.SMF, what string) *message.NodeReportRequest {
	t.Helper()
	timeout := time.After(reportWait)
	for {
		select {
		case req := <-smf.NodeReports():
			if namesGNB(req) {
				return req
			}
		case <-timeout:
			t.Fatalf("no Node Report Request about the gNB for %s in %v", what, reportWait)
		}
	}
}
