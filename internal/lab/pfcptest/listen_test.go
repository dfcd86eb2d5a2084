package pfcptest

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
)

// The SMF accepts an association, node reports and the reports on its
// sessions, hands each report on once however often the UPF retransmits
// it, and refuses reports on sessions it does not know.
func TestListenAnswersTheUPF(t *testing.T) {
	upf, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	defer upf.Close()
	smf, err := NewSMF("smf.xdp5g.test", upf.LocalAddr().(*net.UDPAddr).AddrPort())
	if err != nil {
		t.Fatal(err)
	}
	defer smf.Close()
	at, err := smf.Listen(netip.MustParseAddrPort("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	const cpSEID, upSEID = 0x5eed, 0x0102030405060708
	smf.upSEIDs[cpSEID] = upSEID // as Establish records it
	// exchange sends req with seq from the UPF's socket and returns the
	// SMF's response.
	exchange := func(req message.Message, seq uint32) message.Message {
		t.Helper()
		req.SetSequenceNumber(seq)
		b, err := AppendMessage(nil, req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := upf.WriteToUDPAddrPort(b, at); err != nil {
			t.Fatal(err)
		}
		upf.SetReadDeadline(time.Now().Add(timeout))
		buf := make([]byte, 64<<10)
		n, err := upf.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := message.Parse(buf[:n])
		if err != nil {
			t.Fatal(err)
		}
		if resp.Sequence() != seq {
			t.Fatalf("%s answered with sequence number %d, want %d", req.MessageTypeName(), resp.Sequence(), seq)
		}
		return resp
	}

	setup := exchange(message.NewAssociationSetupRequest(0, ie.NewNodeID("", "", "upf.xdp5g.test"),
		ie.NewRecoveryTimeStamp(time.Now())), 1).(*message.AssociationSetupResponse)
	if err := Accepted("association setup", setup.Cause); err != nil {
		t.Error(err)
	}
	if id, err := setup.NodeID.NodeID(); err != nil || id != "smf.xdp5g.test" {
		t.Errorf("association setup response: node ID %q, %v", id, err)
	}

	report := message.NewSessionReportRequest(0, 0, cpSEID, 0, 0, ie.NewReportType(0, 0, 1, 0),
		ie.NewUsageReportWithinSessionReportRequest(ie.NewURRID(1), ie.NewURSEQN(0)))
	for range 2 { // the second time a retransmission
		resp := exchange(report, 2).(*message.SessionReportResponse)
		if err := Accepted("session report", resp.Cause); err != nil || resp.SEID() != upSEID {
			t.Errorf("session report response: SEID %#x, %v; want %#x, accepted", resp.SEID(), err, uint64(upSEID))
		}
	}
	unknown := message.NewSessionReportRequest(0, 0, cpSEID+1, 0, 0, ie.NewReportType(0, 0, 1, 0))
	resp := exchange(unknown, 3).(*message.SessionReportResponse)
	if c, err := resp.Cause.Cause(); err != nil || c != ie.CauseSessionContextNotFound || resp.SEID() != 0 {
		t.Errorf("report on an unknown session: cause %d, SEID %#x, %v; want %d, 0", c, resp.SEID(), err, ie.CauseSessionContextNotFound)
	}

	if got := <-smf.Reports(); got.SEID() != cpSEID || got.Sequence() != 2 {
		t.Errorf("handed on the report of SEID %#x, sequence number %d", got.SEID(), got.Sequence())
	}
	if len(smf.Reports()) != 0 {
		t.Errorf("%d more reports handed on", len(smf.Reports()))
	}

	node := message.NewNodeReportRequest(0, ie.NewNodeID("", "", "upf.xdp5g.test"), ie.NewNodeReportType(0x01),
		ie.NewUserPlanePathFailureReport(ie.NewRemoteGTPUPeer(0x02, "192.0.2.9", "", 0, "")))
	if err := Accepted("node report", exchange(node, 4).(*message.NodeReportResponse).Cause); err != nil {
		t.Error(err)
	}
	if got := <-smf.NodeReports(); got.Sequence() != 4 || !got.NodeReportType.HasUPFR() {
		t.Errorf("handed on the node report of sequence number %d, type %v", got.Sequence(), got.NodeReportType)
	}
}

// ParseUsageReport reads what the UPF writes into a usage report.
func TestParseUsageReport(t *testing.T) {
	want := UsageReport{URRID: 7, SEQN: 3, Trigger: TriggerVOLTH | TriggerTERMR,
		Volume: *ie.NewVolumeMeasurementFields(0x3f, 6, 4, 2, 3, 2, 1)}
	for _, typ := range []uint16{ie.UsageReportWithinSessionReportRequest, ie.UsageReportWithinSessionDeletionResponse} {
		got, err := ParseUsageReport(ie.NewUsageReport(typ, ie.NewURRID(want.URRID), ie.NewURSEQN(want.SEQN),
			ie.NewUsageReportTrigger(byte(want.Trigger), byte(want.Trigger>>8), 0), ie.NewVolumeMeasurement(0x3f, 6, 4, 2, 3, 2, 1)))
		if err != nil || got != want {
			t.Errorf("IE type %d: got %+v, %v; want %+v", typ, got, err, want)
		}
	}
	if _, err := ParseUsageReport(ie.NewUsageReport(ie.UsageReportWithinSessionReportRequest, ie.NewURSEQN(0),
		ie.New(ie.VolumeMeasurement, []byte{0x3f, 0, 1}))); err == nil {
		t.Error("a truncated volume measurement parsed")
	}
}
