package upfxdp

import (
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// mmap maps an array map (BPF_F_MMAPABLE) into the process.
func mmap(m *ebpf.Map) ([]byte, error) {
	b, err := unix.Mmap(m.FD(), 0, int(m.MaxEntries()*stride(m)), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %w", m, err)
	}
	return b, nil
}

// stride is the distance between two values of a mmapped array: the kernel
// rounds the value size up to 8 bytes.
func stride(m *ebpf.Map) uint32 { return (m.ValueSize() + 7) &^ 7 }

// mapped is an array map written and read through mmap, without a system
// call, its values laid out as T (the type bpf2go made of the C struct). A
// slot is written whole only while no key references it: see tables.go.
type mapped[T any] struct {
	mem    []byte
	stride uintptr
	name   string
}

func mapArray[T any](m *ebpf.Map) (mapped[T], error) {
	if size := unsafe.Sizeof(*new(T)); uintptr(m.ValueSize()) != size {
		return mapped[T]{}, fmt.Errorf("%s: values of %d bytes, not %d", m, m.ValueSize(), size)
	}
	mem, err := mmap(m)
	return mapped[T]{mem: mem, stride: uintptr(stride(m)), name: m.String()}, err
}

func (a mapped[T]) len() uint32 { return uint32(uintptr(len(a.mem)) / a.stride) }

// at is the value in slot, which must be in range.
func (a mapped[T]) at(slot uint32) *T { return (*T)(unsafe.Pointer(&a.mem[uintptr(slot)*a.stride])) }

// put writes a value into slot.
func (a mapped[T]) put(slot uint32, v *T) error {
	if slot >= a.len() {
		return fmt.Errorf("%s: slot %d is not in 0..%d", a.name, slot, int64(a.len())-1)
	}
	*a.at(slot) = *v
	return nil
}

// get reads the value in slot.
func (a mapped[T]) get(slot uint32) (T, error) {
	if slot >= a.len() {
		var none T
		return none, fmt.Errorf("%s: slot %d is not in 0..%d", a.name, slot, int64(a.len())-1)
	}
	return *a.at(slot), nil
}

func (a mapped[T]) close() error {
	if a.mem == nil {
		return nil
	}
	return unix.Munmap(a.mem)
}
