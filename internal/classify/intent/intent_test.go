package intent

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/fielderr"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/strictjson"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// interfaces stands for the classifier's namespace: eth0 and alt0.
func interfaces(name string) (*net.Interface, error) {
	index := map[string]int{"eth0": 2, "alt0": 3}[name]
	if index == 0 {
		return nil, errors.New("no such interface")
	}
	return &net.Interface{Index: index, Name: name}, nil
}

func newStore(t *testing.T) (*Store, *classifyxdp.Datapath) {
	t.Helper()
	testsupport.NeedRoot(t, "BPF")
	dp, err := classifyxdp.OpenDatapath(classifyxdp.Config{})
	testsupport.CheckLoad(t, err)
	t.Cleanup(func() { dp.Close() })
	return NewStore(dp, interfaces, nil), dp
}

// listing1Frame is a packet of Listing 1's flow: in GTP-U (TEID
// 0x8894D0D4) in VXLAN (VNI 0x445), from 192.188.0.140 to port 5004.
func listing1Frame() []byte {
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
	ip := func(src, dst string) *layers.IPv4 {
		return &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.ParseIP(src).To4(), DstIP: net.ParseIP(dst).To4()}
	}
	return demo.Serialize(false, eth, ip("192.0.2.1", "192.0.2.2"), &layers.UDP{SrcPort: 50000, DstPort: 4789},
		&layers.VXLAN{ValidIDFlag: true, VNI: 0x445}, eth, ip("10.100.3.1", "10.100.3.2"), &layers.UDP{SrcPort: 2152, DstPort: 2152},
		&layers.GTPv1U{Version: 1, ProtocolType: 1, MessageType: 255, TEID: 0x8894D0D4}, ip("192.188.0.140", "10.0.0.1"),
		&layers.UDP{SrcPort: 40000, DstPort: 5004}, gopacket.Payload("video"))
}

