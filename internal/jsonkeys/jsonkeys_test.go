package jsonkeys

import (
	"errors"
	"testing"

	"github.com/xdp5g/xdp5g/internal/fielderr"
)

func TestUnique(t *testing.T) {
	for _, tc := range []struct {
		doc, field string // field "": no repeated key
	}{
		{`{"seid":1,"seid":2}`, "seid"},
		{`{"a":{"b":1,"c":2,"b":3}}`, "a.b"},
		{`{"pdrs":[{"id":1},{"pdi":{"teid":1,"teid":1}}]}`, "pdrs[1].pdi.teid"},
		{`[[{"x":1}],[{"x":1,"x":1}]]`, "[1][0].x"},
		{`{"a":1,"A":2,"b":{"a":1},"c":[{"a":1},{"a":1}]}`, ""}, // keys are case-sensitive; each object has its own
		{`{"a":"\u0062","b":1}`, ""},
		{`{"\u0062":1,"b":2}`, "b"}, // the same key, escaped
		{`{"a":1,"b"`, ""},          // malformed: the decoder's to report
		{`"text"`, ""},
	} {
		err := Unique([]byte(tc.doc))
		var fe *fielderr.Error
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v", tc.doc, err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
			t.Errorf("%s: %v, want an error for %s", tc.doc, err, tc.field)
		}
	}
}
