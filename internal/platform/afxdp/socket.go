package afxdp

import (
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// bindRetry is how long a bind waits for a queue to be let go of.
const bindRetry = time.Second

// Ring sizes of Options.
const (
	DefaultRingSize = 2048
	MaxRingSize     = 1 << 16
	// NoRing leaves a socket without its RX or TX ring: a TX-only socket
	// has RxRing: NoRing.
	NoRing = -1
)

// Busy-poll settings of a socket with Options.BusyPoll.
const (
	busyPollMicros = 20
	busyPollBudget = 64
)

// Options set up a socket. A zero size is DefaultRingSize; sizes are
// powers of two up to MaxRingSize.
type Options struct {
	RxRing, TxRing           int // or NoRing
	FillRing, CompletionRing int
	// BusyPoll makes Receive ask the kernel for packets whenever its RX
	// ring is empty and Transmit kick the kernel every time, for a caller
	// that spins on the rings instead of waiting; it also sets
	// SO_PREFER_BUSY_POLL and SO_BUSY_POLL, so that with a NAPI driver
	// those system calls run the driver's receive work in this thread.
	BusyPoll bool
}

// Socket is an AF_XDP socket bound to one queue of one interface.
type Socket struct {
	umem           *UMEM
	slot           uint8 // owner of the frames in its rings
	fd             int
	ifindex, queue int
	fill, comp     *ring[uint64]
	rx, tx         *ring[Desc]
	busyPoll       bool
	needWakeup     bool
	kickBudget     int // sendto calls a Transmit makes at most

	rxPackets, rxBytes, txPackets, txBytes, completed, fillShort atomic.Uint64
}

// NewSocket binds a socket of the UMEM to queue queue of the interface
// with index ifindex, in the calling thread's network namespace. The
// UMEM's first socket registers it; later ones share it and must be on
// other (interface, queue) pairs. A socket with an RX ring gets its fill
// ring filled at once. Put FD in the XDP program's XSKMAP to receive.
func NewSocket(u *UMEM, ifindex, queue int, opts Options) (*Socket, error) {
	if u.area == nil {
		return nil, errors.New("afxdp: the UMEM is closed")
	}
	sizes := [4]*int{&opts.RxRing, &opts.TxRing, &opts.FillRing, &opts.CompletionRing}
	for i, p := range sizes {
		if *p == 0 {
			*p = DefaultRingSize
		}
		if *p == NoRing && i < 2 {
			continue
		}
		if *p <= 0 || *p > MaxRingSize || bits.OnesCount(uint(*p)) != 1 {
			return nil, fmt.Errorf("afxdp: %s ring of %d entries: want a power of two up to %d",
				[4]string{"RX", "TX", "fill", "completion"}[i], *p, MaxRingSize)
		}
	}
	if opts.RxRing == NoRing && opts.TxRing == NoRing {
		return nil, errors.New("afxdp: a socket needs an RX or a TX ring")
	}
	if ifindex <= 0 || queue < 0 {
		return nil, fmt.Errorf("afxdp: interface index %d, queue %d: want a positive index and a queue from 0", ifindex, queue)
	}
	slot := 0
	for i, other := range u.sockets {
		if other == nil {
			if slot == 0 {
				slot = i + 1
			}
		} else if other.ifindex == ifindex && other.queue == queue {
			return nil, fmt.Errorf("afxdp: the UMEM has a socket on interface %d queue %d already", ifindex, queue)
		}
	}
	if slot == 0 {
		return nil, fmt.Errorf("afxdp: a UMEM takes at most %d sockets", maxSockets)
	}
	if u.regFD < 0 {
		return nil, errors.New("afxdp: the UMEM's first socket is closed: no socket can join it")
	}

	s := &Socket{umem: u, slot: uint8(slot), fd: u.regFD, ifindex: ifindex, queue: queue,
		busyPoll: opts.BusyPoll, needWakeup: !u.opts.NoNeedWakeup}
	first := !u.regUsed
	if !first {
		fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("afxdp: AF_XDP socket: %w", err)
		}
		s.fd = fd
	}
	if err := s.setUp(opts, first); err != nil {
		s.unmapRings()
		unix.Close(s.fd)
		if first { // rings are set once per socket: register afresh
			u.regFD = -1
			err = errors.Join(err, u.register())
		}
		return nil, err
	}
	u.regUsed = true
	u.sockets[slot-1] = s
	u.updatePollFDs()
	if s.rx != nil {
		s.refill()
	}
	return s, nil
}

