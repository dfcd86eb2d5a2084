package upfxdp

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
)

// Downlink buffering: a FAR with action FARBuffer hands its packets to the
// control plane through the buffered_packets ring, counting them in its
// buffer's state word (struct buffer), until the control plane releases the
// buffer by setting bufferReleased. The buffers map is mmapped.

const bufferReleased = uint64(1) << upfBufferStateBUFFER_RELEASED_BIT

// BufferCapacity is the number of buffer slots; slot 0 is never used.
func (d *Datapath) BufferCapacity() uint32 { return d.maps.Buffers.MaxEntries() }

func (d *Datapath) buffer(slot uint32) (*upfBuffer, error) {
	if slot == 0 || slot >= d.BufferCapacity() {
		return nil, fmt.Errorf("buffer slot %d is not in 1..%d", slot, d.BufferCapacity()-1)
	}
	return d.buffers.at(slot), nil
}

// ResetBuffer readies a slot no FAR uses for a FAR to buffer into.
func (d *Datapath) ResetBuffer(slot uint32) error {
	b, err := d.buffer(slot)
	if err != nil {
		return err
	}
	atomic.StoreUint64(&b.State, 0)
	atomic.StoreUint64(&b.Dropped, 0)
	return nil
}

// BufferDropped is the number of packets the data path could not hand to a
// buffer: the ring was full, or the frame too long.
func (d *Datapath) BufferDropped(slot uint32) uint64 {
	b, err := d.buffer(slot)
	if err != nil {
		return 0
	}
	return atomic.LoadUint64(&b.Dropped)
}

// BufferState is the number of packets the data path handed to a buffer,
// and whether it was released.
func (d *Datapath) BufferState(slot uint32) (handed uint64, released bool) {
	b, err := d.buffer(slot)
	if err != nil {
		return 0, false
	}
	state := atomic.LoadUint64(&b.State)
	return state &^ bufferReleased, state&bufferReleased != 0
}

// ReleaseBuffer makes the buffer's FARs forward, if the data path has handed
// over exactly received packets; false while more are on their way.
func (d *Datapath) ReleaseBuffer(slot uint32, received uint64) (bool, error) {
	b, err := d.buffer(slot)
	if err != nil {
		return false, err
	}
	return atomic.CompareAndSwapUint64(&b.State, received, received|bufferReleased), nil
}

// BufferedPacket is a frame a buffering FAR held, as it was received.
type BufferedPacket struct {
	Buffer uint32 // slot
	Iface  uint32 // counter slot of the interface it came in on
	PDR    uint16 // the ID of the PDR it matched
	QFI    uint8  // the QFI that PDR marks, 0 for none
	Frame  []byte
}

// BufferedReader reads the buffered_packets ring.
type BufferedReader struct{ rd *ringbuf.Reader }

// BufferedPackets opens the ring of buffered packets.
func (d *Datapath) BufferedPackets() (*BufferedReader, error) {
	rd, err := ringbuf.NewReader(d.maps.BufferedPackets)
	if err != nil {
		return nil, fmt.Errorf("reading buffered packets: %w", err)
	}
	return &BufferedReader{rd}, nil
}

// Read waits for the next packet until the deadline (time.Time{}: none);
// it returns an error wrapping os.ErrDeadlineExceeded when the deadline
// passes, or os.ErrClosed after Close.
func (r *BufferedReader) Read(deadline time.Time) (BufferedPacket, error) {
	r.rd.SetDeadline(deadline)
	rec, err := r.rd.Read()
	if err != nil {
		return BufferedPacket{}, err
	}
	var p upfBufferedPacket
	if _, err := binary.Decode(rec.RawSample, binary.NativeEndian, &p); err != nil || int(p.Len) > len(p.Frame) {
		return BufferedPacket{}, fmt.Errorf("buffered packet record of %d bytes, frame of %d: %v", len(rec.RawSample), p.Len, err)
	}
	return BufferedPacket{Buffer: p.Buffer, Iface: p.Iface, PDR: p.Pdr, QFI: p.Qfi,
		Frame: append([]byte(nil), p.Frame[:p.Len]...)}, nil
}

// Close ends a blocked Read.
func (r *BufferedReader) Close() error { return r.rd.Close() }

// releasers are the programs that release buffered frames, one per
// interface counter slot so that a frame counts where it came in.
type releasers struct {
	mu    sync.Mutex
	progs map[uint32]*ebpf.Program
}

// set makes prog the releaser of a slot, nil none, closing the one before.
func (r *releasers) set(slot uint32, prog *ebpf.Program) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old := r.progs[slot]; old != nil {
		old.Close()
	}
	if prog == nil {
		delete(r.progs, slot)
		return
	}
	if r.progs == nil {
		r.progs = map[uint32]*ebpf.Program{}
	}
	r.progs[slot] = prog
}

func (r *releasers) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.progs {
		p.Close()
	}
	r.progs = nil
}

// Release runs a buffered frame through the downlink data path of the
// interface (counter slot) it came in on, marked as released from its
// buffer, and returns the frame to send and the interface to send it out
// of; ifindex 0 when the data path did not forward it (its counters say
// why). The caller sends it: the data path only rewrites it here.
func (d *Datapath) Release(iface uint32, frame []byte) (out []byte, ifindex uint32, err error) {
	prog, err := d.releaser(iface)
	if err != nil {
		return nil, 0, err
	}
	const metaLen = int(unsafe.Sizeof(upfReleaseMeta{}))
	in := make([]byte, metaLen+len(frame))
	binary.NativeEndian.PutUint32(in, uint32(upfReleaseMagicRELEASE_MAGIC))
	copy(in[metaLen:], frame)
	// Room for what the program prepends: the encapsulation and a tag.
	buf := make([]byte, len(in)+256)
	var ctxOut xdplink.Context
	ret, err := prog.Run(&ebpf.RunOptions{
		Data: in, DataOut: buf,
		Context:    xdplink.Context{Data: uint32(metaLen), DataEnd: uint32(len(in))},
		ContextOut: &ctxOut,
	})
	if err != nil {
		return nil, 0, fmt.Errorf("releasing a buffered frame: %w", err)
	}
	if xdplink.Action(ret) != xdplink.Redirect || int(ctxOut.DataEnd) > len(buf) || ctxOut.Data < uint32(metaLen) {
		return nil, 0, nil
	}
	return buf[ctxOut.Data:ctxOut.DataEnd], binary.NativeEndian.Uint32(buf[4:]), nil
}

// releaser is the program of the slot's interface, or one loaded for a
// slot with no attachment of this process.
func (d *Datapath) releaser(iface uint32) (*ebpf.Program, error) {
	d.release.mu.Lock()
	p := d.release.progs[iface]
	d.release.mu.Unlock()
	if p != nil {
		return p, nil
	}
	var progs ifacePrograms
	if err := d.loadPrograms(iface, RoleCore, &progs); err != nil {
		return nil, err
	}
	d.release.set(iface, progs.UPF)
	return progs.UPF, nil
}
