package jsonkeys

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/xdp5g/xdp5g/internal/fielderr"
)

// repeated is a document and the path of the first key it gives twice, as
// JSON escapes it ("": none).
type repeated struct{ doc, field string }

func TestUnique(t *testing.T) {
	expect(t, Unique, []repeated{
		{`{"seid":1,"seid":2}`, "seid"},
		{`{"a":{"b":1,"c":2,"b":3}}`, "a.b"},
		{`{"pdrs":[{"id":1},{"pdi":{"teid":1,"teid":1}}]}`, "pdrs[1].pdi.teid"},
		{`[[{"x":1}],[{"x":1,"x":1}]]`, "[1][0].x"},
		{`{"a":1,"A":2,"b":{"a":1},"c":[{"a":1},{"a":1}]}`, ""}, // keys are case-sensitive; each object has its own
		{`{"a":"\u0062","b":1}`, ""},
		{`{"\u0062":1,"b":2}`, "b"}, // the same key, escaped
		{`{"a":1,"b"`, ""},          // malformed: the decoder's to report
		{`"text"`, ""},
	})
}

func TestUniqueFolded(t *testing.T) {
	expect(t, UniqueFolded, []repeated{
		{`{"Action":{},"action":{}}`, "action"},
		{`{"a":1,"A":2}`, "A"},
		{`{"Params":[{"paramName":"a","PARAMNAME":"b"}]}`, "Params[0].PARAMNAME"},
		{`{"k":1,"\u212a":2}`, `\u212a`}, // the Kelvin sign: encoding/json takes it for k
		{`{"s":1,"\u017f":2}`, `\u017f`}, // the long s
		{`{"a":{"x":1},"b":{"X":1}}`, ""},
		{`{"seid":1,"seid":2}`, "seid"},
	})
}

func expect(t *testing.T, check func([]byte) error, cases []repeated) {
	t.Helper()
	for _, c := range cases {
		var field string
		if err := json.Unmarshal([]byte(`"`+c.field+`"`), &field); err != nil {
			t.Fatal(err)
		}
		err := check([]byte(c.doc))
		var fe *fielderr.Error
		switch {
		case field == "" && err != nil:
			t.Errorf("%s: %v", c.doc, err)
		case field != "" && (!errors.As(err, &fe) || fe.Field != field):
			t.Errorf("%s: %v, want an error for %s", c.doc, err, field)
		}
	}
}
