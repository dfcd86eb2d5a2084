package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netns"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/classify/intent"
	"github.com/xdp5g/xdp5g/internal/classify/report"
	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// classifyLinks is where, under the pin path, the classifier's links live.
func classifyLinks(cfg *config.Config) string {
	return filepath.Join(cfg.Datapath.PinPath, "classify")
}

// openClassifier loads the classifier, its stages to run in the UPF's
// chains (chain: upfxdp.Datapath.ChainMaps, nil without the UPF), with
// the rules of the rules file (saved, nil for none), keeps that file in step with the rules and
// reports its figures from then on, to its webhooks and to metrics, until stop.
func openClassifier(ctx context.Context, cfg *config.Config, saved []byte, chain map[string]*ebpf.Map, ns netns.NsHandle,
	metrics prometheus.Registerer, log *slog.Logger) (c *api.Classifier, stop func() error, err error) {
	if err := os.MkdirAll(filepath.Dir(cfg.Classify.RulesFile), 0o755); err != nil {
		return nil, nil, fmt.Errorf("classify.rules_file: %w", err)
	}
	state := &stateFile{path: cfg.Classify.RulesFile, log: log}
	rules, err := classifyxdp.OpenDatapath(classifyxdp.Config{MaxMasks: cfg.Classify.MaxMasks,
		OrphanFragments: cfg.Classify.OrphanFragments, Changed: state.changed, Chain: chain})
	if err != nil {
		return nil, nil, err
	}
	resolve := func(name string) (iface *net.Interface, err error) {
		err = inNetns(ns, func() (err error) {
			iface, err = net.InterfaceByName(name)
			return err
		})
		return iface, err
	}
	c = &api.Classifier{Rules: rules, Interface: resolve, Intents: intent.NewStore(rules, resolve, state.changed)}
	state.marshal = c.MarshalRules
	if saved != nil {
		if err := c.RestoreRules(saved); err != nil {
			return nil, nil, errors.Join(fmt.Errorf("%s: %w", cfg.Classify.RulesFile, err), rules.Close())
		}
	}
	log.Info("rules restored", "rules", rules.Len(), "rules_file", cfg.Classify.RulesFile)
	if err := state.start(); err != nil {
		return nil, nil, errors.Join(err, rules.Close())
	}
	reports := report.New(rules, c.Intents, cfg.Classify.Webhooks, log)
	metrics.MustRegister(reports.Metrics())
	reporting, stopReports := context.WithCancel(ctx)
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		reports.Run(reporting, cfg.Classify.ReportInterval)
	}()
	return c, func() error {
		stopReports()
		<-reported
		return errors.Join(state.stop(), rules.Close())
	}, nil
}

// attachClassifier runs the classifier, if there is one, on its
// interfaces (taking over a previous run's attachments without a gap) and
// removes it from those a previous run attached that the configuration no
// longer lists.
func attachClassifier(c *api.Classifier, ns netns.NsHandle, cfg *config.Config, log *slog.Logger) error {
	dir := classifyLinks(cfg)
	var names []string
	if c != nil {
		names = cfg.Classify.Interfaces
		if err := c.Rules.KeepCountingDrops(dir); err != nil {
			return err
		}
	} else if err := classifyxdp.StopCountingDrops(dir); err != nil {
		return err
	}
	return inNetns(ns, func() error {
		for _, name := range names {
			if err := c.Rules.Attach(dir, name, cfg.XDPMode); err != nil {
				return fmt.Errorf("classify interface %s: %w", name, err)
			}
			log.Info("classifier attached", "interface", name, "mode", cfg.XDPMode)
		}
		attached, err := classifyxdp.Attached(dir)
		if err != nil {
			return err
		}
		for _, name := range attached {
			if !slices.Contains(names, name) {
				if err := classifyxdp.Detach(dir, name); err != nil {
					return fmt.Errorf("classify interface %s: %w", name, err)
				}
				log.Info("classifier detached from an interface no longer configured", "interface", name)
			}
		}
		return nil
	})
}

// chainOf is the chain of the stages an interface runs before the UPF, the
// classifier c's (there is one when any is named: config and the API check).
func chainOf(set api.StageSet, c *api.Classifier) upfxdp.Chain {
	if c == nil {
		return upfxdp.Chain{}
	}
	return upfxdp.NewChain(c.Rules, slices.Contains(set.Stages, config.StageClassify),
		slices.Contains(set.Stages, config.StageSteer), set.Slice)
}
