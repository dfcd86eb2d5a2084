package daemon

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdp5g/xdp5g/internal/config"
)

func TestStateFileSavesABurstOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.json")
	var saves atomic.Int32
	f := &stateFile{path: path, log: slog.New(slog.DiscardHandler), marshal: func() ([]byte, error) {
		return []byte(strconv.Itoa(int(saves.Add(1)))), nil
	}}
	f.changed() // before start: the restore's own changes are not saved
	must(t, f.start())
	for range 100 {
		f.changed()
	}
	// The save is written and synced after saveDelay: late on a busy host.
	eventually(t, "the burst saved", func() bool {
		data, err := os.ReadFile(path)
		return err == nil && string(data) != "1"
	})
	time.Sleep(2 * saveDelay) // for any save scheduled besides
	if n := saves.Load(); n != 2 {
		t.Errorf("%d saves for start and a burst, want 2", n)
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != "2" {
		t.Errorf("file holds %q, %v; want the second save", data, err)
	}

	f.changed()
	must(t, f.stop()) // saves at once and cancels the scheduled save
	time.Sleep(2 * saveDelay)
	if n := saves.Load(); n != 3 {
		t.Errorf("%d saves after stop, want 3", n)
	}
	f.changed()
	time.Sleep(2 * saveDelay)
	if n := saves.Load(); n != 3 {
		t.Errorf("a change after stop was saved")
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temporary file left behind: %v", err)
	}
}

func TestStateFileWriteErrorNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing-dir", "sessions.json")
	f := &stateFile{path: path, marshal: func() ([]byte, error) { return []byte("{}"), nil }}
	if err := f.start(); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("start = %v, want an error naming %s", err, path)
	}
}

// A run that stopped before it served PFCP (its start failed at attaching
// the data path, say) left a state without a Recovery Time Stamp and
// nothing else: the next start is a clean one, without a warning that a
// state was not restored, and sets no files aside.
func TestPFCPStateOfARunThatNeverServed(t *testing.T) {
	p := &config.PFCP{StateDir: t.TempDir()}
	log := slog.New(slog.DiscardHandler)
	first, err := openPFCPState(p, log)
	must(t, err)
	must(t, first.log.Close())
	second, err := openPFCPState(p, log)
	must(t, err)
	defer second.log.Close()
	if second.discarded != "" || second.restored() {
		t.Errorf("discarded %q, restored %t: want a clean start", second.discarded, second.restored())
	}
	aside, _ := filepath.Glob(filepath.Join(p.StateDir, "*.unusable"))
	if len(aside) > 0 {
		t.Errorf("files set aside: %v", aside)
	}
}
