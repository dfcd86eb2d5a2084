// Package intent turns intent-based messages (Listing 1 of
// "XDP-Based SmartNIC Hardware Performance Acceleration for Next-Generation Networks")
// into the classifier's slices, rules, prioritised flows and alternative nodes,
// and keeps what each intent installed with its live statistics.
//
// An intent names flows by its Resources (tunnel levels with their ids and
// types, inner addresses, ports, protocol, QFI) and says what to do with
// them by its Action:
//
//   - PRIO-QUEUE: the flows are prioritised on CPU rx_queue: they stay
//     there, and leave for an alternative node only when even they cannot
//     be served; a flow_hash prioritises that one flow (FlowHash) too.
//   - SLICE: the flows spread over the CPUs of "cpus", prioritised when
//     "priority" is "high", limited to "rate" bits per second on each
//     receiving CPU when given.
//   - OFFLOAD: an alternative node (dstMac, dstIP, IPv4 or IPv6: it takes
//     the packets whose outer header is of that family) that takes the flows
//     the host cannot, out of the port they came in on or out of the
//     interface of the interfaceName parameter.
//
// actionType INSERT installs an intent; DELETE removes the installed one
// with the same action name and resources.
package intent

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/fielderr"
	"github.com/xdp5g/xdp5g/internal/strictjson"
)

// Listing1 is the intent of that paper's Listing 1, as it is written there:
// the flow from 192.188.0.140 to port 5004 in GTP-U tunnel 0x8894D0D4 in
// VXLAN 0x445, prioritised on CPU 1.
const Listing1 = `{
 "Resources": [{"resourceId": "F8A4C949", "encapsulationID1": "00000445", "encapsulationType1": "vxlan"},
               {"resourceId": "B6E6B2B3", "encapsulationID2": "8894D0D4", "encapsulationType2": "gtp"},
               {"resourceId": "5A07C580", "srcIP": "192.188.0.140", "dstPort": "5004"}],
 "Action": {"actionType": "INSERT", "actionName": "PRIO-QUEUE", "flow_hash": "E918D704", "rx_queue": "1"},
 "Params": [{"paramName": "interfaceName", "paramValue": "eth0"}]}`

// Kinds of intents: their action names.
const (
	PrioQueue = "PRIO-QUEUE"
	Slice     = "SLICE"
	Offload   = "OFFLOAD"
)

// Rule priorities of the intents' rules: prioritised flows before slices.
const (
	prioQueuePriority = 1 << 20
	slicePriority     = 1 << 19
)

// ruleIDBase is where the IDs of the intents' rules start: intent i has
// rule ruleIDBase + i, out of the way of rules added by hand.
const ruleIDBase = 1 << 31

// invalid is an intent refused: field names what is wrong, by its path in
// the document.
func invalid(field, format string, args ...any) *fielderr.Error {
	return fielderr.New(field, format, args...)
}

// ErrNoIntent is returned for an intent that is not installed.
var ErrNoIntent = errors.New("no intent")

// document is an intent as Listing 1 writes it.
type document struct {
	ID        *uint32          `json:"intentId,omitempty"`
	Resources []map[string]any `json:"Resources"`
	Action    map[string]any   `json:"Action"`
	Params    []param          `json:"Params"`
}

type param struct {
	Name  string `json:"paramName"`
	Value any    `json:"paramValue"`
}

// Intent is an installed intent.
type Intent struct {
	ID       uint32
	Kind     string
	Document json.RawMessage // as it was given, with its ID
	Matches  []classifyxdp.Match
	// CPUs are those of a PRIO-QUEUE or SLICE intent, Prioritised whether
	// its flows are, Rate a SLICE's limit (classifyxdp.Slice).
	CPUs        []int
	Prioritised bool
	Rate        uint64
	// What it installed.
	Rule        uint32             // 0: none
	Slice       *classifyxdp.Slice // with Rule
	FlowHash    *uint32
	Alternative *classifyxdp.Alternative
	resources   string // the canonical resources, to find it by
}

