package api

import (
	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/strictjson"
)

// strict decodes the API's documents, whose field names are
// case-sensitive; a `range:"slice"` tag bounds a slice ID as the data path
// does.
var strict = strictjson.Decoder{Ranges: map[string][2]uint64{"slice": {0, uint64(classifyxdp.MaxSlices) - 1}}}

// decodeStrict decodes one JSON document into v with strict: unknown and
// case-mismatched fields, missing required ones, keys an object gives
// twice and numbers outside their field's range are refused, each naming
// the offending field by its path in the document, e.g. pdrs[1].pdi.teid.
func decodeStrict(data []byte, v any) error { return strict.Decode(data, v) }
