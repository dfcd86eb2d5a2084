package cuup

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/emmansun/gmsm/cbcmac"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/ran/cellsite"
	"github.com/xdp5g/xdp5g/internal/ran/cuupxdp"
	"github.com/xdp5g/xdp5g/internal/ran/e1"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// The cell site of the end-to-end tests: a UPF, the CU-UP and a DU, each in
// a namespace, N3 and F1-U on veth pairs.
var (
	upfN3  = cellsite.UPFAddr
	cuN3   = cellsite.CUN3Addr
	cuF1U  = cellsite.CUF1UAddr
	duF1U  = cellsite.DUAddr
	encKey = bytes.Repeat([]byte{0x2b}, 16)
	intKey = bytes.Repeat([]byte{0x7e}, 16)
)

const waitFor = 5 * time.Second // for what must arrive, on a loaded machine

type cellSite struct {
	*cellsite.Site
	c       *CUUP
	upfConn *net.UDPConn // the UPF's GTP-U socket
	duConn  *net.UDPConn // the DU's
}

// newCellSite builds the cell site around a CU-UP of cfg, to which it
// gives the addresses.
func newCellSite(t *testing.T, cfg Config) *cellSite {
	t.Helper()
	testsupport.NeedRoot(t, "network namespaces")
	site, err := cellsite.New("cuup")
	check(t, err)
	t.Cleanup(func() { site.Close() })
	s := &cellSite{Site: site}
	cfg.N3, cfg.F1U = cuN3, cuF1U
	s.c, err = New(cfg)
	check(t, err)
	t.Cleanup(s.c.Close)
	s.upfConn = listenIn(t, s.UPF, upfN3)
	s.duConn = listenIn(t, s.DU, duF1U)
	return s
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func listenIn(t *testing.T, ns *namespace.Netns, addr netip.Addr) *net.UDPConn {
	t.Helper()
	conn, err := cellsite.ListenGTPU(ns, addr)
	check(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// path is a CU-UP path, opened.
type path interface {
	Serve(ctx context.Context) error
	Close() error
}

// serve opens a path in the CU-UP's namespace and serves it until the
// test ends.
func (s *cellSite) serve(t *testing.T, open func() (path, error)) {
	t.Helper()
	var p path
	check(t, s.CU.Do(func() (err error) {
		p, err = open()
		return err
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		check(t, p.Close())
	})
}

func (s *cellSite) serveSockets(t *testing.T) {
	s.serve(t, func() (path, error) { return s.c.OpenSockets() })
}

// setup sets up a UE: one PDU session, DRB 1 (QFI 9; SDAP headers both
// ways, 18-bit SNs) and DRB 2 (QFI 5; no SDAP headers, 12-bit SNs), NEA2
// and NIA2, and gives the DU's downlink tunnels.
func (s *cellSite) setup(t *testing.T) (e1.PDUSessionSetup, uint32) {
	t.Helper()
	nia2 := e1.Integrity(2)
	tReordering := uint16(50)
	resp, err := s.c.Setup(e1.BearerContextSetupRequest{CUCPUEID: 1,
		Security: e1.SecurityInformation{Algorithm: e1.SecurityAlgorithm{Ciphering: 2, Integrity: &nia2},
			Key: e1.UPSecurityKey{Encryption: encKey, Integrity: (*e1.Key)(&intKey)}},
		PDUSessions: []e1.PDUSessionToSetup{{ID: 1, Type: e1.IPv4, SNSSAI: e1.SNSSAI{SST: 1},
			SecurityIndication: e1.SecurityIndication{Integrity: e1.Required, Confidentiality: e1.Required},
			ULTunnel:           e1.UPTunnel{Address: upfN3, TEID: 0x5501},
			DRBs: []e1.DRBToSetup{
				{ID: 1, SDAP: e1.SDAPConfiguration{DefaultDRB: true, HeaderUL: true, HeaderDL: true},
					PDCP:     e1.PDCPConfiguration{SNSizeUL: 18, SNSizeDL: 18, RLCMode: e1.RLCAM, TReordering: &tReordering},
					QoSFlows: []e1.QoSFlow{{QFI: 9, FiveQI: 9}}},
				{ID: 2, PDCP: e1.PDCPConfiguration{SNSizeUL: 12, SNSizeDL: 12, RLCMode: e1.RLCUMBidirection},
					QoSFlows: []e1.QoSFlow{{QFI: 5, FiveQI: 5}}},
			}}}})
	check(t, err)
	_, err = s.c.Modify(resp.CUUPUEID, e1.BearerContextModificationRequest{Modify: []e1.PDUSessionToModify{{ID: 1,
		ModifyDRBs: []e1.DRBToModify{{ID: 1, DLTunnel: &e1.UPTunnel{Address: duF1U, TEID: 0xd1}},
			{ID: 2, DLTunnel: &e1.UPTunnel{Address: duF1U, TEID: 0xd2}}}}}})
	check(t, err)
	return resp.PDUSessions[0], resp.CUUPUEID
}

// userPacket is the UE's IP packet number i.
func userPacket(t *testing.T, i int, size int) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, Id: uint16(i),
		SrcIP: net.IPv4(192, 0, 2, 1), DstIP: net.IPv4(10, 45, 0, 7)}
	udp := &layers.UDP{SrcPort: 5000, DstPort: 6000}
	udp.SetNetworkLayerForChecksum(ip)
	check(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		ip, udp, gopacket.Payload(bytes.Repeat([]byte{byte(i)}, size))))
	return buf.Bytes()
}

// gpdu encodes a G-PDU with gopacket, with one extension header if ext is
// not 0.
func gpdu(t *testing.T, teid uint32, ext uint8, content, payload []byte) []byte {
	t.Helper()
	g := &layers.GTPv1U{Version: 1, ProtocolType: 1, MessageType: 255, TEID: teid}
	if ext != 0 {
		g.ExtensionHeaderFlag = true
		g.GTPExtensionHeaders = []layers.GTPExtensionHeader{{Type: ext, Content: content}}
	}
	buf := gopacket.NewSerializeBuffer()
	check(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, g, gopacket.Payload(payload)))
	return buf.Bytes()
}

