// Package n4state keeps the UPF's PFCP state on disk, so that a daemon
// stopped or killed at any instant restarts into the state it had.
//
// The state is a journal of entries. An entry is an atomic group of ops,
// each a kind and a value that the state's owners encode (the pfcp and n4
// packages): "the session with this UP SEID is now this", "that
// association is gone". Entries are numbered (their LSN) in the order they
// are reserved, which their owners do under the lock that orders their
// changes, and written in that order, each with one write(2) — or several
// with one, when several are complete at once (group commit). What an
// entry records is answered or reported only once the entry is written
// (Txn.Wait): the page cache keeps it through a killed process, and with
// Options.Sync the disk through a power loss.
//
// The journal would grow without bound, so from time to time it starts a
// new file with a snapshot of the whole state (compaction): the owners
// write their part again, entry by entry, while the journal goes on; once
// the snapshot is complete the older files go. Reading the state back is
// replaying the ops of the newest complete snapshot's file and those after
// it, in order: the last op about a thing says what it is.
//
// A file holds a header, then frames: a 4-octet length and a CRC-32C of
// the body, then the body: the entry's LSN (a varint), then its ops, each
// a kind octet, a 4-octet length and the value. A small file, mmapped,
// holds the LSN of the last entry written, so that a journal that ends
// before it (truncated, or damaged) is told apart from one whose last
// write a crash cut short, whose unfinished entry nobody was told of.
package n4state

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kinds of ops. The package's own mark snapshots; the others are its
// users', listed here so that no two of them take the same number.
const (
	kindSnapshot     byte = 1 // a file's first entry: a snapshot of the state begins
	kindSnapshotDone byte = 2 // the snapshot is complete

	KindRecovery        byte = 16 // the UPF's Recovery Time Stamp (pfcp)
	KindAssociation     byte = 17 // an association, by Node ID (pfcp)
	KindAssociationGone byte = 18
	KindResponse        byte = 19 // the response to a request that changed the state (pfcp)
	KindSession         byte = 20 // a session, by UP SEID (n4)
	KindSessionGone     byte = 21
	KindReport          byte = 22 // a Session Report Request not answered yet (n4)
	KindReportDone      byte = 23
)

// DefaultCompactAfter is Options.CompactAfter when unset.
const DefaultCompactAfter = 64 << 20

