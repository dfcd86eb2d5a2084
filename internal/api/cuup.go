package api

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"text/tabwriter"

	"github.com/xdp5g/xdp5g/internal/ran/cuup"
	"github.com/xdp5g/xdp5g/internal/ran/cuupxdp"
	"github.com/xdp5g/xdp5g/internal/ran/e1"
)

// BearerContexts is the body of GET /api/v1/cuup/bearer-contexts.
type BearerContexts struct {
	BearerContexts []cuup.Context `json:"bearerContexts"`
}

// CUUPClassifier is the CU-UP's XDP classifier, a *cuupxdp.Datapath: what
// it counted on each role's interface.
type CUUPClassifier interface {
	Stats(role cuupxdp.Role) (cuupxdp.Stats, error)
}

// CUUPStats is the body of GET /api/v1/cuup/stats.
type CUUPStats struct {
	// User is what the CU-UP's workers did, summed and per worker in the
	// order they started: on the AF_XDP path one per queue, then the
	// socket path's, one per interface (for what the classifier left to
	// the kernel); on the socket path one per interface.
	User cuup.Stats `json:"user"`
	// Kernel is what the XDP classifier did with each interface's packets,
	// by role ("n3", "f1u"); absent on the socket path.
	Kernel map[string]CUUPClassifierStats `json:"kernel,omitempty"`
}

// CUUPClassifierStats count where the CU-UP's classifier sent the packets
// of an interface, by reason (cuupxdp.Reason's names): summed, and per CPU.
type CUUPClassifierStats struct {
	Total  map[string]Counter   `json:"total"`
	PerCPU []map[string]Counter `json:"perCpu"`
}

// cuupRoles are the CU-UP's roles, in the order of CUUPStats.WriteTable.
var cuupRoles = []cuup.Role{cuup.N3, cuup.F1U}

var errNoCUUP = &Error{Status: http.StatusNotFound, Msg: "the CU-UP is not configured"}

func (s *server) listBearerContexts(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return http.StatusOK, BearerContexts{BearerContexts: s.cuup.List()}, nil
}

func (s *server) setupBearerContext(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var req e1.BearerContextSetupRequest
	if err := decodeBody(w, r, &req); err != nil {
		return 0, nil, err
	}
	resp, err := s.cuup.Setup(req)
	return http.StatusCreated, resp, err
}

func pathBearerContextID(r *http.Request) (uint32, error) { return pathID(r, "a gNB-CU-UP UE E1AP ID") }

func (s *server) getBearerContext(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathBearerContextID(r)
	if err != nil {
		return 0, nil, err
	}
	c, err := s.cuup.Get(id)
	return http.StatusOK, c, err
}

func (s *server) modifyBearerContext(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathBearerContextID(r)
	if err != nil {
		return 0, nil, err
	}
	var req e1.BearerContextModificationRequest
	if err := decodeBody(w, r, &req); err != nil {
		return 0, nil, err
	}
	resp, err := s.cuup.Modify(id, req)
	return http.StatusOK, resp, err
}

func (s *server) releaseBearerContext(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathBearerContextID(r)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, s.cuup.Release(id)
}

func (s *server) cuupStats(w http.ResponseWriter, r *http.Request) (int, any, error) {
	st, err := s.readCUUPStats()
	return http.StatusOK, st, err
}

// readCUUPStats reads the CU-UP's counters.
func (s *server) readCUUPStats() (CUUPStats, error) {
	st := CUUPStats{User: s.cuup.Stats()}
	if st.User.Workers == nil {
		st.User.Workers = []cuup.WorkerStats{}
	}
	if s.cuupClassifier == nil {
		return st, nil
	}
	st.Kernel = map[string]CUUPClassifierStats{}
	for _, r := range cuupRoles {
		k, err := s.cuupClassifier.Stats(r)
		if err != nil {
			return CUUPStats{}, err
		}
		cs := CUUPClassifierStats{Total: reasonCounters(k.Total), PerCPU: []map[string]Counter{}}
		for _, perCPU := range k.PerCPU {
			cs.PerCPU = append(cs.PerCPU, reasonCounters(perCPU))
		}
		st.Kernel[r.Label()] = cs
	}
	return st, nil
}

// reasonCounters names the classifier's counters by their reasons.
func reasonCounters(c cuupxdp.Counts) map[string]Counter {
	named := make(map[string]Counter, len(c))
	for reason, counter := range c {
		named[cuupxdp.Reason(reason).String()] = Counter{Packets: counter.Packets, Bytes: counter.Bytes}
	}
	return named
}

// WriteTable prints the counters: a row per worker (all of them first);
// a row per counter that is not zero of the socket path's and the AF_XDP
// path's own; then a row per role, CPU (all of them first) and reason of
// the classifier's that is not zero.
func (st *CUUPStats) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tDOWNLINK\tDL SENT\tUPLINK\tUL SENT\tUNKNOWN TUNNEL\tNO DRB\tREFUSED\tNO ROOM\tHELD")
	row := func(name string, s cuup.WorkerStats) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", name, s.Downlink, s.DownlinkSent, s.Uplink, s.UplinkSent,
			s.UnknownTunnel, s.NoDRB, s.Refused, s.NoRoom, s.Held)
	}
	row("all", st.User.WorkerStats)
	for i, s := range st.User.Workers {
		row(s.Label(i), s)
	}
	header := "\nPATH\tCOUNTER\tPACKETS"
	for _, path := range []struct {
		name  string
		stats any
	}{{"sockets", st.User.Sockets}, {"xdp", st.User.XDP}} {
		for _, c := range cuup.Counters(path.stats) {
			if c.Value == 0 {
				continue
			}
			if header != "" {
				fmt.Fprintln(tw, header)
				header = ""
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\n", path.name, c.Name, c.Value)
		}
	}
	if st.Kernel != nil {
		fmt.Fprintln(tw, "\nROLE\tCPU\tREASON\tPACKETS\tBYTES")
		for _, r := range cuupRoles {
			k := st.Kernel[r.Label()]
			writeReasons(tw, r.Label(), "all", k.Total)
			for cpu, counters := range k.PerCPU {
				writeReasons(tw, r.Label(), strconv.Itoa(cpu), counters)
			}
		}
	}
	return tw.Flush()
}

// writeReasons writes the counters that are not zero in the classifier's
// order of reasons.
func writeReasons(w io.Writer, role, cpu string, counters map[string]Counter) {
	for reason := range cuupxdp.NumReasons {
		name := cuupxdp.Reason(reason).String()
		if c := counters[name]; c.Packets != 0 {
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\n", role, cpu, name, c.Packets, c.Bytes)
		}
	}
}

// Placement is the body of PUT
// /api/v1/cuup/bearer-contexts/{id}/drbs/{drb}/placement.
type Placement struct {
	Placement cuup.Placement `json:"placement" required:"true"`
}

func (s *server) placeDRB(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathBearerContextID(r)
	if err != nil {
		return 0, nil, err
	}
	drb, err := pathNumber(r, "drb", 8, "a DRB ID")
	if err != nil {
		return 0, nil, err
	}
	var p Placement
	if err := decodeBody(w, r, &p); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, p, s.cuup.SetPlacement(id, uint8(drb), p.Placement)
}