// downlink is the UPF sending a user packet of QoS flow qfi on N3.
func (s *cellSite) downlink(t *testing.T, teid uint32, qfi uint8, packet []byte) {
	t.Helper()
	msg := gpdu(t, teid, 0x85, []byte{0x00, qfi}, packet) // DL PDU SESSION INFORMATION
	_, err := s.upfConn.WriteToUDPAddrPort(msg, netip.AddrPortFrom(cuN3, 2152))
	check(t, err)
}

// received reads a datagram, or fails the test.
func received(t *testing.T, conn *net.UDPConn) []byte {
	t.Helper()
	buf := make([]byte, 4096)
	conn.SetReadDeadline(time.Now().Add(waitFor))
	n, _, err := conn.ReadFromUDPAddrPort(buf)
	check(t, err)
	return buf[:n]
}

// f1uPDU is a PDCP PDU as the DU read it from an F1-U G-PDU: the tunnel,
// the NR-U SN, and the PDU.
type f1uPDU struct {
	teid  uint32
	nruSN uint32
	pdu   []byte
}

func readF1U(t *testing.T, msg []byte) f1uPDU {
	t.Helper()
	var g layers.GTPv1U
	check(t, g.DecodeFromBytes(msg, gopacket.NilDecodeFeedback))
	if len(g.GTPExtensionHeaders) != 1 || g.GTPExtensionHeaders[0].Type != 0x84 {
		t.Fatalf("F1-U G-PDU with extensions %+v, want one NR RAN Container", g.GTPExtensionHeaders)
	}
	frame := g.GTPExtensionHeaders[0].Content
	if frame[0]>>4 != 0 {
		t.Fatalf("NR-U frame of PDU type %d, want DL USER DATA", frame[0]>>4)
	}
	return f1uPDU{teid: g.TEID, nruSN: uint32(frame[2])<<16 | uint32(frame[3])<<8 | uint32(frame[4]), pdu: g.Payload}
}

// Independent NEA2 and NIA2: AES-CTR from Go's library, AES-CMAC from
// gmsm's, with the inputs of TS 33.401 B.1.3 and B.2.3.

