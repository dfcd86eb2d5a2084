// Package afxdp is a small AF_XDP layer over golang.org/x/sys/unix: a UMEM
// of 4 KiB frames, sockets on any number of (interface, queue) pairs that
// share it, each with its own fill and completion rings, and a frame
// allocator that keeps every fill ring topped up.
//
// A frame received on one socket can be changed in place and transmitted
// on another socket of the same UMEM without a copy: the CU-UP's worker of
// a queue owns one UMEM with a socket on N3 and one on F1-U.
//
// # Ownership
//
// A UMEM and its sockets belong to one goroutine: none of their methods is
// safe for concurrent use, except Socket.Stats. That goroutine may lock
// its OS thread to a CPU; nothing here needs it to.
//
// Every frame is in exactly one place: the UMEM's free pool, the kernel
// (a fill, RX, TX or completion ring of one socket), or the caller, from
// Receive or Alloc until it passes the frame to Transmit or Free. Frames
// that return from the kernel (completions) go to the pool, and each
// Receive refills its socket's fill ring from the pool. Give the UMEM
// enough frames for every fill ring plus what the caller holds and has in
// flight: the sum of the fill ring sizes plus that.
//
// # Layout of a frame
//
// Received packets start into their frame by the UMEM's headroom plus
// the kernel's XDP_PACKET_HEADROOM (256). The XDP program's metadata, if
// any, lies right before the packet (Meta). The bytes from the frame's
// start up to the packet are the caller's: to prepend headers in place,
// or to use the tail of the frame, it transmits a Desc whose Addr and Len
// cover them, within the frame.
package afxdp

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FrameSize is the size of a UMEM frame (aligned mode).
const FrameSize = 4096

// MaxHeadroom bounds UMEMOptions.Headroom: a frame keeps room for a
// 1500-byte user packet and the headers of two tunnels.
const MaxHeadroom = 1024

// maxSockets bounds the sockets of a UMEM: a frame's owner is a byte.
const maxSockets = 64

// Owners of a frame besides the sockets 1 to maxSockets, whose rings hold
// it.
const (
	ownerPool   = 0
	ownerCaller = 255
)

// Desc is a packet in the UMEM: the offset of its first byte from the
// UMEM's start and its length. Its layout is struct xdp_desc's.
type Desc struct {
	Addr    uint64
	Len     uint32
	Options uint32
}

// Mode is how sockets move packets between the NIC and the UMEM.
type Mode int

const (
	// ModeDefault lets the kernel choose: zero copy where the driver
	// supports it, else copy.
	ModeDefault Mode = iota
	// ModeCopy copies packets (XDP_COPY): every driver, veth included, and
	// XDP programs in generic mode.
	ModeCopy
	// ModeZeroCopy gives the NIC the UMEM's frames (XDP_ZEROCOPY); binding
	// fails where the driver cannot.
	ModeZeroCopy
)