const (
	magic       = "xdp5g PFCP st\x00\x00\x02" // the format's name and version
	frameHeader = 8
	opHeader    = 5
	maxEntry    = 256 << 20 // a snapshot's entries are far smaller
	iovMax      = 1024
	// Entries written give their buffers to those reserved next, up to
	// maxSpare of them of spareSize octets at most: a request's entry
	// then allocates nothing.
	spareSize   = 4096
	maxSpare    = 1024
	markName    = "written"
	filePrefix  = "journal-"
	fileSuffix  = ".log"
	asideSuffix = ".unusable"
	olderSuffix = ".1" // after asideSuffix: set aside by the restart before
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Options set up a Log.
type Options struct {
	Dir string
	// Sync flushes every write to the disk (fdatasync) before what it
	// records is answered, so that the state survives a power loss too;
	// without, it survives the process only (the page cache keeps it).
	Sync bool
	// CompactAfter is how much the journal may grow past its last
	// snapshot before a new one is written: this, or the snapshot's own
	// size if larger. 0: DefaultCompactAfter.
	CompactAfter int64
	Log          *slog.Logger
}

// Log is the journal of a state. A nil *Log keeps nothing: its methods do
// nothing, and its Txns are nil.
type Log struct {
	opts Options

	mu       sync.Mutex
	cond     sync.Cond // written or failed changed
	next     uint64    // LSN of the next entry reserved
	queue    []*entry  // reserved and not written, in LSN order
	flushing bool      // a goroutine writes the queue's complete entries
	written  uint64
	failed   error
	spare    [][]byte // buffers of entries written, for the next ones
	current  *Txn     // of the request the PFCP server serves
	closed   bool
	// Compaction: its parts, whether one runs; the bytes of entries
	// written, where the last snapshot began and ended, and its size.
	parts                        []func(*Log)
	compacting                   bool
	compacted                    sync.WaitGroup
	removing                     sync.Mutex // while the files before a snapshot go
	total                        int64
	snapshotBegan, snapshotEnded int64
	snapshotBytes                int64

	// The flusher's, and Open's and Close's.
	file *os.File
	gen  uint64
	mark *uint64 // mmapped: the LSN of the last entry written
	mmap []byte
}

// entry is a frame being filled: the header, the LSN, then ops.
type entry struct {
	lsn      uint64
	buf      []byte
	done     bool
	snapshot bool // starts a new file
	complete bool // completes the snapshot of its file
}

// Txn gathers ops into one entry, which it reserves with its first op.
// A nil *Txn does nothing.
type Txn struct {
	log      *Log
	e        *entry
	size     int  // of its ops, if known
	complete bool // its entry's buffer may be another's once written
}

// Txn starts a transaction.
func (l *Log) Txn() *Txn { return l.SizedTxn(0) }

// SizedTxn starts a transaction whose ops take size octets, values and
// their headers (OpSize), so that its entry is allocated once.
func (l *Log) SizedTxn(size int) *Txn {
	if l == nil {
		return nil
	}
	return &Txn{log: l, size: size}
}

// OpSize is what an op whose value takes n octets adds to an entry.
func OpSize(n int) int { return opHeader + n }

// Begin starts the transaction of a PFCP request, which Request returns
// until End: the PFCP server brackets its handler's calls with them, so
// that what the handler changes goes in the entry of the response.
func (l *Log) Begin() *Txn {
	t := l.Txn()
	if l != nil {
		l.mu.Lock()
		l.current = t
		l.mu.Unlock()
	}
	return t
}

// End ends what Begin started; the transaction is committed separately.
func (l *Log) End() {
	if l != nil {
		l.mu.Lock()
		l.current = nil
		l.mu.Unlock()
	}
}

// Request is the transaction of the request being served; nil outside one.
func (l *Log) Request() *Txn {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.current
}

// Put adds an op whose value write appends. The first op reserves the
// entry, and with it the entry's place among the others: call it under the
// lock that orders the change it records.
func (t *Txn) Put(kind byte, write func(*Enc)) {
	if t == nil {
		return
	}
	if t.e == nil {
		t.e = t.log.reserve(t.size)
	}
	e := Enc{B: append(t.e.buf, kind, 0, 0, 0, 0)}
	at := len(e.B)
	if write != nil {
		write(&e)
	}
	binary.LittleEndian.PutUint32(e.B[at-4:], uint32(len(e.B)-at))
	t.e.buf = e.B
}

// PutValues writes ops of a kind whose values are encoded already, a
// thousand an entry, each entry written before the next is reserved: as
// entries are written in the order they are reserved, one that takes long
// to fill holds back every entry reserved after it, a request's
// included. A compaction's parts write the bulk of their state so.
func (l *Log) PutValues(kind byte, values [][]byte) {
	for chunk := range slices.Chunk(values, 1000) {
		size := 0
		for _, v := range chunk {
			size += OpSize(len(v))
		}
		t := l.SizedTxn(size)
		for _, v := range chunk {
			t.Put(kind, func(e *Enc) { e.B = append(e.B, v...) })
		}
		l.Wait(t.Commit())
	}
}

// LSN is the number of the transaction's entry, 0 before its first op.
func (t *Txn) LSN() uint64 {
	if t.Empty() {
		return 0
	}
	return t.e.lsn
}

// Empty says no op was put.
func (t *Txn) Empty() bool { return t == nil || t.e == nil }

// Commit completes the entry and writes it, with the complete ones before
// it, unless an earlier one is not complete yet (its Commit then writes
// this one too) or another goroutine is writing. It returns the entry's
// LSN, 0 for no entry.
func (t *Txn) Commit() uint64 {
	lsn := t.Complete()
	if lsn != 0 {
		t.log.flush()
	}
	return lsn
}

// Complete completes the entry without writing it: a Flush after the
// entries completed together writes them with one call (group commit).
// Completing it again does nothing.
func (t *Txn) Complete() uint64 {
	if t.Empty() {
		return 0
	}
	l, e := t.log, t.e
	if t.complete {
		return e.lsn
	}
	t.complete = true
	frame := e.buf[frameHeader:]
	binary.LittleEndian.PutUint32(e.buf, uint32(len(frame)))
	binary.LittleEndian.PutUint32(e.buf[4:], crc32.Checksum(frame, castagnoli))
	l.mu.Lock()
	e.done = true
	l.mu.Unlock()
	return e.lsn
}

// Flush writes the complete entries, as Commit does.
func (l *Log) Flush() {
	if l != nil {
		l.flush()
	}
}

// Wait waits until the committed entry is written, or writing failed.
func (t *Txn) Wait() {
	if !t.Empty() {
		t.log.Wait(t.e.lsn)
	}
}

// Wait waits until entry lsn is written, or writing failed (logged: the
// state is then no longer kept).
func (l *Log) Wait(lsn uint64) {
	if l == nil || lsn == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.written < lsn && l.failed == nil {
		l.cond.Wait()
	}
}

// reserve reserves an entry for ops of size octets (0: unknown).
func (l *Log) reserve(size int) *entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := &entry{lsn: l.next}
	if n := len(l.spare); n > 0 && size <= spareSize/2 {
		e.buf, l.spare = l.spare[n-1][:frameHeader], l.spare[:n-1]
	} else {
		e.buf = make([]byte, frameHeader, max(256, frameHeader+binary.MaxVarintLen64+size))
	}
	e.buf = binary.AppendUvarint(e.buf, e.lsn)
	l.next++
	if l.failed == nil { // a state no longer kept holds no entries
		l.queue = append(l.queue, e)
	}
	return e
}