func (s *Socket) setUp(opts Options, first bool) error {
	for _, r := range []struct {
		opt, size int
		name      string
	}{
		{unix.XDP_UMEM_FILL_RING, opts.FillRing, "fill"},
		{unix.XDP_UMEM_COMPLETION_RING, opts.CompletionRing, "completion"},
		{unix.XDP_RX_RING, opts.RxRing, "RX"},
		{unix.XDP_TX_RING, opts.TxRing, "TX"},
	} {
		if r.size == NoRing {
			continue
		}
		if err := unix.SetsockoptInt(s.fd, unix.SOL_XDP, r.opt, r.size); err != nil {
			return fmt.Errorf("afxdp: setting up the %s ring: %w", r.name, err)
		}
	}
	var off unix.XDPMmapOffsets
	if err := getsockopt(s.fd, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), unsafe.Sizeof(off)); err != nil {
		return fmt.Errorf("afxdp: reading ring offsets: %w", err)
	}
	var err error
	if s.fill, err = mapRing[uint64](s.fd, unix.XDP_UMEM_PGOFF_FILL_RING, off.Fr, uint32(opts.FillRing)); err != nil {
		return err
	}
	if s.comp, err = mapRing[uint64](s.fd, unix.XDP_UMEM_PGOFF_COMPLETION_RING, off.Cr, uint32(opts.CompletionRing)); err != nil {
		return err
	}
	if opts.RxRing != NoRing {
		if s.rx, err = mapRing[Desc](s.fd, unix.XDP_PGOFF_RX_RING, off.Rx, uint32(opts.RxRing)); err != nil {
			return err
		}
	}
	if opts.TxRing != NoRing {
		if s.tx, err = mapRing[Desc](s.fd, unix.XDP_PGOFF_TX_RING, off.Tx, uint32(opts.TxRing)); err != nil {
			return err
		}
		// Copy mode sends at most a batch of 32 per system call.
		s.kickBudget = opts.TxRing/32 + 2
	}
	if opts.BusyPoll {
		for _, o := range [][2]int{{unix.SO_PREFER_BUSY_POLL, 1}, {unix.SO_BUSY_POLL, busyPollMicros},
			{unix.SO_BUSY_POLL_BUDGET, busyPollBudget}} {
			if err := unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, o[0], o[1]); err != nil {
				return fmt.Errorf("afxdp: setting up busy polling: %w", err)
			}
		}
	}
	u := s.umem
	sa := &unix.SockaddrXDP{Ifindex: uint32(s.ifindex), QueueID: uint32(s.queue)}
	if first {
		switch u.opts.Mode {
		case ModeCopy:
			sa.Flags |= unix.XDP_COPY
		case ModeZeroCopy:
			sa.Flags |= unix.XDP_ZEROCOPY
		}
		if s.needWakeup {
			sa.Flags |= unix.XDP_USE_NEED_WAKEUP
		}
	} else {
		// The kernel takes mode and need-wakeup from the UMEM's first socket.
		sa.Flags = unix.XDP_SHARED_UMEM
		sa.SharedUmemFD = uint32(u.regFD)
	}
	// A queue's previous socket lets go of it only once the kernel has
	// run its deferred release, some time after its close.
	for deadline := time.Now().Add(bindRetry); ; time.Sleep(bindRetry / 100) {
		if err = unix.Bind(s.fd, sa); !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("afxdp: binding to interface %d queue %d (%v mode): %w", s.ifindex, s.queue, u.opts.Mode, err)
	}
	return nil
}

func (s *Socket) unmapRings() {
	s.fill.unmap()
	s.comp.unmap()
	s.rx.unmap()
	s.tx.unmap()
	s.fill, s.comp, s.rx, s.tx = nil, nil, nil, nil
}

// FD is the socket's file descriptor, for the XDP program's XSKMAP.
func (s *Socket) FD() int { return s.fd }

// ZeroCopy reports whether the kernel bound the socket in zero-copy mode.
func (s *Socket) ZeroCopy() (bool, error) {
	var o struct{ flags uint32 }
	if err := getsockopt(s.fd, unix.XDP_OPTIONS, unsafe.Pointer(&o), unsafe.Sizeof(o)); err != nil {
		return false, fmt.Errorf("afxdp: reading socket options: %w", err)
	}
	return o.flags&unix.XDP_OPTIONS_ZEROCOPY != 0, nil
}

