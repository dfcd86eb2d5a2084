package upfxdp

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdp5g/xdp5g/internal/telemetry"
)

var (
	packetsMetric = telemetry.Counter("upf_packets_total",
		"Packets the UPF's data path received on an interface, by where they ended (reason).", "interface", "reason")
	bytesMetric = telemetry.Counter("upf_bytes_total",
		"Octets of the packets the UPF's data path received on an interface, by where they ended (reason).", "interface", "reason")
	coldMetric = telemetry.Counter("upf_cold_packets_total",
		"Packets of installed keys on an interface that no fast-path record served: found through their PDR set.", "interface")
	urrEventsLostMetric = telemetry.Counter("upf_urr_events_lost_total",
		"URR events the data path had no room for: a URR may have passed a limit unreported.")
	unknownTEIDPassedMetric = telemetry.Counter("upf_unknown_teid_passed_total",
		"G-PDUs to unknown TEIDs (reason drop_unknown_teid) the data path passed to the GTP-U endpoint for an Error Indication.")
)

// Metrics collects the data path's counters at scrape time: every
// attached interface's by reason, the URR events lost and the G-PDUs to
// unknown TEIDs passed up.
func (d *Datapath) Metrics() prometheus.Collector {
	return &telemetry.Collector{Families: []telemetry.Family{packetsMetric, bytesMetric, coldMetric, urrEventsLostMetric, unknownTEIDPassedMetric},
		Read: func(ch chan<- prometheus.Metric) {
			if ifaces, err := d.Counters(); err != nil {
				packetsMetric.Fail(ch, err)
			} else {
				for _, i := range ifaces {
					for _, reason := range ReasonNames {
						c := i.Reasons[reason]
						packetsMetric.Emit(ch, float64(c.Packets), i.Name, reason)
						bytesMetric.Emit(ch, float64(c.Bytes), i.Name, reason)
					}
					coldMetric.Emit(ch, float64(i.Cold.Packets), i.Name)
				}
			}
			if lost, err := d.URREventsLost(); err != nil {
				urrEventsLostMetric.Fail(ch, err)
			} else {
				urrEventsLostMetric.Emit(ch, float64(lost))
			}
			if passed, err := d.UnknownTEIDPassed(); err != nil {
				unknownTEIDPassedMetric.Fail(ch, err)
			} else {
				unknownTEIDPassedMetric.Emit(ch, float64(passed))
			}
		}}
}
