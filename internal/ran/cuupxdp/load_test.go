package cuupxdp

import (
	"testing"

	"github.com/xdp5g/xdp5g/internal/testsupport"
)

func openTest(t *testing.T, cfg Config) *Datapath {
	t.Helper()
	testsupport.NeedRoot(t, "BPF")
	d, err := Open(cfg)
	testsupport.CheckLoad(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

// Both roles' programs load.
func TestProgramPassesVerifier(t *testing.T) { openTest(t, Config{}) }

// Every reason the classifier counts has its name, and no other.
func TestReasonNamesAreTheDataPaths(t *testing.T) {
	spec, err := loadCuup()
	if err != nil {
		t.Fatal(err)
	}
	testsupport.CheckEnumNames(t, spec, "cuup_reason", "CUUP_", "CUUP_REASON_COUNT", reasonNames[:])
}