func nea2(count uint32, bearer, dir uint8, data []byte) []byte {
	block, _ := aes.NewCipher(encKey)
	iv := make([]byte, 16)
	binary.BigEndian.PutUint32(iv, count)
	iv[4] = bearer<<3 | dir<<2
	out := make([]byte, len(data))
	cipher.NewCTR(block, iv).XORKeyStream(out, data)
	return out
}

func nia2(count uint32, bearer, dir uint8, msg []byte) []byte {
	block, _ := aes.NewCipher(intKey)
	m := make([]byte, 8, 8+len(msg))
	binary.BigEndian.PutUint32(m, count)
	m[4] = bearer<<3 | dir<<2
	return cbcmac.NewCMAC(block, 16).MAC(append(m, msg...))[:4]
}

// unprotect checks a downlink PDCP PDU of DRB drb and returns its COUNT
// (HFN 0 here) and SDU; sdapHeader: the SDU's first octet is in clear.
func unprotect(t *testing.T, pdu []byte, drb uint8, snBits int, sdapHeader bool) (uint32, []byte) {
	t.Helper()
	hdr := 2
	sn := uint32(pdu[0]&0x0f)<<8 | uint32(pdu[1])
	if snBits == 18 {
		hdr = 3
		sn = uint32(pdu[0]&0x03)<<16 | uint32(pdu[1])<<8 | uint32(pdu[2])
	}
	if pdu[0]&0x80 == 0 {
		t.Fatalf("PDU % x is not a data PDU", pdu[:hdr])
	}
	clear := hdr
	if sdapHeader {
		clear++
	}
	plain := append(bytes.Clone(pdu[:clear]), nea2(sn, drb-1, 1, pdu[clear:])...)
	body, mac := plain[:len(plain)-4], plain[len(plain)-4:]
	if want := nia2(sn, drb-1, 1, body); !bytes.Equal(mac, want) {
		t.Fatalf("COUNT %d: MAC-I % x, want % x", sn, mac, want)
	}
	return sn, body[hdr:]
}

// protect builds an uplink PDCP PDU of DRB 1 (18-bit SN, SDAP header).
func protect(count uint32, sdu []byte) []byte {
	pdu := append([]byte{0x80 | byte(count>>16)&3, byte(count >> 8), byte(count)}, sdu...)
	pdu = append(pdu, nia2(count, 0, 0, pdu)...)
	return append(pdu[:4], nea2(count, 0, 0, pdu[4:])...)
}

