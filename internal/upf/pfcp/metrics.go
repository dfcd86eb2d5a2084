package pfcp

import (
	"math/bits"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xdp5g/xdp5g/internal/telemetry"
)

// metrics are the server's figures counted where their events happen;
// the others (Stats, the associations) are read at scrape time.
type metrics struct {
	requestsReceived    *prometheus.CounterVec // message_type
	responsesSent       *prometheus.CounterVec // message_type, cause
	requestsSent        *prometheus.CounterVec // message_type
	responsesReceived   *prometheus.CounterVec // message_type, cause
	retransmissionsSent *prometheus.CounterVec // message_type
	unanswered          *prometheus.CounterVec // message_type
	roundTrip           *prometheus.HistogramVec
	sessionReports      *prometheus.CounterVec // report_type
	usageReports        *prometheus.CounterVec // trigger
}

func newMetrics() *metrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: telemetry.Namespace, Subsystem: "pfcp", Name: name, Help: help}, labels)
	}
	return &metrics{
		requestsReceived: counter("requests_received_total",
			"PFCP requests of peers served, by message type; retransmissions and requests dropped for overload are not counted.", "message_type"),
		responsesSent: counter("responses_sent_total",
			"PFCP responses the UPF sent, by message type and cause (none for a response without one); a cause other than request_accepted refuses the request.",
			"message_type", "cause"),
		requestsSent: counter("requests_sent_total", "PFCP requests the UPF sent, by message type; retransmissions are not counted.", "message_type"),
		responsesReceived: counter("responses_received_total",
			"Responses of peers to the UPF's PFCP requests, by message type and cause (none for a response without one).", "message_type", "cause"),
		retransmissionsSent: counter("retransmissions_sent_total",
			"PFCP requests the UPF sent again, unanswered after T1, by message type.", "message_type"),
		unanswered: counter("requests_unanswered_total",
			"PFCP requests of the UPF's left unanswered after N1 retransmissions, by message type.", "message_type"),
		roundTrip: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: telemetry.Namespace, Subsystem: "pfcp",
			Name:    "request_round_trip_seconds",
			Help:    "Time from sending a PFCP request of the UPF's to its response, by message type; heartbeat_request is the heartbeats' round trip. Requests answered only after a retransmission are left out.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}},
			[]string{"message_type"}),
		sessionReports: counter("session_reports_sent_total",
			"Session Report Requests the UPF sent, by what they report (their Report Type: dldr, usar, erir, upir...).", "report_type"),
		usageReports: counter("usage_reports_sent_total",
			"Usage reports the UPF sent, in Session Report Requests and in modification and deletion responses, by trigger (their Usage Report Trigger: perio, volth, volqu, termr, immer...).",
			"trigger"),
	}
}

func (m *metrics) inline() []prometheus.Collector {
	return []prometheus.Collector{m.requestsReceived, m.responsesSent, m.requestsSent, m.responsesReceived, m.retransmissionsSent,
		m.unanswered, m.roundTrip, m.sessionReports, m.usageReports}
}

// requestReceived counts a request served: read for the first time, and
// not dropped for overload.
func (m *metrics) requestReceived(msgType uint8) {
	m.requestsReceived.WithLabelValues(messageTypeName(msgType)).Inc()
}

// responseReceived counts a peer's response to a request of the UPF's.
func (m *metrics) responseReceived(b []byte) {
	m.responsesReceived.WithLabelValues(messageTypeName(b[1]), causeOf(b[headerLen(b):])).Inc()
}

// sent counts a message the UPF sends for the first time, b encoded: a
// request, or a response with its cause, and the reports it carries.
func (m *metrics) sent(b []byte, response bool) {
	body := b[headerLen(b):]
	if response {
		m.responsesSent.WithLabelValues(messageTypeName(b[1]), causeOf(body)).Inc()
	} else {
		m.requestsSent.WithLabelValues(messageTypeName(b[1])).Inc()
	}
	for t, v := range topLevelIEs(body) {
		switch t {
		case ie.ReportType:
			countFlags(m.sessionReports, v, reportTypeNames[:])
		case ie.UsageReportWithinSessionReportRequest, ie.UsageReportWithinSessionModificationResponse,
			ie.UsageReportWithinSessionDeletionResponse:
			for ct, cv := range topLevelIEs(v) {
				if ct == ie.UsageReportTrigger {
					countFlags(m.usageReports, cv, usageReportTriggerNames[:])
				}
			}
		}
	}
}

