package n4

import (
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
	"github.com/xdp5g/xdp5g/internal/testsupport"
	"github.com/xdp5g/xdp5g/internal/upf/buffer"
)

// Wire encodings of the buffering IEs.
const (
	tCreateBAR         = 85
	tUpdateBAR         = 86
	tRemoveBAR         = 87
	tBARID             = 88
	tSuggestedPackets  = 140
	tDDNDelay          = 46
	tDownlinkDataRep   = 83
	tDataStatus        = 260
	tMTEDTControlInfo  = 249
	reportTypeDLDR     = 0x01
	dataStatusBuffered = 0x02
)

func barID(id byte) []byte { return tlv(tBARID, []byte{id}) }

// createBAR §7.5.2.6; suggested is the Suggested Buffering Packets Count.
func createBAR(id, suggested byte, c ...[]byte) []byte {
	return tlv(tCreateBAR, slices.Concat([][]byte{barID(id), tlv(tSuggestedPackets, []byte{suggested})}, c)...)
}

// A session whose downlink FAR buffers, over the demo testbed with real
// traffic: the first packet is reported to the SMF in a Downlink Data
// Report (NOCP), the BAR's count bounds what is held and the overflow is
// counted, and when the FAR forwards again every held packet reaches the
// gNB, in order, before the first new one.
func TestBufferingUnderTraffic(t *testing.T) {
	e := newTrafficEnv(t)
	tb, upf, buffers, sent := e.tb, e.upf, e.buffers, e.sent
	captured := captureAtGNB(t, tb)

	const limit, held, fresh = 100, 120, 30
	seid := e.establishBuffering(t, limit)

	sendDownlink(t, tb, 0, held)
	report := waitReport(t, sent)
	dldr := decodeIEs(t, one(t, report, tDownlinkDataRep))
	if rt := one(t, report, tReportType); rt[0] != reportTypeDLDR {
		t.Errorf("report type %#x, want DLDR", rt[0])
	}
	if id := one(t, dldr, tPDRID); binary.BigEndian.Uint16(id) != 2 {
		t.Errorf("Downlink Data Report for PDR %d, want 2", binary.BigEndian.Uint16(id))
	}
	if ds := one(t, dldr, tDataStatus); ds[0] != dataStatusBuffered {
		t.Errorf("data status %#x, want BUFF", ds[0])
	}
	slot, ok := upf.Store.BufferSlot(seid, 2)
	if !ok {
		t.Fatal("FAR 2 has no buffer")
	}
	stats := waitStats(t, buffers, slot, func(s buffer.Stats) bool { return s.Held+int(s.Dropped) == held })
	if stats.Held != limit || stats.Dropped != held-limit {
		t.Errorf("held %d and dropped %d of %d, want %d and %d (the BAR's count)", stats.Held, stats.Dropped, held, limit, held-limit)
	}

	e.forward(t, seid)
	sendDownlink(t, tb, 1000, fresh)
	ids := captured(limit + fresh)
	want := slices.Concat(idRange(0, limit), idRange(1000, fresh))
	if !slices.Equal(ids, want) {
		t.Errorf("the gNB received IP IDs %v, want %v", ids, want)
	}
	// New packets that came while the release was under way queued
	// behind the held ones.
	if s, _ := buffers.Stats(slot); s.Delivered < limit || s.Delivered > limit+fresh || s.Held != 0 {
		t.Errorf("after the release: %+v, want %d to %d delivered", s, limit, limit+fresh)
	}
	select {
	case <-sent:
		t.Error("a second report")
	default:
	}
}

