package cuup

import (
	"reflect"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdp5g/xdp5g/internal/telemetry"
)

var (
	bearerContexts = telemetry.Gauge("cuup_bearer_contexts", "Bearer contexts the CU-CP set up.")
	workerPackets  = telemetry.Counter("cuup_worker_packets_total",
		"Packets a CU-UP worker counted, by worker (its name, else its place) and counter (the JSON names of GET /api/v1/cuup/stats).",
		"worker", "counter")
)

// Metrics collects the bearer contexts and the workers' counters at
// scrape time.
func (c *CUUP) Metrics() prometheus.Collector {
	return &telemetry.Collector{Families: []telemetry.Family{bearerContexts, workerPackets},
		Read: func(ch chan<- prometheus.Metric) {
			c.mu.RLock()
			contexts := len(c.contexts)
			c.mu.RUnlock()
			bearerContexts.Emit(ch, float64(contexts))
			emitWorkers(ch, c.Stats().Workers)
		}}
}

// Label names the i-th worker: by its name, else its place.
func (s WorkerStats) Label(i int) string {
	if s.Worker != "" {
		return s.Worker
	}
	return strconv.Itoa(i)
}

// emitWorkers sends each worker's counters (the uint64 fields of
// WorkerStats, by their JSON names).
func emitWorkers(ch chan<- prometheus.Metric, workers []WorkerStats) {
	for i, ws := range workers {
		worker := ws.Label(i)
		v := reflect.ValueOf(ws)
		for f := range v.NumField() {
			if v.Field(f).Kind() != reflect.Uint64 {
				continue
			}
			counter, _, _ := strings.Cut(v.Type().Field(f).Tag.Get("json"), ",")
			workerPackets.Emit(ch, float64(v.Field(f).Uint()), worker, counter)
		}
	}
}