// Listing 1 installs a prioritised slice on CPU 1 with a rule for its
// resources, and the prioritised flow of its hash; the flow's packets are
// steered and counted.
func TestListing1(t *testing.T) {
	s, dp := newStore(t)
	in, deleted, err := s.Apply([]byte(Listing1))
	if err != nil || deleted {
		t.Fatalf("%v, deleted %v", err, deleted)
	}
	rules := dp.Rules()
	if len(rules) != 1 || rules[0].Action != classifyxdp.ActionSteer || rules[0].Slice != in.Slice.ID || rules[0].Priority != prioQueuePriority {
		t.Fatalf("rules %+v", rules)
	}
	want := []classifyxdp.Match{{Field: "dstPort", Value: 5004, Mask: 0xffff},
		{Field: "innerSrc", Prefix: netip.MustParsePrefix("192.188.0.140/32")},
		{Field: "tunnel1", Value: uint64(classifyxdp.TunnelVXLAN), Mask: 0xff}, {Field: "tunnel1Id", Value: 0x445, Mask: 0xffffffff},
		{Field: "tunnel2", Value: uint64(classifyxdp.TunnelGTPU), Mask: 0xff}, {Field: "tunnel2Id", Value: 0x8894D0D4, Mask: 0xffffffff}}
	if !reflect.DeepEqual(rules[0].Matches, want) {
		t.Errorf("matches %+v\nwant %+v", rules[0].Matches, want)
	}
	if sl := dp.Slices(); len(sl) != 1 || !reflect.DeepEqual(sl[0].CPUs, []int{1}) || !sl[0].Prioritised {
		t.Errorf("slices %+v, want one prioritised on CPU 1", sl)
	}
	flows, err := dp.PrioFlows()
	if err != nil || len(flows) != 1 || flows[0].Hash != 0xE918D704 || flows[0].CPU != 1 {
		t.Errorf("prioritised flows %+v (%v)", flows, err)
	}
	if verdict, err := dp.Program().Run(&ebpf.RunOptions{Data: listing1Frame()}); err != nil || xdplink.Action(verdict) != xdplink.Redirect {
		t.Errorf("the flow's packet: verdict %d (%v), want XDP_REDIRECT", verdict, err)
	}
	st, err := s.Get(in.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Action != PrioQueue || st.FlowHash != "E918D704" || st.Stats.Packets != 1 || !reflect.DeepEqual(st.CPUs, []int{1}) {
		t.Errorf("status %+v", st)
	}
	// DELETE with the same action and resources removes it, and all it installed.
	del := strings.Replace(Listing1, `"INSERT"`, `"DELETE"`, 1)
	if gone, deleted, err := s.Apply([]byte(del)); err != nil || !deleted || gone.ID != in.ID {
		t.Fatalf("delete: %+v, %v, %v", gone, deleted, err)
	}
	flows, _ = dp.PrioFlows()
	if len(dp.Rules()) != 0 || len(dp.Slices()) != 0 || len(flows) != 0 {
		t.Errorf("left behind: rules %v, slices %v, flows %v", dp.Rules(), dp.Slices(), flows)
	}
	if _, _, err := s.Apply([]byte(del)); !errors.Is(err, ErrNoIntent) {
		t.Errorf("deleting it again: %v", err)
	}
}

// A bad intent is refused naming what is wrong, and changes nothing.
func TestBadIntentsChangeNothing(t *testing.T) {
	s, dp := newStore(t)
	if _, _, err := s.Apply([]byte(`{"Resources": [{"qfi": 5}], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0"}}`)); err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal([]any{dp.Rules(), dp.Slices(), s.Marshal()})
	for _, c := range []struct{ name, doc, field string }{
		{name: "not JSON", doc: `{"Resources": [`, field: ""},
		{name: "an unknown key", doc: `{"Resource": [], "Action": {"actionType": "INSERT", "actionName": "SLICE"}}`, field: "Resource"},
		{name: "data after the document", doc: `{"Resources": [{"qfi": 1}], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0"}} x`, field: ""},
		{name: "a number where the resources go", doc: `{"Resources": 5, "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0"}}`, field: "Resources"},
		{name: "a list where the action goes", doc: `{"Resources": [{"qfi": 1}], "Action": []}`, field: "Action"},
		{name: "no action type", doc: `{"Action": {"actionName": "SLICE", "cpus": "0"}}`, field: "Action.actionType"},
		{name: "an unknown action", doc: `{"Action": {"actionType": "INSERT", "actionName": "SHAPE"}}`, field: "Action.actionName"},
		{name: "a field of another action", doc: `{"Resources": [{"qfi": 1}], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0", "rx_queue": "1"}}`, field: "Action.rx_queue"},
		{name: "a prio queue without its CPU", doc: `{"Resources": [{"qfi": 1}], "Action": {"actionType": "INSERT", "actionName": "PRIO-QUEUE"}}`, field: "Action.rx_queue"},
		{name: "a prio queue naming nothing", doc: `{"Action": {"actionType": "INSERT", "actionName": "PRIO-QUEUE", "rx_queue": "1"}}`, field: "Resources"},
		{name: "a bad flow hash", doc: `{"Action": {"actionType": "INSERT", "actionName": "PRIO-QUEUE", "rx_queue": "1", "flow_hash": "XYZ"}}`, field: "Action.flow_hash"},
		{name: "a CPU not there", doc: `{"Resources": [{"qfi": 1}], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0,4096"}}`, field: "Action.cpus"},
		{name: "a CPU twice", doc: `{"Resources": [{"qfi": 1}], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0,0"}}`, field: "Action.cpus"},
		{name: "a prio queue on a CPU not there", doc: `{"Resources": [{"qfi": 1}], "Action": {"actionType": "INSERT", "actionName": "PRIO-QUEUE", "rx_queue": "4096"}}`, field: "Action.rx_queue"},
		{name: "a bad priority", doc: `{"Resources": [{"qfi": 1}], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0", "priority": "urgent"}}`, field: "Action.priority"},
		{name: "a bad rate", doc: `{"Resources": [{"qfi": 1}], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0", "rate": "fast"}}`, field: "Action.rate"},
		{name: "a rate under a byte a second", doc: `{"Resources": [{"qfi": 1}], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0", "rate": "7"}}`, field: "Action.rate"},
		{name: "a slice naming nothing", doc: `{"Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0"}}`, field: "Resources"},
		{name: "an unknown resource field", doc: `{"Resources": [{"vlan": "3"}], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0"}}`, field: "Resources[0].vlan"},
		{name: "a fifth tunnel level", doc: `{"Resources": [{"encapsulationType5": "gre"}], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0"}}`, field: "Resources[0].encapsulationType5"},
		{name: "an unknown encapsulation", doc: `{"Resources": [{"encapsulationType1": "mpls"}], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0"}}`, field: "Resources[0].encapsulationType1"},
		{name: "a field given twice", doc: `{"Resources": [{"dstPort": "1"}, {"dstPort": "2"}], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0"}}`, field: "Resources[1].dstPort"},
		{name: "a bad address", doc: `{"Resources": [{"srcIP": "10.0.0.300"}], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0"}}`, field: "Resources[0].srcIP"},
		{name: "a bad port", doc: `{"Resources": [{"dstPort": "70000"}], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0"}}`, field: "Resources[0].dstPort"},
		{name: "an offload naming flows", doc: `{"Resources": [{"qfi": 1}], "Action": {"actionType": "INSERT", "actionName": "OFFLOAD", "dstMac": "02:00:00:00:00:01", "dstIP": "192.0.2.9"}}`, field: "Resources"},
		{name: "an offload to no MAC", doc: `{"Action": {"actionType": "INSERT", "actionName": "OFFLOAD", "dstMac": "02:00", "dstIP": "192.0.2.9"}}`, field: "Action.dstMac"},
		{name: "an offload to no address", doc: `{"Action": {"actionType": "INSERT", "actionName": "OFFLOAD", "dstMac": "02:00:00:00:00:01", "dstIP": "fe80::1%eth0"}}`, field: "Action.dstIP"},
		{name: "an offload out of no interface", doc: `{"Action": {"actionType": "INSERT", "actionName": "OFFLOAD", "dstMac": "02:00:00:00:00:01", "dstIP": "192.0.2.9"},
			"Params": [{"paramName": "interfaceName", "paramValue": "eth9"}]}`, field: "Params.interfaceName"},
		{name: "an unknown parameter", doc: `{"Action": {"actionType": "INSERT", "actionName": "OFFLOAD", "dstMac": "02:00:00:00:00:01", "dstIP": "192.0.2.9"},
			"Params": [{"paramName": "mode", "paramValue": "fast"}]}`, field: "Params[0].paramName"},
		{name: "a null action type", doc: `{"Resources": [{"qfi": 1}], "Action": {"actionType": null, "actionName": "SLICE", "cpus": "0"}}`, field: "Action.actionType"},
		{name: "a null rate", doc: `{"Resources": [{"qfi": 1}], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0", "rate": null}}`, field: "Action.rate"},
		{name: "a list of CPUs", doc: `{"Resources": [{"qfi": 1}], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": [0, 1]}}`, field: "Action.cpus"},
		{name: "a null resource field", doc: `{"Resources": [{"qfi": 1, "dstPort": null}], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0"}}`, field: "Resources[0].dstPort"},
		{name: "an object as a port", doc: `{"Resources": [{"dstPort": {"port": 1}}], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0"}}`, field: "Resources[0].dstPort"},
		{name: "an empty resource field", doc: `{"Resources": [{"qfi": 1, "": "1"}], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0"}}`, field: `Resources[0].""`},
		{name: "an empty key", doc: `{"": [], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0"}}`, field: `""`},
		{name: "an ID in use", doc: `{"intentId": 1, "Resources": [{"qfi": 2}], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0"}}`, field: "intentId"},
	} {
		_, _, err := s.Apply([]byte(c.doc))
		var e *fielderr.Error
		if !errors.As(err, &e) || e.Field != c.field {
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.field)
		}
		// The refusal speaks of the document, not of Go's types.
		if e != nil && (strings.Contains(e.Reason, "Go ") || strings.Contains(e.Reason, "map[") || strings.Contains(e.Reason, "<nil>") || strings.Contains(e.Reason, `"[`)) {
			t.Errorf("%s: %q, want it without Go's types", c.name, e.Reason)
		}
		if after, _ := json.Marshal([]any{dp.Rules(), dp.Slices(), s.Marshal()}); string(after) != string(before) {
			t.Fatalf("%s changed the classifier:\n%s\nwas\n%s", c.name, after, before)
		}
	}
}

