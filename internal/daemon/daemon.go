// Package daemon runs the UPF: it attaches the data path, keeps the
// sessions across restarts and serves the REST API and, when configured,
// PFCP (N4), the classifier and a CU-UP (which may also run alone).
package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/platform/gcpace"
	"github.com/xdp5g/xdp5g/internal/platform/version"
	"github.com/xdp5g/xdp5g/internal/telemetry"
	"github.com/xdp5g/xdp5g/internal/upf/buffer"
	"github.com/xdp5g/xdp5g/internal/upf/nexthop"
	"github.com/xdp5g/xdp5g/internal/upf/session"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// shutdownTimeout bounds how long requests in flight may take at shutdown.
const shutdownTimeout = 5 * time.Second

// Run attaches the data path to the configured interfaces, takes over the
// sessions of the state file and, with a pfcp section, those of the PFCP
// state (see session.Restore), and serves the REST API, and PFCP if cfg
// has a pfcp section, until ctx is done. With a classify section it runs the classifier too, with the rules
// of its rules file, and with a cuup section a CU-UP (see startCUUP),
// without the UPF when cfg has none (config.Config.UPF).
// The REST API answers GET /healthz from the start, and GET /readyz with
// 503 and what the daemon is doing until everything is up: the data path
// attached, the state restored, PFCP bound; only then does it serve the
// rest of the API.
// On return the XDP programs of the UPF and the classifier stay attached
// and the maps pinned, so traffic keeps flowing until the next run takes
// over (unless datapath.ephemeral let them live on a bpffs that dies with
// the process, see checkPins); Detach removes them. The CU-UP's programs
// leave with it. cfg is valid, as config.Load returns it.
func Run(ctx context.Context, cfg *config.Config, log *slog.Logger) (err error) {
	started := time.Now()
	log.Info("starting", "version", version.String())
	pins := pinsStay
	if cfg.UPF() || cfg.Classify != nil {
		if pins, err = checkPins(cfg.Datapath, log); err != nil {
			return err
		}
	}
	// Listening first stops the start on a busy port before the data path
	// is touched.
	rest, err := serveREST(cfg.API, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, rest.shutdown()) }()
	if cfg.PFCP != nil {
		if err := checkPFCPListen(cfg.PFCP.Listen); err != nil {
			return err
		}
	}
	// Read before touching the data path, so a bad file stops the start
	// with the running data path untouched.
	rest.gate.Starting("starting: reading the state files")
	var saved, savedRules []byte
	var running []api.InterfaceStages // the stages each interface of the UPF runs
	if cfg.UPF() {
		if saved, err = readState(cfg.StateFile); err != nil {
			return err
		}
		if running, err = restoreStages(cfg, log); err != nil {
			return err
		}
	}
	if cfg.Classify != nil {
		if savedRules, err = readState(cfg.Classify.RulesFile); err != nil {
			return err
		}
	}
	ns, err := openNetns(cfg.Netns)
	if err != nil {
		return err
	}
	defer ns.Close()
	if err := checkInterfaces(cfg, ns); err != nil {
		return err
	}
	ready := false
	if cfg.UPF() || cfg.Classify != nil {
		// A start that fails before it is ready leaves a running data
		// path as it was: one it pinned afresh goes (once the lock is let
		// go, deferred before it), rather than its maps staying pinned.
		_, statErr := os.Stat(cfg.Datapath.PinPath)
		if errors.Is(statErr, fs.ErrNotExist) {
			defer func() {
				if err != nil && !ready {
					if derr := Detach(cfg); derr != nil {
						err = errors.Join(err, fmt.Errorf("removing the data path this start pinned: %w", derr))
					}
				}
			}()
		}
		lock, err := lockPins(cfg.Datapath.PinPath)
		if err != nil {
			return err
		}
		defer lock.Close()
	}

	// Every part adds its collector once it runs: /metrics has each
	// part's figures from the first scrape.
	metrics := telemetry.NewRegistry()
	services := api.Services{Log: log, Metrics: metrics}
	// The CU-UP first: it shares nothing with the UPF, and a CU-UP that
	// cannot start leaves the UPF's running data path untouched.
	var cuupFailed <-chan struct{}
	if cfg.CUUP != nil {
		rest.gate.Starting("starting: the CU-UP")
		var cu *cuupRun
		if cu, err = startCUUP(cfg, ns, log); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, cu.stop()) }()
		cu.services(&services, metrics)
		cuupFailed = cu.failed
	}
	// Restoring sessions allocates what stays: collections meanwhile
	// would only mark it again. Resumed once PFCP is served.
	resumeGC := sync.OnceFunc(gcpace.Pause())
	defer resumeGC()
	var u *upf
	if cfg.UPF() {
		rest.gate.Starting("starting: restoring the sessions")
		if u, err = openUPF(ctx, cfg, ns, saved, log); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, u.close()) }()
		services.Store, services.Datapath = u.store, u.dp
		metrics.MustRegister(u.dp.Metrics(), u.store.Metrics(), u.buffers.Metrics(), u.nh.Metrics())
	}

	if cfg.Classify != nil {
		rest.gate.Starting("starting: restoring the classifier's rules")
		var stopClassifier func() error
		var chain map[string]*ebpf.Map // the UPF's interfaces' chains, which the classifier's stages run in
		if u != nil {
			chain = u.dp.ChainMaps()
		}
		if services.Classifier, stopClassifier, err = openClassifier(ctx, cfg, savedRules, chain, ns, metrics, log); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, stopClassifier()) }()
	}
	rest.gate.Starting("starting: attaching the data path")
	if u != nil {
		if err := attach(u.dp, services.Classifier, ns, cfg, running, log); err != nil {
			return err
		}
		warnForwardingOff(ns, log)
		var stopStages func() error
		if services.Stages, stopStages, err = keepStages(cfg, running, u.dp, services.Classifier, ns, log); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, stopStages()) }()
	}
	if err := attachClassifier(services.Classifier, ns, cfg, log); err != nil {
		return err
	}

	if cfg.PFCP == nil && u != nil {
		defer serveFragmentedGPDUs(cfg, u.dp, ns, metrics, log)()
	}
	if cfg.PFCP != nil { // with the UPF, as config checks
		rest.gate.Starting("starting: binding PFCP")
		var stopPFCP func() error
		if services.PFCP, stopPFCP, err = servePFCP(cfg, u, ns, started, metrics, log); err != nil {
			return err
		}
		// Deferred last, so stopped first: no session request reaches the
		// store after its last save.
		defer func() { err = errors.Join(err, stopPFCP()) }()
	}
	resumeGC()

	rest.ready(services)
	ready = true
	log.Info("ready", "after", time.Since(started).Round(time.Millisecond))
	select {
	case <-ctx.Done():
	case err = <-rest.served:
	case <-cuupFailed:
		err = errors.New("the CU-UP stopped serving")
	}
	rest.gate.Stopping()
	// Before the services close: no request reaches them afterwards.
	err = errors.Join(err, rest.shutdown())
	if cfg.UPF() || cfg.Classify != nil {
		log.Info(pins.stopMessage())
	} else {
		log.Info("stopped")
	}
	return err
}

