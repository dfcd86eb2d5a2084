package api

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/classify/intent"
	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/fielderr"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
)

// withRules gives the env a classifier in the UPF's namespace and serves
// the API with it.
func (e *env) withRules(t *testing.T) {
	t.Helper()
	e.classifier = e.newClassifier(t)
	e.serve(t, nil)
}

func (e *env) newClassifier(t *testing.T) *Classifier {
	t.Helper()
	d, err := classifyxdp.OpenDatapath(classifyxdp.Config{})
	must(t, err)
	t.Cleanup(func() { d.Close() })
	resolve := func(name string) (iface *net.Interface, err error) {
		err = e.upf.Do(func() (err error) {
			iface, err = net.InterfaceByName(name)
			return err
		})
		return iface, err
	}
	return &Classifier{Rules: d, Interface: resolve, Intents: intent.NewStore(d, resolve, nil)}
}

func TestRulesWithoutClassification(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ method, path, body string }{
		{method: "GET", path: "/api/v1/rules"}, {method: "GET", path: "/api/v1/rules/count"}, {method: "GET", path: "/api/v1/rules/1"},
		{method: "POST", path: "/api/v1/rules", body: `{"action": "drop"}`}, {method: "DELETE", path: "/api/v1/rules/1"}, {method: "DELETE", path: "/api/v1/rules"},
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
	if verdict, err := e.classifier.Rules.Program().Run(&ebpf.RunOptions{Data: frame}); err != nil || verdict != 2 {
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
		{name: "no action", body: `{"match": {}}`, field: "action"},
		{name: "unknown action", body: `{"action": "shape"}`, field: "action"},
		{name: "a steer without its slice", body: `{"action": "steer"}`, field: "slice"},
		{name: "a steer to no slice", body: `{"action": "steer", "slice": 9}`, field: "slice"},
		{name: "a slice for a drop", body: `{"action": "drop", "slice": 0}`, field: "slice"},
		{name: "a mirror without its egress", body: `{"action": "mirror"}`, field: "out"},
		{name: "a redirect without its egress", body: `{"action": "redirect"}`, field: "out"},
		{name: "an egress for a drop", body: `{"action": "drop", "out": {"interface": "n3n6", "dstMac": "02:00:00:00:00:09"}}`, field: "out"},
		{name: "an egress out of no interface", body: `{"action": "redirect", "out": {"interface": "eth9", "dstMac": "02:00:00:00:00:09"}}`, field: "out.interface"},
		{name: "an egress without its interface", body: `{"action": "redirect", "out": {"dstMac": "02:00:00:00:00:09"}}`, field: "out.interface"},
		{name: "an egress to no MAC", body: `{"action": "mirror", "out": {"interface": "n3n6", "dstMac": "02:00:00:00:09"}}`, field: "out.dstMac"},
		{name: "an egress from no MAC", body: `{"action": "mirror", "out": {"interface": "n3n6", "dstMac": "02:00:00:00:00:09", "srcMac": "x"}}`, field: "out.srcMac"},
		{name: "an ID in use", body: `{"id": 7, "action": "drop"}`, field: "id"},
		{name: "unknown field", body: `{"action": "drop", "match": {"vlan": 3}}`, field: "match.vlan"},
		{name: "a number beyond its field", body: `{"action": "drop", "match": {"qfi": 300}}`, field: "match.qfi"},
		{name: "a DSCP beyond its 6 bits", body: `{"action": "drop", "match": {"dscp": 64}}`, field: "match.dscp"},
		{name: "a temporalId beyond TID 7", body: `{"action": "drop", "match": {"temporalId": 7}}`, field: "match.temporalId"},
		{name: "more tunnels than levels", body: `{"action": "drop", "match": {"tunnels": 5}}`, field: "match.tunnels"},
		{name: "an h265 flag of 2", body: `{"action": "drop", "match": {"h265": 2}}`, field: "match.h265"},
		{name: "a layerId range beyond its 6 bits", body: `{"action": "drop", "match": {"layerId": {"range": [1, 255]}}}`,
			field: "match.layerId.range"},
		{name: "a value outside its mask", body: `{"action": "drop", "match": {"qfi": {"value": 3, "mask": 1}}}`, field: "match.qfi.value"},
		{name: "a reversed range", body: `{"action": "drop", "match": {"dstPort": {"range": [9, 8]}}}`, field: "match.dstPort.range"},
		{name: "not an address", body: `{"action": "drop", "match": {"innerSrc": "ten"}}`, field: "match.innerSrc"},
		{name: "counters given", body: `{"action": "drop", "counters": {"packets": 1, "bytes": 1}}`, field: "counters"},
		{name: "an unknown key", body: `{"action": "drop", "priority": 1, "when": "now"}`, field: "when"},
		{name: "an action twice", body: `{"action": "drop", "action": "count"}`, field: "action"},
		{name: "a match field twice", body: `{"action": "drop", "match": {"qfi": 1, "proto": 6, "qfi": 2}}`, field: "match.qfi"},
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

	// tunnels counts levels: a number, not the name of a tunnel type; the
	// name earlier builds wrote for it (geneve for 2) still reads.
	sameJSON(t, e.expect(t, http.StatusCreated, "POST", "/api/v1/rules", `{"id": 3, "action": "count", "match": {"tunnels": 2}}`),
		`{"id": 3, "priority": 0, "action": "count", "match": {"tunnels": 2}, "counters": {"packets": 0, "bytes": 0}}`)
	sameJSON(t, e.expect(t, http.StatusCreated, "POST", "/api/v1/rules", `{"id": 4, "action": "count", "match": {"tunnels": "geneve"}}`),
		`{"id": 4, "priority": 0, "action": "count", "match": {"tunnels": 2}, "counters": {"packets": 0, "bytes": 0}}`)
	e.expect(t, http.StatusNoContent, "DELETE", "/api/v1/rules/3", "")
	e.expect(t, http.StatusNoContent, "DELETE", "/api/v1/rules/4", "")

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

// A redirect or mirror rule names its interface; the API finds it where
// the classifier runs and shows the egress with the interface's own MAC as
// the source when none is given.
func TestRuleEgress(t *testing.T) {
	e := newEnv(t)
	e.withRules(t)
	_, mac, err := e.upf.Link(upfIface)
	must(t, err)
	created := e.expect(t, http.StatusCreated, "POST", "/api/v1/rules", `{"id": 3, "action": "redirect",
		"match": {"tunnel1Id": 100}, "out": {"interface": "n3n6", "dstMac": "02:00:00:00:00:09"}}`)
	sameJSON(t, created, `{"id": 3, "priority": 0, "action": "redirect", "match": {"tunnel1Id": 100},
		"out": {"interface": "n3n6", "dstMac": "02:00:00:00:00:09", "srcMac": "`+mac.String()+`"},
		"counters": {"packets": 0, "bytes": 0}}`)
	e.expect(t, http.StatusCreated, "POST", "/api/v1/rules", `{"id": 4, "action": "mirror", "match": {"qfi": 9},
		"out": {"interface": "n3n6", "dstMac": "02:00:00:00:00:0a", "srcMac": "02:00:00:00:00:0b"}}`)
	sameJSON(t, e.expect(t, http.StatusOK, "GET", "/api/v1/rules/4", ""), `{"id": 4, "priority": 0, "action": "mirror",
		"match": {"qfi": 9}, "out": {"interface": "n3n6", "dstMac": "02:00:00:00:00:0a", "srcMac": "02:00:00:00:00:0b"},
		"counters": {"packets": 0, "bytes": 0}}`)
	// A steer rule names its slice, and slice 0 is one.
	e.expect(t, http.StatusOK, "PUT", "/api/v1/slices/0", `{"cpus": [0]}`)
	sameJSON(t, e.expect(t, http.StatusCreated, "POST", "/api/v1/rules", `{"id": 5, "action": "steer", "slice": 0, "match": {"qfi": 5}}`),
		`{"id": 5, "priority": 0, "action": "steer", "slice": 0, "match": {"qfi": 5}, "counters": {"packets": 0, "bytes": 0}}`)
}

// The rules file holds what the API shows, less the counters; restored
// into a fresh classifier it gives the same rules, and a bad file is
// refused whole, naming the rule.
func TestRulesFileRoundTrip(t *testing.T) {
	e := newEnv(t)
	e.withRules(t)
	e.expect(t, http.StatusCreated, "POST", "/api/v1/rules", `{"id": 2, "priority": 7, "action": "drop",
		"match": {"innerDst": "10.100.6.0/24", "dstPort": {"range": [5000, 5007]}, "tunnel1": "vxlan"}}`)
	e.expect(t, http.StatusCreated, "POST", "/api/v1/rules", `{"id": 5, "action": "mirror", "match": {"layerId": 1},
		"out": {"interface": "n3n6", "dstMac": "02:00:00:00:00:0a"}}`)
	e.expect(t, http.StatusOK, "PUT", "/api/v1/slices/4", `{"cpus": [1, 0], "prioritised": true, "rate": 100000000}`)
	e.expect(t, http.StatusCreated, "POST", "/api/v1/rules", `{"id": 6, "action": "steer", "slice": 4, "match": {"qfi": 5}}`)
	saved, err := e.classifier.MarshalRules()
	must(t, err)
	if strings.Contains(string(saved), "counters") {
		t.Errorf("the rules file holds counters:\n%s", saved)
	}
	restored := e.newClassifier(t)
	must(t, restored.RestoreRules(saved))
	if got, want := restored.Rules.Rules(), e.classifier.Rules.Rules(); !reflect.DeepEqual(got, want) {
		t.Errorf("restored %+v\nwant %+v", got, want)
	}
	if got, want := restored.Rules.Slices(), e.classifier.Rules.Slices(); !reflect.DeepEqual(got, want) {
		t.Errorf("restored slices %+v\nwant %+v", got, want)
	}

	for _, c := range []struct{ name, file, field string }{
		{name: "an egress gone", file: `{"rules": [{"id": 1, "action": "drop"},
			{"id": 2, "action": "redirect", "out": {"interface": "gone0", "dstMac": "02:00:00:00:00:0a"}}]}`, field: "rules[1].out.interface"},
		{name: "a rule without its ID", file: `{"rules": [{"action": "drop"}]}`, field: "rules[0].id"},
		{name: "a slice without CPUs", file: `{"slices": [{"id": 1, "cpus": []}], "rules": []}`, field: "slices[0].cpus"},
		{name: "a steer to a slice not saved", file: `{"rules": [{"id": 1, "action": "steer", "slice": 2}]}`, field: "rules[0].slice"},
		{name: "an unknown field", file: `{"rules": [{"id": 1, "action": "drop", "match": {"colour": 1}}]}`, field: "rules[0].match.colour"},
	} {
		fresh := e.newClassifier(t)
		var got *fielderr.Error
		if err := fresh.RestoreRules([]byte(c.file)); !errors.As(err, &got) || got.Field != c.field {
			t.Errorf("%s: %v, want an error naming %s", c.name, err, c.field)
		}
		if n := fresh.Rules.Len(); n != 0 {
			t.Errorf("%s: %d rules restored, want none", c.name, n)
		}
	}

	// A rule on a value the parser never writes, which earlier builds took
	// over REST, still restores: the start does not fail on it.
	must(t, e.newClassifier(t).RestoreRules([]byte(`{"rules": [{"id": 1, "action": "drop", "match": {"dscp": 64}}]}`)))
}

// Slices over REST: set, shown with what each CPU took, refused when bad,
// kept while a rule steers to them.
func TestSlices(t *testing.T) {
	e := newEnv(t)
	e.withRules(t)
	sameJSON(t, e.expect(t, http.StatusOK, "PUT", "/api/v1/slices/2", `{"cpus": [0]}`), `{"id": 2, "cpus": [0]}`)
	e.expect(t, http.StatusCreated, "POST", "/api/v1/rules", `{"id": 1, "action": "steer", "slice": 2, "match": {}}`)
	frame := demo.Serialize(false, &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		EthernetType: layers.EthernetTypeIPv4}, &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP,
		SrcIP: net.IPv4(10, 45, 0, 2), DstIP: net.IPv4(10, 100, 6, 2)}, &layers.UDP{SrcPort: 40000, DstPort: 5004})
	if verdict, err := e.classifier.Rules.Program().Run(&ebpf.RunOptions{Data: frame}); err != nil || verdict != 4 {
		t.Fatalf("verdict %d (%v), want XDP_REDIRECT to the slice's CPU", verdict, err)
	}
	sameJSON(t, e.expect(t, http.StatusOK, "GET", "/api/v1/slices", ""), `{"slices": [{"id": 2, "cpus": [0]}]}`)
	for _, c := range []struct{ name, path, body, field string }{
		{name: "no CPUs", path: "/api/v1/slices/3", body: `{"cpus": []}`, field: "cpus"},
		{name: "a CPU not there", path: "/api/v1/slices/3", body: `{"cpus": [0, 4096]}`, field: "cpus[1]"},
		{name: "a CPU twice", path: "/api/v1/slices/3", body: `{"cpus": [0, 0]}`, field: "cpus[1]"},
		{name: "another ID in the body", path: "/api/v1/slices/3", body: `{"id": 4, "cpus": [0]}`, field: "id"},
		{name: "an ID out of range", path: "/api/v1/slices/100000", body: `{"cpus": [0]}`, field: "id"},
		{name: "counters given", path: "/api/v1/slices/3", body: `{"cpus": [0], "counters": []}`, field: "counters"},
		{name: "a rate under a byte a second", path: "/api/v1/slices/3", body: `{"cpus": [0], "rate": 7}`, field: "rate"},
		{name: "a burst without a rate", path: "/api/v1/slices/2", body: `{"cpus": [0], "burst": 1518}`, field: "burst"},
		{name: "a burst no frame fits in", path: "/api/v1/slices/2", body: `{"cpus": [0], "rate": 8000, "burst": 10}`, field: "burst"},
		{name: "counters given in full", path: "/api/v1/slices/3", body: `{"cpus": [0], "counters": [{"cpu": 0, "packets": 1, "bytes": 1}]}`, field: "counters"},
	} {
		status, body := e.request(t, "PUT", c.path, c.body)
		var got Error
		if err := json.Unmarshal(body, &got); err != nil || status != http.StatusBadRequest || got.Field != c.field {
			t.Errorf("%s: status %d, body %s; want 400 naming %s", c.name, status, body, c.field)
		}
	}
	e.expect(t, http.StatusConflict, "DELETE", "/api/v1/slices/2", "")
	e.expect(t, http.StatusNoContent, "DELETE", "/api/v1/rules/1", "")
	e.expect(t, http.StatusNoContent, "DELETE", "/api/v1/slices/2", "")
	e.expect(t, http.StatusNotFound, "DELETE", "/api/v1/slices/2", "")
	sameJSON(t, e.expect(t, http.StatusOK, "GET", "/api/v1/slices", ""), `{"slices": []}`)

	// What xdp5g slices does comes through the client.
	c, ctx := &Client{URL: e.url}, context.Background()
	_, err := c.SetSlice(ctx, 5, []uint32{0})
	must(t, err)
	list, err := c.Slices(ctx)
	must(t, err)
	sameJSON(t, list, `{"slices": [{"id": 5, "cpus": [0]}]}`)
	must(t, c.DeleteSlice(ctx, 5))
	// Changing a slice's CPUs keeps what else it has.
	e.expect(t, http.StatusOK, "PUT", "/api/v1/slices/6", `{"cpus": [0], "prioritised": true, "rate": 8000000, "burst": 4000}`)
	_, err = c.SetSlice(ctx, 6, []uint32{1})
	must(t, err)
	list, err = c.Slices(ctx)
	must(t, err)
	sameJSON(t, list, `{"slices": [{"id": 6, "cpus": [1], "prioritised": true, "rate": 8000000, "burst": 4000}]}`)
	must(t, c.DeleteSlice(ctx, 6))
}