// Receive moves up to len(ds) received packets into ds and returns how
// many: the caller holds their frames until it transmits or frees them.
// It then tops up the fill ring from the pool, and when its RX ring is
// empty and the driver wants it (need-wakeup, or BusyPoll) it asks the
// kernel for packets first. The error is that system call's; packets may
// come with it.
func (s *Socket) Receive(ds []Desc) (int, error) {
	if s.rx == nil {
		return 0, errors.New("afxdp: the socket has no RX ring")
	}
	want := uint32(min(len(ds), int(s.rx.size())))
	n := s.rx.available(want)
	var err error
	if n == 0 && (s.busyPoll || s.needWakeup && s.fill.needsWakeup()) {
		if errno := s.wake(unix.SYS_RECVFROM); errno != 0 && !transient(errno) {
			err = s.wakeError(errno)
		}
		n = s.rx.available(want)
	}
	owner := s.umem.owner
	var bytes uint64
	for i := range n {
		d := s.rx.get(i)
		if f := d.Addr / FrameSize; f < uint64(len(owner)) {
			owner[f] = ownerCaller
		}
		ds[i] = d
		bytes += uint64(d.Len)
	}
	s.rx.release(n)
	s.refill()
	if n > 0 {
		s.rxPackets.Add(uint64(n))
		s.rxBytes.Add(bytes)
	}
	return int(n), err
}

// refill tops the fill ring up from the pool.
func (s *Socket) refill() {
	u := s.umem
	n := s.fill.free(s.fill.size())
	if n == 0 {
		return
	}
	if n > uint32(len(u.free)) {
		s.fillShort.Add(1)
		n = uint32(len(u.free))
	}
	top := len(u.free) - 1
	for i := range n {
		addr := u.free[top-int(i)]
		u.owner[addr/FrameSize] = s.slot
		s.fill.put(i, addr)
	}
	u.free = u.free[:len(u.free)-int(n)]
	s.fill.publish(n)
}

// Transmit queues packets the caller holds, from any socket of the UMEM,
// in order, and returns how many it queued: fewer when the TX ring is
// full, or when one is not the caller's to send (the error says so). The
// caller still holds the rest. It reaps completions first, and kicks the
// kernel when it needs it (always in copy mode).
func (s *Socket) Transmit(ds []Desc) (int, error) {
	if s.tx == nil {
		return 0, errors.New("afxdp: the socket has no TX ring")
	}
	if len(ds) == 0 {
		return 0, nil
	}
	s.Complete()
	want := uint32(min(len(ds), int(s.tx.size())))
	n := s.tx.free(want)
	if n < want {
		s.kick()
		n = s.tx.free(want)
	}
	owner := s.umem.owner
	var bytes uint64
	var err error
	i := uint32(0)
	for ; i < n; i++ {
		d := ds[i]
		f := d.Addr / FrameSize
		if f >= uint64(len(owner)) || owner[f] != ownerCaller || d.Len == 0 ||
			d.Addr+uint64(d.Len) > (f+1)*FrameSize {
			err = fmt.Errorf("afxdp: not transmitting packet %d (address %#x, %d bytes): not a held frame's", i, d.Addr, d.Len)
			break
		}
		owner[f] = s.slot
		s.tx.put(i, Desc{Addr: d.Addr, Len: d.Len})
		bytes += uint64(d.Len)
	}
	if i == 0 {
		return 0, err
	}
	s.tx.publish(i)
	s.txPackets.Add(uint64(i))
	s.txBytes.Add(bytes)
	if s.busyPoll || !s.needWakeup || s.tx.needsWakeup() {
		err = errors.Join(err, s.kick())
	}
	return int(i), err
}

// kick asks the kernel to send what the TX ring holds. In copy mode each
// call sends a batch, and says EAGAIN while more is left or the
// completion ring is full: it goes on, reaping completions, while the
// kernel makes progress.
func (s *Socket) kick() error {
	for range s.kickBudget {
		switch errno := s.wake(unix.SYS_SENDTO); errno {
		case 0, unix.ENOBUFS:
			return nil
		case unix.EAGAIN, unix.EBUSY:
			s.Complete()
			if s.tx.unconsumed() == 0 {
				return nil
			}
		default:
			return s.wakeError(errno)
		}
	}
	return nil
}

