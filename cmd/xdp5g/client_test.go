package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
)

// stdoutOf runs xdp5g with args and returns what it printed; the client
// commands write to os.Stdout.
func stdoutOf(t *testing.T, args ...string) string {
	t.Helper()
	out, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	saved := os.Stdout
	os.Stdout = out
	err = run(context.Background(), args)
	os.Stdout = saved
	if err != nil {
		t.Fatalf("xdp5g %v: %v", args, err)
	}
	printed, err := io.ReadAll(io.NewSectionReader(out, 0, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	return string(printed)
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
		{[]string{"sessions", "list", "--api", srv.URL},
			"{\n  \"sessions\": [\n    {\n      \"seid\": 7,\n      \"pdrs\": [],\n      \"fars\": []\n    }\n  ]\n}\n"},
		{[]string{"associations", "--api", srv.URL},
			"NODE ID      ADDRESS          STATE  SINCE                 LAST HEARTBEAT  SMF STARTED\n" +
				"smf.example  192.0.2.20:8805  up     2025-01-02T03:04:05Z  -               2025-01-02T03:00:00Z\n"},
	} {
		if got := stdoutOf(t, c.args...); got != c.want {
			t.Errorf("xdp5g %v printed:\n%s\nwant:\n%s", c.args[:len(c.args)-2], got, c.want)
		}
	}
}
