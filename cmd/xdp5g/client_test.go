package main

import (
	"context"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdp5g/xdp5g/internal/cli"
)

// xdp5g runs xdp5g with args, stdin as its standard input, and returns its
// exit status and what it wrote to its standard output and error.
func xdp5g(stdin string, args ...string) (status int, stdout, stderr string) {
	root := newRoot()
	var out, errOut strings.Builder
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errOut)
	status = cli.Run(context.Background(), root, args)
	return status, out.String(), errOut.String()
}

// stdoutOf runs xdp5g with args and returns what it printed.
func stdoutOf(t *testing.T, args ...string) string {
	t.Helper()
	status, stdout, stderr := xdp5g("", args...)
	if status != 0 {
		t.Fatalf("xdp5g %v: status %d, %s", args, status, stderr)
	}
	return stdout
}

// The listing commands ask the API given by --api and print its answer:
// sessions as indented JSON, associations as a table.
func TestListingCommands(t *testing.T) {
	bodies := map[string]string{
		"/api/v1/sessions": `{"sessions":[{"seid":7,"pdrs":[],"fars":[]}]}`,
		"/api/v1/pfcp/associations": `{"associations":[{"nodeId":"smf.example","address":"192.0.2.20:8805",` +
			`"recoveryTime":"2025-01-02T03:00:00Z","since":"2025-01-02T03:04:05Z","lost":false}]}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := bodies[r.URL.Path]
		if !ok || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}))
	defer srv.Close()

	for _, c := range []struct {
		args []string
		want string
	}{
		{args: []string{"sessions", "list", "--api", srv.URL},
			want: "{\n  \"sessions\": [\n    {\n      \"seid\": 7,\n      \"pdrs\": [],\n      \"fars\": []\n    }\n  ]\n}\n"},
		{args: []string{"associations", "--api", srv.URL},
			want: "NODE ID      ADDRESS          STATE  SINCE                 LAST HEARTBEAT  SMF STARTED\n" +
				"smf.example  192.0.2.20:8805  up     2025-01-02T03:04:05Z  -               2025-01-02T03:00:00Z\n"},
	} {
		if got := stdoutOf(t, c.args...); got != c.want {
			t.Errorf("xdp5g %v printed:\n%s\nwant:\n%s", c.args[:len(c.args)-2], got, c.want)
		}
	}
}

// A document named "-" is read from the standard input; the daemon's
// answer is printed indented, its refusal is a failure (status 1) with the
// daemon's message.
func TestDocumentCommands(t *testing.T) {
	var got []string // method, path and body of each request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.Path+" "+string(body))
		switch {
		case r.URL.Path == "/api/v1/rules":
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":"no action","field":"action"}`)
		case r.Method == http.MethodGet && r.URL.Path == "/api/v1/slices":
			io.WriteString(w, `{"slices":[{"id":3,"cpus":[1],"prioritised":true,"rate":8000}]}`)
		case r.Method == http.MethodGet && r.URL.Path == "/api/v1/interfaces/n6":
			io.WriteString(w, `{"name":"n6","stages":["steer","upf"],"slice":4,"configured":{"stages":["upf"],"slice":0}}`)
		default:
			w.Write(body)
		}
	}))
	defer srv.Close()

	status, stdout, stderr := xdp5g(`{"seid":7}`, "sessions", "add", "-", "--api", srv.URL)
	if status != 0 || stdout != "{\n  \"seid\": 7\n}\n" {
		t.Errorf("sessions add -: status %d, printed %q, %s", status, stdout, stderr)
	}
	status, stdout, _ = xdp5g("", "slices", "set", "--api", srv.URL, "3", "0,1")
	if status != 0 || stdout != "{\n  \"cpus\": [\n    0,\n    1\n  ],\n  \"prioritised\": true,\n  \"rate\": 8000\n}\n" {
		t.Errorf("slices set 3 0,1: status %d, printed %q", status, stdout)
	}
	status, _, _ = xdp5g("", "interfaces", "stages", "--api", srv.URL, "n3", "classify,steer,upf", "--slice", "2")
	if status != 0 {
		t.Errorf("interfaces stages n3: status %d", status)
	}
	// Without --slice the interface keeps the slice it steers to.
	status, _, _ = xdp5g("", "interfaces", "stages", "--api", srv.URL, "n6", "classify,steer,upf")
	if status != 0 {
		t.Errorf("interfaces stages n6: status %d", status)
	}
	status, _, stderr = xdp5g(`{}`, "rules", "add", "-", "--api", srv.URL)
	if status != 1 || !strings.Contains(stderr, "no action") || strings.Contains(stderr, "Usage:") {
		t.Errorf("rules add refused: status %d, %q", status, stderr)
	}
	want := []string{"POST /api/v1/sessions {\"seid\":7}", "GET /api/v1/slices ",
		"PUT /api/v1/slices/3 {\"cpus\":[0,1],\"prioritised\":true,\"rate\":8000}",
		"PUT /api/v1/interfaces/n3/stages {\"stages\":[\"classify\",\"steer\",\"upf\"],\"slice\":2}",
		"GET /api/v1/interfaces/n6 ", "PUT /api/v1/interfaces/n6/stages {\"stages\":[\"classify\",\"steer\",\"upf\"],\"slice\":4}",
		"POST /api/v1/rules {}"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The client sends the token of --token-file, or else of $XDP5G_TOKEN, and
// trusts the certificates of --ca-file for an https URL.
func TestTokenAndCA(t *testing.T) {
	const token = "xdp5g-client-token-0123456789"
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":"the bearer token is not the daemon's","field":"Authorization"}`)
			return
		}
		io.WriteString(w, `{"sessions":[]}`)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake the client without the CA gives up
	srv.StartTLS()
	defer srv.Close()
	dir := t.TempDir()
	caFile, tokenFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "token")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyFile := filepath.Join(dir, "empty")
	if err := os.WriteFile(emptyFile, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	list := []string{"sessions", "list", "--api", srv.URL}
	for _, c := range []struct {
		name, env string
		args      []string
		status    int
		stderr    string
	}{
		{name: "token file", args: []string{"--token-file", tokenFile, "--ca-file", caFile}},
		{name: "environment", env: token, args: []string{"--ca-file", caFile}},
		{name: "environment with the file's newline", env: token + "\n", args: []string{"--ca-file", caFile}},
		{name: "token file over the environment", env: "not-the-token", args: []string{"--token-file", tokenFile, "--ca-file", caFile}},
		{name: "no token", args: []string{"--ca-file", caFile}, status: 1, stderr: "Authorization: the bearer token is not the daemon's (the token: --token-file FILE, or $XDP5G_TOKEN)"},
		{name: "no CA", args: []string{"--token-file", tokenFile}, status: 1, stderr: "certificate signed by unknown authority"},
		{name: "missing token file", args: []string{"--token-file", filepath.Join(dir, "none"), "--ca-file", caFile}, status: 1, stderr: "no such file"},
		{name: "empty token file", args: []string{"--token-file", emptyFile, "--ca-file", caFile}, status: 1, stderr: "--token-file: " + emptyFile + " holds no token"},
	} {
		t.Setenv("XDP5G_TOKEN", c.env)
		status, stdout, stderr := xdp5g("", append(list, c.args...)...)
		if status != c.status || !strings.Contains(stderr, c.stderr) || status == 0 && stdout != "{\n  \"sessions\": []\n}\n" {
			t.Errorf("%s: status %d, printed %q, %q; want status %d and %q", c.name, status, stdout, stderr, c.status, c.stderr)
		}
	}
}

// The help says that $XDP5G_TOKEN holds the token itself, not the name of
// a file as --token-file's value would be.
func TestTokenVariableHelp(t *testing.T) {
	help := stdoutOf(t, "sessions", "list", "--help")
	_, line, _ := strings.Cut(help, "--token-file")
	line, _, _ = strings.Cut(line, "\n")
	if !strings.Contains(line, "the token itself in $XDP5G_TOKEN") {
		t.Errorf("--token-file's help %q; want it to say $XDP5G_TOKEN holds the token itself", line)
	}
}

// A client command with no daemon at its --api says so and how to start
// one, or to name another.
func TestNoDaemon(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	status, _, stderr := xdp5g("", "sessions", "list", "--api", "http://"+addr)
	if want := "connection refused (no daemon listens there: xdp5g run starts one, --api names another)\n"; status != 1 || !strings.HasSuffix(stderr, want) {
		t.Errorf("status %d, %q; want 1 and %q", status, stderr, want)
	}
}
