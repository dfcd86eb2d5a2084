package fielderr

import (
	"errors"
	"testing"
)

// within is an error of a part at path, and the error named from the
// root it should become.
type within struct {
	path string
	err  error
	want string
}

// A part's error is named from the root; a path or a field left empty
// adds no dot, and other errors pass as they are.
func TestWithin(t *testing.T) {
	for _, c := range []within{
		{"rules[1]", New("match.dstPort", "too big"), "rules[1].match.dstPort: too big"},
		{"", New("seid", "is required"), "seid: is required"},
		{"slices[0]", New("", "no CPUs"), "slices[0]: no CPUs"},
		{"rules[1]", errors.New("disk full"), "disk full"},
		{"rules[1]", nil, ""},
	} {
		got := Within(c.path, c.err)
		if (got == nil && c.want != "") || (got != nil && got.Error() != c.want) {
			t.Errorf("Within(%q, %v) = %v, want %q", c.path, c.err, got, c.want)
		}
	}
}
