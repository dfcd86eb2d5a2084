package strictjson

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/xdp5g/xdp5g/internal/fielderr"
)

type inner struct {
	TEID uint32 `json:"teid"`
	QFI  uint8  `json:"qfi" range:"0..63"`
}

type doc struct {
	SEID  uint64         `json:"seid" required:"true"`
	Name  string         `json:"name"`
	On    bool           `json:"on"`
	PDI   *inner         `json:"pdi"`
	PDRs  []inner        `json:"pdrs"`
	Slice uint32         `json:"slice" range:"slice"`
	IDs   []uint16       `json:"ids" range:"1..32"`
	Extra map[string]any `json:"extra"`
	Any   any            `json:"any"`
	Lists [][]string     `json:"lists"`
	Enum  enum           `json:"enum"`
	Delta int8           `json:"delta"`
}

// enum takes "a" or "b", or an object of them naming the wrong key.
type enum string

func (e *enum) FromJSON(v any) error {
	switch v := v.(type) {
	case string:
		if v != "a" && v != "b" {
			return errors.New(`must be "a" or "b"`)
		}
		*e = enum(v)
		return nil
	case map[string]any:
		for k := range v {
			return fielderr.New(k, "not a name")
		}
	}
	return errors.New("must be a string")
}

var strict = Decoder{Ranges: map[string][2]uint64{"slice": {0, 255}}}

// refused is a document and the field its error names (as JSON escapes
// it) with the error's reason.
type refused struct{ doc, field, reason string }

func expect(t *testing.T, d Decoder, cases []refused) {
	t.Helper()
	for _, c := range cases {
		var field string
		if err := json.Unmarshal([]byte(`"`+c.field+`"`), &field); err != nil {
			t.Fatal(err)
		}
		var v doc
		err := d.Decode([]byte(c.doc), &v)
		var fe *fielderr.Error
		if !errors.As(err, &fe) || fe.Field != field || fe.Reason != c.reason {
			t.Errorf("%s: %v, want %s: %s", c.doc, err, field, c.reason)
		}
	}
}

func TestDecode(t *testing.T) {
	var v doc
	err := strict.Decode([]byte(`{"seid": 7, "name": "n", "on": true, "pdi": {"teid": 4294967295, "qfi": 63},
		"pdrs": [{"teid": 1}, {"qfi": 0}], "slice": 255, "ids": [1, 32], "extra": {"a": [1, "x", null], "b": {"c": false}},
		"any": 1.5, "lists": [[], ["x"]], "enum": "b", "delta": -128}`), &v)
	want := doc{SEID: 7, Name: "n", On: true, PDI: &inner{TEID: 4294967295, QFI: 63}, PDRs: []inner{{TEID: 1}, {}}, Slice: 255,
		IDs: []uint16{1, 32}, Extra: map[string]any{"a": []any{json.Number("1"), "x", nil}, "b": map[string]any{"c": false}},
		Any: json.Number("1.5"), Lists: [][]string{{}, {"x"}}, Enum: "b", Delta: -128}
	if err != nil || !reflect.DeepEqual(v, want) {
		t.Errorf("%+v (%v)\nwant %+v", v, err, want)
	}
	// As deep as encoding/json takes, and no deeper (below).
	deep := strings.Repeat("[", maxDepth-1) + strings.Repeat("]", maxDepth-1)
	if err := strict.Decode([]byte(`{"seid": 1, "any": `+deep+`}`), &v); err != nil {
		t.Errorf("%d levels: %v", maxDepth, err)
	}
	if err := json.Unmarshal([]byte(`{"any": [`+deep+`]}`), new(any)); err == nil {
		t.Errorf("encoding/json takes %d levels", maxDepth+1)
	}
	// null is what leaving the field out is, for what can be empty.
	v = doc{}
	if err := strict.Decode([]byte(`{"seid": 1, "pdi": null, "pdrs": null, "extra": null, "any": null}`), &v); err != nil || !reflect.DeepEqual(v, doc{SEID: 1}) {
		t.Errorf("nulls: %+v (%v)", v, err)
	}
}

