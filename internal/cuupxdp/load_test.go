package cuupxdp

import (
	"errors"
	"os"
	"testing"

	"github.com/cilium/ebpf"
)

func openTest(t *testing.T, cfg Config) *Datapath {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: BPF")
	}
	d, err := Open(cfg)
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			t.Fatalf("%+v", ve)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// Both roles' programs load.
func TestProgramPassesVerifier(t *testing.T) { openTest(t, Config{}) }