// Empty lists are [] in every document, never null.
func TestEmptyListsAreArrays(t *testing.T) {
	e := newEnv(t)
	e.withRules(t)
	for path, want := range map[string]string{"/api/v1/sessions": `{"sessions": []}`, "/api/v1/rules": `{"rules": []}`,
		"/api/v1/slices": `{"slices": []}`, "/api/v1/intents": `{"intents": []}`} {
		sameJSON(t, e.expect(t, http.StatusOK, "GET", path, ""), want)
	}
}

// A tunnel type that is neither a known name nor a number is refused with
// the names it may be.
func TestUnknownTunnelName(t *testing.T) {
	for _, name := range []string{"ipip", "GTPU"} {
		_, err := parseMatch("tunnel2", name)
		if want := "must be vxlan, geneve, gre, gtpu or a number from 0 to 255"; err == nil || err.Error() != want {
			t.Errorf("tunnel2 %q: %v; want %q", name, err, want)
		}
	}
	if _, err := parseMatch("tunnel2", "gtpu"); err != nil {
		t.Errorf("tunnel2 gtpu: %v", err)
	}
}

// Of two rules of equal priority the one added first wins, before a
// restart and after: the rules file keeps the order they were added in,
// which their IDs need not follow.
func TestRulesFileKeepsTheOrderOfEqualPriorities(t *testing.T) {
	e := newEnv(t)
	e.withRules(t)
	e.expect(t, http.StatusCreated, "POST", "/api/v1/rules", `{"id": 20, "priority": 5, "action": "drop"}`)
	e.expect(t, http.StatusCreated, "POST", "/api/v1/rules", `{"id": 10, "priority": 5, "action": "pass"}`)
	frame := demo.Ethernet(net.HardwareAddr{2, 0, 0, 0, 0, 2}, net.HardwareAddr{2, 0, 0, 0, 0, 1},
		demo.UEPacket(netip.MustParseAddr("10.45.0.2"), netip.MustParseAddr("10.100.6.2"), true, 64))
	saved, err := e.classifier.MarshalRules()
	must(t, err)
	restored := e.newClassifier(t)
	must(t, restored.RestoreRules(saved))
	for name, c := range map[string]*Classifier{"before": e.classifier, "restored": restored} {
		if verdict, err := c.Rules.Program().Run(&ebpf.RunOptions{Data: frame}); err != nil || verdict != uint32(xdplink.Drop) {
			t.Errorf("%s: verdict %d (%v), want XDP_DROP of rule 20, added first", name, verdict, err)
		}
	}
}

// A rule set by hand steers to a slice set by hand: an intent's slice goes
// with its intent, and a rule left steering to it would be refused at the
// next start, which restores the rules before the intents.
func TestRulesSteerNotToAnIntentsSlice(t *testing.T) {
	e := newEnv(t)
	e.withRules(t)
	var in struct{ Slice uint32 }
	must(t, json.Unmarshal(e.expect(t, http.StatusCreated, "POST", "/api/v1/intents", `{"Resources": [{"dstPort": "5001"}],
		"Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0"}}`), &in))
	status, body := e.request(t, "POST", "/api/v1/rules", `{"action": "steer", "slice": `+jsonInt(int(in.Slice))+`}`)
	var bad Error
	if err := json.Unmarshal(body, &bad); err != nil || status != http.StatusBadRequest || bad.Field != "slice" {
		t.Errorf("a rule steering to intent 1's slice: %d %s, want 400 naming slice", status, body)
	}
	saved, err := e.classifier.MarshalRules()
	must(t, err)
	must(t, e.newClassifier(t).RestoreRules(saved))
}
