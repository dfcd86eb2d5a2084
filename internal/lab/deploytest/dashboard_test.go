package deploytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/daemon"
	"github.com/xdp5g/xdp5g/internal/lab/pfcptest"
	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/ran/cellsite"
	"github.com/xdp5g/xdp5g/internal/testsupport"
	"github.com/xdp5g/xdp5g/internal/testsupport/daemontest"
)

const dashboard = "../../../deploy/grafana/xdp5g.json"

// Every PromQL expression of the dashboard parses, and every metric it
// names is one that running daemons export, with the labels it selects and
// groups by: a UPF with PFCP, GTP-U signalling, the classifier and a slice,
// driven by an SMF whose association and session fill the labelled
// families; and a CU-UP.
func TestDashboardMetricsExist(t *testing.T) {
	exprs := dashboardExprs(t)
	exported := map[string]map[string]bool{}   // the labels of each metric exported
	values := map[string]map[string][]string{} // the values of each metric's labels
	for _, scrape := range []func(*testing.T) []string{upfScrape, cuupScrape} {
		for _, line := range scrape(t) {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			name, labels, _ := strings.Cut(line, "{")
			name, _, _ = strings.Cut(name, " ")
			if exported[name] == nil {
				exported[name], values[name] = map[string]bool{}, map[string][]string{}
			}
			for _, m := range labelName.FindAllStringSubmatch(labels, -1) {
				exported[name][m[1]] = true
				values[name][m[1]] = append(values[name][m[1]], m[2])
			}
		}
	}
	named := 0
	for _, expr := range exprs {
		named += checkExpr(t, expr, exported, values)
	}
	if named == 0 {
		t.Fatal("the dashboard names no metric")
	}
	t.Logf("%d expressions select %d metrics", len(exprs), named)
}

// labelName finds the label names and values of an exposition line's
// labels.
var labelName = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"`)

// Labels Prometheus adds to every series it scrapes (the chart's
// ServiceMonitor adds node).
var scrapeLabels = map[string]bool{"job": true, "instance": true, "node": true}

// dashboardExprs are the PromQL expressions of the dashboard's panels and
// template variables, Grafana's variables replaced as Grafana would.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	var board struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &board); err != nil {
		t.Fatal(err)
	}
	replacer := strings.NewReplacer("$__rate_interval", "1m", "$__interval", "1m", "$__range", "1h", "$instance", ".*", "$job", ".*")
	var exprs []string
	for _, p := range board.Panels {
		for _, target := range p.Targets {
			if target.Expr == "" {
				t.Errorf("panel %q has a target without an expression", p.Title)
				continue
			}
			exprs = append(exprs, replacer.Replace(target.Expr))
		}
	}
	for _, v := range board.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		query, _ := q["query"].(string)
		// label_values(METRIC, LABEL): the metric is a selector.
		selector, ok := strings.CutPrefix(query, "label_values(")
		if !ok {
			t.Errorf("variable %s: query %q, want label_values(METRIC, LABEL)", v.Name, query)
			continue
		}
		selector = selector[:strings.LastIndex(selector, ",")]
		// Grafana's "All" is every value the query finds: the targets of
		// xdp5g, not every target with a process's metrics.
		if !strings.HasPrefix(selector, "xdp5g_") {
			t.Errorf("variable %s takes its values from %s, which other targets than xdp5g's have", v.Name, selector)
		}
		exprs = append(exprs, replacer.Replace(selector))
	}
	return exprs
}

