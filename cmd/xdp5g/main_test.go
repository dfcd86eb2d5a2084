package main

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// xdp5g writing to a pipe whose reader is gone goes on (and so removes
// what it set up) instead of dying of SIGPIPE.
func TestOutputToClosedPipe(t *testing.T) {
	if os.Getenv("XDP5G_TEST_CLOSED_STDOUT") == "1" {
		os.Args = []string{"xdp5g", "help"} // writes the usage to stdout
		main()
		os.Exit(0)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestOutputToClosedPipe$")
	cmd.Env = append(os.Environ(), "XDP5G_TEST_CLOSED_STDOUT=1")
	cmd.Stdout = w
	err = cmd.Run()
	w.Close()
	if err != nil {
		t.Fatalf("xdp5g help with its output's reader gone: %v", err)
	}
}

// Every command line xdp5g has: the commands, their arguments, and
// whether they take --api.
var commandLines = []struct {
	line   string
	client bool
}{
	{"run", false}, {"detach", false}, {"demo", false},
	{"sessions list", true}, {"sessions get SEID", true}, {"sessions add FILE", true},
	{"sessions replace FILE", true}, {"sessions delete SEID", true},
	{"stats", true}, {"associations", true}, {"associations release NODE", true},
	{"rules list", true}, {"rules get ID", true}, {"rules add FILE", true}, {"rules delete ID", true},
	{"rules clear", true}, {"rules count", true},
	{"slices list", true}, {"slices set ID CPU,...", true}, {"slices delete ID", true},
	{"intents list", true}, {"intents get ID", true}, {"intents add FILE", true}, {"intents delete ID", true},
	{"bearer-contexts list", true}, {"bearer-contexts get ID", true}, {"bearer-contexts setup FILE", true},
	{"bearer-contexts modify ID FILE", true}, {"bearer-contexts release ID", true},
	{"cuup-stats", true},
}

// Each command line is a command whose help shows its usage, by --help
// and by the help command, and whose parent's help lists it.
func TestHelpListsEveryCommand(t *testing.T) {
	for _, c := range commandLines {
		words := strings.Fields(c.line)
		var path []string // the command words
		for _, w := range words {
			if w != strings.ToLower(w) {
				break
			}
			path = append(path, w)
		}
		usage := "xdp5g " + c.line + " [flags]"
		for _, args := range [][]string{append(slices.Clone(path), "--help"), append([]string{"help"}, path...)} {
			status, stdout, stderr := xdp5g("", args...)
			if status != 0 || !strings.Contains(stdout, "Usage:\n  "+usage+"\n") || stderr != "" {
				t.Errorf("xdp5g %s: status %d, printed:\n%s\nwant the usage %q", strings.Join(args, " "), status, stdout+stderr, usage)
			}
			if api := strings.Contains(stdout, "--api URL"); api != c.client {
				t.Errorf("xdp5g %s: --api listed %v, want %v", strings.Join(args, " "), api, c.client)
			}
		}
		parentHelp := append(slices.Clone(path[:len(path)-1]), "--help")
		_, stdout, _ := xdp5g("", parentHelp...)
		if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(path[len(path)-1]) + ` +\S`).MatchString(stdout) {
			t.Errorf("xdp5g %s does not list %s:\n%s", strings.Join(parentHelp, " "), path[len(path)-1], stdout)
		}
	}
	_, stdout, _ := xdp5g("", "help")
	if _, root, _ := xdp5g("", "--help"); stdout != root || !strings.Contains(root, "completion") {
		t.Errorf("xdp5g help printed:\n%s\nxdp5g --help:\n%s", stdout, root)
	}
	status, stdout, _ := xdp5g("", "completion", "bash")
	if status != 0 || !strings.Contains(stdout, "bash completion") {
		t.Errorf("xdp5g completion bash: status %d", status)
	}
}

