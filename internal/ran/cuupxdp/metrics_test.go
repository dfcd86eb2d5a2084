package cuupxdp

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdp5g/xdp5g/internal/telemetry"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// A series per role, CPU and reason, of packets and of bytes.
func TestClassifierMetrics(t *testing.T) {
	var n3, f1u Stats
	n3.PerCPU = make([]Counts, 2)
	n3.PerCPU[0][Redirect] = Counter{Packets: 1, Bytes: 100}
	n3.PerCPU[1][Redirect] = Counter{Packets: 2, Bytes: 200}
	f1u.PerCPU = make([]Counts, 2)
	f1u.PerCPU[0][DropBadEthernet] = Counter{Packets: 1, Bytes: 10}
	out := testsupport.Exposition(t, &telemetry.Collector{Families: []telemetry.Family{classifierPackets, classifierBytes},
		Read: func(ch chan<- prometheus.Metric) {
			emitStats(ch, N3, n3)
			emitStats(ch, F1U, f1u)
		}})
	testsupport.HasLines(t, out,
		`xdp5g_cuup_classifier_packets_total{cpu="1",reason="redirect",role="n3"} 2`,
		`xdp5g_cuup_classifier_bytes_total{cpu="1",reason="redirect",role="n3"} 200`,
		`xdp5g_cuup_classifier_packets_total{cpu="0",reason="drop_bad_ethernet",role="f1u"} 1`,
		`xdp5g_cuup_classifier_packets_total{cpu="1",reason="drop_bad_ethernet",role="f1u"} 0`)
	if n := strings.Count(strings.Join(out, "\n"), "xdp5g_cuup_classifier_packets_total{"); n != 2*2*NumReasons {
		t.Errorf("%d classifier series, want %d", n, 2*2*NumReasons)
	}
}
