// Package testsupport is the harness the tests share: what they need of the
// machine and how they report a BPF program the kernel refused.
package testsupport

import (
	"errors"
	"testing"

	"github.com/cilium/ebpf"
)

// CheckLoad fails a test that could not load BPF programs, with the
// verifier's whole log when the verifier refused one.
func CheckLoad(t testing.TB, err error) {
	t.Helper()
	var ve *ebpf.VerifierError
	switch {
	case errors.As(err, &ve):
		t.Fatalf("%+v", ve)
	case err != nil:
		t.Fatal(err)
	}
}
