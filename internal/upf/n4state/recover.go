package n4state

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
)

// Recovered is what Open found of a previous run's state.
type Recovered struct {
	// Found: there was a state. Restored: it was read whole and every op
	// of it replayed; otherwise Reason says why it could not be used, and
	// its files are set aside (renamed *.unusable) for a look, until the
	// restart after the next that cannot use its state (rotateAside).
	Found, Restored bool
	Reason          string
	Entries         int
	Bytes           int64
}

// Open reads the state a previous run left in opts.Dir, giving replay each
// of its ops in order (value is valid during the call only), and opens the
// journal for what follows. A state that cannot be used whole (damaged, or
// shorter than what was written, or one replay refuses) is set aside and
// the log starts empty: Recovered says so. The error is for a directory
// that cannot be used at all.
func Open(opts Options, replay func(kind byte, value []byte) error) (*Log, Recovered, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, Recovered{}, err
	}
	l := &Log{opts: opts, next: 1}
	l.cond.L = &l.mu
	if err := l.openMark(); err != nil {
		return nil, Recovered{}, err
	}
	names := l.files()
	mark := atomic.LoadUint64(l.mark)
	var rec Recovered
	if len(names) == 0 && mark == 0 {
		return l, rec, l.start(1)
	}
	rec.Found = true
	chain, err := l.scan(names, mark)
	if err == nil {
		err = l.replay(chain, replay, &rec)
	}
	if err == nil {
		if err := l.resume(chain); err != nil {
			return nil, rec, err
		}
		rec.Restored = true
		return l, rec, nil
	}
	rec.Reason = err.Error()
	next := uint64(1)
	if len(names) > 0 {
		next = genOf(names[len(names)-1]) + 1
	}
	return l, rec, l.restart(next)
}

// Discard sets the state Open restored aside and starts the log empty,
// for a state that could not be used after all; call it before anything
// is written.
func (l *Log) Discard() error {
	if l == nil {
		return nil
	}
	if err := l.file.Close(); err != nil {
		return err
	}
	l.file = nil
	return l.restart(l.gen + 1)
}

// restart sets the files aside and starts the log empty in generation gen.
func (l *Log) restart(gen uint64) error {
	l.removed()
	if err := l.rotateAside(); err != nil {
		return err
	}
	for _, name := range l.files() {
		if err := os.Rename(name, name+asideSuffix); err != nil {
			return err
		}
	}
	atomic.StoreUint64(l.mark, 0)
	l.next, l.written = 1, 0
	return l.start(gen)
}

