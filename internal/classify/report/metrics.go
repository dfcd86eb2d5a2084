package report

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdp5g/xdp5g/internal/telemetry"
)

var (
	intentPackets   = telemetry.Counter("intent_packets_total", "Packets of an intent's flows.", "intent", "action")
	intentBytes     = telemetry.Counter("intent_bytes_total", "Octets of an intent's flows.", "intent", "action")
	intentOffloaded = telemetry.Counter("intent_offloaded_packets_total",
		"Packets of an intent's flows sent to alternative nodes.", "intent", "action")
	sliceLocalPackets     = telemetry.Counter("slice_local_packets_total", "Packets of a slice its CPUs took.", "slice")
	sliceLocalBytes       = telemetry.Counter("slice_local_bytes_total", "Octets of the packets of a slice its CPUs took.", "slice")
	sliceOffloadedPackets = telemetry.Counter("slice_offloaded_packets_total", "Packets of a slice sent to alternative nodes.", "slice")
	sliceOffloadedBytes   = telemetry.Counter("slice_offloaded_bytes_total",
		"Octets of the packets of a slice sent to alternative nodes.", "slice")
	slicePoliced    = telemetry.Counter("slice_policed_packets_total", "Packets of a slice its rate dropped.", "slice")
	cpuEnqueued     = telemetry.Counter("cpu_queue_enqueued_packets_total", "Packets steered to a CPU's queue.", "cpu")
	cpuDequeued     = telemetry.Counter("cpu_queue_dequeued_packets_total", "Steered packets a CPU took off its queue.", "cpu")
	cpuDropped      = telemetry.Counter("cpu_queue_dropped_packets_total", "Packets a CPU's queue dropped, full.", "cpu")
	cpuBacklog      = telemetry.Gauge("cpu_queue_backlog_packets", "Packets in a CPU's queue.", "cpu")
	rulesMetric     = telemetry.Gauge("classify_rules", "Classification rules installed, the intents' included.")
	webhookFailures = telemetry.Counter("classify_webhook_failures_total",
		"Reports a webhook did not take (unreachable, timed out, or answered with an error status), by webhook: its URL without its password.", "webhook")
	slicesMetric = telemetry.Gauge("classify_slices", "Slices the classifier steers to.")
)

// Metrics collects the classifier's figures at scrape time: per intent,
// slice and CPU, as the reports carry them but for the rates, which
// Prometheus takes from the counters; and the reports each webhook did
// not take.
func (r *Reporter) Metrics() prometheus.Collector {
	dp, intents := r.dp, r.intents
	return &telemetry.Collector{
		Families: []telemetry.Family{intentPackets, intentBytes, intentOffloaded, sliceLocalPackets, sliceLocalBytes,
			sliceOffloadedPackets, sliceOffloadedBytes, slicePoliced, cpuEnqueued, cpuDequeued, cpuDropped, cpuBacklog,
			rulesMetric, slicesMetric, webhookFailures},
		Read: func(ch chan<- prometheus.Metric) {
			for i, hook := range r.webhooks {
				webhookFailures.Emit(ch, float64(r.failed[i].Load()), redacted(hook))
			}
			if list, err := intents.List(); err != nil {
				intentPackets.Fail(ch, err)
			} else {
				for _, in := range list {
					id := strconv.FormatUint(uint64(in.ID), 10)
					intentPackets.Emit(ch, float64(in.Stats.Packets), id, in.Action)
					intentBytes.Emit(ch, float64(in.Stats.Bytes), id, in.Action)
					intentOffloaded.Emit(ch, float64(in.Stats.Offloaded), id, in.Action)
				}
			}
			all := dp.Slices()
			for _, s := range all {
				st, err := dp.SliceStats(s)
				if err != nil {
					sliceLocalPackets.Fail(ch, err)
					continue
				}
				id := strconv.FormatUint(uint64(s.ID), 10)
				sliceLocalPackets.Emit(ch, float64(st.Local.Packets), id)
				sliceLocalBytes.Emit(ch, float64(st.Local.Bytes), id)
				sliceOffloadedPackets.Emit(ch, float64(st.Offloaded.Packets), id)
				sliceOffloadedBytes.Emit(ch, float64(st.Offloaded.Bytes), id)
				slicePoliced.Emit(ch, float64(st.Policed.Packets), id)
			}
			if loads, err := dp.CPULoads(); err != nil {
				cpuBacklog.Fail(ch, err)
			} else {
				for cpu, l := range loads {
					c := strconv.Itoa(cpu)
					cpuEnqueued.Emit(ch, float64(l.Enqueued), c)
					cpuDequeued.Emit(ch, float64(l.Dequeued), c)
					cpuDropped.Emit(ch, float64(l.Dropped), c)
					cpuBacklog.Emit(ch, float64(l.Backlog()), c)
				}
			}
			rulesMetric.Emit(ch, float64(dp.Len()))
			slicesMetric.Emit(ch, float64(len(all)))
		}}
}
