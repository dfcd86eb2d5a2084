package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/fielderr"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// StageSet is what an interface runs in front of the UPF: its stages in
// order, the UPF last, and the slice its steer stage sends packets to.
type StageSet struct {
	Stages []string `json:"stages"`
	Slice  uint32   `json:"slice" range:"slice"`
}

// InterfaceStages is an interface of the UPF with the stages it runs and
// those the configuration gave it, which the next start runs again.
type InterfaceStages struct {
	Name string `json:"name"`
	StageSet
	Configured StageSet    `json:"configured"`
	roles      upfxdp.Role // what the configuration gives the interface
}

// Interfaces is the document of GET /api/v1/interfaces.
type Interfaces struct {
	Interfaces []InterfaceStages `json:"interfaces"`
}

// Stages changes the stages of the UPF's interfaces while they run: each
// change is one atomic update of the interface's chain, the other stages
// left loaded as they are.
type Stages struct {
	mu          sync.Mutex // serialises changes
	ifaces      []InterfaceStages
	classifying bool                                  // the classify and steer stages can run
	apply       func(name string, set StageSet) error // runs set on the interface
	changed     func()                                // after each change
}

// NewStages starts from the interfaces' stages as they run (RestoreStages);
// apply changes an interface's, and changed is called after each change.
func NewStages(ifaces []InterfaceStages, classifying bool, apply func(name string, set StageSet) error, changed func()) *Stages {
	return &Stages{ifaces: ifaces, classifying: classifying, apply: apply, changed: changed}
}

// RestoreStages are the stages the configured interfaces run at a start:
// those a previous run saved (MarshalState; nil for none) where the
// configuration still gives what it gave then, else the configuration's.
// restored names the interfaces that run saved stages; dropped those
// whose saved change gives way (the configuration changed, or the stages
// cannot run there any more).
func RestoreStages(ifaces []config.Interface, classifying bool, saved []byte) (run []InterfaceStages, restored, dropped []string, err error) {
	var doc Interfaces
	if saved != nil {
		if err := json.Unmarshal(saved, &doc); err != nil {
			return nil, nil, nil, err
		}
	}
	for _, i := range ifaces {
		configured := StageSet{Stages: slices.Clone(i.Stages), Slice: i.Slice}
		in := InterfaceStages{Name: i.Name, StageSet: configured, Configured: configured, roles: i.Roles}
		j := slices.IndexFunc(doc.Interfaces, func(s InterfaceStages) bool { return s.Name == i.Name })
		switch {
		case j < 0 || doc.Interfaces[j].StageSet.equal(doc.Interfaces[j].Configured): // no change saved
		case doc.Interfaces[j].Configured.equal(configured) && checkStages(in.roles, doc.Interfaces[j].StageSet, classifying) == nil:
			in.StageSet = doc.Interfaces[j].StageSet
			restored = append(restored, i.Name)
		default:
			dropped = append(dropped, i.Name)
		}
		run = append(run, in)
	}
	return run, restored, dropped, nil
}

func (a StageSet) equal(b StageSet) bool {
	return slices.Equal(a.Stages, b.Stages) && a.Slice == b.Slice
}

// checkStages refuses a set of stages that cannot run on an interface of
// roles.
func checkStages(roles upfxdp.Role, set StageSet, classifying bool) error {
	if len(set.Stages) == 0 {
		return fielderr.New("stages", "the stages are needed, in order, the UPF last: %v for example",
			[]string{config.StageClassify, config.StageUPF})
	}
	if _, err := config.CheckStages("", roles, set.Stages, set.Slice); err != nil {
		return err
	}
	if !classifying && len(set.Stages) > 1 {
		return fielderr.New("stages", "%s needs the classifier: the daemon's configuration has no classify section", set.Stages[0])
	}
	return nil
}

// MarshalState is the document RestoreStages restores from.
func (s *Stages) MarshalState() ([]byte, error) { return json.Marshal(s.list()) }

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
	if err := checkStages(s.ifaces[i].roles, set, s.classifying); err != nil {
		return InterfaceStages{}, err
	}
	if err := s.apply(name, set); err != nil {
		return InterfaceStages{}, err
	}
	s.ifaces[i].StageSet = set
	s.changed()
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