// countFlags counts each flag set in an IE's value, its first octet's
// lowest bit first, by names.
func countFlags(c *prometheus.CounterVec, value []byte, names []string) {
	for i, octet := range value {
		for ; octet != 0; octet &= octet - 1 {
			if bit := 8*i + bits.TrailingZeros8(octet); bit < len(names) {
				c.WithLabelValues(names[bit]).Inc()
			}
		}
	}
}

// causeOf names the value of a message body's Cause IE; "none" without
// one.
func causeOf(body []byte) string {
	for t, v := range topLevelIEs(body) {
		if t == ie.Cause && len(v) > 0 {
			if name, ok := causeNames[v[0]]; ok {
				return name
			}
			return strconv.Itoa(int(v[0]))
		}
	}
	return "none"
}

// messageTypeName names a message type in metrics.
func messageTypeName(t uint8) string {
	if name, ok := messageTypeNames[t]; ok {
		return name
	}
	return strconv.Itoa(int(t))
}

var messageTypeNames = map[uint8]string{
	message.MsgTypeHeartbeatRequest:             "heartbeat_request",
	message.MsgTypeHeartbeatResponse:            "heartbeat_response",
	message.MsgTypePFDManagementRequest:         "pfd_management_request",
	message.MsgTypePFDManagementResponse:        "pfd_management_response",
	message.MsgTypeAssociationSetupRequest:      "association_setup_request",
	message.MsgTypeAssociationSetupResponse:     "association_setup_response",
	message.MsgTypeAssociationUpdateRequest:     "association_update_request",
	message.MsgTypeAssociationUpdateResponse:    "association_update_response",
	message.MsgTypeAssociationReleaseRequest:    "association_release_request",
	message.MsgTypeAssociationReleaseResponse:   "association_release_response",
	message.MsgTypeVersionNotSupportedResponse:  "version_not_supported_response",
	message.MsgTypeNodeReportRequest:            "node_report_request",
	message.MsgTypeNodeReportResponse:           "node_report_response",
	message.MsgTypeSessionSetDeletionRequest:    "session_set_deletion_request",
	message.MsgTypeSessionSetDeletionResponse:   "session_set_deletion_response",
	message.MsgTypeSessionEstablishmentRequest:  "session_establishment_request",
	message.MsgTypeSessionEstablishmentResponse: "session_establishment_response",
	message.MsgTypeSessionModificationRequest:   "session_modification_request",
	message.MsgTypeSessionModificationResponse:  "session_modification_response",
	message.MsgTypeSessionDeletionRequest:       "session_deletion_request",
	message.MsgTypeSessionDeletionResponse:      "session_deletion_response",
	message.MsgTypeSessionReportRequest:         "session_report_request",
	message.MsgTypeSessionReportResponse:        "session_report_response",
}

// causeNames are the causes of TS 29.244 Table 8.2.1-1 the UPF sends or
// may receive.
var causeNames = map[uint8]string{
	ie.CauseRequestAccepted:                 "request_accepted",
	ie.CauseRequestRejected:                 "request_rejected",
	ie.CauseSessionContextNotFound:          "session_context_not_found",
	ie.CauseMandatoryIEMissing:              "mandatory_ie_missing",
	ie.CauseConditionalIEMissing:            "conditional_ie_missing",
	ie.CauseInvalidLength:                   "invalid_length",
	ie.CauseMandatoryIEIncorrect:            "mandatory_ie_incorrect",
	ie.CauseInvalidForwardingPolicy:         "invalid_forwarding_policy",
	ie.CauseInvalidFTEIDAllocationOption:    "invalid_f_teid_allocation_option",
	ie.CauseNoEstablishedPFCPAssociation:    "no_established_pfcp_association",
	ie.CauseRuleCreationModificationFailure: "rule_creation_modification_failure",
	ie.CausePFCPEntityInCongestion:          "pfcp_entity_in_congestion",
	ie.CauseNoResourcesAvailable:            "no_resources_available",
	ie.CauseServiceNotSupported:             "service_not_supported",
	ie.CauseSystemFailure:                   "system_failure",
	ie.CauseRedirectionRequested:            "redirection_requested",
}

// reportTypeNames are the flags of the Report Type IE (§8.2.21), lowest
// bit first.
var reportTypeNames = [...]string{"dldr", "usar", "erir", "upir", "tmir", "sesr", "uisr"}