func (m Mode) String() string {
	switch m {
	case ModeDefault:
		return "default"
	case ModeCopy:
		return "copy"
	case ModeZeroCopy:
		return "zero-copy"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// UMEMOptions set up a UMEM and, through its first socket, every socket
// of it: the kernel gives sockets that share a UMEM its first socket's
// mode and need-wakeup setting.
type UMEMOptions struct {
	// Headroom is kept free at the start of every frame, before the
	// kernel's XDP_PACKET_HEADROOM, at most MaxHeadroom: more room to
	// prepend headers to received packets.
	Headroom int
	Mode     Mode
	// NoNeedWakeup turns XDP_USE_NEED_WAKEUP off: every Transmit then
	// makes a system call, and a driver that needs one to fill its RX
	// queue is not told so.
	NoNeedWakeup bool
}

// UMEM is the packet memory of a group of sockets and its frame allocator.
type UMEM struct {
	opts     UMEMOptions
	area     []byte
	rxOffset uint64
	owner    []uint8  // by frame: ownerPool, ownerCaller or a socket's slot
	free     []uint64 // the pool: addresses of free frames, used as a stack
	// regFD is the socket the area is registered with, until the first
	// socket binds it; -1 once that socket is closed.
	regFD   int
	regUsed bool
	sockets [maxSockets]*Socket // by slot - 1
	pollFDs []unix.PollFd
}

// NewUMEM maps frames frames of FrameSize bytes and registers them with
// the kernel through the socket its first Socket takes over: call it in
// the network namespace of the interface that socket binds to.
func NewUMEM(frames int, opts UMEMOptions) (*UMEM, error) {
	if frames <= 0 || frames > 1<<20 {
		return nil, fmt.Errorf("afxdp: %d frames: want 1 to %d", frames, 1<<20)
	}
	if opts.Headroom < 0 || opts.Headroom > MaxHeadroom {
		return nil, fmt.Errorf("afxdp: headroom %d: want 0 to %d", opts.Headroom, MaxHeadroom)
	}
	if opts.Mode < ModeDefault || opts.Mode > ModeZeroCopy {
		return nil, fmt.Errorf("afxdp: unknown %v", opts.Mode)
	}
	area, err := unix.Mmap(-1, 0, frames*FrameSize, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("afxdp: mapping %d frames: %w", frames, err)
	}
	u := &UMEM{
		opts:     opts,
		area:     area,
		rxOffset: uint64(opts.Headroom + unix.XDP_PACKET_HEADROOM),
		owner:    make([]uint8, frames),
		free:     make([]uint64, frames),
		regFD:    -1,
	}
	for i := range u.free {
		u.free[i] = uint64(frames-1-i) * FrameSize // frame 0 on top
	}
	if err := u.register(); err != nil {
		unix.Munmap(area)
		return nil, err
	}
	return u, nil
}

// register opens a socket and registers the area with it (XDP_UMEM_REG).
func (u *UMEM) register() error {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("afxdp: AF_XDP socket: %w", err)
	}
	reg := unix.XDPUmemReg{
		Addr:     uint64(uintptr(unsafe.Pointer(&u.area[0]))),
		Len:      uint64(len(u.area)),
		Size:     FrameSize,
		Headroom: uint32(u.opts.Headroom),
	}
	if err := setsockopt(fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		unix.Close(fd)
		return fmt.Errorf("afxdp: registering the UMEM: %w", err)
	}
	u.regFD = fd
	u.regUsed = false
	return nil
}

// Frame is a packet's bytes, with capacity up to its frame's end; nil for
// a descriptor that does not lie within one frame.
func (u *UMEM) Frame(d Desc) []byte {
	end := d.Addr&^(FrameSize-1) + FrameSize
	if d.Addr+uint64(d.Len) > end || end > uint64(len(u.area)) {
		return nil
	}
	return u.area[d.Addr : d.Addr+uint64(d.Len) : end]
}

// Headroom is how many bytes of its frame lie before a packet.
func (u *UMEM) Headroom(d Desc) int { return int(d.Addr & (FrameSize - 1)) }

// Meta is the n bytes right before a packet, where the XDP program's
// metadata lies; nil when the headroom is shorter.
func (u *UMEM) Meta(d Desc, n int) []byte {
	if n < 0 || n > u.Headroom(d) || d.Addr > uint64(len(u.area)) {
		return nil
	}
	return u.area[d.Addr-uint64(n) : d.Addr : d.Addr]
}

// Alloc takes up to len(ds) frames from the pool for packets the caller
// builds, and returns how many it took: ds[i] starts where a received
// packet would, with length 0 (Frame(ds[i])[:n] is the room for n bytes).
func (u *UMEM) Alloc(ds []Desc) int {
	n := min(len(ds), len(u.free))
	for i := range n {
		addr := u.free[len(u.free)-1-i]
		u.owner[addr/FrameSize] = ownerCaller
		ds[i] = Desc{Addr: addr + u.rxOffset}
	}
	u.free = u.free[:len(u.free)-n]
	return n
}

// Free returns the frames of packets the caller holds and does not
// transmit to the pool. A descriptor of a frame the caller does not hold
// (freed twice, say) is left alone and reported.
func (u *UMEM) Free(ds ...Desc) error {
	var bad int
	for _, d := range ds {
		i := d.Addr / FrameSize
		if i >= uint64(len(u.owner)) || u.owner[i] != ownerCaller {
			bad++
			continue
		}
		u.owner[i] = ownerPool
		u.free = append(u.free, i*FrameSize)
	}
	if bad > 0 {
		return fmt.Errorf("afxdp: freeing %d frames the caller does not hold", bad)
	}
	return nil
}

// Wait blocks until a socket of the UMEM has packets to receive, or until
// timeout passes; a negative timeout waits for ever. Before it blocks it
// reaps every socket's completions and tops up its fill ring, and it does
// not block when a socket already has packets. An interrupted wait returns
// nil early.
func (u *UMEM) Wait(timeout time.Duration) error {
	if len(u.pollFDs) == 0 {
		return errors.New("afxdp: no socket with an RX ring to wait for")
	}
	for _, s := range u.sockets {
		if s == nil {
			continue
		}
		if s.tx != nil {
			s.Complete()
		}
		if s.rx != nil {
			s.refill()
			if s.rx.available(1) > 0 {
				return nil
			}
		}
	}
	ms := -1
	if timeout >= 0 {
		ms = int((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	_, err := unix.Poll(u.pollFDs, ms)
	if err != nil && err != unix.EINTR {
		return fmt.Errorf("afxdp: poll: %w", err)
	}
	return nil
}

// Close closes every socket of the UMEM and unmaps its frames.
func (u *UMEM) Close() error {
	var errs []error
	for _, s := range u.sockets {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	if u.regFD >= 0 && !u.regUsed {
		errs = append(errs, unix.Close(u.regFD))
	}
	u.regFD = -1
	if u.area != nil {
		errs = append(errs, unix.Munmap(u.area))
		u.area = nil
	}
	return errors.Join(errs...)
}

func setsockopt(fd, opt int, p unsafe.Pointer, size uintptr) error {
	_, _, errno := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), size, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

func getsockopt(fd, opt int, p unsafe.Pointer, size uintptr) error {
	n := uint32(size)
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p),
		uintptr(unsafe.Pointer(&n)), 0)
	if errno != 0 {
		return errno
	}
	return nil
}
