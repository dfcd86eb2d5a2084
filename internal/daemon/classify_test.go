package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/classify/report"
	"github.com/xdp5g/xdp5g/internal/testsupport"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// Addresses of the spare link, where the classifier runs.
const (
	classifiedAddr = "10.9.0.1"
	peerAddr       = "10.9.0.2"
	droppedPort    = 9999
	passedPort     = 9998
)

// classified sends a datagram from the peer to the dropped port, then one
// to the passed port, and expects the second only: the veth keeps their
// order, so the first would have arrived before it.
func (e *env) classified(t *testing.T, dropped, passed net.PacketConn) {
	t.Helper()
	var conn net.PacketConn
	must(t, e.peer.Do(func() (err error) {
		conn, err = net.ListenPacket("udp4", peerAddr+":0")
		return err
	}))
	defer conn.Close()
	for _, port := range []int{droppedPort, passedPort} {
		_, err := conn.WriteTo([]byte("classify me"), &net.UDPAddr{IP: net.ParseIP(classifiedAddr), Port: port})
		must(t, err)
	}
	buf := make([]byte, 64)
	must(t, passed.SetReadDeadline(time.Now().Add(5*time.Second)))
	if _, _, err := passed.ReadFrom(buf); err != nil {
		t.Fatalf("the passed datagram did not arrive: %v", err)
	}
	must(t, dropped.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
	if _, _, err := dropped.ReadFrom(buf); err == nil {
		t.Fatal("the dropped datagram arrived")
	}
}

// newClassifiedEnv is an env with the spare link addressed, and the
// sockets of the dropped and the passed port on the classified side.
func newClassifiedEnv(t *testing.T) (e *env, dropped, passed net.PacketConn) {
	t.Helper()
	e = newEnv(t)
	must(t, e.upf.AddAddr("spare", classifiedAddr+"/24"))
	must(t, e.peer.AddAddr("spare", peerAddr+"/24"))
	must(t, e.upf.Do(func() (err error) {
		if dropped, err = net.ListenPacket("udp4", fmt.Sprintf("%s:%d", classifiedAddr, droppedPort)); err == nil {
			passed, err = net.ListenPacket("udp4", fmt.Sprintf("%s:%d", classifiedAddr, passedPort))
		}
		return err
	}))
	t.Cleanup(func() {
		dropped.Close()
		passed.Close()
	})
	return e, dropped, passed
}

func ruleCounter(t *testing.T, client *api.Client, id uint32) uint64 {
	t.Helper()
	doc, err := client.Rule(context.Background(), id)
	must(t, err)
	var r struct{ Counters struct{ Packets uint64 } }
	must(t, json.Unmarshal(doc, &r))
	return r.Counters.Packets
}

// The daemon runs the classifier on its own interface: rules come over
// REST, are saved, and go on being enforced while the daemon is down and
// after it restarts; without the classify section the next run removes it.
func TestClassifierRulesSurviveRestarts(t *testing.T) {
	e, dropped, passed := newClassifiedEnv(t)

	// The rules file in a directory of its own, which the daemon makes.
	e.classify = fmt.Sprintf("{interfaces: [spare], max_masks: 8, rules_file: %s}", filepath.Join(e.dir, "rules", "rules.json"))
	cfg := e.config(t)
	client, stop := runDaemon(t, cfg)
	ctx := context.Background()
	for _, rule := range []string{
		`{"id": 1, "priority": 10, "action": "drop", "match": {"proto": 17, "dstPort": 9999}}`,
		`{"id": 2, "action": "count", "match": {"innerDst": "10.9.0.1"}}`,
		`{"id": 3, "action": "redirect", "match": {"dstPort": 7}, "out": {"interface": "n3n6", "dstMac": "02:00:00:00:00:07"}}`,
	} {
		_, err := client.AddRule(ctx, []byte(rule))
		must(t, err)
	}
	if _, err := client.AddRule(ctx, []byte(`{"action": "mirror", "out": {"interface": "eth7", "dstMac": "02:00:00:00:00:07"}}`)); err == nil {
		t.Error("a mirror out of no interface was accepted")
	}
	e.classified(t, dropped, passed)
	if n := ruleCounter(t, client, 1); n != 1 {
		t.Errorf("the drop rule counted %d packets, want 1", n)
	}
	before, err := client.Rules(ctx)
	must(t, err)
	must(t, stop())

	if !testsupport.XDPAttached(t, e.upf, "spare") {
		t.Fatal("spare lost the classifier when the daemon stopped")
	}
	drops := filepath.Join(e.pin, "classify", "queue-drops")
	if _, err := os.Stat(drops); err != nil {
		t.Errorf("the queue-drop link is not pinned while the daemon is down: %v", err)
	}
	e.classified(t, dropped, passed)
	data, err := os.ReadFile(cfg.Classify.RulesFile)
	must(t, err)
	var saved struct{ Rules []struct{ ID uint32 } }
	if err := json.Unmarshal(data, &saved); err != nil || len(saved.Rules) != 3 {
		t.Fatalf("rules file: %s (%v)", data, err)
	}

	client, stop = runDaemon(t, cfg)
	after, err := client.Rules(ctx)
	must(t, err)
	// Counters start again at zero; the first run's packets were counted
	// by its own maps.
	var want, got any
	must(t, json.Unmarshal([]byte(zeroCounters(t, before)), &want))
	must(t, json.Unmarshal(after, &got))
	if !reflect.DeepEqual(want, got) {
		t.Errorf("rules after the restart:\n%s\nwant\n%s", after, before)
	}
	e.classified(t, dropped, passed)
	if n := ruleCounter(t, client, 1); n != 1 {
		t.Errorf("the drop rule counted %d packets after the restart, want 1", n)
	}
	must(t, stop())

	e.classify = ""
	_, stop = runDaemon(t, e.config(t))
	must(t, stop())
	if testsupport.XDPAttached(t, e.upf, "spare") {
		t.Error("spare keeps the classifier with no classify section")
	}
	if _, err := os.Stat(drops); !os.IsNotExist(err) {
		t.Errorf("the queue-drop link outlives the classify section: %v", err)
	}
}

// A configuration with only the classifier (and the REST API's settings)
// runs the classifier alone: no UPF on any interface, no PFCP, rules over
// REST enforced and counted, the figures on /metrics.
func TestClassifierAlone(t *testing.T) {
	e, dropped, passed := newClassifiedEnv(t)
	e.noUPF = true
	e.classify = fmt.Sprintf("{interfaces: [spare], rules_file: %s}", filepath.Join(e.dir, "rules.json"))
	cfg := e.config(t)
	if cfg.UPF() {
		t.Fatal("the configuration asks for a UPF")
	}
	client, stop := runDaemon(t, cfg)
	ctx := context.Background()
	for _, rule := range []string{
		`{"id": 1, "priority": 10, "action": "drop", "match": {"proto": 17, "dstPort": 9999}}`,
		`{"id": 2, "action": "count", "match": {"innerDst": "10.9.0.1"}}`,
	} {
		_, err := client.AddRule(ctx, []byte(rule))
		must(t, err)
	}
	e.classified(t, dropped, passed)
	if n := ruleCounter(t, client, 1); n != 1 {
		t.Errorf("the drop rule counted %d packets, want 1", n)
	}
	if testsupport.XDPAttached(t, e.upf, "n3n6") {
		t.Error("n3n6 runs an XDP program: the daemon started a UPF")
	}
	if _, err := client.Sessions(ctx); err == nil || !strings.Contains(err.Error(), "the UPF is not configured") {
		t.Errorf("the sessions resource without a UPF: %v", err)
	}
	resp, err := http.Get("http://" + cfg.API.Listen + "/metrics")
	must(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	must(t, err)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "xdp5g_classify_rules ") {
		t.Errorf("/metrics answered %d without the classifier's figures:\n%s", resp.StatusCode, body)
	}
	must(t, stop())
}

// With the classify stage in front of the UPF on n3n6, the classifier's
// rules apply to the UPF's downlink: a counted packet is forwarded, a
// dropped one is not; the next run without the stage forwards them all.
func TestClassifyStageInFrontOfTheUPF(t *testing.T) {
	e, client, stop, dp := classifyingUPF(t, "[classify, upf]")
	ctx := context.Background()
	const counted, dropped = 1, 2
	_, err := client.AddRule(ctx, []byte(fmt.Sprintf(`{"id": %d, "action": "count", "match": {"innerDst": %q}}`, counted, ue)))
	must(t, err)
	e.sendDownlink(t, dp)
	if ruleCounter(t, client, counted) == 0 {
		t.Error("the count rule counted none of the forwarded packets")
	}
	addDropRule(t, client, dropped)
	e.sendDropped(t, client, dp, dropped)
	must(t, stop())

	// The next run has no classify stage on n3n6: the UPF forwards what
	// the rule dropped.
	e.stages = ""
	_, stop = runDaemon(t, e.config(t))
	e.sendDownlink(t, dp)
	must(t, stop())
}

// classifyingUPF runs the daemon with the classifier and with stages on
// n3n6 (none when ""), installs the UE's session and opens the data path.
func classifyingUPF(t *testing.T, stages string) (e *env, client *api.Client, stop func() error, dp *upfxdp.Datapath) {
	t.Helper()
	e = newEnv(t)
	e.classify = fmt.Sprintf("{interfaces: [spare], rules_file: %s}", filepath.Join(e.dir, "rules.json"))
	e.stages = stages
	cfg := e.config(t)
	client, stop = runDaemon(t, cfg)
	_, err := client.Create(context.Background(), []byte(doc))
	must(t, err)
	dp, err = upfxdp.Open(upfxdp.Options{PinPath: e.pin, MaxSessions: 1024, N3Addresses: cfg.N3Addresses})
	must(t, err)
	t.Cleanup(func() { dp.Close() })
	return e, client, stop, dp
}

// addDropRule adds rule id, which drops what the data network sends the UE
// on port 9.
func addDropRule(t *testing.T, client *api.Client, id uint32) {
	t.Helper()
	_, err := client.AddRule(context.Background(),
		[]byte(fmt.Sprintf(`{"id": %d, "priority": 10, "action": "drop", "match": {"innerDst": %q, "dstPort": 9}}`, id, ue)))
	must(t, err)
}

// sendDropped sends packets to the UE on port 9 and checks that the rule
// dropped, which drops them, counted each and the UPF forwarded none.
func (e *env) sendDropped(t *testing.T, client *api.Client, dp *upfxdp.Datapath, rule uint32) {
	t.Helper()
	before, counted := forwarded(t, dp), ruleCounter(t, client, rule)
	var conn net.PacketConn
	must(t, e.peer.Do(func() (err error) {
		conn, err = net.ListenPacket("udp4", ":0")
		return err
	}))
	defer conn.Close()
	const sent = 5
	for range sent {
		_, err := conn.WriteTo([]byte("hello"), &net.UDPAddr{IP: net.ParseIP(ue), Port: 9})
		must(t, err)
	}
	for deadline := time.Now().Add(5 * time.Second); ruleCounter(t, client, rule) < counted+sent && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if n := ruleCounter(t, client, rule) - counted; n != sent {
		t.Errorf("the drop rule counted %d packets, want %d", n, sent)
	}
	if n := forwarded(t, dp); n != before {
		t.Errorf("the UPF forwarded %d dropped packets", n-before)
	}
}

// The classify stage added to a running interface through the API applies
// the rules to the UPF's traffic at once, and taken away again leaves the
// UPF forwarding what the rule dropped; a refused change changes nothing.
// A restart keeps a change while the configuration gives the interface
// what it gave it when the change was made; a changed configuration wins.
func TestStagesChangedThroughTheAPI(t *testing.T) {
	e, client, stop, dp := classifyingUPF(t, "")
	ctx := context.Background()
	const dropped = 1
	addDropRule(t, client, dropped)
	e.sendDownlink(t, dp) // no classify stage: the rule does not apply

	set := func(stages ...string) {
		t.Helper()
		_, err := client.SetStages(ctx, "n3n6", api.StageSet{Stages: stages})
		must(t, err)
	}
	set("classify", "upf")
	e.sendDropped(t, client, dp, dropped)

	var apiErr *api.Error
	for _, c := range []struct {
		name   string
		stages []string
		slice  uint32
		status int
		field  string
	}{
		{"n3n6", []string{"upf", "classify"}, 0, http.StatusBadRequest, "stages[1]"},
		{"n3n6", []string{"classify"}, 0, http.StatusBadRequest, "stages"},
		{"n3n6", nil, 0, http.StatusBadRequest, "stages"},
		{"n3n6", []string{"steer", "upf"}, classifyxdp.MaxSlices, http.StatusBadRequest, "slice"},
		{"spare", []string{"upf"}, 0, http.StatusNotFound, ""},
	} {
		_, err := client.SetStages(ctx, c.name, api.StageSet{Stages: c.stages, Slice: c.slice})
		if !errors.As(err, &apiErr) || apiErr.Status != c.status || apiErr.Field != c.field {
			t.Errorf("stages %v on %s: %v, want %d on %q", c.stages, c.name, err, c.status, c.field)
		}
	}
	running := func(stages, configured string) {
		t.Helper()
		want := fmt.Sprintf(`{"interfaces": [{"name": "n3n6", "stages": %s, "slice": 0, "configured": {"stages": %s, "slice": 0}}]}`,
			stages, configured)
		got, err := client.Interfaces(ctx)
		must(t, err)
		var gotDoc, wantDoc any
		must(t, json.Unmarshal(got, &gotDoc))
		must(t, json.Unmarshal([]byte(want), &wantDoc))
		if !reflect.DeepEqual(gotDoc, wantDoc) {
			t.Errorf("interfaces: %s\nwant %s", got, want)
		}
	}
	running(`["classify", "upf"]`, `["upf"]`)
	e.sendDropped(t, client, dp, dropped)
	must(t, stop())

	client, stop = runDaemon(t, e.config(t))
	running(`["classify", "upf"]`, `["upf"]`)
	e.sendDropped(t, client, dp, dropped)
	set("upf")
	e.sendDownlink(t, dp)
	set("classify", "upf")
	must(t, stop())

	e.stages = "[steer, upf]" // its slice has no CPUs: the UPF forwards on the CPU the packet came in on
	client, stop = runDaemon(t, e.config(t))
	running(`["steer", "upf"]`, `["steer", "upf"]`)
	e.sendDownlink(t, dp)
	must(t, stop())
}

// A change of stages the kernel cannot make, on an interface deleted while
// the daemon runs, names the interface and changes nothing.
func TestStagesOfADeletedInterface(t *testing.T) {
	e := newEnv(t)
	client, stop := runDaemon(t, e.config(t, "spare"))
	defer func() { must(t, stop()) }()
	if out, err := exec.Command("ip", "-n", e.upf.Name, "link", "del", "spare").CombinedOutput(); err != nil {
		t.Fatalf("deleting spare: %v: %s", err, out)
	}
	ctx := context.Background()
	if _, err := client.SetStages(ctx, "spare", api.StageSet{Stages: []string{"upf"}}); err == nil || !strings.Contains(err.Error(), "spare") {
		t.Errorf("stages of the deleted spare: %v, want an error naming it", err)
	}
	doc, err := client.Interfaces(ctx)
	must(t, err)
	if !strings.Contains(string(doc), `{"name":"spare","stages":["upf"]`) {
		t.Errorf("spare after the refused change: %s", doc)
	}
}

// zeroCounters is a rules document with every counter at zero.
func zeroCounters(t *testing.T, doc json.RawMessage) string {
	t.Helper()
	var d struct{ Rules []map[string]any }
	must(t, json.Unmarshal(doc, &d))
	for _, r := range d.Rules {
		r["counters"] = map[string]any{"packets": 0, "bytes": 0}
	}
	out, err := json.Marshal(map[string]any{"rules": d.Rules})
	must(t, err)
	return string(out)
}

// The daemon carries out intents and reports on them: a report with the
// intent reaches the configured webhook, /metrics shows it, and the
// intent survives a restart.
func TestIntentsAreReported(t *testing.T) {
	e := newEnv(t)
	reports := make(chan report.Report, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rep report.Report
		if err := json.NewDecoder(r.Body).Decode(&rep); err != nil {
			t.Errorf("a report: %v", err)
		}
		select {
		case reports <- rep:
		default:
		}
	}))
	defer hook.Close()
	e.classify = fmt.Sprintf("{interfaces: [spare], reports: {interval: 50ms, webhooks: [%q]}}", hook.URL)
	cfg := e.config(t)
	client, stop := runDaemon(t, cfg)
	ctx := context.Background()
	_, err := client.PostIntent(ctx, []byte(`{"Resources": [{"encapsulationType1": "vxlan", "encapsulationID1": "64"}],
		"Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0", "priority": "high"},
		"Params": [{"paramName": "interfaceName", "paramValue": "spare"}]}`))
	must(t, err)
	deadline := time.After(5 * time.Second)
	for seen := false; !seen; {
		select {
		case rep := <-reports:
			seen = len(rep.Intents) == 1 && rep.Intents[0].Action == "SLICE" && len(rep.Slices) == 1
		case <-deadline:
			t.Fatal("no report with the intent reached the webhook")
		}
	}
	testsupport.HasLines(t, scrape(t, e.listen), `xdp5g_intent_packets_total{action="SLICE",intent="1"} 0`)
	must(t, stop())

	client, stop = runDaemon(t, cfg)
	got, err := client.Intent(ctx, 1)
	must(t, err)
	if !strings.Contains(string(got), `"action":"SLICE"`) {
		t.Errorf("after the restart: %s", got)
	}
	must(t, client.DeleteIntent(ctx, 1))
	must(t, stop())
}
