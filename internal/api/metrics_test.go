package api

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// failing is a figure that cannot be read.
type failing struct{ desc *prometheus.Desc }

func (f failing) Describe(ch chan<- *prometheus.Desc) { ch <- f.desc }
func (f failing) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.NewInvalidMetric(f.desc, errors.New("a map lookup failed"))
}

// A figure that cannot be read is logged as an error; a scraper that goes
// away before the answer is read is not, which would be an error line per
// metric family of each scrape it gave up.
func TestMetricsLogWhatTheDaemonCouldNotRead(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(failing{prometheus.NewDesc("xdp5g_test_unreadable", "a figure that cannot be read", nil, nil)})
	for i := range 200 { // an answer larger than the sockets' buffers
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: fmt.Sprintf("xdp5g_test_%d", i), Help: strings.Repeat("h", 20000)}, []string{"n"})
		for j := range 20 {
			g.WithLabelValues(fmt.Sprint(j)).Set(1)
		}
		reg.MustRegister(g)
	}
	var logged bytes.Buffer // written before served is closed
	handler := NewHandler(Services{Metrics: reg, Log: slog.New(slog.NewTextHandler(&logged, nil))})
	served := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(served)
		handler.ServeHTTP(w, r)
	}))
	defer srv.Close()
	// A small receive buffer, never read past the answer's first octet:
	// the answer waits on the scraper, which then goes with a reset.
	small := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := small.Dial("tcp", srv.Listener.Addr().String())
	must(t, err)
	fmt.Fprintf(conn, "GET /metrics HTTP/1.1\r\nHost: xdp5g\r\n\r\n")
	_, err = conn.Read(make([]byte, 1))
	must(t, err)
	conn.(*net.TCPConn).SetLinger(0)
	conn.Close()
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("the scrape was not over 10 s after the scraper went")
	}
	log := logged.String()
	if !strings.Contains(log, "a map lookup failed") {
		t.Errorf("the figure that cannot be read is not logged: %s", log)
	}
	if n := strings.Count(log, "level=ERROR"); n != 1 {
		t.Errorf("%d errors logged, want the figure's alone:\n%s", n, log)
	}
}
