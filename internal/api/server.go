// Package api is the REST (JSON) interface of the daemon, and the client
// the command line uses:
//
//	GET    /api/v1/sessions          {"sessions": [document...]}
//	POST   /api/v1/sessions          document → 201 document; 409 if it exists
//	GET    /api/v1/sessions/{seid}   document with each PDR's live counters
//	PUT    /api/v1/sessions/{seid}   document → 200 document (hitless replace)
//	DELETE /api/v1/sessions/{seid}   204
//	GET    /api/v1/stats             Stats
//	GET    /api/v1/pfcp/associations Associations
//	POST   /api/v1/pfcp/associations/{nodeId}/release
//	                                 202 once the SMF agreed to release it
//	GET    /api/v1/pfcp/stats        PFCPStats
//	POST   /api/v1/rules             Rule → 201 Rule with its id and counters
//	GET    /api/v1/rules             Rules, with live counters
//	GET    /api/v1/rules/count       RuleCount
//	GET    /api/v1/rules/{id}        Rule with live counters
//	DELETE /api/v1/rules/{id}        204
//	DELETE /api/v1/rules             204: every rule
//	GET    /api/v1/slices            Slices, with what each CPU took
//	PUT    /api/v1/slices/{id}       Slice (its cpus) → 200 Slice
//	DELETE /api/v1/slices/{id}       204; 409 while a rule steers to it
//	POST   /api/v1/intents           intent document (see intent) →
//	                                 201 intent.Status (INSERT), 200 (DELETE)
//	GET    /api/v1/intents           Intents, with live statistics
//	GET    /api/v1/intents/{id}      intent.Status
//	DELETE /api/v1/intents/{id}      204
//	GET    /api/v1/cuup/bearer-contexts
//	                                 BearerContexts
//	POST   /api/v1/cuup/bearer-contexts
//	                                 e1.BearerContextSetupRequest →
//	                                 201 e1.BearerContextSetupResponse
//	GET    /api/v1/cuup/bearer-contexts/{id}
//	                                 cuup.Context
//	PATCH  /api/v1/cuup/bearer-contexts/{id}
//	                                 e1.BearerContextModificationRequest →
//	                                 200 e1.BearerContextModificationResponse
//	DELETE /api/v1/cuup/bearer-contexts/{id}
//	                                 204: released
//	PUT    /api/v1/cuup/bearer-contexts/{id}/drbs/{drb}/placement
//	                                 Placement (where the DRB's PDCP
//	                                 security runs) → 200 Placement
//	GET    /api/v1/cuup/stats        CUUPStats: the workers' counters and,
//	                                 on the AF_XDP path, the classifier's
//	                                 per CPU
//	GET    /metrics                  every configured part's figures, and
//	                                 the Go runtime's and the process's,
//	                                 for Prometheus
//	GET    /healthz, /readyz         the daemon's health (Gate)
//
// The daemon serves these through a Gate, which answers the health
// resources from its start and the others with 503 until it is ready, and
// with RequireToken when it has a token: 401 for the requests without it.
// Documents are those of Fig. 10 of the paper (see document). A failed
// request answers {"error": ..., "field": ...} (Error) and changes nothing:
// a document refused for one of its fields (a fielderr.Error, whichever
// validator refused it) with 400.
// Sessions that SMFs created over PFCP are listed with the others, but PUT
// and DELETE refuse them (409): only their SMF changes them. Without a UPF
// (a CU-UP alone) the /api/v1/sessions and /api/v1/stats resources answer
// 404, without PFCP the /api/v1/pfcp ones, without classification the
// /api/v1/rules ones, and without a CU-UP the /api/v1/cuup ones.
package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/xdp5g/xdp5g/internal/fielderr"
	"github.com/xdp5g/xdp5g/internal/ran/cuup"
	"github.com/xdp5g/xdp5g/internal/upf/n4"
	"github.com/xdp5g/xdp5g/internal/upf/pfcp"
	"github.com/xdp5g/xdp5g/internal/upf/session"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// maxBody bounds a session document.
const maxBody = 1 << 20

// Error is the body of every failed request, and what Client returns for
// one.
type Error struct {
	Status int    `json:"-"`
	Msg    string `json:"error"`
	Field  string `json:"field,omitempty"` // path in the document, e.g. pdrs[1].pdi.teid
}

func (e *Error) Error() string { return (&fielderr.Error{Field: e.Field, Reason: e.Msg}).Error() }

// Stats is the body of GET /api/v1/stats.
type Stats struct {
	Sessions   int              `json:"sessions"`
	Interfaces []InterfaceStats `json:"interfaces"`
}

