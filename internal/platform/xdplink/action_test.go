package xdplink

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
)

// TestActionsAreTheKernels compares the verdicts with the kernel's enum
// xdp_action.
func TestActionsAreTheKernels(t *testing.T) {
	var enum *btf.Enum
	kernelType(t, "xdp_action", &enum)
	if len(enum.Values) != len(actionNames) {
		t.Errorf("the kernel has %d XDP verdicts, this package %d", len(enum.Values), len(actionNames))
	}
	for _, v := range enum.Values {
		if a := Action(v.Value); a.String() != v.Name {
			t.Errorf("%s is %d in the kernel, %v here", v.Name, v.Value, a)
		}
	}
}

// TestContextIsTheKernels compares Context with the kernel's struct xdp_md.
func TestContextIsTheKernels(t *testing.T) {
	var md *btf.Struct
	kernelType(t, "xdp_md", &md)
	ours := reflect.TypeFor[Context]()
	if uintptr(md.Size) != ours.Size() || len(md.Members) != ours.NumField() {
		t.Fatalf("struct xdp_md has %d bytes in %d members, Context %d in %d", md.Size, len(md.Members), ours.Size(), ours.NumField())
	}
	for i, m := range md.Members {
		f := ours.Field(i)
		if name := strings.ReplaceAll(m.Name, "_", ""); !strings.EqualFold(f.Name, name) || uintptr(m.Offset.Bytes()) != f.Offset {
			t.Errorf("member %s at %d, field %s at %d", m.Name, m.Offset.Bytes(), f.Name, f.Offset)
		}
	}
}

// kernelType finds a type of the running kernel by name, as its BTF
// describes it.
func kernelType(t *testing.T, name string, typ any) {
	t.Helper()
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		t.Skipf("no kernel BTF: %v", err)
	}
	if err := spec.TypeByName(name, typ); err != nil {
		t.Fatal(err)
	}
}
