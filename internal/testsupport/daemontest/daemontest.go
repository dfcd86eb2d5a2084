// Package daemontest is what the tests that run the daemon share. Only
// tests import it.
package daemontest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/daemon"
)

// Config writes yaml as the configuration file xdp5g.yaml in dir and
// loads it; what a daemon of it attaches is detached when the test ends.
func Config(t testing.TB, dir, yaml string) *config.Config {
	t.Helper()
	path := filepath.Join(dir, "xdp5g.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := daemon.Detach(cfg); err != nil {
			t.Error(err)
		}
	})
	return cfg
}
