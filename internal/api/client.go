package api

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// DefaultURL is where a daemon with the default configuration listens.
const DefaultURL = "http://127.0.0.1:9880"

// Client calls the REST API of a running daemon. Calls that return
// documents return them as the daemon sent them.
type Client struct {
	URL  string       // e.g. DefaultURL
	HTTP *http.Client // http.DefaultClient when nil
	// Token is sent as the bearer token of every request, if set.
	Token string
}

// Sessions lists every session.
func (c *Client) Sessions(ctx context.Context) (json.RawMessage, error) {
	return c.do(ctx, http.MethodGet, "/api/v1/sessions", nil)
}

// Session returns one session with its PDRs' counters.
func (c *Client) Session(ctx context.Context, seid uint64) (json.RawMessage, error) {
	return c.do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/sessions/%d", seid), nil)
}

// Create installs the session of a document.
func (c *Client) Create(ctx context.Context, doc []byte) (json.RawMessage, error) {
	return c.do(ctx, http.MethodPost, "/api/v1/sessions", doc)
}

// Replace replaces the session whose SEID the document gives.
func (c *Client) Replace(ctx context.Context, doc []byte) (json.RawMessage, error) {
	var head struct {
		SEID uint64 `json:"seid"`
	}
	if len(bytes.TrimSpace(doc)) == 0 {
		return nil, errors.New("the document is empty; expected a session in JSON")
	}
	if err := json.Unmarshal(doc, &head); err != nil {
		return nil, fmt.Errorf("the document is not a session in JSON: %w", err)
	}
	if head.SEID == 0 {
		return nil, errors.New("the document has no seid to say which session it replaces")
	}
	return c.do(ctx, http.MethodPut, fmt.Sprintf("/api/v1/sessions/%d", head.SEID), doc)
}

// Delete removes a session.
func (c *Client) Delete(ctx context.Context, seid uint64) error {
	_, err := c.do(ctx, http.MethodDelete, fmt.Sprintf("/api/v1/sessions/%d", seid), nil)
	return err
}

// Stats returns the data path's counters.
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	return get[Stats](ctx, c, "/api/v1/stats", "the statistics")
}

// Associations lists the daemon's PFCP associations.
func (c *Client) Associations(ctx context.Context) (*Associations, error) {
	return get[Associations](ctx, c, "/api/v1/pfcp/associations", "the associations")
}

// Release asks the SMF with a Node ID to release its association.
func (c *Client) Release(ctx context.Context, nodeID string) error {
	_, err := c.do(ctx, http.MethodPost, "/api/v1/pfcp/associations/"+url.PathEscape(nodeID)+"/release", nil)
	return err
}

// AddRule installs the classification rule of a JSON document (Rule) and
// returns it as installed.
func (c *Client) AddRule(ctx context.Context, doc []byte) (json.RawMessage, error) {
	return c.do(ctx, http.MethodPost, "/api/v1/rules", doc)
}

// Rules lists the classification rules with their counters.
func (c *Client) Rules(ctx context.Context) (json.RawMessage, error) {
	return c.do(ctx, http.MethodGet, "/api/v1/rules", nil)
}

// Rule returns a classification rule with its counters.
func (c *Client) Rule(ctx context.Context, id uint32) (json.RawMessage, error) {
	return c.do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/rules/%d", id), nil)
}

// DeleteRule removes a classification rule.
func (c *Client) DeleteRule(ctx context.Context, id uint32) error {
	_, err := c.do(ctx, http.MethodDelete, fmt.Sprintf("/api/v1/rules/%d", id), nil)
	return err
}

// ClearRules removes every classification rule.
func (c *Client) ClearRules(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodDelete, "/api/v1/rules", nil)
	return err
}

// RuleCount is the number of classification rules.
func (c *Client) RuleCount(ctx context.Context) (json.RawMessage, error) {
	return c.do(ctx, http.MethodGet, "/api/v1/rules/count", nil)
}

// Interfaces lists the UPF's interfaces with their stages.
func (c *Client) Interfaces(ctx context.Context) (json.RawMessage, error) {
	return c.do(ctx, http.MethodGet, "/api/v1/interfaces", nil)
}

// Interface returns an interface of the UPF with its stages.
func (c *Client) Interface(ctx context.Context, name string) (json.RawMessage, error) {
	return c.do(ctx, http.MethodGet, "/api/v1/interfaces/"+url.PathEscape(name), nil)
}

// SetStages changes the stages an interface of the UPF runs.
func (c *Client) SetStages(ctx context.Context, name string, set StageSet) (json.RawMessage, error) {
	doc, err := json.Marshal(set)
	if err != nil {
		return nil, err
	}
	return c.do(ctx, http.MethodPut, "/api/v1/interfaces/"+url.PathEscape(name)+"/stages", doc)
}

// Slices lists the slices with what each CPU took of them.
func (c *Client) Slices(ctx context.Context) (json.RawMessage, error) {
	return c.do(ctx, http.MethodGet, "/api/v1/slices", nil)
}

// SetSlice creates a slice or changes its CPUs, keeping what else it has
// (prioritised, its rate and burst): PUT replaces the whole slice.
func (c *Client) SetSlice(ctx context.Context, id uint32, cpus []uint32) (json.RawMessage, error) {
	list, err := c.Slices(ctx)
	if err != nil {
		return nil, err
	}
	var current struct {
		Slices []Slice `json:"slices"`
	}
	if err := json.Unmarshal(list, &current); err != nil {
		return nil, err
	}
	slice := Slice{CPUs: cpus}
	for _, s := range current.Slices {
		if s.ID != nil && *s.ID == id {
			slice.Prioritised, slice.Rate, slice.Burst = s.Prioritised, s.Rate, s.Burst
		}
	}
	doc, err := json.Marshal(slice)
	if err != nil {
		return nil, err
	}
	return c.do(ctx, http.MethodPut, fmt.Sprintf("/api/v1/slices/%d", id), doc)
}

