package api

import (
	"fmt"
	"net/http"
	"slices"
	"sync"

	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/fielderr"
)

// StageSet is what an interface runs in front of the UPF: its stages in
// order, the UPF last, and the slice its steer stage sends packets to.
type StageSet struct {
	Stages []string `json:"stages"`
	Slice  uint32   `json:"slice"`
}

// InterfaceStages is an interface of the UPF with the stages it runs and
// those the configuration gave it, which the next start runs again.
type InterfaceStages struct {
	Name string `json:"name"`
	StageSet
	Configured StageSet `json:"configured"`
}

// Interfaces is the document of GET /api/v1/interfaces.
type Interfaces struct {
	Interfaces []InterfaceStages `json:"interfaces"`
}

// Stages changes the stages of the UPF's interfaces while they run: each
// change is one atomic update of the interface's chain, the other stages
// left loaded as they are, and lasts until the daemon stops.
type Stages struct {
	mu          sync.Mutex // serialises changes
	ifaces      []InterfaceStages
	classifying bool                                  // the classify and steer stages can run
	apply       func(name string, set StageSet) error // runs set on the interface
}

// NewStages starts from the configured interfaces, which apply changes.
func NewStages(ifaces []config.Interface, classifying bool, apply func(name string, set StageSet) error) *Stages {
	s := &Stages{classifying: classifying, apply: apply}
	for _, i := range ifaces {
		set := StageSet{Stages: slices.Clone(i.Stages), Slice: i.Slice}
		s.ifaces = append(s.ifaces, InterfaceStages{Name: i.Name, StageSet: set, Configured: set})
	}
	return s
}

func (s *Stages) list() Interfaces {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Interfaces{Interfaces: slices.Clone(s.ifaces)}
}

func (s *Stages) find(name string) (int, error) {
	if i := slices.IndexFunc(s.ifaces, func(i InterfaceStages) bool { return i.Name == name }); i >= 0 {
		return i, nil
	}
	return -1, &Error{Status: http.StatusNotFound, Msg: fmt.Sprintf("no interface %s runs the UPF", name)}
}

func (s *Stages) get(name string) (InterfaceStages, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, err := s.find(name)
	if err != nil {
		return InterfaceStages{}, err
	}
	return s.ifaces[i], nil
}

// set checks set and runs it on the interface; a refused set changes
// nothing.
func (s *Stages) set(name string, set StageSet) (InterfaceStages, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, err := s.find(name)
	if err != nil {
		return InterfaceStages{}, err
	}
	if len(set.Stages) == 0 {
		return InterfaceStages{}, fielderr.New("stages", "the stages are needed, in order, the UPF last: %v for example",
			[]string{config.StageClassify, config.StageUPF})
	}
	if set.Stages, err = config.ParseStages("stages", set.Stages); err != nil {
		return InterfaceStages{}, err
	}
	if !s.classifying && len(set.Stages) > 1 {
		return InterfaceStages{}, fielderr.New("stages", "%s needs the classifier: the daemon's configuration has no classify section", set.Stages[0])
	}
	if err := s.apply(name, set); err != nil {
		return InterfaceStages{}, err
	}
	s.ifaces[i].StageSet = set
	return s.ifaces[i], nil
}

func (s *server) listInterfaces(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return http.StatusOK, s.stages.list(), nil
}

func (s *server) getInterface(w http.ResponseWriter, r *http.Request) (int, any, error) {
	i, err := s.stages.get(r.PathValue("name"))
	return http.StatusOK, i, err
}

func (s *server) putStages(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var set StageSet
	if err := decodeBody(w, r, &set); err != nil {
		return 0, nil, err
	}
	i, err := s.stages.set(r.PathValue("name"), set)
	if err == nil {
		s.log.Info("stages changed", "interface", i.Name, "stages", i.Stages, "slice", i.Slice)
	}
	return http.StatusOK, i, err
}
