package bench

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/xdp5g/xdp5g/internal/platform/version"
)

// The restarts bench runs only a daemon of its own build.
func TestSameBuild(t *testing.T) {
	for said, ok := range map[string]bool{version.String(): true, "other": false} {
		bin := filepath.Join(t.TempDir(), "xdp5g")
		if err := os.WriteFile(bin, []byte("#!/bin/sh\necho 'xdp5g version "+said+"'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := sameBuild(bin); (err == nil) != ok {
			t.Errorf("a daemon saying version %s: %v", said, err)
		}
	}
}
