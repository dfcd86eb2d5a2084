package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/classify/intent"
	"github.com/xdp5g/xdp5g/internal/fielderr"
)

// Rule is a classification rule as the REST API shows it:
//
//	{"id": 7, "priority": 100, "action": "drop",
//	 "match": {"innerDst": "10.0.0.0/8", "dstPort": {"range": [5000, 5100]},
//	           "layerId": {"value": 1, "mask": 63}, "tunnel1": "vxlan", "tunnel1Id": 100}}
//
// An address field takes a prefix (or an address); a number field a
// number, a value under a mask, or a range; tunnelN fields also take the
// tunnel's name. A rule without an id gets the lowest one free.
type Rule struct {
	ID       *uint32     `json:"id,omitempty"`
	Priority uint32      `json:"priority"`
	Action   ruleAction  `json:"action" required:"true"`
	Match    ruleMatch   `json:"match"`
	Out      *RuleEgress `json:"out,omitempty"`
	Slice    *uint32     `json:"slice,omitempty" range:"slice"` // whose CPUs a steer rule sends packets to
	Counters *Counter    `json:"counters,omitempty"`
}

// RuleEgress is where a redirect rule sends packets, or a mirror rule
// their copies: out of an interface of the classifier's namespace, with
// the outermost Ethernet addresses rewritten, the source by default to the
// interface's own.
type RuleEgress struct {
	Interface string `json:"interface" required:"true"`
	DstMAC    string `json:"dstMac" required:"true"`
	SrcMAC    string `json:"srcMac,omitempty"`
}

// Classifier is the daemon's classifier as the REST API serves it.
type Classifier struct {
	Rules *classifyxdp.Datapath
	// Interface finds an interface of the classifier's namespace by name.
	Interface func(name string) (*net.Interface, error)
	// Intents install rules and slices of their own, which the rules and
	// slices resources show but leave to them.
	Intents *intent.Store
}

// Rules is the body of GET /api/v1/rules.
type Rules struct {
	Rules []Rule `json:"rules"`
}

// RuleCount is the body of GET /api/v1/rules/count.
type RuleCount struct {
	Rules int `json:"rules"`
}

// ruleActions are the actions by the names rules give them.
var ruleActions = enumOf(classifyxdp.ActionNames[:])

type ruleAction classifyxdp.ActionKind

func (a *ruleAction) FromJSON(v any) error {
	n, err := ruleActions.parse(v)
	*a = ruleAction(n)
	return err
}

func (a ruleAction) MarshalJSON() ([]byte, error) { return json.Marshal(ruleActions[uint8(a)]) }

// isTunnelType says whether a field is a level's tunnel type (tunnel1 to
// tunnel4), which documents may name; tunnels, the count of levels, is not.
func isTunnelType(field string) bool {
	level, ok := strings.CutPrefix(field, "tunnel")
	return ok && len(level) == 1 && level >= "1" && level <= "9"
}

// tunnelType is the tunnel type a name names; 0 (TunnelNone) for none.
func tunnelType(name string) uint64 {
	if t := slices.Index(classifyxdp.TunnelNames[:], name); t > 0 {
		return uint64(t)
	}
	return 0
}

// tunnelName is a tunnel type's name; empty for TunnelNone and unknown
// types.
func tunnelName(v uint64) string {
	if v >= uint64(len(classifyxdp.TunnelNames)) {
		return ""
	}
	return classifyxdp.TunnelNames[v]
}

// ruleMatch is a rule's matches, by field name.
type ruleMatch []classifyxdp.Match

func (m *ruleMatch) FromJSON(v any) error {
	obj, ok := v.(map[string]any)
	if !ok {
		return errors.New("must be an object of fields")
	}
	*m = nil
	for _, name := range slices.Sorted(maps.Keys(obj)) {
		match, err := parseMatch(name, obj[name])
		if err != nil {
			return fielderr.New(name, "%v", err)
		}
		*m = append(*m, match)
	}
	return nil
}

