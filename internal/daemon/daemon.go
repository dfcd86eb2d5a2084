// Package daemon runs the UPF: it attaches the data path, keeps the
// sessions across restarts and serves the REST API and, when configured,
// PFCP (N4).
package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/buffer"
	"github.com/xdp5g/xdp5g/internal/classify"
	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/datapath"
	"github.com/xdp5g/xdp5g/internal/nexthop"
	"github.com/xdp5g/xdp5g/internal/session"
)

// shutdownTimeout bounds how long requests in flight may take at shutdown.
const shutdownTimeout = 5 * time.Second

// Run attaches the data path to the configured interfaces, takes over the
// sessions of the state file (dropping the SMFs', see session.Restore) and
// serves the REST API, and PFCP if cfg has a pfcp section, until ctx is
// done. With a classify section it runs the classifier too, with the rules
// of its rules file.
// On return the XDP programs stay attached and the maps pinned, so traffic
// keeps flowing until the next run takes over; Detach removes them. cfg is
// valid, as config.Load returns it.
func Run(ctx context.Context, cfg *config.Config, log *slog.Logger) (err error) {
	started := time.Now()
	// Fail on a busy port before touching the data path.
	ln, err := net.Listen("tcp", cfg.API.Listen)
	if err != nil {
		return fmt.Errorf("api.listen: %w", err)
	}
	defer ln.Close()
	if cfg.PFCP != nil {
		if err := checkPFCPListen(cfg.PFCP.Listen); err != nil {
			return err
		}
	}
	// Read before touching the data path, so a bad file stops the start
	// with the running data path untouched.
	saved, err := readState(cfg.StateFile)
	if err != nil {
		return err
	}
	var savedRules []byte
	if cfg.Classify != nil {
		if savedRules, err = readState(cfg.Classify.RulesFile); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(cfg.StateFile), 0o755); err != nil {
		return fmt.Errorf("state_file: %w", err)
	}
	ns, err := openNetns(cfg.Netns)
	if err != nil {
		return err
	}
	defer ns.Close()

	dp, err := datapath.Open(datapath.Options{
		PinPath: cfg.Datapath.PinPath, MaxSessions: cfg.Datapath.MaxSessions, N3Addresses: cfg.N3Addresses,
	})
	if err != nil {
		return err
	}
	defer dp.Close()
	nh, err := nexthop.New(dp, ns, cfg.CoreInterfaces())
	if err != nil {
		return fmt.Errorf("starting the next-hop resolver: %w", err)
	}
	defer nh.Close()

	state := &stateFile{path: cfg.StateFile, log: log}
	store := session.NewStore(dp, nh, cfg.N3Addresses[0], state.changed)
	// In the interfaces' namespace: its raw socket sends released packets.
	var buffers *buffer.Manager
	err = inNetns(ns, func() (err error) {
		buffers, err = buffer.New(dp, buffer.Config{
			SessionPackets: cfg.Buffering.SessionPackets, TotalPackets: cfg.Buffering.TotalPackets, Log: log})
		return err
	})
	if err != nil {
		return err
	}
	buffering := make(chan struct{})
	go func() {
		defer close(buffering)
		buffers.Run(ctx)
	}()
	defer func() {
		err = errors.Join(err, buffers.Close())
		<-buffering
	}()
	store.SetBuffers(buffers)
	state.marshal = store.MarshalState
	var dropped int
	if saved != nil {
		if dropped, err = store.Restore(saved); err != nil {
			return fmt.Errorf("%s: %w", cfg.StateFile, err)
		}
	}
	// The SMFs set their sessions up again once they see the new Recovery
	// Time Stamp.
	log.Info("sessions restored", "sessions", store.Len(), "pfcp_sessions_dropped", dropped, "state_file", cfg.StateFile)
	// Saved at once: the restored sessions live in new map slots.
	if err := state.start(); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, state.stop()) }()

	var classifier *api.Classifier
	if cfg.Classify != nil {
		var stopClassifier func() error
		if classifier, stopClassifier, err = openClassifier(ctx, cfg, savedRules, ns, log); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, stopClassifier()) }()
	}
	if err := attach(dp, ns, cfg, log); err != nil {
		return err
	}
	if err := attachClassifier(classifier, ns, cfg, log); err != nil {
		return err
	}

	var n4Interface *api.PFCP
	if cfg.PFCP != nil {
		var stopPFCP func() error
		if n4Interface, stopPFCP, err = servePFCP(cfg, store, dp, buffers, ns, started, log); err != nil {
			return err
		}
		// Deferred last, so stopped first: no session request reaches the
		// store after its last save.
		defer func() { err = errors.Join(err, stopPFCP()) }()
	}

	srv := &http.Server{Handler: api.NewHandler(api.Services{Store: store, Datapath: dp, PFCP: n4Interface, Classifier: classifier, Log: log}), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("serving the REST API", "listen", ln.Addr().String())
	select {
	case <-ctx.Done():
	case err = <-served:
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err = errors.Join(err, srv.Shutdown(stopCtx))
	log.Info("stopped; the XDP programs stay attached")
	return err
}

// openNetns opens the namespace the interfaces live in: a named one, or
// the daemon's own.
func openNetns(name string) (netns.NsHandle, error) {
	if name == "" {
		return netns.Get()
	}
	ns, err := netns.GetFromName(name)
	if err != nil {
		return ns, fmt.Errorf("netns %s: %w", name, err)
	}
	return ns, nil
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

// attach attaches every configured interface (replacing a previous run's
// program without a gap) and detaches the ones a previous run attached that
// the configuration no longer lists.
func attach(dp *datapath.Datapath, ns netns.NsHandle, cfg *config.Config, log *slog.Logger) error {
	return inNetns(ns, func() error {
		var names []string
		for _, i := range cfg.Interfaces {
			if err := dp.Attach(i.Name, i.Roles, cfg.XDPMode); err != nil {
				return fmt.Errorf("interface %s: %w", i.Name, err)
			}
			log.Info("attached", "interface", i.Name, "mode", cfg.XDPMode)
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

// inNetns runs f on an OS thread of its own switched into ns. The thread
// stays locked, so it ends with its goroutine and no other goroutine ever
// runs in ns.
func inNetns(ns netns.NsHandle, f func() error) error {
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
	if err := errors.Join(datapath.DetachAll(pin), classify.DetachAll(classifyLinks(cfg))); err != nil {
		return err
	}
	return os.RemoveAll(pin)
}