// The SMF has the held packets dropped, in its answer to the Downlink Data
// Report (DROBU, with a smaller BAR count) and when it has the FAR forward
// again (DROBU in the modification): the gNB receives only what comes
// afterwards, and the buffer counts what was dropped.
func TestDroppingBufferedPackets(t *testing.T) {
	e := newTrafficEnv(t)
	captured := captureAtGNB(t, e.tb)
	const suggested, first, second, fresh = 50, 20, 80, 10
	e.answerIEs.Store(&[][]byte{
		tlv(tUpdateBARReportResp, barID(5), tlv(tSuggestedPackets, []byte{suggested})),
		tlv(tPFCPSRRspFlags, []byte{0x01}), // DROBU
	})
	// The report waits 200 ms: every one of the first packets is held by
	// the time the SMF answers.
	seid := e.establishBuffering(t, 100, tlv(tDDNDelay, []byte{4}))
	slot, ok := e.upf.Store.BufferSlot(seid, 2)
	if !ok {
		t.Fatal("FAR 2 has no buffer")
	}
	sendDownlink(t, e.tb, 0, first)
	waitReport(t, e.sent)
	waitStats(t, e.buffers, slot, func(s buffer.Stats) bool { return s.Discarded == first && s.Held == 0 })
	// The BAR's new count bounds what is held now.
	sendDownlink(t, e.tb, 100, second)
	stats := waitStats(t, e.buffers, slot, func(s buffer.Stats) bool { return s.Held+int(s.Dropped) == second })
	if stats.Held != suggested {
		t.Errorf("held %d after the response's BAR, want %d", stats.Held, suggested)
	}

	e.forward(t, seid, tlv(tPFCPSMReqFlags, []byte{0x01})) // DROBU
	sendDownlink(t, e.tb, 1000, fresh)
	if ids := captured(fresh); !slices.Equal(ids, idRange(1000, fresh)) {
		t.Errorf("the gNB received IP IDs %v, want only the %d sent after the FAR forwarded", ids, fresh)
	}
	if s, _ := e.buffers.Stats(slot); s.Discarded != first+suggested || s.Held != 0 {
		t.Errorf("buffer after the release: %+v, want %d discarded", s, first+suggested)
	}
	metrics := testsupport.Exposition(t, e.buffers.Metrics())
	testsupport.HasLines(t, metrics, "xdp5g_upf_buffer_held_packets 0",
		fmt.Sprintf(`xdp5g_upf_buffer_packets_total{outcome="discarded"} %d`, first+suggested),
		fmt.Sprintf(`xdp5g_upf_buffer_packets_total{outcome="dropped_full"} %d`, second-suggested))
	// Every packet received came to an outcome; the fresh ones may have
	// gone through the buffer while it was being released, and one the
	// gNB has may be counted a moment after it was sent.
	var received, outcomes float64
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		metrics := testsupport.Exposition(t, e.buffers.Metrics())
		received, _ = testsupport.Value(metrics, "xdp5g_upf_buffer_received_packets_total")
		outcomes = 0
		for _, o := range []string{"delivered", "unforwarded", "dropped_full", "discarded"} {
			n, _ := testsupport.Value(metrics, fmt.Sprintf("xdp5g_upf_buffer_packets_total{outcome=%q}", o))
			outcomes += n
		}
		if received == outcomes || time.Now().After(deadline) {
			break
		}
	}
	if received < first+second || received != outcomes {
		t.Errorf("%g packets received by the buffers, %g came to an outcome", received, outcomes)
	}
}

// A buffering FAR tells the SMF of the first packet it holds only when it
// has NOCP (§8.2.26): without, the packets are held and no Downlink Data
// Report goes.
func TestDownlinkDataReportOnlyWithNOCP(t *testing.T) {
	e := newTrafficEnv(t)
	for _, c := range []struct {
		name   string
		action byte
	}{{name: "BUFF", action: aaBUFF}, {name: "BUFF|NOCP", action: aaBUFF | aaNOCP}} {
		seid := e.establishBufferingAction(t, c.action, 10)
		slot, ok := e.upf.Store.BufferSlot(seid, 2)
		if !ok {
			t.Fatalf("%s: FAR 2 has no buffer", c.name)
		}
		sendDownlink(t, e.tb, 0, 3)
		waitStats(t, e.buffers, slot, func(s buffer.Stats) bool { return s.Held == 3 })
		if c.action&aaNOCP == 0 {
			e.noReport(t, 300*time.Millisecond, "for a FAR without NOCP")
		} else if rt := one(t, waitReport(t, e.sent), tReportType); rt[0] != reportTypeDLDR {
			t.Errorf("%s: report type %#x, want DLDR", c.name, rt[0])
		}
		e.delete("smf", seid).expect(t, causeAccepted, nil, nil)
	}
}

// establishBuffering sets up a session whose downlink FAR 2 buffers and
// notifies (NOCP) under BAR 5 with a count of limit and the IEs of bar;
// it returns its SEID.
func (e *trafficEnv) establishBuffering(t *testing.T, limit byte, bar ...[]byte) uint64 {
	t.Helper()
	return e.establishBufferingAction(t, aaBUFF|aaNOCP, limit, bar...)
}

// establishBufferingAction is establishBuffering with FAR 2's Apply Action
// flags.
func (e *trafficEnv) establishBufferingAction(t *testing.T, action byte, limit byte, bar ...[]byte) uint64 {
	t.Helper()
	ue := demo.UEAddr.String()
	return e.establish("smf", nodeIDv4("127.0.0.4"), cpFSEID(0x77, "127.0.0.4"),
		createPDR(pdrID(1), precedence(255), pdi(sourceInterface(ifAccess), fteid(demo.UplinkTEID, demo.N3Addr.String()),
			ueIPv4(ue, false)), outerHeaderRemoval(0), farID(1)),
		createPDR(pdrID(2), precedence(255), pdi(sourceInterface(ifCore), ueIPv4(ue, true)), farID(2), qerID(1)),
		createQER(1, qfi(demo.QFI)),
		coreFAR(), createFAR(farID(2), applyAction(action), barID(5)),
		createBAR(5, limit, bar...)).upSEID(t)
}