// A command line that matches no usage is refused with status 2, what is
// wrong, and the usage of the command it names.
func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args       []string
		err, usage string
	}{
		{nil, "xdp5g needs a command", "xdp5g [command]"},
		{[]string{"bogus"}, `unknown command "bogus" for "xdp5g"`, "xdp5g [command]"},
		{[]string{"sesions"}, "did you mean sessions?", "xdp5g [command]"},
		{[]string{"sessions"}, "xdp5g sessions needs a command", "xdp5g sessions [command]"},
		{[]string{"sessions", "bogus"}, `unknown command "bogus" for "xdp5g sessions"`, "xdp5g sessions [command]"},
		{[]string{"sessions", "get"}, "accepts 1 arg(s), received 0", "xdp5g sessions get SEID [flags]"},
		{[]string{"sessions", "get", "1", "2"}, "accepts 1 arg(s), received 2", "xdp5g sessions get SEID [flags]"},
		{[]string{"slices", "set", "1"}, "accepts 2 arg(s), received 1", "xdp5g slices set ID CPU,... [flags]"},
		{[]string{"bearer-contexts", "modify", "1"}, "accepts 2 arg(s), received 1", "xdp5g bearer-contexts modify ID FILE [flags]"},
		{[]string{"stats", "x"}, `unknown command "x" for "xdp5g stats"`, "xdp5g stats [flags]"},
		{[]string{"associations", "x"}, `unknown command "x" for "xdp5g associations"`, "xdp5g associations [flags]"},
		{[]string{"associations", "release"}, "accepts 1 arg(s), received 0", "xdp5g associations release NODE [flags]"},
		{[]string{"rules", "count", "--bogus"}, "unknown flag: --bogus", "xdp5g rules count [flags]"},
		{[]string{"rules", "list", "--api"}, "flag needs an argument: --api", "xdp5g rules list [flags]"},
		{[]string{"run"}, `required flag(s) "config" not set`, "xdp5g run [flags]"},
		{[]string{"detach", "--config"}, "flag needs an argument: --config", "xdp5g detach [flags]"},
		{[]string{"run", "--config", "x.yaml", "extra"}, `unknown command "extra" for "xdp5g run"`, "xdp5g run [flags]"},
		{[]string{"demo", "--api", "x"}, "unknown flag: --api", "xdp5g demo [flags]"},
		{[]string{"completion", "bogus"}, `unknown command "bogus" for "xdp5g completion"`, "xdp5g completion [command]"},
	} {
		status, stdout, stderr := xdp5g("", c.args...)
		if status != 2 || stdout != "" || !strings.HasPrefix(stderr, "xdp5g: ") || !strings.Contains(stderr, c.err) ||
			!strings.Contains(stderr, "Usage:\n") || !strings.Contains(stderr, "\n  "+c.usage+"\n") {
			t.Errorf("xdp5g %s: status %d, stdout %q, stderr:\n%s\nwant status 2, %q and the usage %q",
				strings.Join(c.args, " "), status, stdout, stderr, c.err, c.usage)
		}
	}
}

// An argument that is not what the command needs fails (status 1) with
// what is wrong, before any request.
func TestArgumentErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"sessions", "get", "x"}, `xdp5g: "x" is not a SEID` + "\n"},
		{[]string{"sessions", "delete", "18446744073709551616"}, `xdp5g: "18446744073709551616" is not a SEID` + "\n"},
		{[]string{"rules", "get", "1x"}, `xdp5g: "1x" is not a rule ID` + "\n"},
		{[]string{"rules", "delete", "4294967296"}, `xdp5g: "4294967296" is not a rule ID` + "\n"},
		{[]string{"intents", "get", "x"}, `xdp5g: "x" is not an intent ID` + "\n"},
		{[]string{"slices", "delete", "x"}, `xdp5g: "x" is not a slice ID` + "\n"},
		{[]string{"slices", "set", "x", "0"}, `xdp5g: "x" is not a slice ID` + "\n"},
		{[]string{"slices", "set", "1", "0,a"}, `xdp5g: "a" is not a CPU number` + "\n"},
		{[]string{"bearer-contexts", "release", "x"}, `xdp5g: "x" is not a bearer context ID` + "\n"},
		{[]string{"bearer-contexts", "modify", "x", "-"}, `xdp5g: "x" is not a bearer context ID` + "\n"},
	} {
		// No daemon listens there: a request would fail otherwise.
		args := append(c.args, "--api", "http://192.0.2.1:1")
		if status, stdout, stderr := xdp5g("", args...); status != 1 || stdout != "" || stderr != c.err {
			t.Errorf("xdp5g %s: status %d, stdout %q, stderr %q, want status 1 and %q",
				strings.Join(c.args, " "), status, stdout, stderr, c.err)
		}
	}
}
