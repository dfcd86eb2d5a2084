package upfxdp

import (
	"encoding/binary"
	"fmt"
	"iter"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/platform/percpu"
)

// Usage Reporting Rules: the data path counts what the FARs of a URR's PDRs
// forward. A URR without limits counts in the CPUs' usage lines
// (usage_lines), each CPU in its own, with plain adds; a URR with a
// threshold or a quota counts in its slot of urrs (struct urr), shared by
// the CPUs, with atomic adds that tell the packet which crosses a limit.
// Its usage is the sum of both, and of the rows of urr_counts a previous
// build counted in. A CPU's usage line of a URR also holds when the CPU
// counted its first and its last packet, and the URR's flags (enum
// line_flags), so that a packet reads the URR only when it has limits. The maps are mmapped:
// counters are read and limits written with atomic 64-bit accesses while
// packets count, without a system call.

// Indexes of the URRUsage and URRLimits arrays (enum urr_index).
const (
	URRTotal    = int(upfUrrIndexURR_TOTAL)
	URRUplink   = int(upfUrrIndexURR_UL)
	URRDownlink = int(upfUrrIndexURR_DL)
)

// URRUsage is what a URR counted since it was reset: inner IP packet octets
// (without the GTP-U/UDP/IP encapsulation) and packets.
type URRUsage struct {
	Bytes                   [3]uint64 // URRTotal, URRUplink, URRDownlink
	Packets                 [3]uint64
	FirstPacket, LastPacket time.Time // zero when no packet yet
}

// URRLimits are the byte counts a URR reports or stops at, absolute since
// the reset; 0 for none.
type URRLimits struct {
	Threshold [3]uint64 // the packet that reaches one sends URREventThreshold
	// A packet that would exceed a quota is dropped (drop_urr_quota); the
	// packet that reaches it, or else the first one dropped, sends
	// URREventQuota, once per writing of the limits.
	Quota       [3]uint64
	NotifyStart bool // the next packet sends URREventStart
}

// URRCapacity is the number of URR slots; slot 0 is never used.
func (d *Datapath) URRCapacity() uint32 { return d.maps.Urrs.MaxEntries() }

func (d *Datapath) urr(slot uint32) (*upfUrr, error) {
	if slot == 0 || slot >= d.URRCapacity() {
		return nil, fmt.Errorf("URR slot %d is not in 1..%d", slot, d.URRCapacity()-1)
	}
	return d.urrs.at(slot), nil
}

// ResetURR zeroes a URR's counters and times and sets its limits. No
// packet may count in the slot: a new one, or one out of use for the slot
// pool's reuse delay.
func (d *Datapath) ResetURR(slot uint32, l URRLimits) error {
	u, err := d.urr(slot)
	if err != nil {
		return err
	}
	d.zeroURRRows(slot)
	for i := range u.Bytes {
		atomic.StoreUint64(&u.Bytes[i], 0)
		atomic.StoreUint64(&u.Packets[i], 0)
	}
	atomic.StoreUint64(&u.FirstPacket, 0)
	atomic.StoreUint64(&u.LastPacket, 0)
	for cpu := range d.counterRows() {
		l := d.usageLine(cpu, slot)
		atomic.StoreUint64(&l.LastPacket, 0)
		atomic.AndUint64(&l.Flags, lineFirstPacket-1)
	}
	d.setURRLimits(slot, u, l)
	return nil
}

// SetURRLimits changes a URR's limits and keeps its counters. A URR that
// gets limits while it has none first takes to counting in its shared
// counters (shareURR).
func (d *Datapath) SetURRLimits(slot uint32, l URRLimits) error {
	u, err := d.urr(slot)
	if err != nil {
		return err
	}
	if l.limited() && atomic.LoadUint64(&u.Flags)&urrShared == 0 {
		if err := d.shareURR(slot, u); err != nil {
			return err
		}
	}
	d.setURRLimits(slot, u, l)
	return nil
}

const urrShared = uint64(upfUrrFlagsURR_SHARED)

// limited says the data path must see every packet of the URR's sum: it
// has a threshold or a quota.
func (l URRLimits) limited() bool { return l.Threshold != [3]uint64{} || l.Quota != [3]uint64{} }

// shareURR makes a URR count in its shared counters, so that each packet
// sees the sum its limits apply to: once the packets that took it for
// one counting in the rows are done, the rows stop growing, and what they
// hold moves into the shared counters, out of the sight of the readers of
// its usage. Its limits are still none meanwhile.
func (d *Datapath) shareURR(slot uint32, u *upfUrr) error {
	atomic.OrUint64(&u.Flags, urrShared)
	d.orURRLines(slot, lineURRShared)
	if err := waitForPackets(); err != nil {
		atomic.AndUint64(&u.Flags, ^urrShared)
		d.andURRLines(slot, ^lineURRShared)
		return err
	}
	d.urrMu.Lock()
	defer d.urrMu.Unlock()
	bytes, packets := d.urrRows(slot)
	for i := range bytes {
		atomic.AddUint64(&u.Bytes[i], bytes[i])
		atomic.AddUint64(&u.Packets[i], packets[i])
	}
	d.zeroURRRows(slot)
	return nil
}

