package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/xdp5g/xdp5g/internal/classify/intent"
)

// listing1 is intent.Listing1 on CPU 0 and an interface
// of the env's.
var listing1 = strings.NewReplacer(`"rx_queue": "1"`, `"rx_queue": "0"`, `"eth0"`, `"n3n6"`).Replace(intent.Listing1)

// Intents over REST: installed, shown with their statistics and what they
// installed, which the rules and slices resources leave to them; refused
// naming the field; removed.
func TestIntents(t *testing.T) {
	e := newEnv(t)
	e.withRules(t)
	var st struct {
		ID     uint32
		Action string
		Rule   uint32
		Slice  *uint32
		Stats  struct{ Packets uint64 }
	}
	// One that gives a key twice is refused, naming it, and installs nothing.
	status, body := e.request(t, "POST", "/api/v1/intents", strings.Replace(listing1, `"rx_queue": "0"`, `"rx_queue": "0", "rx_queue": "1"`, 1))
	var bad Error
	if err := json.Unmarshal(body, &bad); err != nil || status != http.StatusBadRequest || bad.Field != "Action.rx_queue" || !strings.Contains(bad.Msg, "twice") {
		t.Errorf("an intent giving rx_queue twice: %d %s", status, body)
	}
	// So is one that gives its action twice, the second in another case
	// (keys of an intent match whatever their case).
	status, body = e.request(t, "POST", "/api/v1/intents", strings.Replace(listing1, `"Params"`, `"action": {"actionType": "DELETE"}, "Params"`, 1))
	if err := json.Unmarshal(body, &bad); err != nil || status != http.StatusBadRequest || bad.Field != "action" {
		t.Errorf("an intent giving Action and action: %d %s", status, body)
	}
	sameJSON(t, e.expect(t, http.StatusOK, "GET", "/api/v1/intents", ""), `{"intents": []}`)
	sameJSON(t, e.expect(t, http.StatusOK, "GET", "/api/v1/rules/count", ""), `{"rules": 0}`)

	must(t, json.Unmarshal(e.expect(t, http.StatusCreated, "POST", "/api/v1/intents", listing1), &st))
	if st.ID != 1 || st.Action != "PRIO-QUEUE" || st.Rule != 1<<31+1 || st.Slice == nil {
		t.Fatalf("installed %+v", st)
	}
	var list Intents
	must(t, json.Unmarshal(e.expect(t, http.StatusOK, "GET", "/api/v1/intents", ""), &list))
	if len(list.Intents) != 1 || list.Intents[0].FlowHash != "E918D704" {
		t.Errorf("listed %+v", list)
	}
	e.expect(t, http.StatusOK, "GET", "/api/v1/intents/1", "")
	// Its rule and slice are shown, but are the intent's to change.
	if rules := string(e.expect(t, http.StatusOK, "GET", "/api/v1/rules", "")); !strings.Contains(rules, `"id":2147483649`) {
		t.Errorf("the intent's rule is not listed: %s", rules)
	}
	e.expect(t, http.StatusConflict, "DELETE", "/api/v1/rules/2147483649", "")
	e.expect(t, http.StatusNotFound, "DELETE", "/api/v1/rules/2147483999", "") // no intent installed it
	e.expect(t, http.StatusConflict, "PUT", "/api/v1/slices/"+jsonInt(int(*st.Slice)), `{"cpus": [0]}`)
	e.expect(t, http.StatusBadRequest, "POST", "/api/v1/rules", `{"id": 2147483650, "action": "drop"}`)
	e.expect(t, http.StatusNoContent, "DELETE", "/api/v1/rules", "")
	sameJSON(t, e.expect(t, http.StatusOK, "GET", "/api/v1/rules/count", ""), `{"rules": 1}`)

	status, body = e.request(t, "POST", "/api/v1/intents", strings.Replace(listing1, `"rx_queue": "0"`, `"rx_queue": "zero"`, 1))
	if err := json.Unmarshal(body, &bad); err != nil || status != http.StatusBadRequest || bad.Field != "Action.rx_queue" {
		t.Errorf("a bad intent: %d %s", status, body)
	}
	saved, err := e.classifier.MarshalRules()
	must(t, err)
	restored := e.newClassifier(t)
	must(t, restored.RestoreRules(saved))
	if was, now := e.classifier.Rules.Rules(), restored.Rules.Rules(); len(now) != 1 || now[0].ID != was[0].ID {
		t.Errorf("restored rules %+v, want %+v", now, was)
	}
	e.expect(t, http.StatusOK, "POST", "/api/v1/intents", strings.Replace(listing1, `"INSERT"`, `"DELETE"`, 1))
	e.expect(t, http.StatusNotFound, "GET", "/api/v1/intents/1", "")
	e.expect(t, http.StatusNotFound, "DELETE", "/api/v1/intents/1", "")
	sameJSON(t, e.expect(t, http.StatusOK, "GET", "/api/v1/rules/count", ""), `{"rules": 0}`)
	sameJSON(t, e.expect(t, http.StatusOK, "GET", "/api/v1/slices", ""), `{"slices": []}`)
}

// An intent's slice is its own across a restart: the slices of the intents
// left after one before them went keep their IDs (the metrics' and
// reports' label), rather than move up into the gap.
func TestIntentsKeepTheirSlicesAcrossARestart(t *testing.T) {
	e := newEnv(t)
	e.withRules(t)
	for _, port := range []string{"5001", "5002", "5003"} {
		e.expect(t, http.StatusCreated, "POST", "/api/v1/intents", `{"Resources": [{"dstPort": "`+port+`"}],
			"Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0"}}`)
	}
	e.expect(t, http.StatusNoContent, "DELETE", "/api/v1/intents/1", "")
	slicesOf := func(c *Classifier) map[uint32]uint32 {
		list, err := c.Intents.List()
		must(t, err)
		out := map[uint32]uint32{}
		for _, in := range list {
			out[in.ID] = *in.Slice
		}
		return out
	}
	saved, err := e.classifier.MarshalRules()
	must(t, err)
	restored := e.newClassifier(t)
	must(t, restored.RestoreRules(saved))
	if was, now := slicesOf(e.classifier), slicesOf(restored); len(now) != 2 || now[2] != was[2] || now[3] != was[3] {
		t.Errorf("the intents' slices restored as %v, want %v", now, was)
	}
}
