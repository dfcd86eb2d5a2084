package api

import (
	"testing"

	"github.com/xdp5g/xdp5g/internal/ran/e1"
)

// No document, however malformed, panics the decoder of any document type
// the API takes: it decodes or says why not.
func FuzzDecodeStrict(f *testing.F) {
	for _, seed := range []string{
		`{"seid": 1, "pdrs": [{"pdrId": 1, "farId": 1, "pdi": {"sourceInterface": 0, "qfi": 9}}], "fars": [{"farId": 1, "applyAction": "BUFF", "buffer": {"held": 3}}]}`,
		`{"action": "steer", "slice": 1, "match": {}}`, `{"rules": [{"action": "drop"}]}`, `{"id": 1, "cpus": [0, 1]}`,
		`{"stages": ["classify", "upf"], "slice": 2}`, `{"seid": null, "qers": [null], "urrs": {}}`, `[[[[]]]]`, `{"a": 1e400}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		for _, v := range []any{&document{}, &rulesFile{}, &Rule{}, &Slice{}, &StageSet{}, &Placement{},
			&e1.BearerContextSetupRequest{}, &e1.BearerContextModificationRequest{}} {
			_ = decodeStrict([]byte(doc), v)
		}
	})
}
