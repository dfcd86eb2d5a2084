package api

import "testing"

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