// usageReportTriggerNames are the flags of the Usage Report Trigger IE
// (§8.2.41), octet 5's lowest bit first.
var usageReportTriggerNames = [...]string{"perio", "volth", "timth", "quhti", "start", "stopt", "droth", "immer",
	"volqu", "timqu", "liusa", "termr", "monit", "envcl", "macar", "eveth",
	"evequ", "tebur", "ipmjl", "quvti", "emrre", "upint"}

var (
	datagramsMetric = telemetry.Counter("pfcp_datagrams_received_total", "UDP datagrams received on the PFCP port.")
	droppedMetric   = telemetry.Counter("pfcp_messages_dropped_total",
		"PFCP messages dropped unanswered, by reason: not_allowed (from a source outside pfcp.allowed_peers and pfcp.peers, dropped unread), truncated, bad_length, bad_version (answered with Version Not Supported), bad_header, unknown_type, undecodable, unmatched_response (answering no request of the UPF's), overload (the request queue full: the peer retransmits).",
		"reason")
	retransmissionsMetric = telemetry.Counter("pfcp_retransmissions_received_total",
		"Requests peers sent again, answered from the response cache or dropped while their first copy was being served.")
	panicsMetric   = telemetry.Counter("pfcp_panics_total", "Panics recovered while serving a PFCP message: each one a bug.")
	handlingMetric = telemetry.Histogram("pfcp_request_handling_seconds",
		"Time from reading a PFCP request to sending its response; retransmissions answered from the cache are left out.")
	associationMetric = telemetry.Gauge("pfcp_association_state",
		"PFCP associations by the peer's Node ID: 1 for the state it is in (up, or lost while the peer leaves heartbeats unanswered), 0 for the other.",
		"node_id", "state")
	lastHeartbeatMetric = telemetry.Gauge("pfcp_association_last_heartbeat_timestamp_seconds",
		"When the last heartbeat was exchanged with an associated peer, either way, in seconds since the epoch.", "node_id")
)

// handlingBucketsEvery is the stride of the buckets of Stats.Handling the
// histogram shows: four to a decade, from 1.8 µs to 56 ms (the last element
// of Handling also holds longer times).
const handlingBucketsEvery = handlingPerDecade / 4

// Metrics collects the server's figures: those counted inline and, at
// scrape time, Stats and the associations.
func (s *Server) Metrics() prometheus.Collector {
	return &telemetry.Collector{
		Families: []telemetry.Family{datagramsMetric, droppedMetric, retransmissionsMetric, panicsMetric, handlingMetric,
			associationMetric, lastHeartbeatMetric},
		Inline: s.metrics.inline(),
		Read: func(ch chan<- prometheus.Metric) {
			st := s.Stats()
			datagramsMetric.Emit(ch, float64(st.Received))
			for _, d := range []struct {
				reason string
				n      uint64
			}{{"not_allowed", st.NotAllowed}, {"truncated", st.Truncated}, {"bad_length", st.BadLength}, {"bad_version", st.BadVersion},
				{"bad_header", st.BadHeader}, {"unknown_type", st.UnknownType}, {"undecodable", st.Undecodable},
				{"unmatched_response", st.UnmatchedResponses}, {"overload", st.Overload}} {
				droppedMetric.Emit(ch, float64(d.n), d.reason)
			}
			retransmissionsMetric.Emit(ch, float64(st.Retransmissions))
			panicsMetric.Emit(ch, float64(st.Panics))

			buckets := map[float64]uint64{}
			var count uint64
			for i, n := range st.Handling {
				count += n
				if (i+1)%handlingBucketsEvery == 0 && i < HandlingBuckets-1 {
					buckets[HandlingBound(i).Seconds()] = count
				}
			}
			handlingMetric.EmitHistogram(ch, count, time.Duration(s.stats.handlingNanos.Load()).Seconds(), buckets)

			for _, a := range s.Associations() {
				up, lost := 1.0, 0.0
				if a.Lost {
					up, lost = 0, 1
				}
				associationMetric.Emit(ch, up, a.NodeID, "up")
				associationMetric.Emit(ch, lost, a.NodeID, "lost")
				if !a.LastHeartbeat.IsZero() {
					lastHeartbeatMetric.Emit(ch, float64(a.LastHeartbeat.UnixNano())/1e9, a.NodeID)
				}
			}
		}}
}