func parseMatch(name string, v any) (classifyxdp.Match, error) {
	m := classifyxdp.Match{Field: name}
	f, ok := classifyxdp.FieldByName(name)
	switch {
	case !ok:
		return m, fmt.Errorf("no field %q", name)
	case f.Size == 16:
		s, ok := v.(string)
		if !ok {
			return m, errors.New("must be an address or a prefix")
		}
		var err error
		if m.Prefix, err = netip.ParsePrefix(s); err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return m, fmt.Errorf("%q is neither an address nor a prefix", s)
			}
			m.Prefix = netip.PrefixFrom(a, a.BitLen())
		}
		return m, nil
	}
	all := uint64(1)<<(8*f.Size) - 1
	number := func(v any) (uint64, error) {
		// tunnels too: earlier builds wrote its count as a tunnel type's
		// name in rules files, which must still restore.
		if s, ok := v.(string); ok && (isTunnelType(name) || name == "tunnels") && tunnelType(s) != 0 {
			return tunnelType(s), nil
		}
		n, ok := v.(json.Number)
		u, err := strconv.ParseUint(string(n), 10, 64)
		if (!ok || err != nil || u > all) && isTunnelType(name) {
			return 0, fmt.Errorf("must be %s or a number from 0 to %d", strings.Join(classifyxdp.TunnelNames[1:], ", "), all)
		}
		if !ok || err != nil || u > all {
			return 0, fmt.Errorf("must be a number from 0 to %d", all)
		}
		return u, nil
	}
	obj, isObj := v.(map[string]any)
	if !isObj {
		n, err := number(v)
		m.Value, m.Mask = n, all
		return m, err
	}
	if r, ok := obj["range"]; ok {
		bounds, ok := r.([]any)
		if len(obj) != 1 || !ok || len(bounds) != 2 {
			return m, errors.New(`a range is {"range": [low, high]}`)
		}
		var err error
		m.Ranged = true
		if m.Lo, err = number(bounds[0]); err == nil {
			m.Hi, err = number(bounds[1])
		}
		return m, err
	}
	value, hasValue := obj["value"]
	mask, hasMask := obj["mask"]
	if len(obj) != 2 || !hasValue || !hasMask {
		return m, errors.New(`a masked value is {"value": v, "mask": m}`)
	}
	var err error
	if m.Value, err = number(value); err == nil {
		m.Mask, err = number(mask)
	}
	return m, err
}

func (m ruleMatch) MarshalJSON() ([]byte, error) {
	out := map[string]any{}
	for _, match := range m {
		f, _ := classifyxdp.FieldByName(match.Field)
		all := uint64(1)<<(8*f.Size) - 1
		switch {
		case match.Prefix.IsValid():
			out[match.Field] = match.Prefix.String()
		case match.Ranged:
			out[match.Field] = map[string]any{"range": []uint64{match.Lo, match.Hi}}
		case match.Mask == all && isTunnelType(match.Field) && tunnelName(match.Value) != "":
			out[match.Field] = tunnelName(match.Value)
		case match.Mask == all:
			out[match.Field] = match.Value
		default:
			out[match.Field] = map[string]any{"value": match.Value, "mask": match.Mask}
		}
	}
	return json.Marshal(out)
}

var errNoClassifier = &Error{Status: http.StatusNotFound, Msg: "classification is not configured"}

func ruleNotFound(id uint32) *Error {
	return &Error{Status: http.StatusNotFound, Msg: fmt.Sprintf("rule %d not found", id)}
}

func pathRuleID(r *http.Request) (uint32, error) { return pathID(r, "a rule ID") }

// ruleDoc is the document of a rule with its counters.
func (s *server) ruleDoc(r classifyxdp.Rule) (Rule, error) {
	packets, bytes, err := s.classifier.Rules.Counters(r.ID)
	if err != nil {
		return Rule{}, err
	}
	doc := ruleDocument(r)
	doc.Counters = &Counter{Packets: packets, Bytes: bytes}
	return doc, nil
}

// ruleDocument is the document of a rule, without counters.
func ruleDocument(r classifyxdp.Rule) Rule {
	id := r.ID
	doc := Rule{ID: &id, Priority: r.Priority, Action: ruleAction(r.Action), Match: r.Matches}
	if r.Action == classifyxdp.ActionSteer {
		doc.Slice = &r.Slice
	}
	if r.Out != nil {
		doc.Out = &RuleEgress{Interface: r.Out.Interface, DstMAC: r.Out.DstMAC.String(), SrcMAC: r.Out.SrcMAC.String()}
	}
	return doc
}

