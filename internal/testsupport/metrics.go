package testsupport

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// Exposition is what collectors expose, in the text format Prometheus
// scrapes, a line each. The registry is pedantic: a collector that sends
// a metric it did not describe, or sends one twice, fails the test.
func Exposition(t testing.TB, cs ...prometheus.Collector) []string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(&collectors{cs}); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	return strings.Split(b.String(), "\n")
}

type collectors struct{ cs []prometheus.Collector }

func (c *collectors) Describe(ch chan<- *prometheus.Desc) {
	for _, one := range c.cs {
		one.Describe(ch)
	}
}

func (c *collectors) Collect(ch chan<- prometheus.Metric) {
	for _, one := range c.cs {
		one.Collect(ch)
	}
}

// HasLines fails the test, which goes on, for each line of want that an
// exposition lacks.
func HasLines(t testing.TB, exposition []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(exposition, w) {
			t.Errorf("no line %s in\n%s", w, strings.Join(exposition, "\n"))
		}
	}
}

// Value is the value of an exposition's sample of series, its name and
// labels as the text format writes them (labels in the order of their
// names); false when it has none.
func Value(exposition []string, series string) (float64, bool) {
	for _, line := range exposition {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			return v, err == nil
		}
	}
	return 0, false
}