// parse checks an intent document and says what it asks for.
func parse(data []byte, iface func(string) (*net.Interface, error)) (doc document, in Intent, err error) {
	// Its keys match its fields whatever their case, as encoding/json
	// matches them: Action and action are the same key.
	if err := (strictjson.Decoder{FoldCase: true}).Decode(data, &doc); err != nil {
		return doc, in, err
	}
	// Lists left out are empty: an intent shows them as [], never null.
	if doc.Resources == nil {
		doc.Resources = []map[string]any{}
	}
	if doc.Params == nil {
		doc.Params = []param{}
	}
	if err := scalars(doc); err != nil {
		return doc, in, err
	}
	if in.Matches, err = matches(doc.Resources); err != nil {
		return doc, in, err
	}
	canonical, _ := json.Marshal(doc.Resources)
	in.resources = string(canonical)
	params := map[string]any{}
	for i, p := range doc.Params {
		if p.Name != "interfaceName" {
			return doc, in, invalid(fmt.Sprintf("Params[%d].paramName", i), "unknown parameter %q (interfaceName)", p.Name)
		}
		params[p.Name] = p.Value
	}
	action := func(name string) (string, bool) {
		v, ok := doc.Action[name]
		if !ok {
			return "", false
		}
		s := fmt.Sprint(v)
		return s, s != ""
	}
	typ, _ := action("actionType")
	if typ != "INSERT" && typ != "DELETE" {
		return doc, in, invalid("Action.actionType", "%q is neither INSERT nor DELETE", typ)
	}
	in.Kind, _ = action("actionName")
	known := map[string][]string{PrioQueue: {"rx_queue", "flow_hash"}, Slice: {"cpus", "priority", "rate"}, Offload: {"dstMac", "dstIP"}}
	fields, ok := known[in.Kind]
	if !ok {
		return doc, in, invalid("Action.actionName", "unknown action %q (%s, %s or %s)", in.Kind, PrioQueue, Slice, Offload)
	}
	for name := range doc.Action {
		if name != "actionType" && name != "actionName" && !slices.Contains(fields, name) {
			return doc, in, invalid("Action."+name, "not a field of %s (%s)", in.Kind, strings.Join(fields, ", "))
		}
	}
	if typ == "DELETE" {
		return doc, in, nil
	}
	switch in.Kind {
	case PrioQueue:
		rx, ok := action("rx_queue")
		if !ok {
			return doc, in, invalid("Action.rx_queue", "the CPU to keep the flows on is required")
		}
		cpu, err := strconv.ParseUint(rx, 10, 16)
		if err != nil {
			return doc, in, invalid("Action.rx_queue", "%q is not a CPU number", rx)
		}
		if hash, ok := action("flow_hash"); ok {
			h, err := strconv.ParseUint(hash, 16, 32)
			if err != nil {
				return doc, in, invalid("Action.flow_hash", "%q is not a 32-bit hexadecimal hash", hash)
			}
			in.FlowHash = ptr(uint32(h))
		} else if len(in.Matches) == 0 {
			return doc, in, invalid("Resources", "name the flows, or give a flow_hash")
		}
		in.CPUs, in.Prioritised = []int{int(cpu)}, true
	case Slice:
		list, ok := action("cpus")
		if !ok {
			return doc, in, invalid("Action.cpus", "the slice's CPUs are required, as \"0,1\"")
		}
		for _, f := range strings.Split(list, ",") {
			cpu, err := strconv.ParseUint(strings.TrimSpace(f), 10, 16)
			if err != nil {
				return doc, in, invalid("Action.cpus", "%q is not a CPU number", f)
			}
			in.CPUs = append(in.CPUs, int(cpu))
		}
		switch p, _ := action("priority"); p {
		case "high":
			in.Prioritised = true
		case "", "normal":
		default:
			return doc, in, invalid("Action.priority", "%q is neither high nor normal", p)
		}
		if r, ok := action("rate"); ok {
			if in.Rate, err = strconv.ParseUint(r, 10, 64); err != nil || in.Rate == 0 {
				return doc, in, invalid("Action.rate", "%q is not a rate in bits per second", r)
			}
			if err := classifyxdp.CheckRate(in.Rate, 0); err != nil {
				return doc, in, asError("Action.rate", err)
			}
		}
		if len(in.Matches) == 0 {
			return doc, in, invalid("Resources", "name the flows of the slice")
		}
	case Offload:
		if len(in.Matches) > 0 {
			return doc, in, invalid("Resources", "an alternative node takes whatever the host cannot: it names no flows")
		}
		mac, _ := action("dstMac")
		addr, _ := action("dstIP")
		alt := classifyxdp.Alternative{}
		if alt.MAC, err = net.ParseMAC(mac); err != nil || len(alt.MAC) != 6 {
			return doc, in, invalid("Action.dstMac", "%q is not an Ethernet address", mac)
		}
		if alt.Addr, err = netip.ParseAddr(addr); err != nil || alt.Addr.Zone() != "" {
			return doc, in, invalid("Action.dstIP", "%q is not an IP address", addr)
		}
		if name, ok := params["interfaceName"]; ok {
			i, err := iface(fmt.Sprint(name))
			if err != nil {
				return doc, in, invalid("Params.interfaceName", "no interface %q where the classifier runs", name)
			}
			alt.Ifindex = i.Index
		}
		in.Alternative = &alt
	}
	return doc, in, nil
}

func ptr[T any](v T) *T { return &v }