// rule is the rule a document describes, its egress found.
func (c *Classifier) rule(doc Rule) (classifyxdp.Rule, error) {
	rule := classifyxdp.Rule{Priority: doc.Priority, Action: classifyxdp.ActionKind(doc.Action), Matches: doc.Match}
	if doc.ID != nil {
		rule.ID = *doc.ID
	}
	switch steer := rule.Action == classifyxdp.ActionSteer; {
	case steer && doc.Slice == nil:
		return rule, fielderr.New("slice", "a rule that steers names its slice")
	case !steer && doc.Slice != nil:
		return rule, fielderr.New("slice", "only a rule that steers has a slice")
	case steer && c.Intents.OwnsSlice(*doc.Slice):
		return rule, fielderr.New("slice", "slice %d is an intent's, and goes with it: steer to a slice set by hand", *doc.Slice)
	case steer:
		rule.Slice = *doc.Slice
	}
	if doc.Out == nil {
		return rule, nil
	}
	iface, err := c.Interface(doc.Out.Interface)
	if err != nil {
		return rule, fielderr.New("out.interface", "no interface %q where the classifier runs", doc.Out.Interface)
	}
	rule.Out = &classifyxdp.Egress{Interface: iface.Name, Ifindex: iface.Index, SrcMAC: iface.HardwareAddr}
	if rule.Out.DstMAC, err = parseMAC(doc.Out.DstMAC); err != nil {
		return rule, fielderr.New("out.dstMac", "%v", err)
	}
	if doc.Out.SrcMAC != "" {
		if rule.Out.SrcMAC, err = parseMAC(doc.Out.SrcMAC); err != nil {
			return rule, fielderr.New("out.srcMac", "%v", err)
		}
	} else if len(rule.Out.SrcMAC) != 6 {
		return rule, fielderr.New("out.srcMac", "%s has no Ethernet address of its own: give one", iface.Name)
	}
	return rule, nil
}

func parseMAC(s string) (net.HardwareAddr, error) {
	mac, err := net.ParseMAC(s)
	if err != nil || len(mac) != 6 {
		return nil, fmt.Errorf("%q is not an Ethernet address", s)
	}
	return mac, nil
}

// rulesFile is what the classifier keeps across restarts: its slices and
// rules as GET /api/v1/slices and /api/v1/rules show them, without
// counters.
type rulesFile struct {
	Slices  []Slice         `json:"slices"`
	Rules   []Rule          `json:"rules"`
	Intents intentDocuments `json:"intents,omitempty"`
	// IntentSlices are the slices the intents took, which they take again.
	IntentSlices []intentSlice `json:"intentSlices,omitempty"`
}

// intentSlice is the slice an intent took.
type intentSlice struct {
	Intent uint32 `json:"intent" required:"true"`
	Slice  uint32 `json:"slice" required:"true"`
}

// intentDocuments are intent documents, kept as they are: the intents
// check them.
type intentDocuments []json.RawMessage

func (d *intentDocuments) FromJSON(v any) error {
	list, ok := v.([]any)
	if !ok {
		return errors.New("must be a list of intent documents")
	}
	for _, doc := range list {
		raw, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		*d = append(*d, raw)
	}
	return nil
}

// MarshalRules is the rules file.
func (c *Classifier) MarshalRules() ([]byte, error) {
	out := rulesFile{Slices: []Slice{}, Rules: []Rule{}, Intents: c.Intents.Marshal()}
	intentSlices := c.Intents.Slices()
	for _, id := range slices.Sorted(maps.Keys(intentSlices)) {
		out.IntentSlices = append(out.IntentSlices, intentSlice{Intent: id, Slice: intentSlices[id]})
	}
	for _, s := range c.Rules.Slices() {
		if !c.Intents.OwnsSlice(s.ID) {
			out.Slices = append(out.Slices, sliceDocument(s))
		}
	}
	for _, r := range c.Rules.RulesAsAdded() {
		if !intent.OwnsRule(r.ID) {
			out.Rules = append(out.Rules, ruleDocument(r))
		}
	}
	return json.MarshalIndent(out, "", "  ")
}

// RestoreRules sets up the slices and adds the rules of a rules file. An
// error names the slice or rule by its place in the file; the rules go in
// all or none.
func (c *Classifier) RestoreRules(data []byte) error {
	var doc rulesFile
	if err := decodeStrict(data, &doc); err != nil {
		return err
	}
	for i, s := range doc.Slices {
		if _, err := c.setSlice(s); err != nil {
			return fielderr.Within(fmt.Sprintf("slices[%d]", i), err)
		}
	}
	rules := make([]classifyxdp.Rule, len(doc.Rules))
	for i, d := range doc.Rules {
		field := fmt.Sprintf("rules[%d]", i)
		if d.ID == nil {
			return fielderr.New(field+".id", "a saved rule has its ID")
		}
		var err error
		if rules[i], err = c.rule(d); err != nil {
			return fielderr.Within(field, err)
		}
	}
	err := c.Rules.Add(rules...)
	var re *fielderr.Error
	if errors.As(err, &re) && len(rules) > 0 {
		// Add names a rule of several by its place, the only one not.
		i, field := 0, re.Field
		if n, _ := fmt.Sscanf(field, "rules[%d].", &i); n == 1 && i < len(rules) {
			field = field[strings.Index(field, ".")+1:]
		}
		return fielderr.New(fmt.Sprintf("rules[%d].%s", i, documentField(rules[i], field)), "%s", re.Reason)
	}
	if err != nil {
		return err
	}
	had := map[uint32]uint32{}
	for _, s := range doc.IntentSlices {
		had[s.Intent] = s.Slice
	}
	return asIntentError(c.Intents.Restore(doc.Intents, had))
}

