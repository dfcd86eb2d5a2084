package api

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/classify"
	"github.com/xdp5g/xdp5g/internal/demo"
)

// withRules gives the env a classifier and serves the API with it.
func (e *env) withRules(t *testing.T) {
	t.Helper()
	d, err := classify.OpenDatapath(classify.Config{})
	must(t, err)
	t.Cleanup(func() { d.Close() })
	e.rules = d
	e.serve(t, nil)
}

func TestRulesWithoutClassification(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/v1/rules", ""}, {"GET", "/api/v1/rules/count", ""}, {"GET", "/api/v1/rules/1", ""},
		{"POST", "/api/v1/rules", `{"action": "drop"}`}, {"DELETE", "/api/v1/rules/1", ""}, {"DELETE", "/api/v1/rules", ""},
	} {
		status, body := e.request(t, c.method, c.path, c.body)
		var got Error
		if err := json.Unmarshal(body, &got); err != nil || status != http.StatusNotFound || !strings.Contains(got.Msg, "classification") {
			t.Errorf("%s %s: status %d, body %s; want 404 naming classification", c.method, c.path, status, body)
		}
	}
}

// The paper's Table 1 (add, delete, clean, numRules) and what an operator
// needs to see, over REST, with the rules enforced by the data path.
func TestRules(t *testing.T) {
	e := newEnv(t)
	e.withRules(t)
	created := e.expect(t, http.StatusCreated, "POST", "/api/v1/rules", `{"priority": 10, "action": "drop",
		"match": {"innerDst": "10.100.6.2", "dstPort": {"range": [5000, 5007]}, "layerId": {"value": 1, "mask": 63},
		          "tunnel1": "vxlan", "tunnel1Id": 100}}`)
	sameJSON(t, created, `{"id": 1, "priority": 10, "action": "drop",
		"match": {"innerDst": "10.100.6.2/32", "dstPort": {"range": [5000, 5007]}, "layerId": {"value": 1, "mask": 63},
		          "tunnel1": "vxlan", "tunnel1Id": 100},
		"counters": {"packets": 0, "bytes": 0}}`)
	e.expect(t, http.StatusCreated, "POST", "/api/v1/rules", `{"id": 7, "priority": 5, "action": "count",
		"match": {"innerDst": "10.100.6.0/24"}}`)
	sameJSON(t, e.expect(t, http.StatusOK, "GET", "/api/v1/rules/count", ""), `{"rules": 2}`)

	// A packet of rule 7's flow (rule 1 wants it in VXLAN): counted, passed.
	frame := demo.Serialize(false, &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		EthernetType: layers.EthernetTypeIPv4}, &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP,
		SrcIP: net.IPv4(10, 45, 0, 2), DstIP: net.IPv4(10, 100, 6, 2)}, &layers.UDP{SrcPort: 40000, DstPort: 5004},
		gopacket.Payload("video"))
	if verdict, err := e.rules.Program().Run(&ebpf.RunOptions{Data: frame}); err != nil || verdict != 2 {
		t.Fatalf("verdict %d (%v), want XDP_PASS", verdict, err)
	}
	sameJSON(t, e.expect(t, http.StatusOK, "GET", "/api/v1/rules/7", ""), `{"id": 7, "priority": 5, "action": "count",
		"match": {"innerDst": "10.100.6.0/24"}, "counters": {"packets": 1, "bytes": `+jsonInt(len(frame))+`}}`)
	var list struct{ Rules []struct{ ID uint32 } }
	must(t, json.Unmarshal(e.expect(t, http.StatusOK, "GET", "/api/v1/rules", ""), &list))
	if len(list.Rules) != 2 || list.Rules[0].ID != 1 || list.Rules[1].ID != 7 {
		t.Errorf("listed %+v", list.Rules)
	}

	// Bad rules: 400 naming the field, nothing changes.
	for _, c := range []struct{ name, body, field string }{
		{"no action", `{"match": {}}`, "action"},
		{"unknown action", `{"action": "shape"}`, "action"},
		{"an action not carried out yet", `{"action": "steer"}`, "action"},
		{"a mirror without its egress", `{"action": "mirror"}`, "action"},
		{"a redirect without its egress", `{"action": "redirect"}`, "action"},
		{"an ID in use", `{"id": 7, "action": "drop"}`, "id"},
		{"unknown field", `{"action": "drop", "match": {"vlan": 3}}`, "match.vlan"},
		{"a number beyond its field", `{"action": "drop", "match": {"qfi": 300}}`, "match.qfi"},
		{"a value outside its mask", `{"action": "drop", "match": {"qfi": {"value": 3, "mask": 1}}}`, "match.qfi.value"},
		{"a reversed range", `{"action": "drop", "match": {"dstPort": {"range": [9, 8]}}}`, "match.dstPort.range"},
		{"not an address", `{"action": "drop", "match": {"innerSrc": "ten"}}`, "match.innerSrc"},
		{"counters given", `{"action": "drop", "counters": {"packets": 1, "bytes": 1}}`, "counters"},
		{"an unknown key", `{"action": "drop", "priority": 1, "when": "now"}`, "when"},
	} {
		status, body := e.request(t, "POST", "/api/v1/rules", c.body)
		var got Error
		if err := json.Unmarshal(body, &got); err != nil || status != http.StatusBadRequest || got.Field != c.field {
			t.Errorf("%s: status %d, body %s; want 400 naming %s", c.name, status, body, c.field)
		}
	}
	sameJSON(t, e.expect(t, http.StatusOK, "GET", "/api/v1/rules/count", ""), `{"rules": 2}`)

	e.expect(t, http.StatusNoContent, "DELETE", "/api/v1/rules/7", "")
	e.expect(t, http.StatusNotFound, "DELETE", "/api/v1/rules/7", "")
	e.expect(t, http.StatusNotFound, "GET", "/api/v1/rules/7", "")
	e.expect(t, http.StatusBadRequest, "GET", "/api/v1/rules/seven", "")
	// The lowest ID free goes to a rule without one.
	sameJSON(t, e.expect(t, http.StatusCreated, "POST", "/api/v1/rules", `{"action": "pass", "match": {"proto": 6}}`),
		`{"id": 2, "priority": 0, "action": "pass", "match": {"proto": 6}, "counters": {"packets": 0, "bytes": 0}}`)

	// What xdp5g rules prints comes through the client.
	c := &Client{URL: e.url}
	count, err := c.RuleCount(context.Background())
	must(t, err)
	sameJSON(t, count, `{"rules": 2}`)
	must(t, c.ClearRules(context.Background()))
	count, err = c.RuleCount(context.Background())
	must(t, err)
	sameJSON(t, count, `{"rules": 0}`)
}

func jsonInt(n int) string { b, _ := json.Marshal(n); return string(b) }
