// Package telemetry is what the daemon's parts share to export their
// figures to Prometheus: one registry per daemon, served at /metrics, and
// the metric families each part's collector (a metrics.go beside what it
// reads) fills at scrape time.
package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/xdp5g/xdp5g/internal/platform/version"
)

// Namespace prefixes every metric name of xdp5g.
const Namespace = "xdp5g"

// NewRegistry is a daemon's registry, with the Go runtime's and the
// process's metrics and xdp5g_build_info (1, labelled with the version, as
// Prometheus's own build_info is); each part the daemon runs adds its
// collector.
func NewRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "build_info",
		Help: "Always 1: the running build's version in its label.", ConstLabels: prometheus.Labels{"version": version.String()}})
	buildInfo.Set(1)
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo)
	return r
}

// Family is a metric family whose values a collector reads at scrape time.
type Family struct {
	desc *prometheus.Desc
	typ  prometheus.ValueType
}

// Counter is a family of counters named xdp5g_name, with the labels.
func Counter(name, help string, labels ...string) Family {
	return Family{Desc(name, help, labels...), prometheus.CounterValue}
}

// Gauge is a family of gauges named xdp5g_name, with the labels.
func Gauge(name, help string, labels ...string) Family {
	return Family{Desc(name, help, labels...), prometheus.GaugeValue}
}

// Histogram is a family of histograms named xdp5g_name, with the labels.
func Histogram(name, help string, labels ...string) Family {
	return Family{desc: Desc(name, help, labels...)}
}

// Desc describes the metric xdp5g_name.
func Desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(Namespace+"_"+name, help, labels, nil)
}

// Emit sends the family's metric with the label values, in the order of
// the family's labels.
func (f Family) Emit(ch chan<- prometheus.Metric, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(f.desc, f.typ, v, labels...)
}

// EmitHistogram sends a histogram of the family: count observations
// summing to sum, buckets counting those at most each upper bound.
func (f Family) EmitHistogram(ch chan<- prometheus.Metric, count uint64, sum float64, buckets map[float64]uint64, labels ...string) {
	ch <- prometheus.MustNewConstHistogram(f.desc, count, sum, buckets, labels...)
}

// Fail reports that the family's values could not be read: the scrape
// says so and goes on with the other families.
func (f Family) Fail(ch chan<- prometheus.Metric, err error) {
	ch <- prometheus.NewInvalidMetric(f.desc, err)
}

// Collector is a part's collector: families read at scrape time, and
// metrics updated inline where their events happen.
type Collector struct {
	Families []Family
	// Read sends the families' metrics; nil when there are none.
	Read   func(ch chan<- prometheus.Metric)
	Inline []prometheus.Collector
}

func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range c.Families {
		ch <- f.desc
	}
	for _, m := range c.Inline {
		m.Describe(ch)
	}
}

func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c.Read != nil {
		c.Read(ch)
	}
	for _, m := range c.Inline {
		m.Collect(ch)
	}
}
