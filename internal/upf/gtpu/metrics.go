package gtpu

import (
	"net/netip"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdp5g/xdp5g/internal/telemetry"
)

var (
	pathsMetric = telemetry.Gauge("gtpu_paths",
		"GTP-U paths to peers (gNBs) under echo supervision, by state: up, or failed (its Echo Requests unanswered).", "state")
	pathFailuresMetric   = telemetry.Counter("gtpu_path_failures_total", "GTP-U paths that failed: reported to the SMFs.")
	pathRecoveriesMetric = telemetry.Counter("gtpu_path_recoveries_total", "Failed GTP-U paths that answered again.")
	echoesSentMetric     = telemetry.Counter("gtpu_echo_requests_sent_total", "Echo Requests sent on supervised paths.")
	echoesAnsweredMetric = telemetry.Counter("gtpu_echo_requests_answered_total", "Echo Requests sent on supervised paths and answered.")
	echoResponsesMetric  = telemetry.Counter("gtpu_echo_responses_sent_total",
		"Echo Responses sent by the user-space endpoint (the data path answers most Echo Requests itself).")
	endMarkersMetric       = telemetry.Counter("gtpu_end_markers_sent_total", "End Markers sent to gNBs whose downlink tunnel was replaced.")
	errorIndicationsMetric = telemetry.Counter("gtpu_error_indications_sent_total",
		"Error Indications sent in answer to G-PDUs to TEIDs no session has.")
	errorIndicationsSuppressedMetric = telemetry.Counter("gtpu_error_indications_suppressed_total",
		"G-PDUs to TEIDs no session has that the data path passed up but got no Error Indication, over the endpoint's rate.")
	receivedMetric = telemetry.Counter("gtpu_messages_received_total",
		"GTP-U signalling messages the data path passed to the user-space endpoint, by message type.", "message_type")
	malformedMetric = telemetry.Counter("gtpu_malformed_messages_total", "Datagrams on GTP-U's port dropped undecoded.")
	unboundMetric   = telemetry.Gauge("gtpu_unbound_addresses",
		"N3 and N9 addresses whose GTP-U port the daemon could not bind, 1 each: user space neither receives on them nor sends from them.", "address")
)

// UnboundMetrics collects the addresses that have no socket (Unbound),
// apart from Metrics, so that they are told when no address has one and
// the endpoint is closed, and without PFCP.
func UnboundMetrics(unbound map[netip.Addr]error) prometheus.Collector {
	return &telemetry.Collector{Families: []telemetry.Family{unboundMetric},
		Read: func(ch chan<- prometheus.Metric) {
			for a := range unbound {
				unboundMetric.Emit(ch, 1, a.String())
			}
		}}
}

// messageTypeNames name the message types in metrics.
var messageTypeNames = map[uint8]string{
	MsgEchoRequest:                           "echo_request",
	MsgEchoResponse:                          "echo_response",
	MsgErrorIndication:                       "error_indication",
	MsgSupportedExtensionHeadersNotification: "supported_extension_headers_notification",
	MsgEndMarker:                             "end_marker",
	MsgGPDU:                                  "g_pdu",
}

// Metrics collects the endpoint's figures at scrape time.
func (e *Endpoint) Metrics() prometheus.Collector {
	return &telemetry.Collector{
		Families: []telemetry.Family{pathsMetric, pathFailuresMetric, pathRecoveriesMetric, echoesSentMetric, echoesAnsweredMetric,
			echoResponsesMetric, endMarkersMetric, errorIndicationsMetric, errorIndicationsSuppressedMetric, receivedMetric, malformedMetric},
		Read: func(ch chan<- prometheus.Metric) {
			e.mu.Lock()
			var up, failed int
			for _, p := range e.paths {
				if p.failed {
					failed++
				} else {
					up++
				}
			}
			e.mu.Unlock()
			st := e.Stats()
			pathsMetric.Emit(ch, float64(up), "up")
			pathsMetric.Emit(ch, float64(failed), "failed")
			pathFailuresMetric.Emit(ch, float64(st.PathFailures))
			pathRecoveriesMetric.Emit(ch, float64(st.PathRecoveries))
			echoesSentMetric.Emit(ch, float64(st.EchoRequestsSent))
			echoesAnsweredMetric.Emit(ch, float64(st.EchoRequestsAnswered))
			echoResponsesMetric.Emit(ch, float64(st.EchoResponsesSent))
			endMarkersMetric.Emit(ch, float64(st.EndMarkersSent))
			errorIndicationsMetric.Emit(ch, float64(st.ErrorIndicationsSent))
			errorIndicationsSuppressedMetric.Emit(ch, float64(st.ErrorIndicationsSuppressed))
			malformedMetric.Emit(ch, float64(st.Malformed))
			for typ, n := range st.Received {
				name, ok := messageTypeNames[typ]
				if !ok {
					name = strconv.Itoa(int(typ))
				}
				receivedMetric.Emit(ch, float64(n), name)
			}
		}}
}
