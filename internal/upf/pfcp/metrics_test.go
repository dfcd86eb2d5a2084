package pfcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// The requests a peer sends are counted by type, their responses by type
// and cause, refusals and retransmissions included; dropped messages by
// reason; the association by its state; and the handling times of the
// requests answered in the histogram.
func TestMetricsOfPeerRequests(t *testing.T) {
	s, _ := startServer(t, nil)
	m := newSMF(t, s.Addr())
	m.associate()
	m.exchange(sessionEstablishmentRequest(0x10))
	m.exchange(sessionEstablishmentRequest(0x10)) // a retransmission
	m.exchange(establishmentWithoutFAR)
	m.exchange(sessionRequest(message.MsgTypeSessionDeletionRequest, 0x11)) // the handler fails
	var dropped [][]byte
	want := map[string]int{"overload": 0, "not_allowed": 0}
	for _, c := range malformed {
		dropped = append(dropped, c.datagram)
		want[c.reason]++
	}
	m.sendDropped(dropped) // and as many heartbeats
	// Counted once the response is out, maybe after the SMF has it.
	answered := 4 + len(dropped)
	waitFor(t, "the handling times", func() bool {
		n, _ := testsupport.Value(testsupport.Exposition(t, s.Metrics()), "xdp5g_pfcp_request_handling_seconds_count")
		return n == float64(answered)
	})

	out := testsupport.Exposition(t, s.Metrics())
	lines := []string{
		`xdp5g_pfcp_requests_received_total{message_type="association_setup_request"} 1`,
		`xdp5g_pfcp_requests_received_total{message_type="session_establishment_request"} 2`,
		`xdp5g_pfcp_requests_received_total{message_type="session_deletion_request"} 1`,
		fmt.Sprintf(`xdp5g_pfcp_requests_received_total{message_type="heartbeat_request"} %d`, len(dropped)),
		`xdp5g_pfcp_responses_sent_total{cause="request_accepted",message_type="association_setup_response"} 1`,
		`xdp5g_pfcp_responses_sent_total{cause="request_accepted",message_type="session_establishment_response"} 1`,
		`xdp5g_pfcp_responses_sent_total{cause="mandatory_ie_missing",message_type="session_establishment_response"} 1`,
		`xdp5g_pfcp_responses_sent_total{cause="system_failure",message_type="session_deletion_response"} 1`,
		fmt.Sprintf(`xdp5g_pfcp_responses_sent_total{cause="none",message_type="heartbeat_response"} %d`, len(dropped)),
		"xdp5g_pfcp_retransmissions_received_total 1",
		fmt.Sprintf("xdp5g_pfcp_datagrams_received_total %d", 5+2*len(dropped)),
		"xdp5g_pfcp_panics_total 0",
		`xdp5g_pfcp_association_state{node_id="smf.example",state="up"} 1`,
		`xdp5g_pfcp_association_state{node_id="smf.example",state="lost"} 0`,
		fmt.Sprintf(`xdp5g_pfcp_request_handling_seconds_bucket{le="+Inf"} %d`, answered),
	}
	for reason, n := range want {
		lines = append(lines, fmt.Sprintf(`xdp5g_pfcp_messages_dropped_total{reason=%q} %d`, reason, n))
	}
	testsupport.HasLines(t, out, lines...)
	if n := strings.Count(strings.Join(out, "\n"), "xdp5g_pfcp_messages_dropped_total{"); n != len(want) {
		t.Errorf("%d reasons of dropped messages, want %d", n, len(want))
	}
	if sum, _ := testsupport.Value(out, "xdp5g_pfcp_request_handling_seconds_sum"); sum <= 0 || sum > float64(answered) {
		t.Errorf("handling times sum to %gs", sum)
	}
	// Buckets are cumulative, the first at 1.78 µs, four to a decade.
	first, _ := testsupport.Value(out, `xdp5g_pfcp_request_handling_seconds_bucket{le="1.778e-06"}`)
	last, ok := testsupport.Value(out, `xdp5g_pfcp_request_handling_seconds_bucket{le="0.056234133"}`)
	if !ok || first > last || last > float64(answered) {
		t.Errorf("handling buckets from %g to %g (%t):\n%s", first, last, ok, strings.Join(out, "\n"))
	}
}