// wake makes a non-blocking recvfrom or sendto without data: the kernel's
// cue to process the socket's rings.
func (s *Socket) wake(call uintptr) unix.Errno {
	_, _, errno := unix.Syscall6(call, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return errno
}

// transient says an error of wake means only "later".
func transient(errno unix.Errno) bool {
	return errno == unix.EAGAIN || errno == unix.EBUSY || errno == unix.ENOBUFS
}

func (s *Socket) wakeError(errno unix.Errno) error {
	return fmt.Errorf("afxdp: waking the kernel on interface %d queue %d: %w", s.ifindex, s.queue, errno)
}

// Complete returns the frames the kernel has sent to the pool and returns
// how many. Transmit and UMEM.Wait do it too.
func (s *Socket) Complete() int {
	u := s.umem
	n := s.comp.available(s.comp.size())
	for i := range n {
		f := s.comp.get(i) / FrameSize
		if f < uint64(len(u.owner)) && u.owner[f] == s.slot {
			u.owner[f] = ownerPool
			u.free = append(u.free, f*FrameSize)
		}
	}
	s.comp.release(n)
	if n > 0 {
		s.completed.Add(uint64(n))
	}
	return int(n)
}

// Stats are a socket's counters: what passed through this package, and
// the kernel's XDP_STATISTICS.
type Stats struct {
	RxPackets, RxBytes uint64 // handed to the caller by Receive
	TxPackets, TxBytes uint64 // queued by Transmit
	Completed          uint64 // sent frames back from the kernel
	FillShort          uint64 // refills that found the pool short of frames
	// The kernel's: packets dropped for lack of a frame or of room,
	// descriptors it refused, and its RX, fill and TX rings found full
	// or empty.
	RxDropped, RxInvalidDescs, TxInvalidDescs uint64
	RxRingFull, RxFillRingEmpty, TxRingEmpty  uint64
}

// Stats reads the socket's counters. Unlike the other methods it may be
// called from any goroutine, though not during Close.
func (s *Socket) Stats() (Stats, error) {
	st := Stats{
		RxPackets: s.rxPackets.Load(), RxBytes: s.rxBytes.Load(),
		TxPackets: s.txPackets.Load(), TxBytes: s.txBytes.Load(),
		Completed: s.completed.Load(), FillShort: s.fillShort.Load(),
	}
	var k unix.XDPStatistics
	if err := getsockopt(s.fd, unix.XDP_STATISTICS, unsafe.Pointer(&k), unsafe.Sizeof(k)); err != nil {
		return st, fmt.Errorf("afxdp: reading XDP statistics: %w", err)
	}
	st.RxDropped, st.RxInvalidDescs, st.TxInvalidDescs = k.Rx_dropped, k.Rx_invalid_descs, k.Tx_invalid_descs
	st.RxRingFull, st.RxFillRingEmpty, st.TxRingEmpty = k.Rx_ring_full, k.Rx_fill_ring_empty_descs, k.Tx_ring_empty_descs
	return st, nil
}

// Close closes the socket, which removes it from any XSKMAP, and returns
// the frames in its rings to the pool. The UMEM's other sockets go on;
// once its first socket is closed, no new one can join it.
func (s *Socket) Close() error {
	if s.fd < 0 {
		return nil
	}
	u := s.umem
	err := unix.Close(s.fd)
	if s.fd == u.regFD {
		u.regFD = -1
	}
	s.fd = -1
	s.unmapRings()
	// The kernel has let go of the socket's frames with its last reference.
	for f, o := range u.owner {
		if o == s.slot {
			u.owner[f] = ownerPool
			u.free = append(u.free, uint64(f)*FrameSize)
		}
	}
	u.sockets[s.slot-1] = nil
	u.updatePollFDs()
	if err != nil {
		return fmt.Errorf("afxdp: closing the socket on interface %d queue %d: %w", s.ifindex, s.queue, err)
	}
	return nil
}

// updatePollFDs lists the sockets Wait polls: those with an RX ring.
func (u *UMEM) updatePollFDs() {
	u.pollFDs = u.pollFDs[:0]
	for _, s := range u.sockets {
		if s != nil && s.rx != nil {
			u.pollFDs = append(u.pollFDs, unix.PollFd{Fd: int32(s.fd), Events: unix.POLLIN})
		}
	}
}