func (s *server) addRule(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var doc Rule
	if err := decodeBody(w, r, &doc); err != nil {
		return 0, nil, err
	}
	if doc.Counters != nil {
		return 0, nil, fielderr.New("counters", "counters are the data path's to say")
	}
	rule, err := s.classifier.rule(doc)
	if err != nil {
		return 0, nil, err
	}
	if err := classifyxdp.CheckValues(rule.Matches); err != nil {
		return 0, nil, asRuleError(rule, err)
	}
	switch {
	case doc.ID == nil:
		rule.ID = s.freeRuleID()
	case intent.OwnsRule(*doc.ID):
		return 0, nil, fielderr.New("id", "IDs from %d on are the intents' rules'", uint32(1)<<31)
	}
	if err := s.classifier.Rules.Add(rule); err != nil {
		return 0, nil, asRuleError(rule, err)
	}
	got, err := s.ruleDoc(rule)
	return http.StatusCreated, got, err
}

// asRuleError names the field of r's document that a refusal of r is
// about.
func asRuleError(r classifyxdp.Rule, err error) error {
	var re *fielderr.Error
	if errors.As(err, &re) {
		return fielderr.New(documentField(r, re.Field), "%s", re.Reason)
	}
	return err
}

// documentField names a field of a rule's document for the field of a
// rule error: matches[i] is match.<the i-th match's field>.
func documentField(r classifyxdp.Rule, field string) string {
	var i int
	var rest string
	if n, _ := fmt.Sscanf(field, "matches[%d]%s", &i, &rest); n >= 1 && i < len(r.Matches) {
		if rest == ".field" {
			rest = ""
		}
		return "match." + r.Matches[i].Field + rest
	}
	if field == "matches" {
		return "match"
	}
	return field
}

// freeRuleID is the lowest rule ID not in use. A concurrent add may take
// it first: that one's add is then refused, naming the id.
func (s *server) freeRuleID() uint32 {
	id := uint32(1)
	for _, r := range s.classifier.Rules.Rules() {
		if r.ID != id {
			break
		}
		id++
	}
	return id
}

func (s *server) listRules(w http.ResponseWriter, r *http.Request) (int, any, error) {
	out := Rules{Rules: []Rule{}}
	for _, rule := range s.classifier.Rules.Rules() {
		doc, err := s.ruleDoc(rule)
		if errors.Is(err, classifyxdp.ErrNoRule) {
			continue // deleted meanwhile
		}
		if err != nil {
			return 0, nil, err
		}
		out.Rules = append(out.Rules, doc)
	}
	return http.StatusOK, out, nil
}

func (s *server) getRule(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathRuleID(r)
	if err != nil {
		return 0, nil, err
	}
	rule, ok := s.classifier.Rules.Rule(id)
	if !ok {
		return 0, nil, ruleNotFound(id)
	}
	doc, err := s.ruleDoc(rule)
	if errors.Is(err, classifyxdp.ErrNoRule) {
		return 0, nil, ruleNotFound(id)
	}
	return http.StatusOK, doc, err
}

func (s *server) deleteRule(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathRuleID(r)
	if err != nil {
		return 0, nil, err
	}
	if _, ok := s.classifier.Rules.Rule(id); !ok {
		return 0, nil, ruleNotFound(id)
	}
	if intent.OwnsRule(id) {
		return 0, nil, &Error{Status: http.StatusConflict, Msg: fmt.Sprintf("rule %d is an intent's: delete the intent", id)}
	}
	if err := s.classifier.Rules.Delete(id); errors.Is(err, classifyxdp.ErrNoRule) {
		return 0, nil, ruleNotFound(id)
	} else if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, nil
}

// clearRules removes every rule but the intents'.
func (s *server) clearRules(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var ids []uint32
	for _, rule := range s.classifier.Rules.Rules() {
		if !intent.OwnsRule(rule.ID) {
			ids = append(ids, rule.ID)
		}
	}
	if err := s.classifier.Rules.Delete(ids...); err != nil && !errors.Is(err, classifyxdp.ErrNoRule) {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, nil
}

func (s *server) countRules(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return http.StatusOK, RuleCount{Rules: s.classifier.Rules.Len()}, nil
}
