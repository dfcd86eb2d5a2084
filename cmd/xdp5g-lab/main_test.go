package main

import (
	"context"
	"strings"
	"testing"

	"github.com/xdp5g/xdp5g/internal/cli"
)

// xdp5gLab runs xdp5g-lab with args and returns its exit status and what
// it wrote to its standard output and error.
func xdp5gLab(args ...string) (status int, stdout, stderr string) {
	root := newRoot()
	var out, errOut strings.Builder
	root.SetOut(&out)
	root.SetErr(&errOut)
	status = cli.Run(context.Background(), root, args)
	return status, out.String(), errOut.String()
}

// bench's help lists its flags with two dashes; a flag with one dash is
// refused with bench's usage (status 2), a value the benchmarks cannot
// take fails (status 1) before anything is built.
func TestBenchCommandLine(t *testing.T) {
	status, stdout, _ := xdp5gLab("bench", "--help")
	for _, flag := range []string{"--quick", "--pfcp", "--pfcp-sessions int", "--classify", "--slicing", "--cuup", "--sessions counts"} {
		if status != 0 || !strings.Contains(stdout, "\n      "+flag+" ") {
			t.Errorf("xdp5g-lab bench --help: status %d, no %s in:\n%s", status, flag, stdout)
		}
	}
	if _, root, _ := xdp5gLab("--help"); !strings.Contains(root, "\n  bench ") {
		t.Errorf("xdp5g-lab --help lists no bench:\n%s", root)
	}
	for _, c := range []struct {
		args   []string
		status int
		err    string
	}{
		{[]string{"bench", "-pfcp"}, 2, "unknown shorthand flag: 'p' in -pfcp"},
		{[]string{"bench", "--pfcp", "extra"}, 2, `unknown command "extra" for "xdp5g-lab bench"`},
		{[]string{}, 2, "xdp5g-lab needs a command"},
		{[]string{"bench", "--cuup-size", "27"}, 1, "--cuup-size: 27 octets"},
		{[]string{"bench", "--quick", "--sessions", "1,x"}, 1, `--sessions: "x" is not a count`},
	} {
		status, stdout, stderr := xdp5gLab(c.args...)
		if status != c.status || stdout != "" || !strings.Contains(stderr, c.err) ||
			strings.Contains(stderr, "Usage:") != (c.status == 2) {
			t.Errorf("xdp5g-lab %s: status %d, stdout %q, stderr:\n%s\nwant status %d and %q",
				strings.Join(c.args, " "), status, stdout, stderr, c.status, c.err)
		}
	}
}
