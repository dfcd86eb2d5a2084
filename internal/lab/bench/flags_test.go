package bench

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// parseFlags parses args as `xdp5g-lab bench` does.
func parseFlags(args []string) (config, error) {
	fs := pflag.NewFlagSet("bench", pflag.ContinueOnError)
	f := AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	return f.config()
}

// --quick sets the flags not given to their quick values; the report's
// headline repeats the flags as given, --quick included and the values it
// set not.
func TestQuick(t *testing.T) {
	fs := pflag.NewFlagSet("bench", pflag.ContinueOnError)
	f := AddFlags(fs)
	if err := fs.Parse([]string{"--quick", "--runs", "2", "--pfcp", "--sessions", "1,10"}); err != nil {
		t.Fatal(err)
	}
	given := f.given()
	cfg, err := f.config()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"--quick", "--runs", "2", "--pfcp", "--sessions", "1,10"}; !slices.Equal(given, want) {
		t.Errorf("given %q, want %q", given, want)
	}
	if cfg.runs != 2 || !slices.Equal(cfg.sessions, []int{1, 10}) || cfg.packets != 2_000_000 || cfg.pfcpSessions != 100_000 ||
		cfg.steady.String() != "5s" || !cfg.pfcp {
		t.Errorf("--quick --runs 2 --pfcp --sessions 1,10: %+v", cfg)
	}
	for name := range quickValues {
		if fs.Lookup(name) == nil {
			t.Errorf("--quick sets --%s, which is no flag", name)
		}
	}
}

// The flags' help names flags with two dashes and cites no development
// notes.
func TestFlagHelp(t *testing.T) {
	fs := pflag.NewFlagSet("bench", pflag.ContinueOnError)
	AddFlags(fs)
	singleDash := regexp.MustCompile(`(^|[^-\w])-[a-z]`)
	fs.VisitAll(func(f *pflag.Flag) {
		if singleDash.MatchString(f.Usage) {
			t.Errorf("--%s: help %q names a flag with one dash", f.Name, f.Usage)
		}
		for _, bad := range []string{"issue", "000_", "001_"} {
			if strings.Contains(f.Usage, bad) {
				t.Errorf("--%s: help %q has %q", f.Name, f.Usage, bad)
			}
		}
	})
}

// --flows takes counts of sessions, each at least one.
func TestFlows(t *testing.T) {
	cfg, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{4096, 65536}; !slices.Equal(cfg.flows, want) {
		t.Errorf("--flows by default: %v, want %v", cfg.flows, want)
	}
	for _, bad := range []string{"0", "4096,", "many"} {
		if _, err := parseFlags([]string{"--flows", bad}); err == nil || !strings.Contains(err.Error(), "--flows") {
			t.Errorf("--flows %q: %v, want an error naming --flows", bad, err)
		}
	}
}

// A run measures one suite, and --charts names a directory of --slicing's
// before the run: refused, the run measures nothing.
func TestSuiteFlagsRefused(t *testing.T) {
	dir, file := t.TempDir(), filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"--pfcp", "--classify"}, "--pfcp, --classify: one suite a run"},
		{[]string{"--restarts", "2", "--cuup"}, "--restarts, --cuup: one suite a run"},
		{[]string{"--slicing", "--charts", filepath.Join(dir, "none")}, "--charts: " + filepath.Join(dir, "none") + " is not a directory"},
		{[]string{"--slicing", "--charts", file}, "--charts: " + file + " is not a directory"},
		{[]string{"--chain", "--charts", dir}, "--charts applies to --slicing alone"},
	} {
		if _, err := parseFlags(c.args); err == nil || err.Error() != c.err {
			t.Errorf("%q: %v, want %q", c.args, err, c.err)
		}
	}
	if _, err := parseFlags([]string{"--slicing", "--charts", dir}); err != nil {
		t.Errorf("--slicing --charts %s: %v", dir, err)
	}
}
