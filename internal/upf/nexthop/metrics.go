package nexthop

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdp5g/xdp5g/internal/telemetry"
)

var nexthopsMetric = telemetry.Gauge("upf_nexthops",
	"Next hops the data path holds, by kind (destination: a tunnel's far end, such as a gNB; gateway: where the mirrored uplink routes lead) and state (resolved: the data path has its Ethernet header; unresolved: no route or neighbour entry yet, and packets to it are dropped or left to the kernel).",
	"kind", "state")

// Metrics collects the next hops at scrape time.
func (r *Resolver) Metrics() prometheus.Collector {
	return &telemetry.Collector{Families: []telemetry.Family{nexthopsMetric},
		Read: func(ch chan<- prometheus.Metric) {
			type counts struct{ resolved, unresolved int }
			add := func(c *counts, s *slotState) {
				if s.nh.Valid != 0 {
					c.resolved++
				} else {
					c.unresolved++
				}
			}
			var destinations, gateways counts
			r.mu.Lock()
			for _, e := range r.dsts {
				add(&destinations, &e.slotState)
			}
			for _, e := range r.nbrs {
				add(&gateways, &e.slotState)
			}
			r.mu.Unlock()
			for kind, c := range map[string]counts{"destination": destinations, "gateway": gateways} {
				nexthopsMetric.Emit(ch, float64(c.resolved), kind, "resolved")
				nexthopsMetric.Emit(ch, float64(c.unresolved), kind, "unresolved")
			}
		}}
}
