package daemon

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/vishvananda/netns"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// stagesFile keeps the stages changed through the REST API, beside the
// state file.
func stagesFile(cfg *config.Config) string {
	return filepath.Join(filepath.Dir(cfg.StateFile), "stages.json")
}

// restoreStages reads the stages each interface of the UPF is to run: as
// changed through the API in a previous run, where the configuration still
// gives it what it gave it then, else the configuration's.
func restoreStages(cfg *config.Config, log *slog.Logger) ([]api.InterfaceStages, error) {
	saved, err := readState(stagesFile(cfg))
	if err != nil {
		return nil, err
	}
	running, restored, dropped, err := api.RestoreStages(cfg.Interfaces, cfg.Classify != nil, saved)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", stagesFile(cfg), err)
	}
	if len(restored) > 0 {
		log.Info("stages as changed through the REST API, not as configured", "interfaces", restored, "file", stagesFile(cfg))
	}
	if len(dropped) > 0 {
		log.Info("stages changed through the REST API dropped: the configuration gives these interfaces other stages now, or the stages cannot run there",
			"interfaces", dropped, "file", stagesFile(cfg))
	}
	return running, nil
}

// keepStages serves changes of the interfaces' stages, which run the
// classifier c's stages, and keeps the stages file in step with them until
// stop.
func keepStages(cfg *config.Config, running []api.InterfaceStages, dp *upfxdp.Datapath, c *api.Classifier, ns netns.NsHandle,
	log *slog.Logger) (stages *api.Stages, stop func() error, err error) {
	state := &stateFile{path: stagesFile(cfg), log: log}
	stages = api.NewStages(running, c != nil, func(name string, set api.StageSet) error {
		return inNetns(ns, func() error { return dp.SetStages(name, chainOf(set, c)) })
	}, state.changed)
	state.marshal = stages.MarshalState
	if err := state.start(); err != nil {
		return nil, nil, err
	}
	return stages, state.stop, nil
}