// checkExpr parses a PromQL expression and checks that each metric it
// selects is exported with the labels it matches, and that what it
// aggregates by is a label of the metrics aggregated. It returns the
// number of metrics selected.
func checkExpr(t *testing.T, expr string, exported map[string]map[string]bool, values map[string]map[string][]string) int {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Errorf("%q: %v", expr, err)
		return 0
	}
	named := 0
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			named++
			names, ok := exported[n.Name]
			switch {
			case n.Name == "":
				t.Errorf("%q selects series by labels only: name a metric", expr)
			case !ok:
				t.Errorf("the dashboard names %s, which no daemon exports, in %q", n.Name, expr)
			}
			for _, m := range n.LabelMatchers {
				if ok && m.Name != "__name__" && !scrapeLabels[m.Name] && !names[m.Name] {
					t.Errorf("%q selects %s by %s, a label it does not have", expr, n.Name, m.Name)
				}
				// A value it selects by is one the daemons export: a
				// misspelt reason or cause would select nothing.
				if positive := m.Type == labels.MatchEqual || m.Type == labels.MatchRegexp; ok && positive &&
					!scrapeLabels[m.Name] && m.Name != "__name__" && !slices.ContainsFunc(values[n.Name][m.Name], m.Matches) {
					t.Errorf("%q selects %s by %s, which no series of it has (%v)", expr, n.Name, m, values[n.Name][m.Name])
				}
			}
		case *parser.AggregateExpr:
			if n.Without {
				break
			}
			under := map[string]bool{}
			parser.Inspect(n.Expr, func(inner parser.Node, _ []parser.Node) error {
				if vs, ok := inner.(*parser.VectorSelector); ok {
					for l := range exported[vs.Name] {
						under[l] = true
					}
				}
				return nil
			})
			for _, l := range n.Grouping {
				if !scrapeLabels[l] && !under[l] {
					t.Errorf("%q aggregates by %s, a label none of its metrics has", expr, l)
				}
			}
		}
		return nil
	})
	return named
}

// upfScrape runs a UPF with PFCP, GTP-U signalling and the classifier,
// fills the families that have series only once something happens (an
// association the UPF sets up with an SMF, heartbeats, a session whose URR
// reports periodically, an association setup left unanswered, a slice), and
// returns its /metrics.
func upfScrape(t *testing.T) []string {
	upf, peer := testsupport.Netns(t, "dash-"), testsupport.Netns(t, "dash-")
	for _, link := range []string{"n3n6", "edge"} {
		if err := namespace.Veth(upf, link, peer, link); err != nil {
			t.Fatal(err)
		}
	}
	// The N3 address is local: GTP-U signalling runs.
	if err := errors.Join(upf.AddAddr("n3n6", "10.1.2.1/24"), peer.AddAddr("n3n6", "10.1.2.2/24")); err != nil {
		t.Fatal(err)
	}
	pfcpListen := testsupport.FreeAddr(t, "udp")
	const smfNodeID = "smf.dashboard.test"
	smf, err := pfcptest.NewSMF(smfNodeID, netip.MustParseAddrPort(pfcpListen))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { smf.Close() })
	// Where the UPF sets up its association and sends its requests.
	smfAddr, err := smf.Listen(netip.MustParseAddrPort("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	// A peer that never answers: the UPF retransmits, then gives up. It has
	// an address of its own: the UPF takes an association from a peer's
	// address as that peer's, so on the SMF's address it could wait on the
	// SMF's instead of asking. Its port stays bound, for nobody to answer.
	silent, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	silentPeer := silent.LocalAddr().String()
	dir := t.TempDir()
	cfg := daemontest.Config(t, dir, fmt.Sprintf(`interfaces: [{name: n3n6, roles: [access, core]}]
n3_addresses: [10.1.2.1]
netns: %s
api: {listen: %q}
datapath: {pin_path: %s, max_sessions: 64}
state_file: %s
pfcp: {node_id: upf.dashboard.test, listen: %q, peers: [%q, %q], heartbeat_interval: 1s, t1: 500ms, n1: 1, ue_pool: 10.45.0.0/24}
classify: {interfaces: [edge], reports: {interval: 50ms}}
`, upf.Name, testsupport.FreeAddr(t, "tcp"), testsupport.PinDir(t), filepath.Join(dir, "sessions.json"), pfcpListen, smfAddr, silentPeer))
	client := run(t, cfg)

	var exposition []string
	eventually(t, "the association with the SMF", func() bool {
		exposition = scrape(t, cfg.API.Listen)
		return slices.Contains(exposition, `xdp5g_pfcp_association_state{node_id="`+smfNodeID+`",state="up"} 1`)
	})
	req := smf.PDUSessionRequest(1, netip.MustParseAddr("10.45.0.9"), netip.MustParseAddr("10.1.2.2"), 100, 9)
	if err := pfcptest.AddURR(req, pfcptest.VolumeURR(1, pfcptest.TriggerPERIO, time.Second, 0), 1, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := smf.Establish(req); err != nil {
		t.Fatal(err)
	}
	if _, err := client.PostIntent(t.Context(), []byte(`{"Resources": [{"resourceId": "1", "encapsulationType1": "gtp", "qfi": "5"}],
 "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0", "priority": "high", "rate": "100000000"}}`)); err != nil {
		t.Fatal(err)
	}
	// An Echo Response nobody asked for: signalling the data path passes
	// up to the daemon.
	var gnb net.Conn
	if err := peer.Do(func() (err error) {
		gnb, err = net.Dial("udp4", "10.1.2.1:2152")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer gnb.Close()
	buf := gopacket.NewSerializeBuffer()
	const echoResponse, recovery = 2, 14
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true},
		&layers.GTPv1U{Version: 1, ProtocolType: 1, MessageType: echoResponse, SequenceNumberFlag: true},
		gopacket.Payload{recovery, 0}); err != nil {
		t.Fatal(err)
	}
	// Heartbeats, a periodic report, the silent peer given up and the
	// signalling.
	want := []string{"xdp5g_pfcp_association_last_heartbeat_timestamp_seconds", "xdp5g_pfcp_request_round_trip_seconds_count",
		"xdp5g_pfcp_session_reports_sent_total", "xdp5g_pfcp_usage_reports_sent_total", "xdp5g_pfcp_requests_unanswered_total",
		"xdp5g_gtpu_messages_received_total"}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := gnb.Write(buf.Bytes()); err != nil {
			t.Fatal(err)
		}
		exposition = scrape(t, cfg.API.Listen)
		missing := slices.DeleteFunc(slices.Clone(want), func(m string) bool { return has(exposition, m) })
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %v after 10 s", missing)
		}
	}
	return exposition
}

