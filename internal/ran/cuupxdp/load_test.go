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