// The downlink reaches the DU on each DRB's tunnel, in NR-U and PDCP
// sequence, ciphered and integrity protected as an independent NEA2 and
// NIA2 check; the uplink reaches the UPF in COUNT order with its QoS flow;
// the DU's flow control holds the downlink and lets it go.
func testEndToEnd(t *testing.T, s *cellSite, unknownTunnels func() uint64) {
	session, _ := s.setup(t)
	n3TEID := session.DLTunnel.TEID
	const n = 20
	for i := range n {
		qfi := uint8(9)
		if i%2 == 1 {
			qfi = 5
		}
		s.downlink(t, n3TEID, qfi, userPacket(t, i, 100+i*60))
	}
	next := map[uint32]uint32{} // by DU TEID: the next NR-U SN and COUNT
	for i := range n {
		got := readF1U(t, received(t, s.duConn))
		drb, snBits, sdapHeader := uint8(1), 18, true
		if got.teid == 0xd2 {
			drb, snBits, sdapHeader = 2, 12, false
		} else if got.teid != 0xd1 {
			t.Fatalf("F1-U G-PDU on TEID %#x", got.teid)
		}
		count, sdu := unprotect(t, got.pdu, drb, snBits, sdapHeader)
		if got.nruSN != next[got.teid] || count != next[got.teid] {
			t.Errorf("DRB %d: NR-U SN %d and COUNT %d, want %d", drb, got.nruSN, count, next[got.teid])
		}
		next[got.teid]++
		if sdapHeader {
			if sdu[0] != 9 {
				t.Errorf("DRB 1: SDAP header %#x, want QFI 9", sdu[0])
			}
			sdu = sdu[1:]
		}
		// Each DRB carries its packets in order: the i-th of a DRB is
		// packet 2*(i)+(drb-1).
		want := userPacket(t, int(2*count)+int(drb-1), 100+(int(2*count)+int(drb-1))*60)
		if diff := testsupport.FrameDiff(sdu, want); diff != "" {
			t.Errorf("packet %d: DRB %d delivered %s", i, drb, diff)
		}
	}

	// Uplink on DRB 1: COUNT 1 before COUNT 0, delivered in order; COUNT 4
	// with 3 missing, delivered when t-Reordering (50 ms) expires; 3 then
	// comes too late and is discarded.
	ulTEID := session.DRBs[0].ULTunnel.TEID
	sendUplink := func(count uint32) {
		sdu := append([]byte{0x80 | 9}, userPacket(t, 100+int(count), 80)...) // UL SDAP data header, QFI 9
		_, err := s.duConn.WriteToUDPAddrPort(gpdu(t, ulTEID, 0, nil, protect(count, sdu)), netip.AddrPortFrom(cuF1U, 2152))
		check(t, err)
	}
	for _, count := range []uint32{1, 0, 2, 4} {
		sendUplink(count)
	}
	sent := time.Now()
	for _, count := range []int{0, 1, 2, 4} {
		var g layers.GTPv1U
		check(t, g.DecodeFromBytes(received(t, s.upfConn), gopacket.NilDecodeFeedback))
		if g.TEID != 0x5501 || len(g.GTPExtensionHeaders) != 1 || g.GTPExtensionHeaders[0].Type != 0x85 {
			t.Fatalf("N3 G-PDU %+v", g)
		}
		if c := g.GTPExtensionHeaders[0].Content; c[0]>>4 != 1 || c[1]&0x3f != 9 {
			t.Errorf("PDU Session Container % x, want UL of QFI 9", c)
		}
		if want := userPacket(t, 100+count, 80); !bytes.Equal(g.Payload, want) {
			t.Errorf("uplink %d: % x, want % x", count, g.Payload, want)
		}
	}
	if waited := time.Since(sent); waited < 50*time.Millisecond {
		t.Errorf("COUNT 4 delivered after %v, before t-Reordering expired", waited)
	}
	sendUplink(3)

	// The DU wants 300 octets on DRB 1: a DL DATA DELIVERY STATUS with
	// only the desired buffer size (TS 38.425 5.5.2.2).
	status := func(size uint32) {
		frame := binary.BigEndian.AppendUint32([]byte{0x10, 0x00}, size)
		_, err := s.duConn.WriteToUDPAddrPort(gpdu(t, ulTEID, 0x84, frame, nil), netip.AddrPortFrom(cuF1U, 2152))
		check(t, err)
	}
	status(300)
	// The status is handled before the packets come.
	for deadline := time.Now().Add(waitFor); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		ctx, err := s.c.Get(s.c.List()[0].CUUPUEID)
		check(t, err)
		if ctx.PDUSessions[0].DRBs[0].Stats.StatusReports == 1 {
			break
		}
	}
	for i := range 4 {
		s.downlink(t, n3TEID, 9, userPacket(t, 200+i, 100)) // 128 octets each with IP and UDP
	}
	var counts []uint32
	for range 2 {
		c, _ := unprotect(t, readF1U(t, received(t, s.duConn)).pdu, 1, 18, true)
		counts = append(counts, c)
	}
	s.duConn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, _, err := s.duConn.ReadFromUDPAddrPort(make([]byte, 4096)); err == nil {
		t.Fatal("a third PDU beyond the desired buffer size")
	}
	status(10000)
	for range 2 {
		c, _ := unprotect(t, readF1U(t, received(t, s.duConn)).pdu, 1, 18, true)
		counts = append(counts, c)
	}
	if want := []uint32{10, 11, 12, 13}; !slices.Equal(counts, want) {
		t.Errorf("under flow control COUNTs %v, want %v", counts, want)
	}

	ctx, err := s.c.Get(s.c.List()[0].CUUPUEID)
	check(t, err)
	if st := ctx.PDUSessions[0].DRBs[0].Stats; st.StatusReports != 2 || st.DesiredBuffer != 10000 || st.Queued != 2 ||
		st.UplinkSDUs != 4 || st.PDCPRx.Delivered != 4 || st.PDCPRx.ReorderingTimeouts != 1 || st.PDCPRx.OutOfWindow != 1 ||
		st.PDCPTx.PDUs != 14 || st.DownlinkSDUs != 14 {
		t.Errorf("DRB 1 counted %+v", st)
	}

	// A tunnel of no bearer is counted and goes no further.
	before := unknownTunnels()
	s.downlink(t, n3TEID^0x800000, 9, userPacket(t, 1, 10))
	deadline := time.Now().Add(waitFor)
	for unknownTunnels() == before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := unknownTunnels() - before; n != 1 {
		t.Errorf("unknown tunnel counted %d times", n)
	}
}