// upf is the UPF's data path and sessions.
type upf struct {
	dp        *upfxdp.Datapath
	nh        *nexthop.Resolver
	store     *session.Store
	buffers   *buffer.Manager
	buffering chan struct{} // closed when the buffers stop running
	state     *stateFile    // saving from start on
	pfcp      *pfcpState    // with a pfcp section
}

// openUPF opens the UPF's data path (its maps and programs, not yet
// attached), the store with the sessions of the state file (saved, nil for
// none) and its downlink buffers, and keeps the state file in step with
// the store until close.
func openUPF(ctx context.Context, cfg *config.Config, ns netns.NsHandle, saved []byte, log *slog.Logger) (_ *upf, err error) {
	if err := os.MkdirAll(filepath.Dir(cfg.StateFile), 0o755); err != nil {
		return nil, fmt.Errorf("state_file: %w", err)
	}
	u := &upf{}
	defer func() {
		if err != nil {
			err = errors.Join(err, u.close())
		}
	}()
	u.dp, err = upfxdp.Open(upfxdp.Options{
		PinPath: cfg.Datapath.PinPath, MaxSessions: cfg.Datapath.MaxSessions, N3Addresses: cfg.N3Addresses,
		N9Addresses: cfg.N9Addresses, ErrorIndicationRate: cfg.Datapath.ErrorIndicationRate,
	})
	if err != nil {
		return nil, err
	}
	if u.nh, err = nexthop.New(u.dp, ns, cfg.CoreInterfaces()); err != nil {
		return nil, fmt.Errorf("starting the next-hop resolver: %w", err)
	}

	state := &stateFile{path: cfg.StateFile, log: log}
	if cfg.PFCP != nil {
		if u.pfcp, err = openPFCPState(cfg.PFCP, log); err != nil {
			return nil, err
		}
	}
	// In the interfaces' namespace: its raw socket sends released packets.
	err = inNetns(ns, func() (err error) {
		u.buffers, err = buffer.New(u.dp, buffer.Config{
			SessionPackets: cfg.Buffering.SessionPackets, TotalPackets: cfg.Buffering.TotalPackets, Log: log})
		return err
	})
	if err != nil {
		return nil, err
	}
	newStore := func() *session.Store {
		store := session.NewStore(u.dp, u.nh, state.changed)
		store.SetBuffers(u.buffers)
		return store
	}
	var restored session.Restored
	u.store, restored, err = restoreSessions(newStore, saved, u.pfcp, log)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.StateFile, err)
	}
	logRestore(log, cfg, restored, u.pfcp)
	// Started once the buffers are taken over.
	u.buffering = make(chan struct{})
	go func() {
		defer close(u.buffering)
		u.buffers.Run(ctx)
	}()
	state.marshal = u.store.MarshalState
	// Saved at once: the restored sessions live in new map slots.
	if err := state.start(); err != nil {
		return nil, err
	}
	u.state = state
	return u, nil
}

