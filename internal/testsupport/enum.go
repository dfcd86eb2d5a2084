package testsupport

import (
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// CheckEnumNames fails a test unless names, indexed by value, are the
// members of the enum called enum in a BPF object's BTF, each in lower case
// without prefix; the member count, which counts the others, has no name.
// A value the C side has and the Go side does not name fails it, and so
// does a name the C side has not, or has under another value.
func CheckEnumNames(t testing.TB, spec *ebpf.CollectionSpec, enum, prefix, count string, names []string) {
	t.Helper()
	var e *btf.Enum
	if err := spec.Types.TypeByName(enum, &e); err != nil {
		t.Fatalf("enum %s: %v", enum, err)
	}
	named := 0
	for _, v := range e.Values {
		if v.Name == count {
			if v.Value != uint64(len(names)) {
				t.Errorf("%s is %d, and the Go side names %d values", count, v.Value, len(names))
			}
			continue
		}
		named++
		want := strings.ToLower(strings.TrimPrefix(v.Name, prefix))
		switch {
		case v.Value >= uint64(len(names)):
			t.Errorf("%s (%d) is beyond the %d Go names", v.Name, v.Value, len(names))
		case names[v.Value] != want:
			t.Errorf("%s (%d) is named %q on the Go side, want %q", v.Name, v.Value, names[v.Value], want)
		}
	}
	if named != len(names) {
		t.Errorf("enum %s has %d values besides %s, the Go side names %d", enum, named, count, len(names))
	}
}
