package n4state

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// kv is a state of keys and values as the log's users keep theirs: a put
// op holds a key and its value, a gone op a key.
type kv struct {
	mu sync.Mutex
	m  map[uint64]string
}

func (s *kv) replay(kind byte, value []byte) error {
	d := NewDec(value)
	k := d.Uint()
	switch kind {
	case KindSession:
		s.m[k] = d.String()
	case KindSessionGone:
		delete(s.m, k)
	default:
		return fmt.Errorf("unknown kind %d", kind)
	}
	return d.Done()
}

// set changes a key, as its owner does: the op is put under the owner's
// lock, the entry committed and waited for after.
func (s *kv) set(l *Log, k uint64, v string) {
	t := l.Txn()
	s.mu.Lock()
	if v == "" {
		delete(s.m, k)
		t.Put(KindSessionGone, func(e *Enc) { e.Uint(k) })
	} else {
		s.m[k] = v
		t.Put(KindSession, func(e *Enc) { e.Uint(k); e.String(v) })
	}
	s.mu.Unlock()
	t.Commit()
	t.Wait()
}

// snapshot writes the whole state, some keys an entry.
func (s *kv) snapshot(l *Log) {
	s.mu.Lock()
	keys := slices.Collect(maps.Keys(s.m))
	s.mu.Unlock()
	t := l.Txn()
	n := 0
	for _, k := range keys {
		s.mu.Lock()
		if v, ok := s.m[k]; ok {
			t.Put(KindSession, func(e *Enc) { e.Uint(k); e.String(v) })
			n++
		}
		s.mu.Unlock()
		if n%7 == 0 {
			t.Commit()
			t = l.Txn()
		}
	}
	t.Commit()
	t.Wait()
}

func open(t *testing.T, dir string, compactAfter int64) (*Log, *kv, Recovered) {
	t.Helper()
	s := &kv{m: map[uint64]string{}}
	l, rec, err := Open(Options{Dir: dir, CompactAfter: compactAfter}, s.replay)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Restored {
		s.m = map[uint64]string{} // what replay gave is not to be used
	}
	l.Compact(s.snapshot)
	return l, s, rec
}

