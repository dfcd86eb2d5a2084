package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/fielderr"
)

// Slice is a set of CPUs that steer rules spread flows over, as the REST
// API shows it: {"id": 1, "cpus": [2, 3], "counters": [{"cpu": 2, ...}]}.
type Slice struct {
	ID   *uint32  `json:"id,omitempty" range:"slice"`
	CPUs []uint32 `json:"cpus" required:"true"`
	// Its flows leave the host for an alternative node only when even
	// they cannot be served.
	Prioritised bool `json:"prioritised,omitempty"`
	// Bits per second each receiving CPU lets through, and the bucket in
	// bytes (classifyxdp.Slice); 0: no limit.
	Rate  uint64 `json:"rate,omitempty"`
	Burst uint64 `json:"burst,omitempty"`
	// What each CPU of the machine took of the slice, those that took
	// some.
	Counters []CPUCounter `json:"counters,omitempty"`
}

// CPUCounter is what one CPU took.
type CPUCounter struct {
	CPU     uint32 `json:"cpu"`
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

// Slices is the body of GET /api/v1/slices.
type Slices struct {
	Slices []Slice `json:"slices"`
}

func sliceDocument(s classifyxdp.Slice) Slice {
	id := s.ID
	doc := Slice{ID: &id, CPUs: []uint32{}, Prioritised: s.Prioritised, Rate: s.Rate, Burst: s.Burst}
	for _, cpu := range s.CPUs {
		doc.CPUs = append(doc.CPUs, uint32(cpu))
	}
	return doc
}

func (s *server) sliceDoc(sl classifyxdp.Slice) (Slice, error) {
	doc := sliceDocument(sl)
	perCPU, err := s.classifier.Rules.SliceCPUs(sl.ID)
	for cpu, c := range perCPU {
		if c.Packets > 0 {
			doc.Counters = append(doc.Counters, CPUCounter{CPU: uint32(cpu), Packets: c.Packets, Bytes: c.Bytes})
		}
	}
	return doc, err
}

// setSlice sets up the slice a document describes; an error names the
// field.
func (c *Classifier) setSlice(doc Slice) (classifyxdp.Slice, error) {
	if doc.ID == nil {
		return classifyxdp.Slice{}, fielderr.New("id", "a slice has its ID")
	}
	if doc.Counters != nil {
		return classifyxdp.Slice{}, fielderr.New("counters", "counters are the data path's to say")
	}
	s := classifyxdp.Slice{ID: *doc.ID, CPUs: make([]int, len(doc.CPUs)), Prioritised: doc.Prioritised, Rate: doc.Rate, Burst: doc.Burst}
	for i, cpu := range doc.CPUs {
		s.CPUs[i] = int(cpu)
	}
	return s, c.Rules.SetSlice(s)
}

func pathSliceID(r *http.Request) (uint32, error) { return pathID(r, "a slice ID") }

func sliceNotFound(id uint32) *Error {
	return &Error{Status: http.StatusNotFound, Msg: fmt.Sprintf("slice %d not found", id)}
}

func (s *server) putSlice(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathSliceID(r)
	if err != nil {
		return 0, nil, err
	}
	var doc Slice
	if err := decodeBody(w, r, &doc); err != nil {
		return 0, nil, err
	}
	if doc.ID != nil && *doc.ID != id {
		return 0, nil, fielderr.New("id", "the body names slice %d, the path %d", *doc.ID, id)
	}
	if s.classifier.Intents.OwnsSlice(id) {
		return 0, nil, &Error{Status: http.StatusConflict, Msg: fmt.Sprintf("slice %d is an intent's", id)}
	}
	// Checked here rather than in setSlice, so that a rules file an
	// earlier version wrote still loads.
	if err := classifyxdp.CheckRate(doc.Rate, doc.Burst); err != nil {
		return 0, nil, err
	}
	doc.ID = &id
	set, err := s.classifier.setSlice(doc)
	if err != nil {
		return 0, nil, err
	}
	got, err := s.sliceDoc(set)
	return http.StatusOK, got, err
}

func (s *server) listSlices(w http.ResponseWriter, r *http.Request) (int, any, error) {
	out := Slices{Slices: []Slice{}}
	for _, sl := range s.classifier.Rules.Slices() {
		doc, err := s.sliceDoc(sl)
		if err != nil {
			return 0, nil, err
		}
		out.Slices = append(out.Slices, doc)
	}
	return http.StatusOK, out, nil
}

func (s *server) deleteSlice(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathSliceID(r)
	if err != nil {
		return 0, nil, err
	}
	switch err := s.classifier.Rules.DeleteSlice(id); {
	case errors.Is(err, classifyxdp.ErrNoSlice):
		return 0, nil, sliceNotFound(id)
	case errors.Is(err, classifyxdp.ErrSliceInUse):
		return 0, nil, &Error{Status: http.StatusConflict, Msg: err.Error()}
	case err != nil:
		return 0, nil, err
	}
	return http.StatusNoContent, nil, nil
}