// flush writes the complete entries at the head of the queue until none
// is left, unless another goroutine does.
func (l *Log) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.flushing {
		return
	}
	l.flushing = true
	for l.failed == nil {
		n := 0
		for n < len(l.queue) && l.queue[n].done {
			n++
		}
		if n == 0 {
			break
		}
		batch := l.queue[:n:n]
		l.queue = l.queue[n:]
		l.mu.Unlock()
		err := l.write(batch)
		l.mu.Lock()
		if err != nil {
			l.fail(err)
			break
		}
		l.written = batch[n-1].lsn
		for _, e := range batch {
			if e.snapshot {
				l.snapshotBegan = l.total
			}
			l.total += int64(len(e.buf))
			if e.complete {
				l.snapshotBytes, l.snapshotEnded = l.total-l.snapshotBegan, l.total
			}
			if cap(e.buf) <= spareSize && len(l.spare) < maxSpare {
				l.spare = append(l.spare, e.buf)
			}
			e.buf = nil
		}
		l.cond.Broadcast()
		l.maybeCompact()
	}
	l.flushing = false
}

// write writes a batch of complete entries, starting a new file before a
// snapshot, and removing the older ones after a complete snapshot.
func (l *Log) write(batch []*entry) error {
	for len(batch) > 0 {
		if batch[0].snapshot {
			if err := l.newFile(); err != nil {
				return err
			}
		}
		n := 1 + slices.IndexFunc(batch[1:], func(e *entry) bool { return e.snapshot })
		if n == 0 {
			n = len(batch)
		}
		if err := l.writeFile(batch[:n]); err != nil {
			return err
		}
		if slices.ContainsFunc(batch[:n], func(e *entry) bool { return e.complete }) {
			// Apart: unlinking a file of hundreds of megabytes would hold
			// back the entries waiting to be written. A file left by a
			// crash meanwhile goes at the next start (resume).
			gen := l.gen
			l.removing.Lock() // held until they are gone
			go func() {
				defer l.removing.Unlock()
				l.removeOlder(gen)
			}()
		}
		batch = batch[n:]
	}
	if l.opts.Sync {
		if err := unix.Fdatasync(int(l.file.Fd())); err != nil {
			return fmt.Errorf("syncing the PFCP state: %w", err)
		}
	}
	return nil
}

// writeFile appends entries to the current file with as few calls as
// writev takes, then moves the mark.
func (l *Log) writeFile(entries []*entry) error {
	for len(entries) > 0 {
		n := min(len(entries), iovMax)
		iov := make([][]byte, n)
		for i, e := range entries[:n] {
			iov[i] = e.buf
		}
		for len(iov) > 0 {
			w, err := unix.Writev(int(l.file.Fd()), iov)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				return fmt.Errorf("writing the PFCP state: %w", err)
			}
			for w > 0 {
				if w < len(iov[0]) {
					iov[0] = iov[0][w:]
					break
				}
				w -= len(iov[0])
				iov = iov[1:]
			}
		}
		atomic.StoreUint64(l.mark, entries[n-1].lsn)
		entries = entries[n:]
	}
	return nil
}

// fail stops keeping the state after a write failed: the files go, so that
// the next start is a clean one rather than one from a state with a gap,
// and are let go of, so that their room on the disk is free again.
func (l *Log) fail(err error) {
	l.failed = err
	l.opts.Log.Error("the PFCP state can no longer be kept; it is removed, and the next start will be a clean one", "err", err)
	l.removeAll()
	l.closeFiles()
	l.queue = nil
	l.cond.Broadcast()
}

// closeFiles closes the journal's file and unmaps the mark.
func (l *Log) closeFiles() error {
	var err error
	if l.file != nil {
		err = l.file.Close()
	}
	if l.mmap != nil {
		err = errors.Join(err, unix.Munmap(l.mmap))
	}
	l.file, l.mmap, l.mark = nil, nil, new(uint64)
	return err
}

