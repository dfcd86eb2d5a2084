package afxdp

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ring is this side of one of the single-producer, single-consumer rings a
// socket shares with the kernel: fill and TX rings are produced here and
// consumed by the kernel, RX and completion rings the other way round.
//
// Memory ordering: a producer writes entries, then publishes them with a
// store of the producer index; a consumer loads the producer index, reads
// the entries, then frees them with a store of the consumer index. The
// kernel pairs its side with acquire and release barriers; the sync/atomic
// loads and stores used here are sequentially consistent, which is at least
// acquire (loads) and release (stores), and also orders a producer-index
// store before the flags load that follows it (need-wakeup), as the
// kernel's protocol wants. The entries themselves are plain memory.
type ring[T uint64 | Desc] struct {
	mem      []byte
	producer *uint32
	consumer *uint32
	flags    *uint32
	entries  []T
	mask     uint32
	// This side's index, which only this side writes, and the last value
	// read of the other side's, refreshed only when it does not suffice.
	prod, cons uint32
}

func mapRing[T uint64 | Desc](fd int, pgoff int64, off unix.XDPRingOffset, size uint32) (*ring[T], error) {
	var zero T
	length := int(off.Desc) + int(size)*int(unsafe.Sizeof(zero))
	mem, err := unix.Mmap(fd, pgoff, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mapping a ring of %d entries: %w", size, err)
	}
	r := &ring[T]{
		mem:      mem,
		producer: (*uint32)(unsafe.Pointer(&mem[off.Producer])),
		consumer: (*uint32)(unsafe.Pointer(&mem[off.Consumer])),
		flags:    (*uint32)(unsafe.Pointer(&mem[off.Flags])),
		entries:  unsafe.Slice((*T)(unsafe.Pointer(&mem[off.Desc])), size),
		mask:     size - 1,
	}
	r.prod = atomic.LoadUint32(r.producer)
	r.cons = atomic.LoadUint32(r.consumer)
	return r, nil
}

func (r *ring[T]) unmap() error {
	if r == nil {
		return nil
	}
	return unix.Munmap(r.mem)
}

func (r *ring[T]) size() uint32 { return r.mask + 1 }

// free is how many entries a producer may write, up to want.
func (r *ring[T]) free(want uint32) uint32 {
	n := r.size() - (r.prod - r.cons)
	if n < want {
		r.cons = atomic.LoadUint32(r.consumer)
		n = r.size() - (r.prod - r.cons)
	}
	return min(n, want)
}

// put writes the i-th entry after those published.
func (r *ring[T]) put(i uint32, v T) { r.entries[(r.prod+i)&r.mask] = v }

// publish hands n written entries to the kernel.
func (r *ring[T]) publish(n uint32) {
	r.prod += n
	atomic.StoreUint32(r.producer, r.prod)
}

// unconsumed is how many published entries the kernel has not taken yet.
func (r *ring[T]) unconsumed() uint32 { return r.prod - atomic.LoadUint32(r.consumer) }

// available is how many entries a consumer may read, up to want.
func (r *ring[T]) available(want uint32) uint32 {
	n := r.prod - r.cons
	if n < want {
		r.prod = atomic.LoadUint32(r.producer)
		n = r.prod - r.cons
	}
	return min(n, want)
}

// get reads the i-th entry not yet released.
func (r *ring[T]) get(i uint32) T { return r.entries[(r.cons+i)&r.mask] }

// release gives n read entries back to the kernel.
func (r *ring[T]) release(n uint32) {
	r.cons += n
	atomic.StoreUint32(r.consumer, r.cons)
}

func (r *ring[T]) needsWakeup() bool {
	return atomic.LoadUint32(r.flags)&unix.XDP_RING_NEED_WAKEUP != 0
}