// The UPF's own requests are counted by type, retransmissions and requests
// left unanswered too, their responses by type and cause; the reports they
// carry by report type and usage report trigger; the round trip of those
// answered at once in the histogram, the heartbeats' among them.
func TestMetricsOfOwnRequests(t *testing.T) {
	s, _, m := startWithPeer(t, func(c *Config) { c.T1, c.N1 = 50*time.Millisecond, 5 })
	m.acceptSetup()
	m.answerHeartbeats(heartbeatResponse, "a heartbeat's round trip", func() bool {
		n, _ := testsupport.Value(testsupport.Exposition(t, s.Metrics()),
			`xdp5g_pfcp_request_round_trip_seconds_count{message_type="heartbeat_request"}`)
		return n > 0
	})

	// A report answered after a retransmission.
	report := message.NewSessionReportRequest(0, 0, cpSEIDValue, 0, 0, ie.NewReportType(0, 0, 1, 0),
		ie.NewUsageReport(ie.UsageReportWithinSessionReportRequest, ie.NewURRID(1), ie.NewURSEQN(0),
			ie.NewUsageReportTrigger(0x03, 0x00, 0x08))) // PERIO, VOLTH; QUVTI
	done := make(chan error)
	go func() {
		_, err := s.SendSessionReport(context.Background(), Peer{NodeID: smfName, Addr: m.addr()}, report)
		done <- err
	}()
	for {
		first := parseWire(t, m.recv())
		if first.msgType != message.MsgTypeSessionReportRequest {
			continue // a heartbeat
		}
		again := parseWire(t, m.recv())
		for again.msgType != message.MsgTypeSessionReportRequest {
			again = parseWire(t, m.recv())
		}
		m.send(sessionReportResponse(again.seq))
		break
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	out := testsupport.Exposition(t, s.Metrics())
	testsupport.HasLines(t, out,
		`xdp5g_pfcp_requests_sent_total{message_type="association_setup_request"} 1`,
		`xdp5g_pfcp_requests_sent_total{message_type="session_report_request"} 1`,
		`xdp5g_pfcp_responses_received_total{cause="request_accepted",message_type="association_setup_response"} 1`,
		`xdp5g_pfcp_responses_received_total{cause="request_accepted",message_type="session_report_response"} 1`,
		`xdp5g_pfcp_session_reports_sent_total{report_type="usar"} 1`,
		`xdp5g_pfcp_usage_reports_sent_total{trigger="perio"} 1`,
		`xdp5g_pfcp_usage_reports_sent_total{trigger="volth"} 1`,
		`xdp5g_pfcp_usage_reports_sent_total{trigger="quvti"} 1`)
	// At least the one the SMF answered; more if it answered late.
	if n, _ := testsupport.Value(out, `xdp5g_pfcp_retransmissions_sent_total{message_type="session_report_request"}`); n < 1 {
		t.Errorf("%g retransmissions of the report", n)
	}
	if _, ok := testsupport.Value(out, `xdp5g_pfcp_request_round_trip_seconds_count{message_type="session_report_request"}`); ok {
		t.Error("the round trip of a report answered after a retransmission is in the histogram")
	}
	if _, ok := testsupport.Value(out, `xdp5g_pfcp_association_last_heartbeat_timestamp_seconds{node_id="smf.example"}`); !ok {
		t.Errorf("no last heartbeat:\n%s", strings.Join(out, "\n"))
	}
	if sent, _ := testsupport.Value(out, `xdp5g_pfcp_requests_sent_total{message_type="heartbeat_request"}`); sent < 1 {
		t.Errorf("%g heartbeats sent", sent)
	}

	// Left unanswered.
	_, err := s.SendSessionReport(context.Background(), Peer{NodeID: smfName, Addr: newSMF(t, s.Addr()).addr()}, report)
	if !errors.Is(err, ErrNoResponse) {
		t.Fatalf("err %v", err)
	}
	testsupport.HasLines(t, testsupport.Exposition(t, s.Metrics()),
		`xdp5g_pfcp_requests_unanswered_total{message_type="session_report_request"} 1`)
}