// Compact has the parts write the state when the journal has grown: each
// writes its part of it, as Txns of its own.
func (l *Log) Compact(parts ...func(*Log)) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.parts = parts
	l.maybeCompact()
}

// maybeCompact starts a compaction when one is due; under mu.
func (l *Log) maybeCompact() {
	if l.parts == nil || l.compacting || l.closed || l.failed != nil ||
		l.total-l.snapshotEnded < max(cmp.Or(l.opts.CompactAfter, DefaultCompactAfter), l.snapshotBytes) {
		return
	}
	l.compacting = true
	l.compacted.Go(l.compact)
}

// CompactNow writes a snapshot now, after the one under way if any, and
// waits for it, and for the files before it to go.
func (l *Log) CompactNow() {
	l.mu.Lock()
	for l.compacting {
		l.mu.Unlock()
		l.compacted.Wait()
		l.mu.Lock()
	}
	l.compacting = true
	l.mu.Unlock()
	l.compact()
	l.removed()
}

// removed waits until the files a snapshot replaced are gone.
func (l *Log) removed() {
	l.removing.Lock()
	l.removing.Unlock()
}

// compact writes a snapshot into a new file.
func (l *Log) compact() {
	l.marker(func(e *entry) { e.snapshot = true }, kindSnapshot)
	for _, part := range l.parts {
		part(l)
	}
	l.marker(func(e *entry) { e.complete = true }, kindSnapshotDone)
	l.mu.Lock()
	l.compacting = false
	l.mu.Unlock()
}

// marker writes an entry of one of the package's own ops.
func (l *Log) marker(set func(*entry), kind byte) {
	t := l.Txn()
	t.Put(kind, nil)
	set(t.e)
	t.Commit()
	t.Wait()
}

// Close waits for a compaction under way, writes what is complete and
// closes the files.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.compacted.Wait()
	l.flush()
	l.removed()
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.queue); n > 0 {
		l.opts.Log.Error("PFCP state entries left unwritten at close", "entries", n)
	}
	return l.closeFiles()
}

// Size is the bytes the state's files take.
func (l *Log) Size() int64 {
	var total int64
	for _, name := range l.files() {
		if st, err := os.Stat(name); err == nil {
			total += st.Size()
		}
	}
	return total
}

// newFile starts the next generation's file.
func (l *Log) newFile() error {
	f, err := os.OpenFile(l.fileName(l.gen+1), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("starting a PFCP state file: %w", err)
	}
	if _, err := f.WriteString(magic); err != nil {
		f.Close()
		return fmt.Errorf("starting a PFCP state file: %w", err)
	}
	if l.opts.Sync {
		err = errors.Join(unix.Fdatasync(int(f.Fd())), syncDir(l.opts.Dir))
		if l.file != nil {
			err = errors.Join(err, unix.Fdatasync(int(l.file.Fd())))
		}
		if err != nil {
			f.Close()
			return fmt.Errorf("syncing the PFCP state: %w", err)
		}
	}
	if l.file != nil {
		l.file.Close()
	}
	l.file, l.gen = f, l.gen+1
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (l *Log) fileName(gen uint64) string {
	return filepath.Join(l.opts.Dir, fmt.Sprintf("%s%016x%s", filePrefix, gen, fileSuffix))
}

// files are the journal's files, oldest first.
func (l *Log) files() []string {
	names, _ := filepath.Glob(filepath.Join(l.opts.Dir, filePrefix+"*"+fileSuffix))
	slices.Sort(names) // the generation is fixed-width hexadecimal
	return names
}

func genOf(name string) uint64 {
	var gen uint64
	fmt.Sscanf(strings.TrimPrefix(filepath.Base(name), filePrefix), "%016x", &gen)
	return gen
}

// removeOlder removes the files before generation gen.
func (l *Log) removeOlder(gen uint64) {
	for _, name := range l.files() {
		if genOf(name) < gen {
			if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
				l.opts.Log.Warn("removing an old PFCP state file", "file", name, "err", err)
			}
		}
	}
}

// removeAll removes the files and the mark.
func (l *Log) removeAll() {
	for _, name := range append(l.files(), filepath.Join(l.opts.Dir, markName)) {
		os.Remove(name)
	}
}

// openMark maps the mark file, which it creates at 0 if missing.
func (l *Log) openMark() error {
	f, err := os.OpenFile(filepath.Join(l.opts.Dir, markName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return err
	} else if st.Size() < 8 {
		if err := f.Truncate(8); err != nil {
			return err
		}
	}
	m, err := unix.Mmap(int(f.Fd()), 0, 8, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mapping %s: %w", f.Name(), err)
	}
	l.mmap, l.mark = m, (*uint64)(unsafe.Pointer(&m[0]))
	return nil
}