// forward has FAR 2 of a session forward to the gNB, with more IEs of the
// request.
func (e *trafficEnv) forward(t *testing.T, seid uint64, more ...[]byte) {
	t.Helper()
	e.modify("smf", seid, append([][]byte{updateFAR(farID(2), applyAction(aaFORW), updFwdParams(destinationInterface(ifAccess),
		ohcGTPU(demo.DownlinkTEID, demo.GNBAddr.String())))}, more...)...).expect(t, causeAccepted, nil, nil)
}

func idRange(from, n uint16) []uint16 {
	ids := make([]uint16, n)
	for i := range ids {
		ids[i] = from + uint16(i)
	}
	return ids
}

func waitReport(t *testing.T, sent <-chan []byte) []wireIE {
	t.Helper()
	select {
	case b := <-sent:
		_, seid, ies := decodeMsg(t, b)
		if seid != 0x77 {
			t.Errorf("report for CP SEID %#x", seid)
		}
		return ies
	case <-time.After(10 * time.Second):
		t.Fatal("no Session Report Request")
		return nil
	}
}

func waitStats(t *testing.T, b *buffer.Manager, slot uint32, done func(buffer.Stats) bool) buffer.Stats {
	t.Helper()
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(10 * time.Millisecond) {
		if s, ok := b.Stats(slot); ok && done(s) {
			return s
		}
	}
	s, _ := b.Stats(slot)
	t.Fatalf("buffer %d: %+v", slot, s)
	return s
}

// sendDownlink sends n downlink packets from the DN with IP IDs from
// first on, one at a time through a raw socket.
func sendDownlink(t *testing.T, tb *demo.Testbed, first, n uint16) {
	t.Helper()
	sendRaw(t, tb.DN, demo.N6, func(send func([]byte) error) error {
		for id := first; id < first+n; id++ {
			inner := demo.UEPacket(demo.UEAddr, demo.DNAddr, false, demo.UETTL)
			binary.BigEndian.PutUint16(inner[4:], id)
			binary.BigEndian.PutUint16(inner[10:], 0)
			binary.BigEndian.PutUint16(inner[10:], gopacket.FoldChecksum(gopacket.ComputeChecksum(inner[:20], 0)))
			if err := send(tb.DownlinkFrame(inner)); err != nil {
				return err
			}
		}
		return nil
	})
}

// freshGNBSink replaces the testbed's gNB sink with one that has seen
// nothing yet (its sample is the first frame it matches); pass lets the
// frames on to the gNB's stack.
func freshGNBSink(t *testing.T, tb *demo.Testbed, pass bool) {
	t.Helper()
	fatalIf(t, tb.GNBSink.Close())
	gtpu := trafficgen.Filter{EtherType: uint16(layers.EthernetTypeIPv4), IPProto: uint8(layers.IPProtocolUDP), DstPort: 2152}
	var err error
	tb.GNBSink, err = trafficgen.NewSink(tb.GNB, demo.N3, gtpu, pass)
	fatalIf(t, err)
}