// The strict decoder takes every field of an intent document: one it
// could not would panic the request that gives it.
func TestIntentDocumentDecodable(t *testing.T) {
	if err := strictjson.Decodable(document{}); err != nil {
		t.Error(err)
	}
}

// An intent's own keys are read whatever their case; a key given twice,
// in two cases, is refused naming the second.
func TestKeysMatchWhateverTheirCase(t *testing.T) {
	doc, in, err := parse([]byte(`{"resources": [{"qfi": "1"}], "ACTION": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0"},
		"Params": [{"PARAMNAME": "interfaceName", "paramvalue": "eth0"}]}`), interfaces)
	want := []classifyxdp.Match{{Field: "qfi", Value: 1, Mask: 0xff}}
	if err != nil || in.Kind != Slice || !reflect.DeepEqual(in.Matches, want) || len(doc.Params) != 1 || doc.Params[0].Value != "eth0" {
		t.Errorf("%+v %+v (%v)", doc, in, err)
	}
	_, _, err = parse([]byte(`{"Resources": [{"qfi": "1"}], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0"}, "action": {}}`), interfaces)
	var e *fielderr.Error
	if !errors.As(err, &e) || e.Field != "action" || !strings.Contains(e.Reason, "twice") {
		t.Errorf("Action and action: %v, want an error naming action", err)
	}
}

