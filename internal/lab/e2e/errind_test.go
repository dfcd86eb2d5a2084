package e2e

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/demo/demotest"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// A G-PDU to a TEID no session has, sent by the gNB through the UPF's XDP
// program, is answered with an Error Indication (TS 29.281 §7.3.1) to the
// gNB's GTP-U port, naming the TEID and the UPF's N3 address, and the
// G-PDU's source port when not 2152; a G-PDU of the session is not, until
// the session is deleted. A flood of unknown TEIDs gets no more Error
// Indications than the rate, and the data path drops what it does not
// pass up.
func TestUnknownTEIDGetsErrorIndication(t *testing.T) {
	const rate = 3
	tb := demotest.Testbed(t)
	// The gNB's stack takes the Error Indications: no sink may drop them.
	if err := tb.GNBSink.Close(); err != nil {
		t.Fatal(err)
	}
	tb.GNBSink = nil
	cfg := pfcpConfig(t, tb, uePool)
	cfg.Datapath.ErrorIndicationRate = rate
	client, stop := startDaemon(t, cfg)
	defer stop()
	smf := associatedSMF(t, cfg)
	sess, err := smf.EstablishPDUSession(0x5eed, demo.GNBAddr, demo.DownlinkTEID, demo.QFI)
	if err != nil {
		t.Fatal(err)
	}
	gnb := gnbSocket(t, tb)
	var other *net.UDPConn
	if err := tb.GNB.Do(func() (err error) {
		other, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(demo.GNBAddr, 0)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	n3 := netip.AddrPortFrom(demo.N3Addr, gtpuPort)
	gpdu := func(conn *net.UDPConn, teid uint32) {
		t.Helper()
		g := &layers.GTPv1U{Version: 1, ProtocolType: 1, MessageType: 255, TEID: teid, ExtensionHeaderFlag: true,
			GTPExtensionHeaders: []layers.GTPExtensionHeader{{Type: 0x85, Content: []byte{demo.ULPDUSession, demo.QFI}}}}
		if _, err := conn.WriteToUDPAddrPort(demo.Serialize(false, g, gopacket.Payload(demo.UEPacket(sess.UE, demo.DNAddr, true, demo.UETTL))), n3); err != nil {
			t.Fatal(err)
		}
	}

	// The first that arrives answers the unknown TEID: the gNB would get
	// the known one's first.
	const unknown = 0xdead0001
	gpdu(gnb, sess.TEID)
	gpdu(gnb, unknown)
	expectErrorIndication(t, gnb, unknown, gtpuPort)
	otherPort := uint16(other.LocalAddr().(*net.UDPAddr).Port)
	gpdu(other, unknown+1)
	expectErrorIndication(t, gnb, unknown+1, otherPort)

	time.Sleep(time.Second) // a second of its own for the flood
	start := time.Now()
	const flood = 50
	for i := range uint32(flood) {
		gpdu(gnb, unknown+2+i)
	}
	var answered int
	for {
		if _, _, err := testsupport.ReceiveGTPU(gnb, 500*time.Millisecond); err != nil {
			break
		}
		answered++
	}
	seconds := int(time.Since(start)/time.Second) + 1
	if answered == 0 || answered > rate*seconds {
		t.Errorf("%d Error Indications for %d G-PDUs to unknown TEIDs in %d s, want 1 to %d a second", answered, flood, seconds, rate)
	}
	// Every G-PDU to an unknown TEID counts as drop_unknown_teid, whether
	// passed up or dropped; more were passed up than answered, fewer than
	// all.
	if got := reasonPackets(t, client, demo.N3, "drop_unknown_teid"); got != flood+2 {
		t.Errorf("drop_unknown_teid counted %d, want %d", got, flood+2)
	}
	scrape := metrics(t, client)
	sent := metricValue(t, scrape, "xdp5g_gtpu_error_indications_sent_total")
	if want := uint64(answered + 2); sent != want {
		t.Errorf("xdp5g_gtpu_error_indications_sent_total %d, want %d", sent, want)
	}
	if passed := metricValue(t, scrape, "xdp5g_upf_unknown_teid_passed_total"); passed < sent || passed >= flood+2 {
		t.Errorf("xdp5g_upf_unknown_teid_passed_total %d, want %d to %d", passed, sent, flood+1)
	}
	t.Logf("%d Error Indications for the flood of %d", answered, flood)
	if forwarded := reasonPackets(t, client, demo.N3, "uplink_forward"); forwarded != 1 {
		t.Errorf("%d G-PDUs of the session forwarded, want 1", forwarded)
	}

	// The TEID of a session just deleted is unknown at once.
	if err := smf.Delete(sess.SEID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // past the flood's second
	gpdu(gnb, sess.TEID)
	expectErrorIndication(t, gnb, sess.TEID, gtpuPort)
}

// expectErrorIndication reads the Error Indication for a G-PDU to teid at
// the UPF's N3 address from srcPort: from the N3 address's GTP-U port,
// TEID 0 with a sequence number, the TEID Data I (§8.3) and GTP-U Peer
// Address (§8.4) IEs, and a UDP Port extension header (§5.2.2.1) naming
// srcPort unless it is 2152.
func expectErrorIndication(t *testing.T, gnb *net.UDPConn, teid uint32, srcPort uint16) {
	t.Helper()
	g, from, err := testsupport.ReceiveGTPU(gnb, 5*time.Second)
	if err != nil {
		t.Fatalf("no Error Indication for TEID %#x: %v", teid, err)
	}
	ies := binary.BigEndian.AppendUint32([]byte{16}, teid)
	ies = append(append(ies, 133, 0, 4), demo.N3Addr.AsSlice()...)
	var ext []layers.GTPExtensionHeader
	if srcPort != gtpuPort {
		ext = []layers.GTPExtensionHeader{{Type: 0x40, Content: binary.BigEndian.AppendUint16(nil, srcPort)}}
	}
	extOK := len(g.GTPExtensionHeaders) == len(ext)
	for i := range ext {
		extOK = extOK && g.GTPExtensionHeaders[i].Type == ext[i].Type && bytes.Equal(g.GTPExtensionHeaders[i].Content, ext[i].Content)
	}
	if from != netip.AddrPortFrom(demo.N3Addr, gtpuPort) || g.MessageType != 26 || g.TEID != 0 || !g.SequenceNumberFlag ||
		!bytes.Equal(g.Payload, ies) || !extOK {
		t.Errorf("from %v: %+v; want an Error Indication from %v:%d with IEs % x and extension headers %+v",
			from, g, demo.N3Addr, gtpuPort, ies, ext)
	}
}

// metricValue is the value of a metric without labels in a scrape of
// /metrics.
func metricValue(t *testing.T, scrape []string, name string) uint64 {
	t.Helper()
	for _, line := range scrape {
		if n, value, ok := strings.Cut(line, " "); ok && n == name {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return uint64(v)
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// Without PFCP the daemon answers a G-PDU to an unknown TEID too. Once it
// stopped, its programs still attached and forwarding, no socket takes
// such a G-PDU: the data path drops it rather than have the kernel answer
// the gNB with an ICMP Port Unreachable from the GTP-U port, which fails
// the next receive of a gNB's connected socket.
func TestNoPortUnreachableWhileStopped(t *testing.T) {
	tb := demotest.Testbed(t)
	if err := tb.GNBSink.Close(); err != nil {
		t.Fatal(err)
	}
	tb.GNBSink = nil
	_, stop := startDaemon(t, daemonConfig(t, tb, ""))
	gnb := gnbSocket(t, tb)
	n3 := netip.AddrPortFrom(demo.N3Addr, gtpuPort)
	var connected *net.UDPConn
	if err := tb.GNB.Do(func() (err error) {
		connected, err = net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(demo.GNBAddr, 0)), net.UDPAddrFromAddrPort(n3))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer connected.Close()
	const unknown = 0xdead0001
	gpdu := demo.Serialize(false, &layers.GTPv1U{Version: 1, ProtocolType: 1, MessageType: 255, TEID: unknown},
		gopacket.Payload(demo.UEPacket(demo.UEAddr, demo.DNAddr, true, demo.UETTL)))
	if _, err := gnb.WriteToUDPAddrPort(gpdu, n3); err != nil {
		t.Fatal(err)
	}
	expectErrorIndication(t, gnb, unknown, gtpuPort)

	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := connected.Write(gpdu); err != nil {
		t.Fatal(err)
	}
	connected.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := connected.Read(make([]byte, 1500)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the gNB's connected socket read %v after a G-PDU to an unknown TEID, want nothing", err)
	}
}
