package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// saveDelay is how long a change waits to be saved, so that a burst of
// changes costs one write.
const saveDelay = 200 * time.Millisecond

// stateFile keeps a state file (the sessions', the rules') in step with
// what it saves between start and stop.
type stateFile struct {
	path    string
	marshal func() ([]byte, error) // Store.MarshalState, Classifier.MarshalRules
	log     *slog.Logger

	saving sync.Mutex // held while saving; taken before mu
	// mu guards what follows and is never held while calling out: the
	// store calls changed with its own lock held.
	mu    sync.Mutex
	timer *time.Timer // a save is scheduled
	live  bool
}

// changed schedules a save; the store and the classifier call it after
// every change.
func (f *stateFile) changed() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.live && f.timer == nil {
		f.timer = time.AfterFunc(saveDelay, f.scheduledSave)
	}
}

func (f *stateFile) scheduledSave() {
	f.saving.Lock()
	defer f.saving.Unlock()
	f.mu.Lock()
	live := f.live
	f.timer = nil
	f.mu.Unlock()
	if !live {
		return // stop saved
	}
	if err := f.save(); err != nil {
		f.log.Error("saving the state", "err", err)
	}
}

// start saves the store now and after every change from now on.
func (f *stateFile) start() error {
	f.saving.Lock()
	defer f.saving.Unlock()
	f.mu.Lock()
	f.live = true
	f.mu.Unlock()
	return f.save()
}

// stop cancels a scheduled save and saves now, for the last time.
func (f *stateFile) stop() error {
	f.saving.Lock()
	defer f.saving.Unlock()
	f.mu.Lock()
	f.live = false
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
	f.mu.Unlock()
	return f.save()
}

// save replaces the file atomically: a crash leaves the old state or the
// new one.
func (f *stateFile) save() error {
	data, err := f.marshal()
	if err != nil {
		return err
	}
	tmp := f.path + ".tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = out.Write(data)
	if err = errors.Join(err, out.Sync(), out.Close()); err == nil {
		err = os.Rename(tmp, f.path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("saving %s: %w", f.path, err)
	}
	return nil
}
