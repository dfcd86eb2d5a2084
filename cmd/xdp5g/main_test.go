package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xdp5g/xdp5g/internal/cli"
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

// Every command line xdp5g has, its commands and their arguments: those
// that act on the machine, and the REST API's clients, which take --api.
var (
	localCommandLines  = []string{"run", "detach", "demo"}
	clientCommandLines = []string{
		"interfaces list", "interfaces stages NAME STAGE,...",
		"sessions list", "sessions get SEID", "sessions add FILE", "sessions replace FILE", "sessions delete SEID",
		"stats", "associations", "associations release NODE",
		"rules list", "rules get ID", "rules add FILE", "rules delete ID", "rules clear", "rules count",
		"slices list", "slices set ID CPU,...", "slices delete ID",
		"intents list", "intents get ID", "intents add FILE", "intents delete ID",
		"bearer-contexts list", "bearer-contexts get ID", "bearer-contexts setup FILE",
		"bearer-contexts modify ID FILE", "bearer-contexts release ID",
		"cuup-stats",
	}
)

// Each command line is a command whose help shows its usage, by --help
// and by the help command, and whose parent's help lists it.
func TestHelpListsEveryCommand(t *testing.T) {
	for _, line := range slices.Concat(localCommandLines, clientCommandLines) {
		client := slices.Contains(clientCommandLines, line)
		words := strings.Fields(line)
		var path []string // the command words
		for _, w := range words {
			if w != strings.ToLower(w) {
				break
			}
			path = append(path, w)
		}
		usage := "xdp5g " + line + " [flags]"
		for _, args := range [][]string{append(slices.Clone(path), "--help"), append([]string{"help"}, path...)} {
			status, stdout, stderr := xdp5g("", args...)
			if status != 0 || !strings.Contains(stdout, "Usage:\n  "+usage+"\n") || stderr != "" {
				t.Errorf("xdp5g %s: status %d, printed:\n%s\nwant the usage %q", strings.Join(args, " "), status, stdout+stderr, usage)
			}
			if api := strings.Contains(stdout, "--api URL"); api != client {
				t.Errorf("xdp5g %s: --api listed %v, want %v", strings.Join(args, " "), api, client)
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
		{args: nil, err: "xdp5g needs a command", usage: "xdp5g [command]"},
		{args: []string{"bogus"}, err: `unknown command "bogus" for "xdp5g"`, usage: "xdp5g [command]"},
		{args: []string{"sesions"}, err: "did you mean sessions?", usage: "xdp5g [command]"},
		{args: []string{"sessions"}, err: "xdp5g sessions needs a command", usage: "xdp5g sessions [command]"},
		{args: []string{"sessions", "bogus"}, err: `unknown command "bogus" for "xdp5g sessions"`, usage: "xdp5g sessions [command]"},
		{args: []string{"sessions", "get"}, err: "accepts 1 arg(s), received 0", usage: "xdp5g sessions get SEID [flags]"},
		{args: []string{"sessions", "get", "1", "2"}, err: "accepts 1 arg(s), received 2", usage: "xdp5g sessions get SEID [flags]"},
		{args: []string{"slices", "set", "1"}, err: "accepts 2 arg(s), received 1", usage: "xdp5g slices set ID CPU,... [flags]"},
		{args: []string{"bearer-contexts", "modify", "1"}, err: "accepts 2 arg(s), received 1", usage: "xdp5g bearer-contexts modify ID FILE [flags]"},
		{args: []string{"stats", "x"}, err: `unknown command "x" for "xdp5g stats"`, usage: "xdp5g stats [flags]"},
		{args: []string{"associations", "x"}, err: `unknown command "x" for "xdp5g associations"`, usage: "xdp5g associations [flags]"},
		{args: []string{"associations", "release"}, err: "accepts 1 arg(s), received 0", usage: "xdp5g associations release NODE [flags]"},
		{args: []string{"rules", "count", "--bogus"}, err: "unknown flag: --bogus", usage: "xdp5g rules count [flags]"},
		{args: []string{"rules", "list", "--api"}, err: "flag needs an argument: --api", usage: "xdp5g rules list [flags]"},
		{args: []string{"run"}, err: `required flag(s) "config" not set`, usage: "xdp5g run [flags]"},
		{args: []string{"detach", "--config"}, err: "flag needs an argument: --config", usage: "xdp5g detach [flags]"},
		{args: []string{"run", "--config", "x.yaml", "extra"}, err: `unknown command "extra" for "xdp5g run"`, usage: "xdp5g run [flags]"},
		{args: []string{"demo", "--api", "x"}, err: "unknown flag: --api", usage: "xdp5g demo [flags]"},
		{args: []string{"completion", "bogus"}, err: `unknown command "bogus" for "xdp5g completion"`, usage: "xdp5g completion [command]"},
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
		{args: []string{"sessions", "get", "x"}, err: `xdp5g: "x" is not a SEID` + "\n"},
		{args: []string{"sessions", "delete", "18446744073709551616"}, err: `xdp5g: "18446744073709551616" is not a SEID` + "\n"},
		{args: []string{"rules", "get", "1x"}, err: `xdp5g: "1x" is not a rule ID` + "\n"},
		{args: []string{"rules", "delete", "4294967296"}, err: `xdp5g: "4294967296" is not a rule ID` + "\n"},
		{args: []string{"intents", "get", "x"}, err: `xdp5g: "x" is not an intent ID` + "\n"},
		{args: []string{"slices", "delete", "x"}, err: `xdp5g: "x" is not a slice ID` + "\n"},
		{args: []string{"slices", "set", "x", "0"}, err: `xdp5g: "x" is not a slice ID` + "\n"},
		{args: []string{"slices", "set", "1", "0,a"}, err: `xdp5g: "a" is not a CPU number` + "\n"},
		{args: []string{"bearer-contexts", "release", "x"}, err: `xdp5g: "x" is not a bearer context ID` + "\n"},
		{args: []string{"bearer-contexts", "modify", "x", "-"}, err: `xdp5g: "x" is not a bearer context ID` + "\n"},
	} {
		// No daemon listens there: a request would fail otherwise.
		args := append(c.args, "--api", "http://192.0.2.1:1")
		if status, stdout, stderr := xdp5g("", args...); status != 1 || stdout != "" || stderr != c.err {
			t.Errorf("xdp5g %s: status %d, stdout %q, stderr %q, want status 1 and %q",
				strings.Join(c.args, " "), status, stdout, stderr, c.err)
		}
	}
}

// An --api that is not a URL (a bare host:port) is named, not passed to
// the HTTP client to fail obscurely.
func TestAPIMustBeAURL(t *testing.T) {
	for _, api := range []string{"127.0.0.1:9880", "ftp://127.0.0.1:9880", "http://"} {
		want := fmt.Sprintf("xdp5g: --api: %q is not an http or https URL such as http://127.0.0.1:9880\n", api)
		if status, stdout, stderr := xdp5g("", "rules", "list", "--api", api); status != 1 || stdout != "" || stderr != want {
			t.Errorf("--api %s: status %d, stdout %q, stderr %q, want status 1 and %q", api, status, stdout, stderr, want)
		}
	}
}

// A --token-file or --ca-file that cannot be read is named by its flag.
func TestClientFilesAreNamed(t *testing.T) {
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	for _, c := range []struct {
		flag, file, want string
	}{
		{flag: "--token-file", file: missing, want: "xdp5g: --token-file: open " + missing + ": no such file or directory\n"},
		{flag: "--ca-file", file: missing, want: "xdp5g: --ca-file: open " + missing + ": no such file or directory\n"},
		{flag: "--ca-file", file: notPEM, want: "xdp5g: --ca-file: " + notPEM + " holds no PEM certificate\n"},
	} {
		if status, stdout, stderr := xdp5g("", "rules", "list", "--api", "http://192.0.2.1:1", c.flag, c.file); status != 1 || stdout != "" || stderr != c.want {
			t.Errorf("%s %s: status %d, stdout %q, stderr %q, want status 1 and %q", c.flag, c.file, status, stdout, stderr, c.want)
		}
	}
}

// --version says the version `make build` stamps into the binary.
func TestVersionIsStamped(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "xdp5g")
	build := exec.Command("go", "build", "-ldflags=-X github.com/xdp5g/xdp5g/internal/platform/version.stamped=1.2.3-test", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || string(out) != "xdp5g version 1.2.3-test\n" {
		t.Errorf("xdp5g --version: %v, %q", err, out)
	}
}

// A command interrupted (SIGINT, SIGTERM, SIGHUP cancel its context) says
// so, rather than Go's "context canceled".
func TestInterrupted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	var stderr strings.Builder
	root := newRoot()
	root.SetErr(&stderr)
	if status := cli.Run(ctx, root, []string{"rules", "list", "--api", srv.URL}); status != 1 || stderr.String() != "xdp5g: interrupted\n" {
		t.Errorf("rules list, interrupted: status %d, %q; want 1 and xdp5g: interrupted", status, &stderr)
	}
}

// run --debug logs at debug level too (what the docs say is logged so: PFCP
// datagrams from peers that are not allowed, among others); without it, not.
func TestRunDebug(t *testing.T) {
	for _, debug := range []bool{false, true} {
		run, _, err := newRoot().Find([]string{"run"})
		if err != nil {
			t.Fatal(err)
		}
		if debug {
			if err := run.ParseFlags([]string{"--debug"}); err != nil {
				t.Fatalf("run --debug: %v", err)
			}
		}
		if got := daemonLog(run).Enabled(context.Background(), slog.LevelDebug); got != debug {
			t.Errorf("run (--debug %v) logs at debug level: %v", debug, got)
		}
	}
}