// waitForPackets returns once every run of the data path under way when
// it was called has ended: the kernel runs XDP programs in RCU read-side
// critical sections, whose end MEMBARRIER_CMD_GLOBAL waits for.
func waitForPackets() error {
	const membarrierCmdGlobal = 1 // linux/membarrier.h
	if _, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, membarrierCmdGlobal, 0, 0); errno != 0 {
		return fmt.Errorf("waiting for the packets under way (membarrier): %w", errno)
	}
	return nil
}

// setURRLimits writes the flags after the quotas: clearing a quota's
// reported bit before its new value is in place would let a packet the old
// one drops in between report it and set the bit for the new one. The
// usage lines' flags follow the URR's (count_urrs says why).
func (d *Datapath) setURRLimits(slot uint32, u *upfUrr, l URRLimits) {
	for i := range u.Threshold {
		atomic.StoreUint64(&u.Threshold[i], l.Threshold[i])
		atomic.StoreUint64(&u.Quota[i], l.Quota[i])
	}
	var flags uint64
	if l.NotifyStart {
		flags = uint64(upfUrrFlagsURR_NOTIFY_START)
	}
	line := lineURRKnown
	if l.NotifyStart {
		line |= lineURRNotifyStart
	}
	if l.limited() {
		flags |= urrShared
		line |= lineURRShared
	}
	atomic.StoreUint64(&u.Flags, flags)
	for cpu := range d.counterRows() {
		setLineFlags(d.usageLine(cpu, slot), lineURRFlags, line)
	}
}

// Bits of a usage line's flags (enum line_flags).
const (
	lineQERKnown       = uint64(upfLineFlagsLINE_QER_KNOWN)
	lineGateClosed     = uint64(upfLineFlagsLINE_GATE_CLOSED)
	lineMBR            = uint64(upfLineFlagsLINE_MBR)
	lineQERFlags       = lineQERKnown | (lineGateClosed|lineMBR)*3 // both directions
	lineURRKnown       = uint64(upfLineFlagsLINE_URR_KNOWN)
	lineURRNotifyStart = uint64(upfLineFlagsLINE_URR_NOTIFY_START)
	lineURRShared      = uint64(upfLineFlagsLINE_URR_SHARED)
	lineURRFlags       = lineURRKnown | lineURRNotifyStart | lineURRShared
	lineFirstPacket    = uint64(upfLineFlagsLINE_FIRST_PACKET)
	qerChunkShift      = uint64(upfLimitsQER_CHUNK_SHIFT)
)

// setLineFlags replaces the bits of mask in a usage line's flags with
// those of flags, in two atomic steps, the QER's or the URR's alone: in
// between the line says nothing of them, and the packet reads the QER or
// the URR.
func setLineFlags(l *upfUsageLine, mask, flags uint64) {
	atomic.AndUint64(&l.Flags, ^mask)
	atomic.OrUint64(&l.Flags, flags)
}

func (d *Datapath) orURRLines(slot uint32, bits uint64) {
	for cpu := range d.counterRows() {
		atomic.OrUint64(&d.usageLine(cpu, slot).Flags, bits)
	}
}

func (d *Datapath) andURRLines(slot uint32, bits uint64) {
	for cpu := range d.counterRows() {
		atomic.AndUint64(&d.usageLine(cpu, slot).Flags, bits)
	}
}

// urrRows sums what the CPUs' usage lines and rows of urr_counts hold of
// a URR slot, by URRTotal, URRUplink, URRDownlink.
func (d *Datapath) urrRows(slot uint32) (bytes, packets [3]uint64) {
	for c := range d.urrCounts(slot) {
		for dir := range c.Dir {
			b, p := atomic.LoadUint64(&c.Dir[dir].Bytes), atomic.LoadUint64(&c.Dir[dir].Packets)
			bytes[URRUplink+dir] += b
			packets[URRUplink+dir] += p
			bytes[URRTotal] += b
			packets[URRTotal] += p
		}
	}
	return bytes, packets
}

// zeroURRRows zeroes what the CPUs' usage lines and rows hold of a URR
// slot's counts, which no packet may be counting in.
func (d *Datapath) zeroURRRows(slot uint32) {
	for c := range d.urrCounts(slot) {
		for dir := range c.Dir {
			atomic.StoreUint64(&c.Dir[dir].Packets, 0)
			atomic.StoreUint64(&c.Dir[dir].Bytes, 0)
		}
	}
}

