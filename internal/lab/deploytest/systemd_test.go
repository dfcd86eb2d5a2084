package deploytest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/xdp5g/xdp5g/internal/config"
)

// maxExposure bounds what `systemd-analyze security` makes of the unit's
// hardening (0 the most confined, 10 the least).
const maxExposure = 3.5

// `make install` installs the binary, the unit (pointing at it) and the
// example configuration, keeping a configuration already there; systemd
// reads the unit without a complaint and judges it well confined.
func TestSystemdUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	root := t.TempDir()
	install := func() {
		t.Helper()
		cmd := exec.Command("make", "--no-print-directory", "install", "DESTDIR="+root, "PREFIX=/usr")
		cmd.Dir = "../../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make install: %v\n%s", err, out)
		}
	}
	install()
	binary := filepath.Join(root, "usr/bin/xdp5g")
	if st, err := os.Stat(binary); err != nil || st.Mode().Perm()&0o111 == 0 {
		t.Fatalf("the binary: %v", err)
	}
	configFile := filepath.Join(root, "etc/xdp5g/xdp5g.yaml")
	if _, err := config.Load(configFile); err != nil {
		t.Errorf("the configuration installed: %v", err)
	}
	unit, err := os.ReadFile(filepath.Join(root, "etc/systemd/system/xdp5g.service"))
	if err != nil {
		t.Fatal(err)
	}
	const execStart = "ExecStart=/usr/bin/xdp5g run --config /etc/xdp5g/xdp5g.yaml\n"
	if !strings.Contains(string(unit), execStart) {
		t.Errorf("the unit does not run the binary installed: no %q in\n%s", execStart, unit)
	}
	const mine = "# the operator's\n"
	if err := os.WriteFile(configFile, []byte(mine), 0o640); err != nil {
		t.Fatal(err)
	}
	install()
	if got, _ := os.ReadFile(configFile); string(got) != mine {
		t.Errorf("make install replaced the configuration there: %q", got)
	}

	// systemd-analyze wants the command at its path: the binary installed.
	checked := filepath.Join(t.TempDir(), "xdp5g.service")
	if err := os.WriteFile(checked, []byte(strings.Replace(string(unit), "/usr/bin/xdp5g", binary, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", checked).CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err := exec.Command(analyze, "security", "--offline=true", checked).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security said:\n%s", out)
	}
	if exposure, _ := strconv.ParseFloat(string(m[1]), 64); exposure > maxExposure {
		t.Errorf("exposure %g, want %g at most:\n%s", exposure, maxExposure, out)
	}
}
