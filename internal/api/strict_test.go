package api

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/xdp5g/xdp5g/internal/fielderr"
	"github.com/xdp5g/xdp5g/internal/ran/e1"
	"github.com/xdp5g/xdp5g/internal/strictjson"
)

// A number of the wrong type, or outside its field's range, is refused
// naming the field's range, not its Go type's.
func TestNumbersNameTheirFieldsRange(t *testing.T) {
	setup := func(old, new string) string { return strings.Replace(bearerContextSetup, old, new, 1) }
	for _, c := range []struct {
		doc   string
		into  any
		field string
		want  string
	}{
		{`{"stages": [], "slice": -1}`, &StageSet{}, "slice", "must be an integer from 0 to 255"},
		{`{"stages": [], "slice": 4294967295}`, &StageSet{}, "slice", "must be an integer from 0 to 255"},
		{`{"action": "steer", "slice": "1"}`, &Rule{}, "slice", "must be an integer from 0 to 255"},
		{`{"id": 256, "cpus": [0]}`, &Slice{}, "id", "must be an integer from 0 to 255"},
		{`{"cpus": [-1]}`, &Slice{}, "cpus[0]", "must be an integer from 0 to 4294967295"}, // no narrower range
		{`{"seid": 1, "pdrs": [{"pdrId": 1, "farId": 1, "pdi": {"sourceInterface": 0, "qfi": "9"}}]}`, &document{}, "pdrs[0].pdi.qfi", "must be an integer from 0 to 63"},
		{`{"seid": 1, "qers": [{"qerId": 1, "qfi": 256}]}`, &document{}, "qers[0].qfi", "must be an integer from 0 to 63"},
		{`{"seid": 1, "fars": [{"farId": 1, "buffer": {"held": 1.5}}]}`, &document{}, "fars[0].buffer.held", "must be an integer from -9223372036854775808 to 9223372036854775807"},
		{`{"seid": 1, "fars": [{"farId": 1, "forwardingParameters": {"dscp": 1.5}}]}`, &document{}, "fars[0].forwardingParameters.dscp", "must be an integer from 0 to 63"},
		{`{"seid": 1, "fars": [{"farId": 1, "duplicatingParameters": {"destinationInterface": 4, "dscp": 64}}]}`, &document{}, "fars[0].duplicatingParameters.dscp", "must be an integer from 0 to 63"},
		{setup(`"pduSessionId": 1`, `"pduSessionId": 0`), &e1.BearerContextSetupRequest{}, "pduSessionResourceToSetupList[0].pduSessionId", "must be an integer from 1 to 255"},
		{setup(`"sst": 1`, `"sst": 1, "sd": 16777216`), &e1.BearerContextSetupRequest{}, "pduSessionResourceToSetupList[0].snssai.sd", "must be an integer from 0 to 16777215"},
		{setup(`"drbId": 1`, `"drbId": 33`), &e1.BearerContextSetupRequest{}, "pduSessionResourceToSetupList[0].drbToSetupList[0].drbId", "must be an integer from 1 to 32"},
		{setup(`"qosFlowIdentifier": 9`, `"qosFlowIdentifier": -1`), &e1.BearerContextSetupRequest{},
			"pduSessionResourceToSetupList[0].drbToSetupList[0].qosFlowInformationToBeSetup[0].qosFlowIdentifier", "must be an integer from 0 to 63"},
		{`{"pduSessionResourceToModifyList": [{"pduSessionId": "1"}]}`, &e1.BearerContextModificationRequest{}, "pduSessionResourceToModifyList[0].pduSessionId", "must be an integer from 1 to 255"},
		{`{"pduSessionResourceToModifyList": [{"pduSessionId": 1, "drbToModifyList": [{"drbId": 0}]}]}`, &e1.BearerContextModificationRequest{},
			"pduSessionResourceToModifyList[0].drbToModifyList[0].drbId", "must be an integer from 1 to 32"},
		{`{"pduSessionResourceToModifyList": [{"pduSessionId": 1, "drbToRemoveList": [1, 40]}]}`, &e1.BearerContextModificationRequest{},
			"pduSessionResourceToModifyList[0].drbToRemoveList[1]", "must be an integer from 1 to 32"},
		{`{"pduSessionResourceToRemoveList": [0]}`, &e1.BearerContextModificationRequest{}, "pduSessionResourceToRemoveList[0]", "must be an integer from 1 to 255"},
	} {
		err := decodeStrict([]byte(c.doc), c.into)
		var fe *fielderr.Error
		if !errors.As(err, &fe) || fe.Field != c.field || fe.Reason != c.want {
			t.Errorf("%s: %v, want %s: %s", c.doc, err, c.field, c.want)
		}
	}
	// The bounds themselves are taken.
	var set StageSet
	if err := decodeStrict([]byte(`{"stages": [], "slice": 255}`), &set); err != nil || set.Slice != 255 {
		t.Errorf("slice 255: %v, %+v", err, set)
	}
	if err := decodeStrict([]byte(setup(`"sst": 1`, `"sst": 1, "sd": 16777215`)), &e1.BearerContextSetupRequest{}); err != nil {
		t.Error(err)
	}
	var req e1.BearerContextModificationRequest
	if err := decodeStrict([]byte(`{"pduSessionResourceToRemoveList": [1, 255], "pduSessionResourceToModifyList": [{"pduSessionId": 1, "drbToRemoveList": [32]}]}`), &req); err != nil {
		t.Error(err)
	}
}