// close saves the state for the last time and closes what is open.
func (u *upf) close() error {
	var errs []error
	if u.state != nil {
		errs = append(errs, u.state.stop())
	}
	if u.pfcp != nil {
		errs = append(errs, u.pfcp.log.Close())
	}
	if u.buffers != nil {
		errs = append(errs, u.buffers.Close())
		if u.buffering != nil {
			<-u.buffering
		}
	}
	if u.nh != nil {
		u.nh.Close()
	}
	if u.dp != nil {
		u.dp.Close()
	}
	return errors.Join(errs...)
}

// openNetns opens the namespace the interfaces live in: a named one, or
// netns.None() for the daemon's own, which it never has to enter (entering
// a namespace takes CAP_SYS_ADMIN, which a container may not have).
func openNetns(name string) (netns.NsHandle, error) {
	if name == "" {
		return netns.None(), nil
	}
	ns, err := netns.GetFromName(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return ns, fmt.Errorf("netns: there is no network namespace %s under /run/netns", name)
	case err != nil:
		return ns, fmt.Errorf("netns: %s: %w", name, err)
	}
	return ns, nil
}

// checkInterfaces makes sure the UPF's and the classifier's interfaces
// exist before the data path is touched: a missing one would otherwise
// stop the start halfway through attaching.
func checkInterfaces(cfg *config.Config, ns netns.NsHandle) error {
	where := "the daemon's network namespace"
	if cfg.Netns != "" {
		where = "netns " + cfg.Netns
	}
	return inNetns(ns, func() error {
		exists := func(key, name string) error {
			if _, err := net.InterfaceByName(name); err != nil {
				return fmt.Errorf("%s: there is no interface %s in %s", key, name, where)
			}
			return nil
		}
		for i, in := range cfg.Interfaces {
			if err := exists(fmt.Sprintf("interfaces[%d].name", i), in.Name); err != nil {
				return err
			}
		}
		if cfg.Classify != nil {
			for i, name := range cfg.Classify.Interfaces {
				if err := exists(fmt.Sprintf("classify.interfaces[%d]", i), name); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// readState reads the state file of a previous run; nil when there is none.
func readState(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !json.Valid(data) {
		return nil, fmt.Errorf("%s is corrupt (not JSON); fix or remove it", path)
	}
	return data, nil
}

// attach attaches every configured interface with the stages it runs
// (running, in the same order), the classifier's from c (replacing a
// previous run's programs without a gap), and detaches the ones a previous
// run attached that the configuration no longer lists.
func attach(dp *upfxdp.Datapath, c *api.Classifier, ns netns.NsHandle, cfg *config.Config, running []api.InterfaceStages,
	log *slog.Logger) error {
	return inNetns(ns, func() error {
		var names []string
		for j, i := range cfg.Interfaces {
			set := running[j].StageSet
			if err := dp.AttachChain(i.Name, i.Roles, cfg.XDPMode, chainOf(set, c)); err != nil {
				return fmt.Errorf("interface %s: %w", i.Name, err)
			}
			log.Info("attached", "interface", i.Name, "mode", cfg.XDPMode, "stages", set.Stages)
			names = append(names, i.Name)
		}
		attached, err := dp.Attached()
		if err != nil {
			return err
		}
		for _, name := range attached {
			if !slices.Contains(names, name) {
				if err := dp.Detach(name); err != nil {
					return fmt.Errorf("interface %s: %w", name, err)
				}
				log.Info("detached an interface no longer configured", "interface", name)
			}
		}
		return nil
	})
}

// warnForwardingOff warns when the interfaces' namespace does not forward
// IPv4, as docs/operations.md asks it to: the kernel then drops the uplink
// packets the data path hands it for want of a resolved next hop, and so
// never resolves it, though their PDRs counted them.
func warnForwardingOff(ns netns.NsHandle, log *slog.Logger) {
	var on []byte
	err := inNetns(ns, func() (err error) {
		on, err = os.ReadFile("/proc/sys/net/ipv4/ip_forward") // the calling thread's namespace's
		return err
	})
	if err == nil && strings.TrimSpace(string(on)) == "0" {
		log.Warn("IP forwarding is off in the interfaces' namespace: the kernel drops the uplink packets whose next hop is not resolved yet, and never resolves it (sysctl -w net.ipv4.ip_forward=1)")
	}
}

// inNetns runs f on an OS thread of its own switched into ns, or on the
// caller's for netns.None(). The thread stays locked, so it ends with its
// goroutine and no other goroutine ever runs in ns.
func inNetns(ns netns.NsHandle, f func() error) error {
	if !ns.IsOpen() {
		return f()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := netns.Set(ns); err != nil {
			done <- fmt.Errorf("entering the network namespace: %w", err)
			return
		}
		done <- f()
	}()
	return <-done
}

// Detach undoes what runs leave behind: it detaches every interface with a
// pinned attachment, configured or not, and removes the pin directory. The
// maps are not opened, so this works for a pin directory of another size or
// version too. The state file stays, so the next run installs the REST
// API's sessions again. Stop the daemon first.
func Detach(cfg *config.Config) error {
	pin := cfg.Datapath.PinPath
	var st unix.Statfs_t
	if err := unix.Statfs(pin, &st); errors.Is(err, unix.ENOENT) {
		return nil // nothing attached
	} else if err != nil {
		return fmt.Errorf("datapath.pin_path %s: %w", pin, err)
	}
	// The directory is removed recursively: make sure it is ours.
	if st.Type != unix.BPF_FS_MAGIC {
		return fmt.Errorf("datapath.pin_path %s is not on a bpf filesystem; not removing it", pin)
	}
	lock, err := lockPins(pin)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := errors.Join(upfxdp.DetachAll(pin), classifyxdp.DetachAll(classifyLinks(cfg))); err != nil {
		return err
	}
	return os.RemoveAll(pin)
}