// DeleteSlice removes a slice no rule steers to.
func (c *Client) DeleteSlice(ctx context.Context, id uint32) error {
	_, err := c.do(ctx, http.MethodDelete, fmt.Sprintf("/api/v1/slices/%d", id), nil)
	return err
}

// PostIntent carries out an intent document (package intent).
func (c *Client) PostIntent(ctx context.Context, doc []byte) (json.RawMessage, error) {
	return c.do(ctx, http.MethodPost, "/api/v1/intents", doc)
}

// Intents lists the installed intents with their statistics.
func (c *Client) Intents(ctx context.Context) (json.RawMessage, error) {
	return c.do(ctx, http.MethodGet, "/api/v1/intents", nil)
}

// Intent returns an installed intent with its statistics.
func (c *Client) Intent(ctx context.Context, id uint32) (json.RawMessage, error) {
	return c.do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/intents/%d", id), nil)
}

// DeleteIntent removes an installed intent.
func (c *Client) DeleteIntent(ctx context.Context, id uint32) error {
	_, err := c.do(ctx, http.MethodDelete, fmt.Sprintf("/api/v1/intents/%d", id), nil)
	return err
}

// BearerContexts lists the CU-UP's bearer contexts with their DRBs'
// statistics.
func (c *Client) BearerContexts(ctx context.Context) (json.RawMessage, error) {
	return c.do(ctx, http.MethodGet, "/api/v1/cuup/bearer-contexts", nil)
}

// BearerContext returns a bearer context, by its gNB-CU-UP UE E1AP ID, with
// its DRBs' statistics.
func (c *Client) BearerContext(ctx context.Context, id uint32) (json.RawMessage, error) {
	return c.do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/cuup/bearer-contexts/%d", id), nil)
}

// SetupBearerContext sets up the bearer context of a Bearer Context Setup
// Request document (e1.BearerContextSetupRequest) and returns the
// response.
func (c *Client) SetupBearerContext(ctx context.Context, doc []byte) (json.RawMessage, error) {
	return c.do(ctx, http.MethodPost, "/api/v1/cuup/bearer-contexts", doc)
}

// ModifyBearerContext changes a bearer context as a Bearer Context
// Modification Request document (e1.BearerContextModificationRequest)
// says and returns the response.
func (c *Client) ModifyBearerContext(ctx context.Context, id uint32, doc []byte) (json.RawMessage, error) {
	return c.do(ctx, http.MethodPatch, fmt.Sprintf("/api/v1/cuup/bearer-contexts/%d", id), doc)
}

// ReleaseBearerContext releases a bearer context.
func (c *Client) ReleaseBearerContext(ctx context.Context, id uint32) error {
	_, err := c.do(ctx, http.MethodDelete, fmt.Sprintf("/api/v1/cuup/bearer-contexts/%d", id), nil)
	return err
}

// CUUPStats returns the CU-UP's counters.
func (c *Client) CUUPStats(ctx context.Context) (*CUUPStats, error) {
	return get[CUUPStats](ctx, c, "/api/v1/cuup/stats", "the CU-UP's statistics")
}

// Ready returns nil once the daemon is ready (GET /readyz), else an *Error
// with status 503 and the reason.
func (c *Client) Ready(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodGet, readyzPath, nil)
	return err
}

// get reads the document at path into a T; what names it in an error.
func get[T any](ctx context.Context, c *Client, path, what string) (*T, error) {
	body, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	v := new(T)
	if err := json.Unmarshal(body, v); err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	return v, nil
}

// do sends a request and returns the response body, or an *Error for a
// failed request.
func (c *Client) do(ctx context.Context, method, path string, body []byte) (json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.URL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 300 {
		return data, nil
	}
	e := &Error{Status: resp.StatusCode}
	if json.Unmarshal(data, e) != nil || e.Msg == "" {
		// Not one of ours: the mux's 404 and 405 are plain text.
		e.Msg = cmp.Or(strings.TrimSpace(string(data)), resp.Status)
	}
	return nil, e
}

// WriteTable prints the counters that are not zero, a row per interface
// and reason.
func (s *Stats) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INTERFACE\tREASON\tPACKETS\tBYTES")
	for _, i := range s.Interfaces {
		counted := false
		for _, reason := range reasonsInOrder(i.Reasons) {
			if c := i.Reasons[reason]; c.Packets != 0 {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", i.Name, reason, c.Packets, c.Bytes)
				counted = true
			}
		}
		if !counted {
			fmt.Fprintf(tw, "%s\t-\t0\t0\n", i.Name)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "sessions: %d\n", s.Sessions)
	return err
}

// reasonsInOrder sorts reasons as the data path numbers them (forwarded
// first), any it does not know last.
func reasonsInOrder(reasons map[string]Counter) []string {
	rank := func(name string) int {
		if i := slices.Index(upfxdp.ReasonNames[:], name); i >= 0 {
			return i
		}
		return len(upfxdp.ReasonNames)
	}
	names := slices.Collect(maps.Keys(reasons))
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(a, b))
	})
	return names
}

// WriteTable prints a row per association.
func (a *Associations) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE ID\tADDRESS\tSTATE\tSINCE\tLAST HEARTBEAT\tSMF STARTED")
	for _, as := range a.Associations {
		state := "up"
		if as.Lost {
			state = "lost"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", as.NodeID, as.Addr, state,
			timestamp(as.Since), timestamp(as.LastHeartbeat), timestamp(as.RecoveryTime))
	}
	return tw.Flush()
}

func timestamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format(time.RFC3339)
}