// InterfaceStats counts where the packets an interface received ended, by
// reason (upfxdp.ReasonNames).
type InterfaceStats struct {
	Name    string             `json:"name"`
	Ifindex uint32             `json:"ifindex"`
	Reasons map[string]Counter `json:"reasons"`
}

// Associations is the body of GET /api/v1/pfcp/associations.
type Associations struct {
	Associations []Association `json:"associations"`
}

// Association is a PFCP association with an SMF: pfcp.Association, named
// for JSON (converted, so the fields stay in step).
type Association struct {
	NodeID string         `json:"nodeId"`
	Addr   netip.AddrPort `json:"address"` // where the UPF sends its requests
	// RecoveryTime is when the SMF started, as it says.
	RecoveryTime  time.Time `json:"recoveryTime"`
	Since         time.Time `json:"since"`
	LastHeartbeat time.Time `json:"lastHeartbeat,omitzero"` // absent before the first
	Lost          bool      `json:"lost"`                   // the SMF leaves heartbeats unanswered
}

// PFCPStats is the body of GET /api/v1/pfcp/stats: pfcp.Stats, named for
// JSON (converted, so the fields stay in step).
type PFCPStats struct {
	Received           uint64 `json:"received"`
	NotAllowed         uint64 `json:"notAllowed"`
	Truncated          uint64 `json:"truncated"`
	BadLength          uint64 `json:"badLength"`
	BadVersion         uint64 `json:"badVersion"`
	BadHeader          uint64 `json:"badHeader"`
	UnknownType        uint64 `json:"unknownType"`
	Undecodable        uint64 `json:"undecodable"`
	Retransmissions    uint64 `json:"retransmissions"`
	UnmatchedResponses uint64 `json:"unmatchedResponses"`
	Overload           uint64 `json:"overload"`
	Panics             uint64 `json:"panics"`
	// Handling counts the requests answered by the time from reading the
	// request to sending the response: element i those within
	// 10^((i+1)/40) µs and over the element before's bound
	// (pfcp.HandlingBound); the last also longer ones.
	Handling [pfcp.HandlingBuckets]uint64 `json:"handling"`
}

// PFCP is the daemon's N4 interface.
type PFCP struct {
	Server *pfcp.Server
	// Sessions tells which sessions of the store SMFs created.
	Sessions *n4.Handler
}

// Services are what the daemon runs, for the API to serve.
type Services struct {
	// Store and Datapath are the UPF's, nil without a UPF.
	Store    *session.Store
	Datapath *upfxdp.Datapath // the store fills it
	PFCP     *PFCP            // nil without N4
	// Classifier is nil without classification.
	Classifier *Classifier
	CUUP       *cuup.CUUP // nil without a CU-UP
	// CUUPClassifier is the CU-UP's XDP classifier; nil without one (on
	// the socket path).
	CUUPClassifier CUUPClassifier
	// Metrics are what GET /metrics serves; nil: none (404).
	Metrics prometheus.Gatherer
	Log     *slog.Logger
	// Stages are the UPF's interfaces' stages; nil without a UPF.
	Stages *Stages
}

type server struct {
	store          *session.Store
	dp             *upfxdp.Datapath
	pfcp           *PFCP
	classifier     *Classifier
	cuup           *cuup.CUUP
	cuupClassifier CUUPClassifier
	stages         *Stages
	log            *slog.Logger
}

