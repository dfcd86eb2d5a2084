package buffer

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdp5g/xdp5g/internal/telemetry"
)

var (
	heldMetric     = telemetry.Gauge("upf_buffer_held_packets", "Downlink packets the buffers of buffering FARs hold.")
	receivedMetric = telemetry.Counter("upf_buffer_received_packets_total",
		"Downlink packets the data path handed to the buffers of buffering FARs.")
	outcomesMetric = telemetry.Counter("upf_buffer_packets_total",
		"Buffered packets no longer held, by outcome: delivered (released and sent), unforwarded (released, but the data path did not forward them), dropped_full (over the session's or the total limit), discarded (as the SMF asked, or with their session).", "outcome")
)

// Metrics collects the buffers' figures at scrape time: what they hold,
// received and what became of it. Packets the data path could not hand
// over are its drop_buffer_full reason.
func (m *Manager) Metrics() prometheus.Collector {
	return &telemetry.Collector{Families: []telemetry.Family{heldMetric, receivedMetric, outcomesMetric},
		Read: func(ch chan<- prometheus.Metric) {
			m.mu.Lock()
			held, received, outcomes := m.total, m.received, m.outcomes
			m.mu.Unlock()
			heldMetric.Emit(ch, float64(held))
			receivedMetric.Emit(ch, float64(received))
			for o, n := range outcomes {
				outcomesMetric.Emit(ch, float64(n), outcomeNames[o])
			}
		}}
}
