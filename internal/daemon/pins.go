package daemon

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/fielderr"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// pinScope is what becomes of the XDP programs of the UPF and the
// classifier when the daemon stops.
type pinScope int

const (
	pinsStay    pinScope = iota // on a bpffs that outlives the daemon
	pinsDie                     // on a bpffs private to its mount namespace
	pinsUnknown                 // could not be told
)

// stopMessage is what the daemon logs as it stops, true in each case.
func (p pinScope) stopMessage() string {
	switch p {
	case pinsDie:
		return "stopped; the XDP programs of the UPF and the classifier are detached with the process (datapath.ephemeral: their bpf filesystem is private to its mount namespace)"
	case pinsUnknown:
		return "stopped; the XDP programs of the UPF and the classifier stay attached only if the bpf filesystem of datapath.pin_path outlives the process"
	}
	return "stopped; the XDP programs of the UPF and the classifier stay attached"
}

// checkPins refuses a pin path whose pins would die with the daemon (a
// bpffs private to its mount namespace, as under `ip netns exec`) unless
// datapath.ephemeral allows it, and says how to run the daemon instead.
func checkPins(d config.Datapath, log *slog.Logger) (pinScope, error) {
	outlive, why, err := upfxdp.PinsOutlive(d.PinPath)
	switch {
	case err == nil && outlive:
		return pinsStay, nil
	case errors.Is(err, upfxdp.ErrNotBPFFS):
		return 0, fielderr.New("datapath.pin_path", "%v, which pins need: put it below /sys/fs/bpf, "+
			"or mount one there first (mount -t bpf bpf %s)", err, filepath.Dir(d.PinPath))
	case err != nil && !d.Ephemeral:
		return 0, fielderr.New("datapath.pin_path", "cannot tell whether the data path would outlive the daemon (%v); "+
			"set datapath.ephemeral: true to let it stop with the daemon", err)
	case err != nil:
		log.Warn("cannot tell whether the data path outlives the daemon", "pin_path", d.PinPath, "err", err)
		return pinsUnknown, nil
	case !d.Ephemeral:
		return 0, fielderr.New("datapath.pin_path", "%s, so the data path would stop with the daemon. "+
			"To keep it, run the daemon in the host's mount namespace and name the interfaces' namespace in the netns setting "+
			"rather than running it under `ip netns exec`; or put the pin path on a bpf filesystem the host mounted "+
			"(such as `mount -t bpf bpf /run/xdp5g/bpf` in the host's mount namespace, and pin_path: /run/xdp5g/bpf/xdp5g; "+
			"in a container, the host's /sys/fs/bpf mounted into it); or set datapath.ephemeral: true to let it stop with the daemon", why)
	}
	log.Warn("the data path stops with the daemon (datapath.ephemeral)", "pin_path", d.PinPath, "why", why)
	return pinsDie, nil
}

// lockPins holds the pin path while the daemon runs (or detach removes
// it): a second daemon, or detach, on the same pins is refused until then,
// rather than taking the data path from under the first.
func lockPins(pinPath string) (*os.File, error) {
	lock, err := upfxdp.LockPins(pinPath)
	if errors.Is(err, upfxdp.ErrPinsInUse) {
		return nil, fielderr.New("datapath.pin_path", "another xdp5g runs with the data path pinned at %s: stop it first", pinPath)
	}
	if err != nil {
		return nil, fielderr.New("datapath.pin_path", "%v", err)
	}
	return lock, nil
}
