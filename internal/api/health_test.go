package api

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// answer is a request's status and body, decoded.
type answer struct {
	status int
	body   map[string]string
}

func request(t *testing.T, h http.Handler, method, path, authorization string) answer {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	a := answer{status: rec.Code}
	if body, _ := io.ReadAll(rec.Body); len(body) > 0 {
		if err := json.Unmarshal(body, &a.body); err != nil {
			t.Fatalf("%s %s: %q is not a JSON object: %v", method, path, body, err)
		}
	}
	return a
}

func (a answer) want(t *testing.T, what string, status int, key, value string) {
	t.Helper()
	if a.status != status || a.body[key] != value {
		t.Errorf("%s: %d %v, want %d with %s %q", what, a.status, a.body, status, key, value)
	}
}

// The gate answers /healthz from the start, /readyz with 503 and the
// reason until the daemon is ready, and serves the API only once it is.
func TestGate(t *testing.T) {
	g := NewGate()
	served := 0
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served++; w.WriteHeader(http.StatusNoContent) })

	request(t, g, "GET", "/healthz", "").want(t, "healthz at start", http.StatusOK, "status", "alive")
	request(t, g, "GET", "/readyz", "").want(t, "readyz at start", http.StatusServiceUnavailable, "error", "starting")
	g.Starting("starting: attaching the data path")
	request(t, g, "GET", "/readyz", "").want(t, "readyz while attaching", http.StatusServiceUnavailable, "error", "starting: attaching the data path")
	request(t, g, "POST", "/api/v1/sessions", "").want(t, "the API while attaching", http.StatusServiceUnavailable,
		"error", "not ready (starting: attaching the data path)")
	if served != 0 {
		t.Fatalf("the API served %d requests before it was ready", served)
	}

	g.Ready(api)
	request(t, g, "GET", "/readyz", "").want(t, "readyz when ready", http.StatusOK, "status", "ready")
	request(t, g, "HEAD", "/healthz", "").want(t, "HEAD healthz", http.StatusOK, "", "")
	if a := request(t, g, "POST", "/api/v1/sessions", ""); a.status != http.StatusNoContent || served != 1 {
		t.Errorf("the API when ready: %d, served %d", a.status, served)
	}

	g.Stopping()
	request(t, g, "GET", "/readyz", "").want(t, "readyz while stopping", http.StatusServiceUnavailable, "error", "stopping")
	request(t, g, "GET", "/healthz", "").want(t, "healthz while stopping", http.StatusOK, "status", "alive")
	if a := request(t, g, "GET", "/api/v1/sessions", ""); a.status != http.StatusNoContent || served != 2 {
		t.Errorf("the API while stopping: %d, served %d", a.status, served)
	}
}

// A method the health resources do not take is answered 405 with Allow,
// as the API's resources answer it, before and after the daemon is ready;
// it never reaches the API, where it would be a 404 or, with a token, a 401.
func TestGateRefusesOtherMethods(t *testing.T) {
	g := NewGate()
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("%s %s reached the API", r.Method, r.URL.Path)
	})
	for _, ready := range []bool{false, true} {
		if ready {
			g.Ready(api)
		}
		for _, path := range []string{"/healthz", "/readyz"} {
			rec := httptest.NewRecorder()
			g.ServeHTTP(rec, httptest.NewRequest("POST", path, nil))
			var body map[string]string
			json.Unmarshal(rec.Body.Bytes(), &body)
			if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" ||
				body["error"] != path+" takes GET, HEAD, not POST" {
				t.Errorf("POST %s (ready %v): %d, Allow %q, %q; want 405, GET, HEAD and the error",
					path, ready, rec.Code, rec.Header().Get("Allow"), rec.Body)
			}
		}
	}
}

// Only requests with the token reach the API; the others get 401 naming
// the Authorization header, and neither the token nor a wrong one is
// logged.
func TestRequireToken(t *testing.T) {
	const token, wrong = "s3cret-token-of-the-test", "s3cret-token-of-the-tesT"
	var logged bytes.Buffer
	served := 0
	h := RequireToken(token, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served++ }),
		slog.New(slog.NewTextHandler(&logged, nil)))
	for _, c := range []struct{ name, authorization, reason string }{
		{name: "none", reason: "this API needs a bearer token: Authorization: Bearer TOKEN"},
		{name: "basic", authorization: "Basic " + token, reason: "this API needs a bearer token: Authorization: Bearer TOKEN"},
		{name: "wrong", authorization: "Bearer " + wrong, reason: "the bearer token is not the daemon's"},
		{name: "prefix", authorization: "Bearer " + token[:10], reason: "the bearer token is not the daemon's"},
		{name: "longer", authorization: "Bearer " + token + "x", reason: "the bearer token is not the daemon's"},
	} {
		a := request(t, h, "DELETE", "/api/v1/rules", c.authorization)
		a.want(t, c.name, http.StatusUnauthorized, "error", c.reason)
		a.want(t, c.name, http.StatusUnauthorized, "field", "Authorization")
	}
	if served != 0 {
		t.Fatalf("%d requests without the token were served", served)
	}
	for _, authorization := range []string{"Bearer " + token, "bearer " + token} {
		if a := request(t, h, "GET", "/api/v1/rules", authorization); a.status != http.StatusOK {
			t.Errorf("%q: %d", authorization, a.status)
		}
	}
	if served != 2 {
		t.Errorf("%d requests with the token served, want 2", served)
	}
	if strings.Contains(logged.String(), token[:10]) || !strings.Contains(logged.String(), "REST request refused") {
		t.Errorf("the log:\n%s\nwants the refusals, without the tokens", &logged)
	}
}
