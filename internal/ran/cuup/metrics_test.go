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

// The counters of the socket path and of the AF_XDP path that are no
// worker's (GET /api/v1/cuup/stats's sockets and xdp), drops among them,
// are exported too, by their JSON names.
func TestPathMetrics(t *testing.T) {
	c, _ := newCUUP(t)
	defer c.Close()
	c.socketStats = SocketStats{Echoes: 3, SendErrors: 1}
	c.xdpStats = XDPStats{TxFull: 7}
	out := testsupport.Exposition(t, c.Metrics())
	testsupport.HasLines(t, out, "# TYPE xdp5g_cuup_socket_packets_total counter",
		`xdp5g_cuup_socket_packets_total{counter="echoes"} 3`,
		`xdp5g_cuup_socket_packets_total{counter="sendErrors"} 1`,
		`xdp5g_cuup_socket_packets_total{counter="malformed"} 0`,
		"# TYPE xdp5g_cuup_xdp_packets_total counter",
		`xdp5g_cuup_xdp_packets_total{counter="txFull"} 7`,
		`xdp5g_cuup_xdp_packets_total{counter="badMeta"} 0`)
}