// rotateAside makes room for files to set aside, as logrotate does: those
// the previous restart set aside become *.unusable.1, and those of the one
// before are removed. A start that cannot use its state, again and again,
// fills no disk: it keeps the last two such states, for a look.
func (l *Log) rotateAside() error {
	aside := filepath.Join(l.opts.Dir, "*"+asideSuffix)
	older, _ := filepath.Glob(aside + olderSuffix)
	for _, name := range older {
		if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	last, _ := filepath.Glob(aside)
	for _, name := range last {
		if err := os.Rename(name, name+olderSuffix); err != nil {
			return err
		}
	}
	return nil
}

// start writes the first file, generation gen, with an empty snapshot.
func (l *Log) start(gen uint64) error {
	l.gen = gen - 1
	t := l.Txn()
	t.Put(kindSnapshot, nil)
	t.Put(kindSnapshotDone, nil)
	t.e.snapshot, t.e.complete = true, true
	t.Commit()
	t.Wait()
	return l.failed
}

// file is a journal file as scan found it.
type file struct {
	name       string
	good       int64  // its length up to the end of its last whole frame
	first      uint64 // the LSN of its first entry, 0 for none
	last       uint64
	complete   bool // it holds a complete snapshot
	tornReason error
}

// scan checks the files and returns those to replay: the newest one with
// a complete snapshot, and those after it. Only the last file may end in
// a frame cut short, and only after every entry up to mark.
func (l *Log) scan(names []string, mark uint64) ([]file, error) {
	var files []file
	for i, name := range names {
		f := file{name: name}
		err := eachFrame(name, func(_ int64, lsn uint64, ops []byte) error {
			if f.first == 0 {
				f.first = lsn
			}
			f.last = lsn
			return eachOp(ops, func(kind byte, _ []byte) error {
				if kind == kindSnapshotDone {
					f.complete = true
				}
				return nil
			})
		}, &f.good)
		var torn *tornError
		switch {
		case errors.As(err, &torn) && i == len(names)-1:
			f.tornReason = err
		case err != nil:
			return nil, err
		}
		files = append(files, f)
	}
	from := len(files) - 1
	for from >= 0 && !files[from].complete {
		from--
	}
	if from < 0 {
		reason := "its files are missing"
		if len(files) > 0 && files[len(files)-1].tornReason != nil {
			reason = files[len(files)-1].tornReason.Error()
		}
		return nil, fmt.Errorf("no complete snapshot of the state: %s", reason)
	}
	chain := files[from:]
	var last uint64
	for _, f := range chain {
		if f.first == 0 {
			continue // a file started as the process died
		}
		if last != 0 && f.first != last+1 {
			return nil, fmt.Errorf("%s starts at entry %d, after entry %d: entries are missing", f.name, f.first, last)
		}
		last = f.last
	}
	if last < mark {
		reason := "the state was truncated or damaged"
		if f := chain[len(chain)-1]; f.tornReason != nil {
			reason = f.tornReason.Error()
		}
		return nil, fmt.Errorf("the state ends at entry %d, but entry %d was written: %s", last, mark, reason)
	}
	return chain, nil
}

func (l *Log) replay(chain []file, replay func(byte, []byte) error, rec *Recovered) error {
	for _, f := range chain {
		var good int64
		err := eachFrame(f.name, func(_ int64, lsn uint64, ops []byte) error {
			rec.Entries++
			rec.Bytes += int64(frameHeader + len(ops))
			return eachOp(ops, func(kind byte, value []byte) error {
				if kind < KindRecovery || replay == nil {
					return nil
				}
				if err := replay(kind, value); err != nil {
					return fmt.Errorf("entry %d of %s: op of kind %d: %w", lsn, f.name, kind, err)
				}
				return nil
			})
		}, &good)
		var torn *tornError
		if err != nil && !errors.As(err, &torn) {
			return err
		}
	}
	return nil
}

// resume removes the files before the chain, cuts the last one's frame cut
// short off, and appends to it from now on.
func (l *Log) resume(chain []file) error {
	for _, name := range l.files() {
		if genOf(name) < genOf(chain[0].name) {
			if err := os.Remove(name); err != nil {
				return err
			}
		}
	}
	last := chain[len(chain)-1]
	f, err := os.OpenFile(last.name, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(last.good)
	if err == nil && last.good == 0 { // created as the process died
		_, err = f.WriteString(magic)
	}
	if err != nil {
		f.Close()
		return err
	}
	l.file, l.gen = f, genOf(last.name)
	for _, f := range slices.Backward(chain) {
		if f.last != 0 {
			l.next, l.written = f.last+1, f.last
			break
		}
	}
	atomic.StoreUint64(l.mark, l.written)
	for _, f := range chain {
		l.snapshotBytes += f.good
	}
	return nil
}

// tornError is a frame cut short or damaged: the end of the last file, if
// a crash cut its last write short.
type tornError struct {
	name string
	at   int64
	why  string
}

func (e *tornError) Error() string {
	return fmt.Sprintf("%s is damaged at offset %d: %s", e.name, e.at, e.why)
}

// eachFrame calls f with each frame of a file: its offset, its entry's
// LSN and its ops; good is set to where the last whole frame ends. A frame
// that cannot be read whole is a *tornError.
func eachFrame(name string, f func(at int64, lsn uint64, ops []byte) error, good *int64) error {
	in, err := os.Open(name)
	if err != nil {
		return err
	}
	defer in.Close()
	r := bufio.NewReaderSize(in, 1<<20)
	head := make([]byte, len(magic))
	if _, err := io.ReadFull(r, head); err != nil || string(head) != magic {
		return &tornError{name, 0, "no PFCP state header"}
	}
	at := int64(len(magic))
	*good = at
	var body []byte
	for {
		var hdr [frameHeader]byte
		if _, err := io.ReadFull(r, hdr[:]); err == io.EOF {
			return nil
		} else if err != nil {
			return &tornError{name, at, "frame header cut short"}
		}
		n := binary.LittleEndian.Uint32(hdr[:])
		if n > maxEntry {
			return &tornError{name, at, fmt.Sprintf("frame of %d octets", n)}
		}
		body = slices.Grow(body[:0], int(n))[:n]
		if _, err := io.ReadFull(r, body); err != nil {
			return &tornError{name, at, "frame cut short"}
		}
		if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(hdr[4:]) {
			return &tornError{name, at, "checksum mismatch"}
		}
		lsn, k := binary.Uvarint(body)
		if k <= 0 || lsn == 0 {
			return &tornError{name, at, "no entry number"}
		}
		if err := checkOps(body[k:]); err != nil {
			return &tornError{name, at, err.Error()}
		}
		if err := f(at, lsn, body[k:]); err != nil {
			return err
		}
		at += frameHeader + int64(n)
		*good = at
	}
}

func checkOps(ops []byte) error {
	return eachOp(ops, func(byte, []byte) error { return nil })
}

// eachOp calls f with each op of an entry.
func eachOp(ops []byte, f func(kind byte, value []byte) error) error {
	for len(ops) > 0 {
		if len(ops) < opHeader {
			return errors.New("op header cut short")
		}
		n := binary.LittleEndian.Uint32(ops[1:])
		if uint64(n) > uint64(len(ops)-opHeader) {
			return errors.New("op value cut short")
		}
		if err := f(ops[0], ops[opHeader:opHeader+n]); err != nil {
			return err
		}
		ops = ops[opHeader+n:]
	}
	return nil
}
