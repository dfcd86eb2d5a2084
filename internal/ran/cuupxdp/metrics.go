package cuupxdp

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdp5g/xdp5g/internal/telemetry"
)

var (
	classifierPackets = telemetry.Counter("cuup_classifier_packets_total",
		"Packets the CU-UP's XDP classifier handled, by role, CPU and reason.", "role", "cpu", "reason")
	classifierBytes = telemetry.Counter("cuup_classifier_bytes_total",
		"Octets of the packets the CU-UP's XDP classifier handled, by role, CPU and reason.", "role", "cpu", "reason")
)

// Label names a role in metrics and in the REST API's statistics.
func (r Role) Label() string {
	switch r {
	case N3:
		return "n3"
	case F1U:
		return "f1u"
	}
	return r.String()
}

// Metrics collects the classifier's counters at scrape time.
func (d *Datapath) Metrics() prometheus.Collector {
	return &telemetry.Collector{Families: []telemetry.Family{classifierPackets, classifierBytes},
		Read: func(ch chan<- prometheus.Metric) {
			for _, role := range []Role{N3, F1U} {
				st, err := d.Stats(role)
				if err != nil {
					classifierPackets.Fail(ch, err)
					continue
				}
				emitStats(ch, role, st)
			}
		}}
}

// emitStats sends a role's counters per CPU and reason.
func emitStats(ch chan<- prometheus.Metric, role Role, st Stats) {
	for cpu, counts := range st.PerCPU {
		for reason, c := range counts {
			labels := []string{role.Label(), strconv.Itoa(cpu), Reason(reason).String()}
			classifierPackets.Emit(ch, float64(c.Packets), labels...)
			classifierBytes.Emit(ch, float64(c.Bytes), labels...)
		}
	}
}
