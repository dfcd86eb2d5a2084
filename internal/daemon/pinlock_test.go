package daemon

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/testsupport"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// While a daemon runs, a second one with the same pin path and detach are
// refused, and change nothing: the first goes on serving with its data
// path. Once it stops, detach takes the data path away.
func TestOneDaemonPerPinPath(t *testing.T) {
	e := newEnv(t)
	first := e.config(t)
	client, stop := runDaemon(t, first)
	_, err := client.Create(context.Background(), []byte(doc))
	must(t, err)
	running := true
	defer func() {
		if running {
			stop()
		}
	}()
	e.listen = testsupport.FreeAddr(t, "tcp")
	second := e.config(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	want := "another xdp5g runs with the data path pinned at " + e.pin
	if err := Run(ctx, second, slog.New(slog.NewTextHandler(t.Output(), nil))); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a second daemon on the same pins: %v; want %q", err, want)
	}
	if err := Detach(first); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("detach while the daemon runs: %v; want %q", err, want)
	}
	if _, err := os.Stat(e.pin); err != nil {
		t.Errorf("the pins after the refusals: %v", err)
	}
	if err := client.Ready(context.Background()); err != nil {
		t.Errorf("the first daemon after the refusals: %v", err)
	}
	dp, err := upfxdp.Open(upfxdp.Options{PinPath: e.pin, MaxSessions: 1024, N3Addresses: first.N3Addresses})
	must(t, err)
	defer dp.Close()
	e.sendDownlink(t, dp)

	running = false
	must(t, stop())
	must(t, Detach(first))
	if _, err := os.Stat(e.pin); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the pins after detach: %v; want them gone", err)
	}
}

// A start that fails before it is ready (its interface runs another data
// path's program) leaves no pins behind where it pinned afresh, and the
// running data path as it was.
func TestFailedStartLeavesNoNewPins(t *testing.T) {
	e := newEnv(t)
	first := e.config(t)
	client, stop := runDaemon(t, first)
	defer func() { must(t, stop()) }()
	e.pin, e.dir = testsupport.PinDir(t), t.TempDir()
	e.listen = testsupport.FreeAddr(t, "tcp")
	second := e.config(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := Run(ctx, second, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err == nil {
		t.Fatal("a second data path started on the first one's interface")
	}
	if !strings.Contains(err.Error(), "runs another XDP program") {
		t.Errorf("the failed start says %q; want that the interface runs another XDP program", err)
	}
	if _, err := os.Stat(e.pin); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the pins of the failed start: %v; want them gone", err)
	}
	if err := client.Ready(context.Background()); err != nil {
		t.Errorf("the first daemon after the failed start: %v", err)
	}
	dp, err := upfxdp.Open(upfxdp.Options{PinPath: first.Datapath.PinPath, MaxSessions: 1024, N3Addresses: first.N3Addresses})
	must(t, err)
	defer dp.Close()
	_, err = client.Create(context.Background(), []byte(doc))
	must(t, err)
	e.sendDownlink(t, dp)
}

// A pin path on no bpf filesystem can hold no pins, ephemeral or not: the
// start is refused with what to do, not with advice to set ephemeral.
func TestPinPathOffBPFFS(t *testing.T) {
	for _, ephemeral := range []bool{false, true} {
		d := config.Datapath{PinPath: filepath.Join(t.TempDir(), "xdp5g"), Ephemeral: ephemeral}
		_, err := checkPins(d, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), "datapath.pin_path") || !strings.Contains(err.Error(), "mount -t bpf") ||
			strings.Contains(err.Error(), "ephemeral") {
			t.Errorf("ephemeral %t: %v; want a refusal that says to put the pins on a bpf filesystem", ephemeral, err)
		}
	}
}
