package api

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
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

// cuupRoles name the CU-UP's roles in CUUPStats.
var cuupRoles = []struct {
	name string
	role cuup.Role
}{{"n3", cuup.N3}, {"f1u", cuup.F1U}}

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
		k, err := s.cuupClassifier.Stats(r.role)
		if err != nil {
			return CUUPStats{}, err
		}
		cs := CUUPClassifierStats{Total: reasonCounters(k.Total), PerCPU: []map[string]Counter{}}
		for _, perCPU := range k.PerCPU {
			cs.PerCPU = append(cs.PerCPU, reasonCounters(perCPU))
		}
		st.Kernel[r.name] = cs
	}
	return st, nil
}

// WriteMetrics writes the counters in the Prometheus text format: each
// worker's (by its name, else its place) by counter (the fields of
// cuup.WorkerStats, by their JSON names), and the classifier's by role, CPU
// and reason.
func (st *CUUPStats) WriteMetrics(w io.Writer) error {
	var b bytes.Buffer
	header := func(name, help string) {
		fmt.Fprintf(&b, "# HELP xdp5g_%s %s\n# TYPE xdp5g_%s counter\n", name, help, name)
	}
	header("cuup_worker_packets_total", "Packets a CU-UP worker counted, by counter.")
	for i, ws := range st.User.Workers {
		worker := workerLabel(i, ws)
		v := reflect.ValueOf(ws)
		for f := range v.NumField() {
			if v.Field(f).Kind() != reflect.Uint64 {
				continue
			}
			counter, _, _ := strings.Cut(v.Type().Field(f).Tag.Get("json"), ",")
			fmt.Fprintf(&b, "xdp5g_cuup_worker_packets_total{worker=%q,counter=%q} %d\n", worker, counter, v.Field(f).Uint())
		}
	}
	if st.Kernel != nil {
		for _, m := range []struct {
			name, help string
			pick       func(Counter) uint64
		}{
			{"cuup_classifier_packets_total", "Packets the CU-UP's XDP classifier handled, by role, CPU and reason.",
				func(c Counter) uint64 { return c.Packets }},
			{"cuup_classifier_bytes_total", "Octets of the packets the CU-UP's XDP classifier handled, by role, CPU and reason.",
				func(c Counter) uint64 { return c.Bytes }},
		} {
			header(m.name, m.help)
			for _, r := range cuupRoles {
				for cpu, counters := range st.Kernel[r.name].PerCPU {
					for reason := range cuupxdp.NumReasons {
						name := cuupxdp.Reason(reason).String()
						fmt.Fprintf(&b, "xdp5g_%s{role=%q,cpu=\"%d\",reason=%q} %d\n", m.name, r.name, cpu, name, m.pick(counters[name]))
					}
				}
			}
		}
	}
	_, err := b.WriteTo(w)
	return err
}

// reasonCounters names the classifier's counters by their reasons.
func reasonCounters(c cuupxdp.Counts) map[string]Counter {
	named := make(map[string]Counter, len(c))
	for reason, counter := range c {
		named[cuupxdp.Reason(reason).String()] = Counter{Packets: counter.Packets, Bytes: counter.Bytes}
	}
	return named
}

// WriteTable prints the counters that are not zero: a row per worker
// (all of them first), then a row per role, CPU (all of them first) and
// reason of the classifier's.
func (st *CUUPStats) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tDOWNLINK\tDL SENT\tUPLINK\tUL SENT\tUNKNOWN TUNNEL\tNO DRB\tREFUSED\tNO ROOM\tHELD")
	row := func(name string, s cuup.WorkerStats) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", name, s.Downlink, s.DownlinkSent, s.Uplink, s.UplinkSent,
			s.UnknownTunnel, s.NoDRB, s.Refused, s.NoRoom, s.Held)
	}
	row("all", st.User.WorkerStats)
	for i, s := range st.User.Workers {
		row(workerLabel(i, s), s)
	}
	if st.Kernel != nil {
		fmt.Fprintln(tw, "\nROLE\tCPU\tREASON\tPACKETS\tBYTES")
		for _, r := range cuupRoles {
			k := st.Kernel[r.name]
			writeReasons(tw, r.name, "all", k.Total)
			for cpu, counters := range k.PerCPU {
				writeReasons(tw, r.name, strconv.Itoa(cpu), counters)
			}
		}
	}
	return tw.Flush()
}

// workerLabel names the i-th worker: by its name, else its place.
func workerLabel(i int, s cuup.WorkerStats) string {
	if s.Worker != "" {
		return s.Worker
	}
	return strconv.Itoa(i)
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
