package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netns"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/ran/cuup"
	"github.com/xdp5g/xdp5g/internal/ran/cuupxdp"
)

// cuupRun is the CU-UP the daemon serves.
type cuupRun struct {
	c *cuup.CUUP
	// classifier is the XDP classifier of the AF_XDP path, nil on the
	// socket path.
	classifier *cuupxdp.Datapath
	xdp        *cuup.XDP
	sockets    *cuup.Sockets
	cancel     context.CancelFunc
	serving    sync.WaitGroup
	// failed is closed when a path stops serving before stop; errs are
	// what the paths' Serve returned.
	failed     chan struct{}
	failedOnce sync.Once
	mu         sync.Mutex
	errs       []error
}

// startCUUP builds the CU-UP, opens its paths in the interfaces' namespace
// and serves them until stop. On the AF_XDP path the socket path runs too:
// it answers GTP-U echoes and carries what the classifier leaves to the
// kernel. Nothing stays attached when it fails or once stopped: the
// classifier's links are not pinned, as its sockets die with the process.
//
// Bearer contexts live in memory only, not in a state file: a restarted
// CU-UP has none, and the CU-CP, seeing the E1 interface set up again
// (gNB-CU-UP E1 Setup, TS 38.463 §8.2.3), establishes them anew, with new
// tunnels.
func startCUUP(cfg *config.Config, ns netns.NsHandle, log *slog.Logger) (_ *cuupRun, err error) {
	cc := cfg.CUUP
	if err := inNetns(ns, func() error { return checkCUUPInterfaces(cc) }); err != nil {
		return nil, err
	}
	r := &cuupRun{}
	defer func() {
		if err != nil {
			err = errors.Join(err, r.close())
		}
	}()
	var tunnels cuup.Tunnels
	if cc.IO == config.CUUPAFXDP {
		if r.classifier, err = cuupxdp.Open(cuupxdp.Config{}); err != nil {
			return nil, err
		}
		tunnels = r.classifier
	}
	if r.c, err = cuup.New(cuup.Config{N3: cc.N3.Address, F1U: cc.F1U.Address, Tunnels: tunnels,
		CryptoWorkers: cc.CryptoWorkers, Placement: cc.CryptoPlacement}); err != nil {
		return nil, err
	}
	err = inNetns(ns, func() (err error) {
		if r.classifier != nil {
			r.xdp, err = r.c.OpenXDP(r.classifier, cuup.XDPConfig{N3: cc.N3.Interface, F1U: cc.F1U.Interface,
				Mode: cfg.XDPMode, Queues: cc.Queues, Frames: cc.Frames, BusyPoll: cc.BusyPoll})
			if err != nil {
				return err
			}
		}
		r.sockets, err = r.c.OpenSockets()
		return err
	})
	if err != nil {
		return nil, err
	}
	var ctx context.Context
	ctx, r.cancel = context.WithCancel(context.Background())
	r.failed = make(chan struct{})
	paths := []func(context.Context) error{r.sockets.Serve}
	if r.xdp != nil {
		paths = append(paths, r.xdp.Serve)
	}
	for _, serve := range paths {
		r.serving.Go(func() {
			err := serve(ctx)
			if ctx.Err() == nil { // not stopped: failed
				r.failedOnce.Do(func() { close(r.failed) })
			}
			r.mu.Lock()
			r.errs = append(r.errs, err)
			r.mu.Unlock()
		})
	}
	log.Info("serving the CU-UP", "io", cc.IO, "n3", cc.N3.Address, "n3_interface", cc.N3.Interface,
		"f1u", cc.F1U.Address, "f1u_interface", cc.F1U.Interface, "queues", cc.Queues, "mode", cfg.XDPMode)
	return r, nil
}

// checkCUUPInterfaces checks, in the calling thread's namespace, that each
// interface exists and holds the CU-UP's address of its role, so that a
// wrong configuration stops the start with an error naming its key rather
// than a bind or attach error.
func checkCUUPInterfaces(cc *config.CUUP) error {
	for _, side := range []struct {
		key   string
		iface config.CUUPInterface
	}{{"cuup.n3", cc.N3}, {"cuup.f1u", cc.F1U}} {
		ifi, err := net.InterfaceByName(side.iface.Interface)
		if err != nil {
			return fmt.Errorf("%s.interface %s: %w", side.key, side.iface.Interface, err)
		}
		addrs, err := ifi.Addrs()
		if err != nil {
			return fmt.Errorf("%s.interface %s: %w", side.key, ifi.Name, err)
		}
		held := false
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr() == side.iface.Address {
				held = true
			}
		}
		if !held {
			return fmt.Errorf("%s.address %v is not an address of interface %s", side.key, side.iface.Address, ifi.Name)
		}
	}
	return nil
}

// services gives the API the CU-UP and, on the AF_XDP path, its
// classifier, and their collectors to reg.
func (r *cuupRun) services(sv *api.Services, reg prometheus.Registerer) {
	sv.CUUP = r.c
	reg.MustRegister(r.c.Metrics())
	if r.classifier != nil {
		sv.CUUPClassifier = r.classifier
		reg.MustRegister(r.classifier.Metrics())
	}
}

// stop ends serving, then closes the paths: the classifier leaves the
// interfaces. It returns why a path failed, if one did.
func (r *cuupRun) stop() error {
	r.cancel()
	r.serving.Wait()
	return errors.Join(append(r.errs, r.close())...)
}

// close closes what is open.
func (r *cuupRun) close() error {
	var errs []error
	if r.sockets != nil {
		errs = append(errs, r.sockets.Close())
	}
	if r.xdp != nil {
		errs = append(errs, r.xdp.Close())
	}
	if r.classifier != nil {
		errs = append(errs, r.classifier.Close())
	}
	if r.c != nil {
		r.c.Close() // its crypto pool, once no worker runs
	}
	return errors.Join(errs...)
}
