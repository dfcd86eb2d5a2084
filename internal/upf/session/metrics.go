package session

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdp5g/xdp5g/internal/telemetry"
)

var (
	sessionsMetric    = telemetry.Gauge("upf_sessions", "Sessions installed, from the REST API and over PFCP.")
	maxSessionsMetric = telemetry.Gauge("upf_sessions_max", "Sessions the data path is sized for (datapath.max_sessions).")
	slotsMetric       = telemetry.Gauge("upf_table_slots_used",
		"Slots in use of a data-path table: pdr, qer, urr, sdf_filter (PDRs with SDF filters), buffer (buffering FARs), pdr_set (uplink TEIDs and downlink UE addresses).", "table")
	maxSlotsMetric = telemetry.Gauge("upf_table_slots_max", "Slots a data-path table holds (see xdp5g_upf_table_slots_used).", "table")
)

// Metrics collects at scrape time the sessions and the slots of the data
// path's tables in use, and what the data path holds.
func (s *Store) Metrics() prometheus.Collector {
	return &telemetry.Collector{Families: []telemetry.Family{sessionsMetric, maxSessionsMetric, slotsMetric, maxSlotsMetric},
		Read: func(ch chan<- prometheus.Metric) {
			s.mu.Lock()
			sessions := len(s.sessions)
			type usage struct {
				table           string
				used, available int
			}
			tables := []usage{{"pdr", s.pdrSlots.InUse(), s.pdrSlots.Capacity()}, {"qer", s.qerSlots.InUse(), s.qerSlots.Capacity()},
				{"urr", s.urrSlots.InUse(), s.urrSlots.Capacity()}, {"sdf_filter", s.sdfSlots.InUse(), s.sdfSlots.Capacity()},
				{"buffer", s.bufSlots.InUse(), s.bufSlots.Capacity()}}
			s.mu.Unlock()
			sets, maxSets := s.dp.PDRSets()
			tables = append(tables, usage{"pdr_set", sets, maxSets})

			sessionsMetric.Emit(ch, float64(sessions))
			maxSessionsMetric.Emit(ch, float64(s.dp.MaxSessions()))
			for _, t := range tables {
				slotsMetric.Emit(ch, float64(t.used), t.table)
				maxSlotsMetric.Emit(ch, float64(t.available), t.table)
			}
		}}
}