// NewHandler serves the REST API of the services.
func NewHandler(sv Services) http.Handler {
	s := &server{store: sv.Store, dp: sv.Datapath, pfcp: sv.PFCP, classifier: sv.Classifier, cuup: sv.CUUP,
		cuupClassifier: sv.CUUPClassifier, stages: sv.Stages, log: sv.Log}
	// A capability's resources answer 404 while the daemon runs without it.
	upf := s.needs(s.store != nil, errNoUPF)
	staged := s.needs(s.stages != nil, errNoUPF)
	pfcp := s.needs(s.pfcp != nil, errNoPFCP)
	classifying := s.needs(s.classifier != nil, errNoClassifier)
	cuUP := s.needs(s.cuup != nil, errNoCUUP)
	mux := http.NewServeMux()
	mux.Handle("GET /api/v1/sessions", upf(s.list))
	mux.Handle("POST /api/v1/sessions", upf(s.create))
	mux.Handle("GET /api/v1/sessions/{seid}", upf(s.get))
	mux.Handle("PUT /api/v1/sessions/{seid}", upf(s.replace))
	mux.Handle("DELETE /api/v1/sessions/{seid}", upf(s.delete))
	mux.Handle("GET /api/v1/stats", upf(s.stats))
	mux.Handle("GET /api/v1/interfaces", staged(s.listInterfaces))
	mux.Handle("GET /api/v1/interfaces/{name}", staged(s.getInterface))
	mux.Handle("PUT /api/v1/interfaces/{name}/stages", staged(s.putStages))
	mux.Handle("GET /api/v1/pfcp/associations", pfcp(s.associations))
	mux.Handle("GET /api/v1/pfcp/stats", pfcp(s.pfcpStats))
	mux.Handle("POST /api/v1/pfcp/associations/{node}/release", pfcp(s.release))
	mux.Handle("POST /api/v1/rules", classifying(s.addRule))
	mux.Handle("GET /api/v1/rules", classifying(s.listRules))
	mux.Handle("DELETE /api/v1/rules", classifying(s.clearRules))
	mux.Handle("GET /api/v1/rules/count", classifying(s.countRules))
	mux.Handle("GET /api/v1/rules/{id}", classifying(s.getRule))
	mux.Handle("DELETE /api/v1/rules/{id}", classifying(s.deleteRule))
	mux.Handle("GET /api/v1/slices", classifying(s.listSlices))
	mux.Handle("PUT /api/v1/slices/{id}", classifying(s.putSlice))
	mux.Handle("DELETE /api/v1/slices/{id}", classifying(s.deleteSlice))
	mux.Handle("POST /api/v1/intents", classifying(s.postIntent))
	mux.Handle("GET /api/v1/intents", classifying(s.listIntents))
	mux.Handle("GET /api/v1/intents/{id}", classifying(s.getIntent))
	mux.Handle("DELETE /api/v1/intents/{id}", classifying(s.deleteIntent))
	mux.Handle("GET /api/v1/cuup/bearer-contexts", cuUP(s.listBearerContexts))
	mux.Handle("POST /api/v1/cuup/bearer-contexts", cuUP(s.setupBearerContext))
	mux.Handle("GET /api/v1/cuup/bearer-contexts/{id}", cuUP(s.getBearerContext))
	mux.Handle("PATCH /api/v1/cuup/bearer-contexts/{id}", cuUP(s.modifyBearerContext))
	mux.Handle("DELETE /api/v1/cuup/bearer-contexts/{id}", cuUP(s.releaseBearerContext))
	mux.Handle("PUT /api/v1/cuup/bearer-contexts/{id}/drbs/{drb}/placement", cuUP(s.placeDRB))
	mux.Handle("GET /api/v1/cuup/stats", cuUP(s.cuupStats))
	if sv.Metrics != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(sv.Metrics, promhttp.HandlerOpts{
			ErrorLog: scrapeLog{s.log}, ErrorHandling: promhttp.ContinueOnError}))
	}
	return withJSONRefusals(mux)
}

// scrapeLog logs what promhttp reports of a scrape: a figure that could not
// be read as an error, and at debug level what could not be sent, which is
// the scraper's going away (a line per metric family), not the daemon's.
type scrapeLog struct{ log *slog.Logger }

func (l scrapeLog) Println(v ...any) {
	msg := strings.TrimSuffix(fmt.Sprintln(v...), "\n")
	level := slog.LevelError
	if strings.HasPrefix(msg, "error encoding and sending") {
		level = slog.LevelDebug
	}
	l.log.Log(context.Background(), level, msg)
}

// withJSONRefusals serves mux, its own 404 and 405 answers (plain text)
// turned into the API's JSON errors.
func withJSONRefusals(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" {
			w = &jsonRefusal{ResponseWriter: w, r: r}
		}
		mux.ServeHTTP(w, r)
	})
}

// jsonRefusal turns the mux's answer to a request no resource takes (404,
// or 405 with its Allow header) into the API's JSON error.
type jsonRefusal struct {
	http.ResponseWriter
	r *http.Request
}

func (w *jsonRefusal) WriteHeader(status int) {
	msg := "no resource " + w.r.URL.Path
	if status == http.StatusMethodNotAllowed {
		msg = fmt.Sprintf("%s takes %s, not %s", w.r.URL.Path, w.Header().Get("Allow"), w.r.Method)
	}
	w.Header().Del("X-Content-Type-Options")
	writeJSON(w.ResponseWriter, status, &Error{Msg: msg})
}

// Write drops the mux's plain-text body.
func (w *jsonRefusal) Write(b []byte) (int, error) { return len(b), nil }

// handlerFunc answers a request with a status and a body to encode (none
// when nil), or an error.
type handlerFunc func(w http.ResponseWriter, r *http.Request) (int, any, error)