func TestRefused(t *testing.T) {
	expect(t, strict, []refused{
		{``, "", "the body is empty; expected a JSON document"},
		{" \n", "", "the body is empty; expected a JSON document"},
		{`{"seid": 1,`, "", "malformed JSON: unexpected EOF"},
		{`{"seid": 1, "name": "x`, "", "malformed JSON: unexpected EOF"},
		{`{"seid": 1 "name": "x"}`, "", `malformed JSON at byte 11: invalid character '"' after object key:value pair`},
		{`{"seid": 1} x`, "", "malformed JSON: data after the document (byte 12)"},
		{`{"seid": 1} {}`, "", "malformed JSON: data after the document (byte 13)"},
		{`[{"seid": 1}]`, "", "the document must be a JSON object, {…}"},
		{`null`, "", "the document must be a JSON object, {…}"},
		{`{}`, "seid", "is required"},
		{`{"seid": null}`, "seid", "must be an integer from 0 to 18446744073709551615"},
		{`{"seid": 1, "Name": "x"}`, "Name", "unknown field"},
		{`{"seid": 1, "pdrs": [{}, {"teid": 1, "qfy": 1}]}`, "pdrs[1].qfy", "unknown field"},
		{`{"seid": 1, "": 1}`, `\"\"`, "unknown field"},
		{`{"seid": 1, "pdi": {"": 1}}`, `pdi.\"\"`, "unknown field"},
		{`{"seid": 1, "extra": {"": 1, "": 2}}`, `extra.\"\"`, `the key "" is given twice`},
		{`{"seid": 1, "seid": 2}`, "seid", `the key "seid" is given twice`},
		{`{"seid": 1, "extra": {"a": {"b": 1, "\u0062": 2}}}`, "extra.a.b", `the key "b" is given twice`},
		{`{"seid": 1, "enum": {"x": 1, "x": 2}}`, "enum.x", `the key "x" is given twice`},
		{`{"seid": -1}`, "seid", "must be an integer from 0 to 18446744073709551615"},
		{`{"seid": 1, "pdi": {"qfi": 64}}`, "pdi.qfi", "must be an integer from 0 to 63"},
		{`{"seid": 1, "pdi": {"qfi": "9"}}`, "pdi.qfi", "must be an integer from 0 to 63"},
		{`{"seid": 1, "pdi": {"teid": 1.5}}`, "pdi.teid", "must be an integer from 0 to 4294967295"},
		{`{"seid": 1, "delta": 128}`, "delta", "must be an integer from -128 to 127"},
		{`{"seid": 1, "delta": "1"}`, "delta", "must be an integer from -128 to 127"},
		{`{"seid": 1, "slice": 256}`, "slice", "must be an integer from 0 to 255"},
		{`{"seid": 1, "ids": [1, 0]}`, "ids[1]", "must be an integer from 1 to 32"},
		{`{"seid": 1, "name": 5}`, "name", "must be a string"},
		{`{"seid": 1, "on": "yes"}`, "on", "must be true or false"},
		{`{"seid": 1, "pdi": []}`, "pdi", "must be an object"},
		{`{"seid": 1, "pdrs": {}}`, "pdrs", "must be a list"},
		{`{"seid": 1, "pdrs": [5]}`, "pdrs[0]", "must be an object"},
		{`{"seid": 1, "extra": "x"}`, "extra", "must be an object"},
		{`{"seid": 1, "lists": [[], [1]]}`, "lists[1][0]", "must be a string"},
		{`{"seid": 1, "enum": "c"}`, "enum", `must be "a" or "b"`},
		{`{"seid": 1, "enum": {"y": 1}}`, "enum.y", "not a name"},
		{`{"seid": 1, "any": ` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}`, "", "malformed JSON: nested deeper than 10000 levels"},
	})
	// The first error of the document, as it reads.
	expect(t, strict, []refused{
		{`{"name": 1, "seid": 1, "seid": 2}`, "name", "must be a string"},
		{`{"seid": 1, "seid": 2, "name": 1}`, "seid", `the key "seid" is given twice`},
	})
}

// Folding case, keys match fields whatever their case, and keys that
// differ in case alone are one key given twice; values keep their keys.
func TestFoldCase(t *testing.T) {
	folded := Decoder{FoldCase: true, Ranges: strict.Ranges}
	var v doc
	err := folded.Decode([]byte(`{"SEID": 1, "Name": "n", "pDi": {"TEID": 2}, "Extra": {"Ab": 1}}`), &v)
	want := doc{SEID: 1, Name: "n", PDI: &inner{TEID: 2}, Extra: map[string]any{"Ab": json.Number("1")}}
	if err != nil || !reflect.DeepEqual(v, want) {
		t.Errorf("%+v (%v), want %+v", v, err, want)
	}
	expect(t, folded, []refused{
		{`{"seid": 1, "SEID": 2}`, "SEID", `the key "SEID" is given twice, as "seid" before: keys match whatever their case`},
		{`{"seid": 1, "extra": {"a": 1, "A": 2}}`, "extra.A", `the key "A" is given twice, as "a" before: keys match whatever their case`},
		{`{"seid": 1, "pdi": {"teid": 1, "\u0074eid": 2}}`, "pdi.teid", `the key "teid" is given twice`},
		{`{"seid": 1, "extra": {"k": 1, "\u212a": 2}}`, `extra.\u212a`, `the key "` + "\u212a" + `" is given twice, as "k" before: keys match whatever their case`}, // the Kelvin sign
		{`{"seid": 1, "extra": {"s": 1, "\u017f": 2}}`, `extra.\u017f`, `the key "` + "\u017f" + `" is given twice, as "s" before: keys match whatever their case`}, // the long s
	})
	// Without folding, each case is its own key.
	v = doc{}
	if err := strict.Decode([]byte(`{"seid": 1, "extra": {"a": 1, "A": 2}}`), &v); err != nil || len(v.Extra) != 2 {
		t.Errorf("keys in two cases: %+v (%v)", v, err)
	}
}