// A document that is not an object is refused saying so of the document,
// as no field is at fault.
func TestDocumentNotAnObject(t *testing.T) {
	for _, doc := range []string{`[{"cpus": [0]}]`, `"x"`, `7`} {
		err := decodeStrict([]byte(doc), &Slice{})
		if want := "the document must be a JSON object, {…}"; err == nil || err.Error() != want {
			t.Errorf("%s: %v; want %q", doc, err, want)
		}
	}
}

// How long a session document takes to decode (Fig. 10's).
func BenchmarkDecodeSession(b *testing.B) {
	for b.Loop() {
		var d document
		if err := decodeStrict([]byte(fig10), &d); err != nil {
			b.Fatal(err)
		}
	}
}

// How long a rules file of 10,000 rules takes to decode, as a start reads
// it.
func BenchmarkDecodeRulesFile(b *testing.B) {
	rules := make([]string, 10000)
	for i := range rules {
		rules[i] = fmt.Sprintf(`{"id": %d, "priority": 1, "action": "drop", "match": {"dstPort": %d, "innerSrc": "10.0.0.0/8"}}`, i+1, i)
	}
	doc := []byte(`{"slices": [], "rules": [` + strings.Join(rules, ",") + `]}`)
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		var f rulesFile
		if err := decodeStrict(doc, &f); err != nil {
			b.Fatal(err)
		}
	}
}

// Every document the API decodes has only fields the strict decoder takes:
// one it cannot would panic the request that gives it. The live figures of
// a document it serves (a FAR's buffer) are taken back as given.
func TestDocumentsDecodeEveryField(t *testing.T) {
	for _, v := range []any{document{}, rulesFile{}, Rule{}, Slice{}, StageSet{}, Placement{},
		e1.BearerContextSetupRequest{}, e1.BearerContextModificationRequest{}} {
		if err := strictjson.Decodable(v); err != nil {
			t.Errorf("%T: %v", v, err)
		}
	}
	var d document
	doc := `{"seid": 1, "fars": [{"farId": 1, "applyAction": "BUFF", "buffer": {"held": 3, "delivered": 1, "dropped": 0}}]}`
	if err := decodeStrict([]byte(doc), &d); err != nil || d.FARs[0].Buffer == nil || d.FARs[0].Buffer.Held != 3 {
		t.Errorf("a document with a FAR's buffer figures: %+v, %v", d.FARs, err)
	}
}