func TestEndToEndSockets(t *testing.T) {
	s := newCellSite(t, Config{})
	s.serveSockets(t)
	testEndToEnd(t, s, func() uint64 { return s.c.Stats().UnknownTunnel })
}

// DRBs whose crypto runs on the pool carry the same PDUs, in order.
func TestEndToEndCryptoPool(t *testing.T) {
	s := newCellSite(t, Config{CryptoWorkers: 2, Placement: Pool})
	s.serveSockets(t)
	testEndToEnd(t, s, func() uint64 { return s.c.Stats().UnknownTunnel })
}

func TestEndToEndXDP(t *testing.T) {
	for _, mode := range []xdplink.Mode{xdplink.ModeNative, xdplink.ModeGeneric} {
		t.Run(string(mode), func(t *testing.T) {
			dp, err := cuupxdp.Open(cuupxdp.Config{})
			testsupport.CheckLoad(t, err)
			t.Cleanup(func() { dp.Close() })
			s := newCellSite(t, Config{Tunnels: dp})
			// A queue the veth lacks fails the whole path and leaves
			// nothing behind: the path opens afterwards.
			check(t, s.CU.Do(func() error {
				if x, err := s.c.OpenXDP(dp, XDPConfig{N3: "n3", F1U: "f1u", Mode: mode, Queues: []int{0, 5}}); err == nil {
					x.Close()
					return errors.New("a queue the interface lacks was opened")
				}
				return nil
			}))
			s.serve(t, func() (path, error) {
				return s.c.OpenXDP(dp, XDPConfig{N3: "n3", F1U: "f1u", Mode: mode})
			})
			// The classifier leaves a tunnel that is no bearer's to the kernel.
			testEndToEnd(t, s, func() uint64 {
				st, err := dp.Stats(N3)
				check(t, err)
				return st.Total[cuupxdp.PassUnknownTEID].Packets
			})
			if st := s.c.Stats(); st.Downlink == 0 || st.Uplink == 0 {
				t.Errorf("the AF_XDP workers carried nothing: %+v", st)
			}
			// Once the DU's MAC address is known, the socket sends.
			viaKernel := s.c.Stats().XDP.ThroughKernel
			s.downlink(t, s.c.List()[0].PDUSessions[0].DLTunnel.TEID, 5, userPacket(t, 1, 10))
			readF1U(t, received(t, s.duConn))
			if n := s.c.Stats().XDP.ThroughKernel - viaKernel; n != 0 {
				t.Errorf("%d packets to a known DU went through the kernel", n)
			}
		})
	}
}

// The socket path's workers are listed N3 first, then F1-U, at every
// start: in the stats, their table and the docs' examples alike.
func TestSocketWorkersInOrder(t *testing.T) {
	s := newCellSite(t, Config{})
	for range 16 {
		var p *Sockets
		check(t, s.CU.Do(func() (err error) {
			p, err = s.c.OpenSockets()
			return err
		}))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- p.Serve(ctx) }()
		var names []string
		for deadline := time.Now().Add(waitFor); len(names) < 2 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			names = names[:0]
			for _, w := range s.c.Stats().Workers {
				names = append(names, w.Worker)
			}
		}
		cancel()
		check(t, <-done)
		check(t, p.Close())
		if want := []string{"N3 socket", "F1-U socket"}; !slices.Equal(names, want) {
			t.Fatalf("workers %q, want %q", names, want)
		}
	}
}