// tunnelTypes are the names of encapsulation types.
var tunnelTypes = map[string]uint8{"vxlan": classifyxdp.TunnelVXLAN, "gtp": classifyxdp.TunnelGTPU, "gtpu": classifyxdp.TunnelGTPU,
	"gtp-u": classifyxdp.TunnelGTPU, "gre": classifyxdp.TunnelGRE, "geneve": classifyxdp.TunnelGENEVE}

var protocols = map[string]uint64{"icmp": 1, "tcp": 6, "udp": 17, "sctp": 132}

// matches turns the resources into the classifier's matches: every field
// of every resource, none given twice.
// scalars refuses a value of the resources or the action that is not
// one, in the document's terms: they are strings, as in Listing 1,
// numbers taken as their text. A resourceId, free text that nothing
// reads, may be anything, as intents kept in rules files have it.
func scalars(doc document) error {
	scalar := func(where string, v any) error {
		switch v.(type) {
		case string, json.Number, bool:
			return nil
		}
		return invalid(where, "must be a string")
	}
	for i, r := range doc.Resources {
		for _, name := range slices.Sorted(maps.Keys(r)) {
			if name == "resourceId" {
				continue
			}
			if err := scalar(fmt.Sprintf("Resources[%d].%s", i, name), r[name]); err != nil {
				return err
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(doc.Action)) {
		if err := scalar("Action."+name, doc.Action[name]); err != nil {
			return err
		}
	}
	return nil
}

func matches(resources []map[string]any) ([]classifyxdp.Match, error) {
	byField := map[string]classifyxdp.Match{}
	from := map[string]string{}
	for i, r := range resources {
		for _, name := range slices.Sorted(maps.Keys(r)) {
			where := fmt.Sprintf("Resources[%d].%s", i, name)
			if name == "" {
				where += `""`
			}
			value := fmt.Sprint(r[name])
			if name == "resourceId" {
				continue
			}
			m, err := match(name, value)
			if err != nil {
				return nil, invalid(where, "%v", err)
			}
			if prev, ok := from[m.Field]; ok {
				return nil, invalid(where, "%s is given by %s too", m.Field, prev)
			}
			byField[m.Field], from[m.Field] = m, where
		}
	}
	var out []classifyxdp.Match
	for _, f := range slices.Sorted(maps.Keys(byField)) {
		out = append(out, byField[f])
	}
	return out, nil
}

// match is the match of one resource field.
func match(name, value string) (classifyxdp.Match, error) {
	exact := func(field string, v uint64) classifyxdp.Match {
		f, _ := classifyxdp.FieldByName(field)
		return classifyxdp.Match{Field: field, Value: v, Mask: 1<<(8*f.Size) - 1}
	}
	number := func(bits int) (uint64, error) {
		n, err := strconv.ParseUint(value, 10, bits)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number of %d bits", value, bits)
		}
		return n, nil
	}
	switch {
	case name == "srcIP" || name == "dstIP":
		p, err := netip.ParsePrefix(value)
		if err != nil {
			a, aerr := netip.ParseAddr(value)
			if aerr != nil {
				return classifyxdp.Match{}, fmt.Errorf("%q is neither an address nor a prefix", value)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		return classifyxdp.Match{Field: map[string]string{"srcIP": "innerSrc", "dstIP": "innerDst"}[name], Prefix: p}, nil
	case name == "srcPort" || name == "dstPort":
		n, err := number(16)
		return exact(name, n), err
	case name == "qfi":
		n, err := number(6)
		return exact(name, n), err
	case name == "protocol":
		if n, ok := protocols[strings.ToLower(value)]; ok {
			return exact("proto", n), nil
		}
		n, err := number(8)
		return exact("proto", n), err
	}
	if level, ok := tunnelLevel(name, "encapsulationType"); ok {
		t, ok := tunnelTypes[strings.ToLower(value)]
		if !ok {
			return classifyxdp.Match{}, fmt.Errorf("unknown encapsulation %q (vxlan, gtp, gre or geneve)", value)
		}
		return exact(fmt.Sprintf("tunnel%d", level), uint64(t)), nil
	}
	if level, ok := tunnelLevel(name, "encapsulationID"); ok {
		n, err := strconv.ParseUint(value, 16, 32)
		if err != nil {
			return classifyxdp.Match{}, fmt.Errorf("%q is not a 32-bit hexadecimal id", value)
		}
		return exact(fmt.Sprintf("tunnel%dId", level), n), nil
	}
	return classifyxdp.Match{}, fmt.Errorf("unknown resource field (srcIP, dstIP, srcPort, dstPort, protocol, qfi, encapsulationTypeN, encapsulationIDN with N from 1 to %d)", classifyxdp.MaxTunnels)
}

// tunnelLevel reads N, a tunnel level, from a field named prefix + N.
func tunnelLevel(name, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	level, err := strconv.Atoi(rest)
	return level, ok && err == nil && level >= 1 && level <= classifyxdp.MaxTunnels
}