// One flow hash is prioritised by one intent: a second intent naming it is
// refused and changes nothing, and the first one's removal, the flow's
// entry with it, succeeds.
func TestOneIntentPrioritisesAFlow(t *testing.T) {
	s, dp := newStore(t)
	doc := func(qfi int) []byte {
		return fmt.Appendf(nil, `{"Resources": [{"qfi": %d}], "Action": {"actionType": "INSERT", "actionName": "PRIO-QUEUE", "flow_hash": "E918D704", "rx_queue": "0"}}`, qfi)
	}
	first, _, err := s.Apply(doc(5))
	if err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal([]any{dp.Rules(), dp.Slices(), s.Marshal()})
	var e *fielderr.Error
	if _, _, err := s.Apply(doc(6)); !errors.As(err, &e) || e.Field != "Action.flow_hash" {
		t.Errorf("a second intent prioritising flow E918D704: %v, want an error naming Action.flow_hash", err)
	}
	if after, _ := json.Marshal([]any{dp.Rules(), dp.Slices(), s.Marshal()}); string(after) != string(before) {
		t.Fatalf("the refused intent changed the classifier:\n%s\nwas\n%s", after, before)
	}
	if err := s.Delete(first.ID); err != nil {
		t.Errorf("removing the first intent: %v", err)
	}
	if flows, err := dp.PrioFlows(); err != nil || len(flows) != 0 {
		t.Errorf("prioritised flows left: %v (%v)", flows, err)
	}
}