func (s *server) handle(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, body, err := h(w, r)
		if err != nil {
			e := s.asError(r, err)
			status, body = e.Status, e
		}
		if body == nil {
			w.WriteHeader(status)
			return
		}
		writeJSON(w, status, body)
	})
}

func (s *server) asError(r *http.Request, err error) *Error {
	var (
		e         *Error
		invalid   *fielderr.Error
		conflict  *session.ConflictError
		noContext *cuup.NotFoundError
		cuupFull  *cuup.ConflictError
	)
	switch {
	case errors.As(err, &e):
		return e
	case errors.As(err, &invalid):
		return &Error{Status: http.StatusBadRequest, Field: invalid.Field, Msg: invalid.Reason}
	case errors.As(err, &conflict):
		return &Error{Status: http.StatusConflict, Msg: conflict.Msg}
	case errors.As(err, &noContext):
		return &Error{Status: http.StatusNotFound, Msg: noContext.Error()}
	case errors.As(err, &cuupFull):
		return &Error{Status: http.StatusConflict, Msg: cuupFull.Msg}
	}
	s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	return &Error{Status: http.StatusInternalServerError, Msg: err.Error()}
}

func notFound(seid uint64) *Error {
	return &Error{Status: http.StatusNotFound, Msg: fmt.Sprintf("session %d not found", seid)}
}

// changeableSEID reads the SEID of the URL, refusing one of a session an
// SMF created: the SMF would go on modifying and deleting the session it
// believes it made.
func (s *server) changeableSEID(r *http.Request) (uint64, error) {
	seid, err := pathSEID(r)
	if err == nil && s.pfcp != nil && s.pfcp.Sessions.Owns(seid) {
		err = &Error{Status: http.StatusConflict, Msg: fmt.Sprintf("session %d was created over PFCP: only its SMF may change or delete it", seid)}
	}
	return seid, err
}

var errNoUPF = &Error{Status: http.StatusNotFound, Msg: "the UPF is not configured: the daemon's configuration has no interfaces"}

// needs serves the handlers of a capability through handle when the daemon
// runs it; when not (runs false), each of them answers missing.
func (s *server) needs(runs bool, missing *Error) func(handlerFunc) http.Handler {
	return func(h handlerFunc) http.Handler {
		if !runs {
			h = func(http.ResponseWriter, *http.Request) (int, any, error) { return 0, nil, missing }
		}
		return s.handle(h)
	}
}

var errNoPFCP = &Error{Status: http.StatusNotFound, Msg: "PFCP is not served: the daemon's configuration has no pfcp section"}

func (s *server) list(w http.ResponseWriter, r *http.Request) (int, any, error) {
	docs := []*document{}
	for _, sess := range s.store.List() {
		d, err := s.live(sess)
		if err != nil {
			return 0, nil, err
		}
		docs = append(docs, d)
	}
	return http.StatusOK, map[string]any{"sessions": docs}, nil
}

// create and replace take a session as N4 takes a PFCP request: the
// document is translated into the session model, validated, and installed
// with one call into the store (which checks the model again as it
// installs it); nothing that fails before reaches the store.
func (s *server) create(w http.ResponseWriter, r *http.Request) (int, any, error) {
	sess, err := readSession(w, r)
	if err == nil {
		err = session.Validate(&sess)
	}
	if err != nil {
		return 0, nil, err
	}
	if err := s.store.Create(sess); err != nil {
		return 0, nil, err
	}
	w.Header().Set("Location", fmt.Sprintf("/api/v1/sessions/%d", sess.SEID))
	return s.current(http.StatusCreated, sess.SEID)
}

func (s *server) get(w http.ResponseWriter, r *http.Request) (int, any, error) {
	seid, err := pathSEID(r)
	if err != nil {
		return 0, nil, err
	}
	return s.current(http.StatusOK, seid)
}

func (s *server) replace(w http.ResponseWriter, r *http.Request) (int, any, error) {
	seid, err := s.changeableSEID(r)
	if err != nil {
		return 0, nil, err
	}
	sess, err := readSession(w, r)
	if err != nil {
		return 0, nil, err
	}
	if sess.SEID != seid {
		return 0, nil, fielderr.New("seid", "is %d but the URL names session %d", sess.SEID, seid)
	}
	if err := session.Validate(&sess); err != nil {
		return 0, nil, err
	}
	if err := s.store.Replace(sess); errors.Is(err, session.ErrNotFound) {
		return 0, nil, notFound(seid)
	} else if err != nil {
		return 0, nil, err
	}
	return s.current(http.StatusOK, seid)
}