// cuupScrape runs a CU-UP alone, with a bearer context, and returns its
// /metrics.
func cuupScrape(t *testing.T) []string {
	site, err := cellsite.New("dashcu-")
	if err != nil {
		t.Fatal(err)
	}
	testsupport.Cleanup(t, site.Close)
	dir := t.TempDir()
	cfg := daemontest.Config(t, dir, fmt.Sprintf(`netns: %s
api: {listen: %q}
datapath: {pin_path: %s}
state_file: %s
cuup: {n3: {interface: %s, address: %s}, f1u: {interface: %s, address: %s}, io: afxdp, queues: [0], frames: 1024}
`, site.CU.Name, testsupport.FreeAddr(t, "tcp"), testsupport.PinDir(t), filepath.Join(dir, "sessions.json"),
		cellsite.N3, cellsite.CUN3Addr, cellsite.F1U, cellsite.CUF1UAddr))
	run(t, cfg)
	return scrape(t, cfg.API.Listen)
}

// run runs the daemon until the test ends, and waits until it is ready.
func run(t *testing.T, cfg *config.Config) *api.Client {
	t.Helper()
	testsupport.Go(t, func(ctx context.Context) error {
		return daemon.Run(ctx, cfg, slog.New(slog.NewTextHandler(t.Output(), nil)))
	})
	client := &api.Client{URL: "http://" + cfg.API.Listen, HTTP: &http.Client{Timeout: 5 * time.Second}}
	eventually(t, "the daemon ready", func() bool { return client.Ready(t.Context()) == nil })
	return client
}

func scrape(t *testing.T, listen string) []string {
	t.Helper()
	resp, err := http.Get("http://" + listen + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s %v", resp.Status, err)
	}
	return strings.Split(string(body), "\n")
}

// has says whether an exposition has a sample of a metric.
func has(exposition []string, metric string) bool {
	return slices.ContainsFunc(exposition, func(line string) bool {
		return strings.HasPrefix(line, metric+" ") || strings.HasPrefix(line, metric+"{")
	})
}

// eventually polls cond until it holds, failing the test after 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