// An action is taken once on the same resources, which name the intent
// to a DELETE: a second such INSERT is refused and changes nothing; the
// same resources under another action, and other resources under the
// same, are taken. A saved file that holds two such (an earlier version
// took them) is restored whole.
func TestOneIntentPerActionAndResources(t *testing.T) {
	s, dp := newStore(t)
	doc := func(action string, qfi int) []byte {
		if action == "SLICE" {
			return fmt.Appendf(nil, `{"Resources": [{"qfi": %d}], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0"}}`, qfi)
		}
		return fmt.Appendf(nil, `{"Resources": [{"qfi": %d}], "Action": {"actionType": "INSERT", "actionName": "PRIO-QUEUE", "rx_queue": "0"}}`, qfi)
	}
	if _, _, err := s.Apply(doc("SLICE", 5)); err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal([]any{dp.Rules(), dp.Slices(), s.Marshal()})
	var e *fielderr.Error
	if _, _, err := s.Apply(doc("SLICE", 5)); !errors.As(err, &e) || e.Field != "Resources" {
		t.Errorf("the same SLICE intent again: %v, want an error naming Resources", err)
	}
	if after, _ := json.Marshal([]any{dp.Rules(), dp.Slices(), s.Marshal()}); string(after) != string(before) {
		t.Fatalf("the refused intent changed the classifier:\n%s\nwas\n%s", after, before)
	}
	for _, d := range [][]byte{doc("SLICE", 6), doc("PRIO-QUEUE", 5)} {
		if _, _, err := s.Apply(d); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
	restored, _ := newStore(t)
	if err := restored.Restore([]json.RawMessage{doc("SLICE", 5), doc("SLICE", 5)}, nil); err != nil {
		t.Fatalf("restoring two intents of one action on the same resources: %v", err)
	}
	if list, _ := restored.List(); len(list) != 2 {
		t.Errorf("restored %d intents, want 2", len(list))
	}
}

// A SLICE intent's rate is refused as a slice's rate set over REST is,
// with the same reason.
func TestSliceIntentRateCheckedAsSlices(t *testing.T) {
	s, _ := newStore(t)
	_, _, err := s.Apply([]byte(`{"Resources": [{"qfi": 1}], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0", "rate": "7"}}`))
	var got, want *fielderr.Error
	if !errors.As(err, &got) || !errors.As(classifyxdp.CheckRate(7, 0), &want) || got.Field != "Action.rate" || got.Reason != want.Reason {
		t.Errorf("a rate of 7: %v; want Action.rate: %v", err, want)
	}
}

// OFFLOAD intents are the classifier's alternative nodes, in the order of
// their IDs; the intents survive Marshal and Restore into another store.
func TestOffloadIntentsAndRestore(t *testing.T) {
	s, dp := newStore(t)
	for _, doc := range []string{
		`{"Action": {"actionType": "INSERT", "actionName": "OFFLOAD", "dstMac": "02:00:00:00:00:01", "dstIP": "192.0.2.1"}}`,
		`{"Action": {"actionType": "INSERT", "actionName": "OFFLOAD", "dstMac": "02:00:00:00:00:02", "dstIP": "192.0.2.2"},
		  "Params": [{"paramName": "interfaceName", "paramValue": "alt0"}]}`,
		`{"Resources": [{"encapsulationType1": "vxlan", "encapsulationID1": "64"}], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0", "priority": "high", "rate": "100000000"}}`,
	} {
		if _, _, err := s.Apply([]byte(doc)); err != nil {
			t.Fatal(err)
		}
	}
	if doc := string(s.Marshal()[0]); !strings.Contains(doc, `"Resources":[]`) || !strings.Contains(doc, `"Params":[]`) {
		t.Errorf("an intent without resources and parameters is kept as %s, want [] for both", doc)
	}
	alts, err := dp.Alternatives()
	if err != nil || len(alts) != 2 || alts[0].Addr.String() != "192.0.2.1" || alts[1].Ifindex != 3 || alts[0].Ifindex != 0 {
		t.Fatalf("alternatives %+v (%v)", alts, err)
	}
	saved := s.Marshal()
	other, otherDP := newStore(t)
	if err := other.Restore(saved, s.Slices()); err != nil {
		t.Fatal(err)
	}
	if sl := otherDP.Slices(); len(sl) != 1 || sl[0].Rate != 100_000_000 || !sl[0].Prioritised {
		t.Errorf("restored slices %+v, want the prioritised one at 100 Mbit/s", sl)
	}
	was, _ := s.List()
	now, _ := other.List()
	if !reflect.DeepEqual(was, now) || !reflect.DeepEqual(dp.Rules(), otherDP.Rules()) {
		t.Errorf("restored %+v\nwant %+v", now, was)
	}
	if err := s.Delete(1); err != nil {
		t.Fatal(err)
	}
	if alts, _ := dp.Alternatives(); len(alts) != 1 || alts[0].Addr.String() != "192.0.2.2" {
		t.Errorf("alternatives after deleting the first: %+v", alts)
	}
	if err := s.Delete(1); !errors.Is(err, ErrNoIntent) {
		t.Errorf("deleting it again: %v", err)
	}
}
