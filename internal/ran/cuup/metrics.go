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
	socketPackets = telemetry.Counter("cuup_socket_packets_total",
		"What the CU-UP's socket path did besides G-PDUs, by counter (the JSON names of sockets in GET /api/v1/cuup/stats): Echo Requests answered, other messages and malformed datagrams dropped, datagrams the kernel refused.",
		"counter")
	xdpPackets = telemetry.Counter("cuup_xdp_packets_total",
		"What the CU-UP's AF_XDP path could not do itself, by counter (the JSON names of xdp in GET /api/v1/cuup/stats): sent through the kernel, of those refused by it, dropped with the TX ring full, received without the classifier's metadata.",
		"counter")
)

// Metrics collects the bearer contexts and the workers' and the paths'
// counters at scrape time.
func (c *CUUP) Metrics() prometheus.Collector {
	return &telemetry.Collector{Families: []telemetry.Family{bearerContexts, workerPackets, socketPackets, xdpPackets},
		Read: func(ch chan<- prometheus.Metric) {
			c.mu.RLock()
			contexts := len(c.contexts)
			c.mu.RUnlock()
			bearerContexts.Emit(ch, float64(contexts))
			stats := c.Stats()
			emitWorkers(ch, stats.Workers)
			emitCounters(ch, socketPackets, stats.Sockets)
			emitCounters(ch, xdpPackets, stats.XDP)
		}}
}

// Label names the i-th worker: by its name, else its place.
func (s WorkerStats) Label(i int) string {
	if s.Worker != "" {
		return s.Worker
	}
	return strconv.Itoa(i)
}

// emitWorkers sends each worker's counters.
func emitWorkers(ch chan<- prometheus.Metric, workers []WorkerStats) {
	for i, ws := range workers {
		emitCounters(ch, workerPackets, ws, ws.Label(i))
	}
}

// emitCounters sends the counters of stats to family, each with the
// labels and its JSON name.
func emitCounters(ch chan<- prometheus.Metric, family telemetry.Family, stats any, labels ...string) {
	for _, c := range Counters(stats) {
		family.Emit(ch, float64(c.Value), append(labels, c.Name)...)
	}
}

// Counter is one counter of a stats struct, by its JSON name.
type Counter struct {
	Name  string
	Value uint64
}

// Counters lists the counters of stats (a struct such as WorkerStats,
// SocketStats or XDPStats: its uint64 fields), in their order.
func Counters(stats any) []Counter {
	v := reflect.ValueOf(stats)
	var counters []Counter
	for f := range v.NumField() {
		if v.Field(f).Kind() != reflect.Uint64 {
			continue
		}
		name, _, _ := strings.Cut(v.Type().Field(f).Tag.Get("json"), ",")
		counters = append(counters, Counter{Name: name, Value: v.Field(f).Uint()})
	}
	return counters
}
