package cuup

import (
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdp5g/xdp5g/internal/telemetry"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// A series per worker and counter, named by the worker's name, else its
// place, and the counter's JSON name.
func TestWorkerMetrics(t *testing.T) {
	workers := []WorkerStats{{Downlink: 1, DownlinkSent: 1}, {Worker: "queue 1", Downlink: 2, DownlinkSent: 1, NoDRB: 1}}
	out := testsupport.Exposition(t, &telemetry.Collector{Families: []telemetry.Family{workerPackets},
		Read: func(ch chan<- prometheus.Metric) { emitWorkers(ch, workers) }})
	testsupport.HasLines(t, out, "# TYPE xdp5g_cuup_worker_packets_total counter",
		`xdp5g_cuup_worker_packets_total{counter="downlink",worker="queue 1"} 2`,
		`xdp5g_cuup_worker_packets_total{counter="noDrb",worker="queue 1"} 1`,
		`xdp5g_cuup_worker_packets_total{counter="held",worker="0"} 0`)
	all := strings.Join(out, "\n")
	if n, want := strings.Count(all, "xdp5g_cuup_worker_packets_total{"), 2*(reflect.TypeFor[WorkerStats]().NumField()-1); n != want { // less the name
		t.Errorf("%d worker series, want %d", n, want)
	}
}