// urrCounts yields where each CPU counts a URR slot without limits, and
// where it counted under a previous build.
func (d *Datapath) urrCounts(slot uint32) iter.Seq[*upfUrrCount] {
	return func(yield func(*upfUrrCount) bool) {
		for cpu := range d.counterRows() {
			if !yield(&d.usageLine(cpu, slot).Count) || !yield(d.urrCountRows.at(cpu*d.pdrs.len()+slot)) {
				return
			}
		}
	}
}

// usageLine is CPU cpu's line of a QER and URR slot.
func (d *Datapath) usageLine(cpu, slot uint32) *upfUsageLine {
	return d.usageLines.at(cpu*d.pdrs.len() + slot)
}

// URRLimits reads a URR's limits back.
func (d *Datapath) URRLimits(slot uint32) (URRLimits, error) {
	u, err := d.urr(slot)
	if err != nil {
		return URRLimits{}, err
	}
	var l URRLimits
	for i := range u.Threshold {
		l.Threshold[i] = atomic.LoadUint64(&u.Threshold[i])
		l.Quota[i] = atomic.LoadUint64(&u.Quota[i])
	}
	l.NotifyStart = atomic.LoadUint64(&u.Flags)&uint64(upfUrrFlagsURR_NOTIFY_START) != 0
	return l, nil
}

// URRUsage reads a URR's counters: its shared ones and the CPUs' rows.
func (d *Datapath) URRUsage(slot uint32) (URRUsage, error) {
	u, err := d.urr(slot)
	if err != nil {
		return URRUsage{}, err
	}
	var usage URRUsage
	d.urrMu.RLock()
	defer d.urrMu.RUnlock()
	usage.Bytes, usage.Packets = d.urrRows(slot)
	for i := range u.Bytes {
		usage.Bytes[i] += atomic.LoadUint64(&u.Bytes[i])
		usage.Packets[i] += atomic.LoadUint64(&u.Packets[i])
	}
	// A build before the usage lines kept the times in the URR alone.
	first, last := atomic.LoadUint64(&u.FirstPacket), atomic.LoadUint64(&u.LastPacket)
	for cpu := range d.counterRows() {
		l := d.usageLine(cpu, slot)
		if f := atomic.LoadUint64(&l.Flags) &^ (lineFirstPacket - 1); f != 0 && (first == 0 || f < first) {
			first = f
		}
		last = max(last, atomic.LoadUint64(&l.LastPacket))
	}
	if first == 0 {
		return usage, nil
	}
	// The data path reads the coarse monotonic clock, which has no wall
	// time: the packets were as long before now as the clock has run since.
	// Now by the precise clock of the same base: the coarse one lags it by
	// up to a tick, which moved the times a read gave by as much.
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return URRUsage{}, err
	}
	now := time.Now().UnixNano()
	usage.FirstPacket = time.Unix(0, now-(ts.Nano()-int64(first)))
	usage.LastPacket = time.Unix(0, now-(ts.Nano()-int64(last)))
	return usage, nil
}

// URREventKind says why a URR sent an event (enum urr_event_kind).
type URREventKind uint32

const (
	URREventThreshold = URREventKind(upfUrrEventKindURR_EVENT_THRESHOLD)
	URREventQuota     = URREventKind(upfUrrEventKindURR_EVENT_QUOTA)
	URREventStart     = URREventKind(upfUrrEventKindURR_EVENT_START)
)

// URREvent names the URR slot whose usage is to be read.
type URREvent struct {
	Slot uint32
	Kind URREventKind
}

// URREventReader reads the events of every URR.
type URREventReader struct{ rd *ringbuf.Reader }

// URREvents opens the ring of URR events. Events the ring had no room for
// are counted by URREventsLost.
func (d *Datapath) URREvents() (*URREventReader, error) {
	rd, err := ringbuf.NewReader(d.maps.UrrEvents)
	if err != nil {
		return nil, fmt.Errorf("reading URR events: %w", err)
	}
	return &URREventReader{rd}, nil
}

// Read waits for the next event; after Close, it returns an error wrapping
// os.ErrClosed.
func (r *URREventReader) Read() (URREvent, error) {
	rec, err := r.rd.Read()
	if err != nil {
		return URREvent{}, err
	}
	var ev upfUrrEvent
	if _, err := binary.Decode(rec.RawSample, binary.NativeEndian, &ev); err != nil {
		return URREvent{}, fmt.Errorf("URR event of %d bytes: %w", len(rec.RawSample), err)
	}
	return URREvent{Slot: ev.Slot, Kind: URREventKind(ev.Kind)}, nil
}

// Close ends a blocked Read.
func (r *URREventReader) Close() error { return r.rd.Close() }

// URREventsLost is the number of events the ring had no room for: when it
// grows, every URR in use may have passed a limit unreported.
func (d *Datapath) URREventsLost() (uint64, error) {
	return percpu.Sum[uint64](d.maps.UrrEventsLost, uint32(0))
}
