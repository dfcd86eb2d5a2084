package api

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
)

// Health is the body of a 200 answer of GET /healthz and GET /readyz.
type Health struct {
	Status string `json:"status"` // "alive", "ready"
}

// The paths of the health resources, which a Gate answers itself.
const (
	healthzPath = "/healthz"
	readyzPath  = "/readyz"
)

// Gate is the REST API's handler from the moment the daemon listens. It
// answers GET /healthz with 200 at once (the process serves), GET /readyz
// with 503 and the reason ({"error": reason}) until the daemon is ready and
// 200 from then on, and every other request with 503 until the daemon hands
// it the API to serve. Neither health resource needs a token.
type Gate struct {
	health      http.Handler    // the health resources, whatever the method
	healthPaths map[string]bool // their paths
	state       atomic.Pointer[gateState]
}

type gateState struct {
	api    http.Handler // nil: 503 with reason
	reason string       // why the daemon is not ready; "" when it is
}

// NewGate is a Gate of a daemon that has just started.
func NewGate() *Gate {
	g := &Gate{healthPaths: map[string]bool{}}
	g.Starting("starting")
	resources := map[string]http.HandlerFunc{
		healthzPath: func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, Health{Status: "alive"})
		},
		readyzPath: func(w http.ResponseWriter, r *http.Request) {
			if st := g.state.Load(); st.reason != "" {
				writeJSON(w, http.StatusServiceUnavailable, &Error{Msg: st.reason})
				return
			}
			writeJSON(w, http.StatusOK, Health{Status: "ready"})
		},
	}
	health := http.NewServeMux()
	for path, serve := range resources {
		health.HandleFunc("GET "+path, serve)
		g.healthPaths[path] = true
	}
	g.health = withJSONRefusals(health)
	return g
}

// Starting says what the daemon is doing before it is ready.
func (g *Gate) Starting(reason string) { g.state.Store(&gateState{reason: reason}) }

// Ready serves api from now on, and /readyz answers 200.
func (g *Gate) Ready(api http.Handler) { g.state.Store(&gateState{api: api}) }

// Stopping makes /readyz answer 503 while the daemon stops; the API serves
// until it is shut down.
func (g *Gate) Stopping() {
	g.state.Store(&gateState{api: g.state.Load().api, reason: "stopping"})
}

func (g *Gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.healthPaths[r.URL.Path] {
		g.health.ServeHTTP(w, r)
		return
	}
	st := g.state.Load()
	if st.api == nil {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, &Error{Msg: "not ready (" + st.reason + ")"})
		return
	}
	st.api.ServeHTTP(w, r)
}

// writeJSON answers with status and body as JSON.
func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}