func (s *server) delete(w http.ResponseWriter, r *http.Request) (int, any, error) {
	seid, err := s.changeableSEID(r)
	if err != nil {
		return 0, nil, err
	}
	if err := s.store.Delete(seid); errors.Is(err, session.ErrNotFound) {
		return 0, nil, notFound(seid)
	} else if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, nil
}

func (s *server) stats(w http.ResponseWriter, r *http.Request) (int, any, error) {
	ifaces, err := s.dp.Counters()
	if err != nil {
		return 0, nil, err
	}
	st := Stats{Sessions: s.store.Len(), Interfaces: []InterfaceStats{}}
	for _, i := range ifaces {
		is := InterfaceStats{Name: i.Name, Ifindex: i.Ifindex, Reasons: map[string]Counter{}}
		for reason, c := range i.Reasons {
			is.Reasons[reason] = Counter{Packets: c.Packets, Bytes: c.Bytes}
		}
		st.Interfaces = append(st.Interfaces, is)
	}
	return http.StatusOK, st, nil
}

func (s *server) associations(w http.ResponseWriter, r *http.Request) (int, any, error) {
	body := Associations{Associations: []Association{}}
	for _, a := range s.pfcp.Server.Associations() {
		body.Associations = append(body.Associations, Association(a))
	}
	return http.StatusOK, body, nil
}

// release asks an SMF to release its association (§6.2.8.1), as before
// taking the UPF out of service: the SMF moves or deletes its sessions and
// then releases it. Only the SMF may end an association.
func (s *server) release(w http.ResponseWriter, r *http.Request) (int, any, error) {
	err := s.pfcp.Server.RequestRelease(r.Context(), r.PathValue("node"))
	switch {
	case errors.Is(err, pfcp.ErrNoAssociation):
		return 0, nil, &Error{Status: http.StatusNotFound, Msg: err.Error()}
	case err != nil: // the SMF did not answer, or refused
		return 0, nil, &Error{Status: http.StatusBadGateway, Msg: err.Error()}
	}
	return http.StatusAccepted, nil, nil
}

func (s *server) pfcpStats(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return http.StatusOK, PFCPStats(s.pfcp.Server.Stats()), nil
}

// current answers with a session's document and live counters.
func (s *server) current(status int, seid uint64) (int, any, error) {
	sess, ok := s.store.Get(seid)
	if !ok {
		return 0, nil, notFound(seid)
	}
	d, err := s.live(sess)
	if err != nil {
		return 0, nil, err
	}
	return status, d, nil
}

// live is a session's document with its live counters and usage; a
// session deleted meanwhile has none.
func (s *server) live(sess session.Session) (*document, error) {
	counters, err := s.store.PDRCounters(sess.SEID)
	if err != nil && !errors.Is(err, session.ErrNotFound) {
		return nil, err
	}
	usage := map[uint32]upfxdp.URRUsage{}
	for _, u := range sess.URRs {
		m, err := s.store.URRUsage(sess.SEID, u.ID)
		if errors.Is(err, session.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		usage[u.ID] = m
	}
	return documentOf(sess, counters, usage, s.store.BufferStats(sess.SEID)), nil
}

func pathSEID(r *http.Request) (uint64, error) { return pathNumber(r, "seid", 64, "a SEID") }

// pathID reads the URL's 32-bit id; what names it in the error.
func pathID(r *http.Request, what string) (uint32, error) {
	id, err := pathNumber(r, "id", 32, what)
	return uint32(id), err
}

// pathNumber reads the number of bits a URL's wildcard name holds; what
// names it in the error.
func pathNumber(r *http.Request, name string, bits int, what string) (uint64, error) {
	n, err := strconv.ParseUint(r.PathValue(name), 10, bits)
	if err != nil {
		return 0, fielderr.New("", "%q in the URL is not %s", r.PathValue(name), what)
	}
	return n, nil
}

// readBody reads a request's document, maxBody bytes at most.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, &Error{Status: http.StatusRequestEntityTooLarge, Msg: fmt.Sprintf("the document is larger than %d bytes", maxBody)}
	}
	if err != nil {
		return nil, fielderr.New("", "reading the body: %v", err)
	}
	return body, nil
}

// decodeBody reads a request's document into v with decodeStrict.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	return decodeStrict(body, v)
}

// readSession translates the request's document into the session model.
func readSession(w http.ResponseWriter, r *http.Request) (session.Session, error) {
	var d document
	if err := decodeBody(w, r, &d); err != nil {
		return session.Session{}, err
	}
	return d.session()
}