// captureAtGNB lets the gNB's GTP-U through to its stack and reads it from
// a packet socket: captured(n) waits until n packets have come (or a few
// seconds) and returns the inner IP IDs of all so far, in order of
// arrival, those that came while a FAR buffered among them.
func captureAtGNB(t *testing.T, tb *demo.Testbed) func(n int) []uint16 {
	t.Helper()
	freshGNBSink(t, tb, true)
	var fd int
	fatalIf(t, tb.GNB.Do(func() error {
		ifi, err := net.InterfaceByName(demo.N3)
		if err != nil {
			return err
		}
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_IP))); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: ifi.Index})
	}))
	t.Cleanup(func() { unix.Close(fd) })
	fatalIf(t, unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 300_000}))
	var ids []uint16
	return func(n int) []uint16 {
		buf := make([]byte, 4096)
		for deadline := time.Now().Add(3 * time.Second); len(ids) < n && time.Now().Before(deadline); {
			k, from, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				continue // a quiet spell
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
				continue
			}
			p := gopacket.NewPacket(buf[:k], layers.LayerTypeEthernet, gopacket.Default)
			var ips []*layers.IPv4
			for _, l := range p.Layers() {
				if ip, ok := l.(*layers.IPv4); ok {
					ips = append(ips, ip)
				}
			}
			if len(ips) == 2 {
				ids = append(ids, ips[1].Id)
			}
		}
		return ids
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// BARs and buffering FARs over the wire: a buffering FAR gets a buffer,
// keeps it while it buffers, and loses it (with what it held) when it
// drops; whatever names a BAR the session lacks, or asks for what is not
// implemented, is refused with the rule and changes nothing.
func TestBARsAndBufferingFARs(t *testing.T) {
	e := newEnv(t)
	buffering := createFAR(farID(2), applyAction(aaBUFF|aaNOCP), barID(5))
	ies := open5gs(0x1001, fixedUE("10.60.0.9"), 0x0a0b0c0d)
	ies[atAccessFAR] = buffering
	seid := e.establish("smf1", append(ies, createBAR(5, 10))...).upSEID(t)
	slot, ok := e.store.BufferSlot(seid, 2)
	if !ok || !e.buffers.Pending(slot) {
		t.Fatalf("the buffering FAR has no armed buffer (slot %d, %v)", slot, ok)
	}
	updateBAR := func(id byte, c ...[]byte) []byte {
		return tlv(tUpdateBAR, slices.Concat(append([][]byte{barID(id)}, c...)...))
	}
	e.modify("smf1", seid, updateBAR(5, tlv(tSuggestedPackets, []byte{20}), tlv(tDDNDelay, []byte{2}))).expect(t, causeAccepted, nil, nil)
	if got := e.h.sessions[seid].bar; got == nil || got.suggested != 20 || got.ddnDelay != 100*time.Millisecond {
		t.Errorf("BAR after the update: %+v", got)
	}
	if s, _ := e.store.BufferSlot(seid, 2); s != slot {
		t.Errorf("the buffering FAR moved from buffer %d to %d", slot, s)
	}
	// Removed and created again in one request, the FAR is another one:
	// a buffer of its own, the old one let go with what it held.
	e.modify("smf1", seid, removeFAR(2), buffering).expect(t, causeAccepted, nil, nil)
	renewed, ok := e.store.BufferSlot(seid, 2)
	if !ok || renewed == slot || !e.buffers.Pending(renewed) || e.buffers.Pending(slot) {
		t.Errorf("created again: buffer %d (%v, pending %v), the old %d pending %v; want a fresh one, the old let go",
			renewed, ok, e.buffers.Pending(renewed), slot, e.buffers.Pending(slot))
	}
	slot = renewed

	before := e.state()
	for _, c := range []struct {
		name       string
		ies        [][]byte
		failedRule []byte
	}{
		{name: "a second BAR", ies: [][]byte{createBAR(6, 1)}, failedRule: failedBAR(6)},
		{name: "two BARs for one", ies: [][]byte{tlv(tRemoveBAR, barID(5)), createBAR(6, 1), createBAR(7, 1)}, failedRule: failedBAR(7)},
		{name: "a BAR removed twice", ies: [][]byte{tlv(tRemoveBAR, barID(5)), tlv(tRemoveBAR, barID(5)), createBAR(6, 1)}, failedRule: failedBAR(5)},
		{name: "updating a missing BAR", ies: [][]byte{updateBAR(9)}, failedRule: failedBAR(9)},
		{name: "removing a missing BAR", ies: [][]byte{tlv(tRemoveBAR, barID(9))}, failedRule: failedBAR(9)},
		{name: "BUFF with FORW", ies: [][]byte{updateFAR(farID(2), applyAction(aaBUFF|aaFORW))}, failedRule: failedFAR(2)},
		{name: "a FAR naming a missing BAR", ies: [][]byte{updateFAR(farID(2), applyAction(aaBUFF), barID(9))}, failedRule: failedFAR(2)},
		{name: "an uplink FAR that buffers", ies: [][]byte{updateFAR(farID(1), applyAction(aaBUFF))}, failedRule: failedPDR(1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.modify("smf1", seid, c.ies...).expect(t, causeRuleFailure, c.failedRule, nil)
			e.unchanged(before)
			if !e.buffers.Pending(slot) {
				t.Error("the buffer was let go")
			}
		})
	}

	e.modify("smf1", seid, updateFAR(farID(2), applyAction(aaDROP)), tlv(tRemoveBAR, barID(5))).expect(t, causeAccepted, nil, nil)
	if _, ok := e.store.BufferSlot(seid, 2); ok || e.buffers.Pending(slot) {
		t.Error("a dropping FAR kept its buffer")
	}
	e.modify("smf1", seid, createBAR(7, 3), updateFAR(farID(2), applyAction(aaBUFF), barID(7))).expect(t, causeAccepted, nil, nil)
	again, ok := e.store.BufferSlot(seid, 2)
	if !ok || again == slot {
		t.Errorf("buffering again: buffer %d (%v), want a fresh one", again, ok)
	}
	e.delete("smf1", seid).expect(t, causeAccepted, nil, nil)
	if e.buffers.Pending(again) {
		t.Error("the deleted session's buffer is still in use")
	}
}