func closeLog(t *testing.T, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// What the ops said, changes and compactions through, is what a reopened
// log replays; compaction leaves the newest snapshot's file and those
// after it only.
func TestReplayAfterCompactions(t *testing.T) {
	dir := t.TempDir()
	l, s, rec := open(t, dir, 4<<10)
	if rec.Found {
		t.Fatalf("a new directory has a state: %+v", rec)
	}
	var wg sync.WaitGroup
	for w := range 4 { // owners committing at once share writes
		wg.Go(func() {
			for i := range 500 {
				k := uint64(w*1000 + i%97)
				v := ""
				if i%5 != 0 {
					v = fmt.Sprintf("%d-%d", w, i)
				}
				s.set(l, k, v)
			}
		})
	}
	wg.Wait()
	want := maps.Clone(s.m)
	closeLog(t, l)
	if n := len(l.files()); n > 2 {
		t.Errorf("%d files after compactions: the older ones stay", n)
	}

	l, s, rec = open(t, dir, 4<<10)
	defer closeLog(t, l)
	if !rec.Restored {
		t.Fatalf("not restored: %s", rec.Reason)
	}
	if !maps.Equal(s.m, want) {
		t.Errorf("replayed %d keys, want %d: %v\nwant %v", len(s.m), len(want), s.m, want)
	}
	s.set(l, 1, "after") // and the journal goes on
}

// An entry completed again once written (a deferred Complete after a
// Commit) changes nothing, though its buffer went to the entries after it.
func TestCompletingAgainChangesNothing(t *testing.T) {
	dir := t.TempDir()
	l, s, _ := open(t, dir, 0)
	first := l.Txn()
	first.Put(KindSession, func(e *Enc) { e.Uint(1); e.String("one") })
	first.Commit()
	first.Wait()
	s.set(l, 2, "two") // reuses the first entry's buffer
	if lsn := first.Complete(); lsn != first.LSN() {
		t.Errorf("completing again returned %d, not the entry's %d", lsn, first.LSN())
	}
	s.set(l, 3, "three")
	closeLog(t, l)

	l, s, rec := open(t, dir, 0)
	defer closeLog(t, l)
	if want := map[uint64]string{1: "one", 2: "two", 3: "three"}; !rec.Restored || !maps.Equal(s.m, want) {
		t.Errorf("restored %v (%s), want %v", s.m, rec.Reason, want)
	}
}

// damage writes a state of some entries, closes it, and applies f to its
// journal file and its mark.
func damage(t *testing.T, f func(journal string, size int64)) (dir string) {
	t.Helper()
	dir = t.TempDir()
	l, s, _ := open(t, dir, 0)
	for i := range 20 {
		s.set(l, uint64(i), strings.Repeat("x", 100))
	}
	closeLog(t, l)
	files := l.files()
	if len(files) != 1 {
		t.Fatalf("%d files", len(files))
	}
	st, err := os.Stat(files[0])
	if err != nil {
		t.Fatal(err)
	}
	f(files[0], st.Size())
	return dir
}

// A journal whose last write a crash cut short is restored without the
// entry it was writing, of which nobody was told; the journal goes on
// from there.
func TestTornLastWrite(t *testing.T) {
	dir := damage(t, func(journal string, size int64) {
		lowerMark(t, filepath.Dir(journal))
		if err := os.Truncate(journal, size-30); err != nil {
			t.Fatal(err)
		}
	})
	l, s, rec := open(t, dir, 0)
	if !rec.Restored || len(s.m) != 19 {
		t.Fatalf("restored %v (%s) with %d keys; want 19", rec.Restored, rec.Reason, len(s.m))
	}
	s.set(l, 100, "after")
	closeLog(t, l)
	l, s, rec = open(t, dir, 0)
	defer closeLog(t, l)
	if !rec.Restored || s.m[100] != "after" || len(s.m) != 20 {
		t.Errorf("after appending to a cut journal: restored %v (%s), %d keys", rec.Restored, rec.Reason, len(s.m))
	}
}

// lowerMark moves the mark back one entry, as a crash between a write and
// the mark's update leaves it.
func lowerMark(t *testing.T, dir string) {
	t.Helper()
	l := &Log{opts: Options{Dir: dir}}
	if err := l.openMark(); err != nil {
		t.Fatal(err)
	}
	*l.mark--
	if err := unix.Munmap(l.mmap); err != nil {
		t.Fatal(err)
	}
}

// A state that is truncated, damaged or missing is not used: the log says
// why, sets the files aside and starts empty.
func TestUnusableState(t *testing.T) {
	for _, c := range []struct {
		name, reason string
		spoil        func(t *testing.T, journal string, size int64)
	}{
		{"truncated", "was written", func(t *testing.T, journal string, size int64) {
			if err := os.Truncate(journal, size/2); err != nil {
				t.Fatal(err)
			}
		}},
		{"damaged in the middle", "checksum", func(t *testing.T, journal string, size int64) {
			b, err := os.ReadFile(journal)
			if err != nil {
				t.Fatal(err)
			}
			b[size/2] ^= 0xff
			if err := os.WriteFile(journal, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"not a state file", "header", func(t *testing.T, journal string, _ int64) {
			if err := os.WriteFile(journal, []byte("sessions: []\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"missing", "missing", func(t *testing.T, journal string, _ int64) {
			if err := os.Remove(journal); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := damage(t, func(journal string, size int64) { c.spoil(t, journal, size) })
			l, s, rec := open(t, dir, 0)
			if !rec.Found || rec.Restored || !strings.Contains(rec.Reason, c.reason) {
				t.Errorf("found %v, restored %v, reason %q; want not restored, for a reason with %q", rec.Found, rec.Restored, rec.Reason, c.reason)
			}
			s.set(l, 7, "fresh")
			closeLog(t, l)
			if aside, _ := filepath.Glob(filepath.Join(dir, "*"+asideSuffix)); c.name != "missing" && len(aside) == 0 {
				t.Error("the unusable file was not kept aside")
			}
			l, s, rec = open(t, dir, 0)
			defer closeLog(t, l)
			if !rec.Restored || len(s.m) != 1 || s.m[7] != "fresh" {
				t.Errorf("the state started afresh: restored %v (%s), %v", rec.Restored, rec.Reason, s.m)
			}
		})
	}
}

// Starts that cannot use their state, one after another, keep the files
// of the last two set aside (*.unusable and *.unusable.1) and remove the
// older ones: the directory does not grow without bound.
func TestUnusableStatesAreRotated(t *testing.T) {
	spoil := func(journal string, size int64) {
		if err := os.Truncate(journal, size/2); err != nil {
			t.Fatal(err)
		}
	}
	dir := damage(t, spoil)
	var setAside [][]string // by start, the files it set aside, as named then
	for start := range 4 {
		damaged := (&Log{opts: Options{Dir: dir}}).files()
		l, s, rec := open(t, dir, 0)
		if rec.Restored {
			t.Fatalf("start %d restored a damaged state", start)
		}
		for i := range 20 {
			s.set(l, uint64(i), strings.Repeat("y", 100))
		}
		closeLog(t, l)
		var names []string
		for _, name := range damaged {
			names = append(names, name+asideSuffix)
		}
		setAside = append(setAside, names)
		files := l.files()
		st, err := os.Stat(files[len(files)-1])
		if err != nil {
			t.Fatal(err)
		}
		spoil(files[len(files)-1], st.Size())
	}
	last, _ := filepath.Glob(filepath.Join(dir, "*"+asideSuffix))
	before, _ := filepath.Glob(filepath.Join(dir, "*"+asideSuffix+olderSuffix))
	all, _ := filepath.Glob(filepath.Join(dir, "*"+asideSuffix+"*"))
	var want []string
	for _, name := range setAside[2] {
		want = append(want, name+olderSuffix)
	}
	if !slices.Equal(last, setAside[3]) || !slices.Equal(before, want) || len(all) != len(last)+len(before) {
		t.Errorf("set aside: %v and %v, of %v; want the last start's %v and the one's before %v", last, before, all, setAside[3], want)
	}
}

// An op that its owner cannot read makes the state unusable too.
func TestReplayRefusal(t *testing.T) {
	dir := damage(t, func(string, int64) {})
	l, _, rec := func() (*Log, *kv, Recovered) {
		s := &kv{m: map[uint64]string{}}
		l, rec, err := Open(Options{Dir: dir}, func(kind byte, value []byte) error {
			if len(s.m) == 10 {
				return ErrCorrupt
			}
			return s.replay(kind, value)
		})
		if err != nil {
			t.Fatal(err)
		}
		return l, s, rec
	}()
	defer closeLog(t, l)
	if rec.Restored || !strings.Contains(rec.Reason, ErrCorrupt.Error()) {
		t.Errorf("restored %v, reason %q", rec.Restored, rec.Reason)
	}
}

// A write that fails for want of room stops the keeping and removes the
// files, whose room is free again at once: the log holds none of them
// open, which would keep the disk full while the daemon runs.
func TestFailedWriteFreesTheDisk(t *testing.T) {
	testsupport.NeedRoot(t, "mounting a file system")
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(dir, 0) })
	l, s, _ := open(t, filepath.Join(dir, "pfcp"), 0)
	for k := uint64(0); l.failure() == nil; k++ {
		if k == 1000 {
			t.Fatal("64 KiB never filled up")
		}
		s.set(l, k, strings.Repeat("x", 1000))
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Bfree != st.Blocks {
		t.Errorf("%d of %d blocks free after the state was removed; want all", st.Bfree, st.Blocks)
	}
	// The changes after hold no memory for a state no longer kept.
	for k := range uint64(100) {
		s.set(l, 2000+k, "after")
	}
	l.mu.Lock()
	queued := len(l.queue)
	l.mu.Unlock()
	if queued != 0 {
		t.Errorf("%d entries held after the keeping stopped; want none", queued)
	}
	closeLog(t, l)
}

func (l *Log) failure() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}
