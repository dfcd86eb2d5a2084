package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdp5g/xdp5g/internal/lab/pfcptest"
	"github.com/xdp5g/xdp5g/internal/platform/version"
	"github.com/xdp5g/xdp5g/internal/testsupport"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// downlinkForwarded is the series of the downlink packets the UPF sent
// back out of n3n6, tunnelled to the gNB.
const downlinkForwarded = `xdp5g_upf_packets_total{interface="n3n6",reason="downlink_forward"}`

// scrape reads the daemon's /metrics, a line each.
func scrape(t *testing.T, listen string) []string {
	t.Helper()
	resp, err := http.Get("http://" + listen + "/metrics")
	must(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	must(t, err)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s %s", resp.Status, body)
	}
	return strings.Split(string(body), "\n")
}

// promtool checks an exposition as Prometheus's own linter does.
func promtool(t *testing.T, exposition []string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed: make setup installs Debian's prometheus package, which has it")
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = strings.NewReader(strings.Join(exposition, "\n"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// value is a series' value in an exposition, failing the test without
// one.
func value(t *testing.T, exposition []string, series string) float64 {
	t.Helper()
	v, ok := testsupport.Value(exposition, series)
	if !ok {
		t.Fatalf("no %s in\n%s", series, strings.Join(exposition, "\n"))
	}
	return v
}

// downlinkSender sends UDP datagrams to the UE from the data network.
func (e *env) downlinkSender(t *testing.T) func() {
	t.Helper()
	var conn net.PacketConn
	must(t, e.peer.Do(func() (err error) {
		conn, err = net.ListenPacket("udp4", ":0")
		return err
	}))
	t.Cleanup(func() { conn.Close() })
	return func() {
		_, err := conn.WriteTo([]byte("hello"), &net.UDPAddr{IP: net.ParseIP(ue), Port: 9})
		must(t, err)
	}
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

// A running daemon exposes every configured part from the first scrape,
// in an exposition Prometheus's linter accepts, and its figures move with
// a PFCP association and establishment and with the packets of the
// session.
func TestMetricsMoveWithTrafficAndPFCP(t *testing.T) {
	e := newEnv(t)
	// The N3 address is local: the GTP-U endpoint serves it.
	must(t, e.upf.AddAddr("n3n6", "10.1.2.1/32"))
	listen := testsupport.FreeAddr(t, "udp")
	e.pfcp = fmt.Sprintf("{listen: %q, node_id: upf.xdp5g.test, heartbeat_interval: 1h}", listen)
	cfg := e.config(t)
	_, stop := runDaemon(t, cfg)
	defer func() { must(t, stop()) }()

	first := scrape(t, e.listen)
	promtool(t, first)
	testsupport.HasLines(t, first, downlinkForwarded+" 0", "xdp5g_upf_sessions 0", "xdp5g_upf_sessions_max 1024",
		`xdp5g_upf_table_slots_used{table="pdr"} 0`, `xdp5g_upf_nexthops{kind="destination",state="resolved"} 0`,
		"xdp5g_upf_buffer_held_packets 0", "xdp5g_upf_urr_events_lost_total 0", "xdp5g_upf_unknown_teid_passed_total 0",
		`xdp5g_gtpu_paths{state="up"} 0`,
		`xdp5g_pfcp_messages_dropped_total{reason="truncated"} 0`, "xdp5g_pfcp_request_handling_seconds_count 0",
		fmt.Sprintf(`xdp5g_build_info{version=%q} 1`, version.String()))
	value(t, first, "go_goroutines")
	value(t, first, "process_cpu_seconds_total")

	smf, err := pfcptest.NewSMF("smf.xdp5g.test", netip.MustParseAddrPort(listen))
	must(t, err)
	defer smf.Close()
	_, err = smf.Associate()
	must(t, err)
	_, err = smf.Establish(smf.PDUSessionRequest(0x77, netip.MustParseAddr(ue), netip.MustParseAddr("10.1.3.2"), 701, 9))
	must(t, err)

	// The daemon resolves the gNB's MAC address on its own: no packet is
	// sent before, to be counted late.
	eventually(t, "the gNB's next hop resolved", func() bool {
		return value(t, scrape(t, e.listen), `xdp5g_upf_nexthops{kind="destination",state="resolved"}`) == 1
	})
	send := e.downlinkSender(t)
	before := scrape(t, e.listen)
	const packets = 10
	for range packets {
		send()
	}
	eventually(t, "the packets counted", func() bool {
		return value(t, scrape(t, e.listen), downlinkForwarded) >= value(t, before, downlinkForwarded)+packets
	})
	after := scrape(t, e.listen)
	promtool(t, after)
	if got, want := value(t, after, downlinkForwarded), value(t, before, downlinkForwarded)+packets; got != want {
		t.Errorf("%g downlink packets forwarded, want %g", got, want)
	}
	// Each at least the UE's IPv4 and UDP headers and the payload.
	bytesOf := `xdp5g_upf_bytes_total{interface="n3n6",reason="downlink_forward"}`
	if grew := value(t, after, bytesOf) - value(t, before, bytesOf); grew < packets*(20+8+5) {
		t.Errorf("the downlink bytes grew by %g for %d packets", grew, packets)
	}
	// The session tunnels to the gNB, and to the SMF (N4-u): two paths.
	testsupport.HasLines(t, after, "xdp5g_upf_sessions 1",
		`xdp5g_upf_nexthops{kind="destination",state="resolved"} 1`, `xdp5g_gtpu_paths{state="up"} 2`,
		`xdp5g_pfcp_requests_received_total{message_type="association_setup_request"} 1`,
		`xdp5g_pfcp_requests_received_total{message_type="session_establishment_request"} 1`,
		`xdp5g_pfcp_responses_sent_total{cause="request_accepted",message_type="session_establishment_response"} 1`,
		`xdp5g_pfcp_association_state{node_id="smf.xdp5g.test",state="up"} 1`,
		"xdp5g_pfcp_request_handling_seconds_count 2")
	// The session's four PDRs and its TEID's and UE address's PDR sets.
	if pdrs := value(t, after, `xdp5g_upf_table_slots_used{table="pdr"}`); pdrs != 4 {
		t.Errorf("%g PDR slots in use, want 4", pdrs)
	}
	if sets := value(t, after, `xdp5g_upf_table_slots_used{table="pdr_set"}`); sets < 2 {
		t.Errorf("%g PDR sets in use, want the TEID's and the UE address's", sets)
	}
}

// A Prometheus server scraping the daemon holds the data path's counter of
// the downlink packets forwarded as the data path has it.
func TestPrometheusScrapesTheUPF(t *testing.T) {
	server, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus is not installed: make setup installs Debian's prometheus package")
	}
	e := newEnv(t)
	cfg := e.config(t)
	client, stop := runDaemon(t, cfg)
	defer func() { must(t, stop()) }()
	_, err = client.Create(context.Background(), []byte(doc))
	must(t, err)
	// A second handle on the pinned maps, to read the counter as the data
	// path has it.
	dp, err := upfxdp.Open(upfxdp.Options{PinPath: e.pin, MaxSessions: 1024, N3Addresses: cfg.N3Addresses})
	must(t, err)
	defer dp.Close()
	e.sendDownlink(t, dp)

	dir := t.TempDir()
	web := testsupport.FreeAddr(t, "tcp")
	config := fmt.Sprintf("global: {scrape_interval: 1s}\nscrape_configs:\n  - job_name: xdp5g\n    static_configs: [{targets: [%q]}]\n", e.listen)
	must(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600))
	var log bytes.Buffer
	cmd := exec.Command(server, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+web, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &log, &log
	must(t, cmd.Start())
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus:\n%s", log.String())
		}
	}()

	query := "http://" + web + "/api/v1/query?query=" + url.QueryEscape(downlinkForwarded)
	// A packet of sendDownlink's still on its way is counted late: the
	// data path's count is read anew each time.
	got, want := "nothing", ""
	for deadline := time.Now().Add(20 * time.Second); got != want; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus has %s of %s, the data path %s", got, downlinkForwarded, want)
		}
		want = strconv.FormatUint(forwarded(t, dp), 10)
		resp, err := http.Get(query)
		if err != nil {
			continue // not serving yet
		}
		var answer struct {
			Status string
			Data   struct {
				Result []struct{ Value [2]any } // time, value
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&answer)
		resp.Body.Close()
		if err == nil && answer.Status == "success" && len(answer.Data.Result) == 1 {
			got, _ = answer.Data.Result[0].Value[1].(string)
		}
	}
}
