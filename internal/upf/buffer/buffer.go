// Package buffer keeps the downlink packets of buffering FARs (TS 29.244
// §5.2.1, apply action BUFF) and delivers them, in the order they came,
// before any new packet when the FARs forward again.
//
// The XDP data path copies each packet a buffering FAR matches into a ring
// (struct buffered_packet, bpf/upf/structs.h) and drops the original:
// buffering is the path of idle UEs being paged, where a copy costs nothing
// that matters, and it keeps no AF_XDP frame pinned for the seconds paging
// takes.
// A release runs every held frame back through the data path (so QERs,
// URRs and the FAR's current tunnel apply to it), sends it out of the
// interface the data path chose with a raw socket, and only then lets the
// FAR forward, with a compare-and-swap that fails while a packet is still
// on its way through the ring.
package buffer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// Defaults of the Config limits left zero.
const (
	DefaultSessionPackets = 256
	DefaultTotalPackets   = 32768
)

// poll is how long the ring is waited on at a time: the delay before a
// release starts.
const poll = 10 * time.Millisecond

// Owner names what a buffer belongs to: a session's FAR.
type Owner struct {
	SEID uint64
	FAR  uint32
}

// Config sets up a Manager.
type Config struct {
	// SessionPackets is how many packets a session's buffers hold at most
	// unless SetLimit says otherwise; TotalPackets is the limit over all.
	SessionPackets, TotalPackets int
	Log                          *slog.Logger
}

// Stats are what a buffer did since it was armed.
type Stats struct {
	Held      int    `json:"held"`      // packets waiting
	Delivered uint64 `json:"delivered"` // released and sent
	// Dropped were lost for want of room: over the session's or the total
	// limit, the data path's ring full, or a frame too long.
	Dropped uint64 `json:"dropped"`
	// Unforwarded were released but the data path did not forward them
	// (a QER, a URR quota, an expired TTL: its counters say which).
	Unforwarded uint64 `json:"unforwarded,omitempty"`
	// Discarded were held when the SMF had them dropped (DROBU).
	Discarded uint64 `json:"discarded,omitempty"`
}

// Manager holds the packets of every buffer slot in use.
type Manager struct {
	dp   *upfxdp.Datapath
	cfg  Config
	ring *upfxdp.BufferedReader
	sock int // AF_PACKET, for the released frames
	// notify is told of the first packet each buffer holds: SetNotify.
	notify atomic.Pointer[func(o Owner, pdr uint16, qfi uint8)]

	// lost are the packets a previous run held, lost with it (Adopt).
	lost atomic.Uint64

	mu      sync.Mutex
	buffers map[uint32]*buffer
	limits  map[uint64]int // by SEID: SetLimit
	held    map[uint64]int // by SEID
	total   int
	// received counts every packet taken off the ring; outcomes what
	// became of those no longer held, over every buffer since New.
	received uint64
	outcomes [numOutcomes]uint64
}

// outcome is what became of a packet taken off the ring.
type outcome int

const (
	delivered   outcome = iota // released and sent
	unforwarded                // released, but the data path did not forward it
	droppedFull                // no room: over the session's or the total limit
	discarded                  // dropped as the SMF asked (DROBU), or with its session
	numOutcomes
)

var outcomeNames = [numOutcomes]string{delivered: "delivered", unforwarded: "unforwarded", droppedFull: "dropped_full", discarded: "discarded"}

type buffer struct {
	owner    Owner
	frames   []upfxdp.BufferedPacket
	received uint64 // records read from the ring, held or dropped
	stats    Stats
	notified bool
	// releasing: the FAR forwards once the frames are out; released: it
	// does.
	releasing, released bool
	// adopted: a previous run armed it (Adopt).
	adopted bool
}

// New opens the ring of buffered packets and a raw socket in the calling
// thread's network namespace, the one of the interfaces.
func New(dp *upfxdp.Datapath, cfg Config) (*Manager, error) {
	if cfg.SessionPackets <= 0 {
		cfg.SessionPackets = DefaultSessionPackets
	}
	if cfg.TotalPackets <= 0 {
		cfg.TotalPackets = DefaultTotalPackets
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	sock, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening a packet socket for buffered packets: %w", err)
	}
	// Straight to the driver, as XDP_REDIRECT sends: no queueing
	// discipline to reorder or hold the released frames.
	if err := unix.SetsockoptInt(sock, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); err != nil {
		unix.Close(sock)
		return nil, fmt.Errorf("packet socket: %w", err)
	}
	ring, err := dp.BufferedPackets()
	if err != nil {
		unix.Close(sock)
		return nil, err
	}
	return &Manager{dp: dp, cfg: cfg, ring: ring, sock: sock,
		buffers: map[uint32]*buffer{}, limits: map[uint64]int{}, held: map[uint64]int{}}, nil
}

// SetNotify has f called with the first packet a buffer holds after Arm,
// the PDR it matched and that PDR's QFI (0: none). f runs on the goroutine
// of Run, outside the manager's lock.
func (m *Manager) SetNotify(f func(o Owner, pdr uint16, qfi uint8)) { m.notify.Store(&f) }

// Close stops Run and drops every held packet.
func (m *Manager) Close() error {
	return errors.Join(m.ring.Close(), unix.Close(m.sock))
}

// Arm readies a slot that no FAR uses yet to buffer for owner.
func (m *Manager) Arm(slot uint32, owner Owner) error {
	if err := m.dp.ResetBuffer(slot); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.buffers[slot] = &buffer{owner: owner}
	return nil
}

// Adopt takes over the buffers a previous run armed, by slot, as it left
// them; call it before Run. The packets the previous run had taken from
// the ring were in its memory and are lost: Adopt returns how many, those
// of buffers not taken over included. The ones it left in the ring are
// held as they were.
func (m *Manager) Adopt(owners map[uint32]Owner) (lost uint64) {
	left := map[uint32][]upfxdp.BufferedPacket{}
	for {
		p, err := m.ring.Read(time.Now())
		if err != nil {
			break
		}
		left[p.Buffer] = append(left[p.Buffer], p)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for slot, owner := range owners {
		handed, released := m.dp.BufferState(slot)
		// One that held a packet had its Downlink Data Report sent, or
		// journaled to be sent.
		b := &buffer{owner: owner, adopted: true, notified: handed > 0}
		m.buffers[slot] = b
		if released {
			b.released = true
			continue
		}
		b.received = handed
		b.frames = left[slot]
		m.held[owner.SEID] += len(b.frames)
		m.total += len(b.frames)
		lost += handed - uint64(len(b.frames))
	}
	for slot, frames := range left {
		if _, ok := owners[slot]; !ok {
			lost += uint64(len(frames))
		}
	}
	m.lost.Add(lost)
	return lost
}

// Lost is the number of packets the buffers of a previous run held in its
// memory, which it lost with it (Adopt), for telemetry.
func (m *Manager) Lost() uint64 { return m.lost.Load() }

// Pending reports whether a slot is armed and not yet released: its FAR
// still buffers, or forwards only once the held packets are out.
func (m *Manager) Pending(slot uint32) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.buffers[slot]
	return b != nil && !b.released
}

// Release has the held packets sent, then the slot's FARs forward.
func (m *Manager) Release(slot uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b := m.buffers[slot]; b != nil && !b.released {
		b.releasing = true
	}
}

// Hold stops a release that has not finished: the FAR buffers again.
func (m *Manager) Hold(slot uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b := m.buffers[slot]; b != nil {
		b.releasing = false
	}
}

// Discard drops a slot's held packets and forgets it; it returns how many
// were dropped.
func (m *Manager) Discard(slot uint32) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.drop(slot)
	delete(m.buffers, slot)
	return n
}

// Drop drops a slot's held packets and keeps it armed; it returns how many
// were dropped. The next packet held is a first one again, which Notify
// tells: the SMF drops what is held (DROBU) before the FAR's action applies
// again (TS 29.244 §8.2.59), to hear of new data when the UE was not paged.
func (m *Manager) Drop(slot uint32) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b := m.buffers[slot]; b != nil {
		b.notified = false
	}
	return m.drop(slot)
}

// drop empties a slot's buffer, counting what it held as discarded.
func (m *Manager) drop(slot uint32) int {
	b := m.buffers[slot]
	if b == nil {
		return 0
	}
	n := len(b.frames)
	m.unhold(b.owner.SEID, n)
	b.frames = nil
	m.count(b, discarded, uint64(n))
	return n
}

// count notes that n packets of b came to an outcome.
func (m *Manager) count(b *buffer, o outcome, n uint64) {
	m.outcomes[o] += n
	switch o {
	case delivered:
		b.stats.Delivered += n
	case unforwarded:
		b.stats.Unforwarded += n
	case droppedFull:
		b.stats.Dropped += n
	case discarded:
		b.stats.Discarded += n
	}
}

// unhold takes n packets of a session off the counts of held ones.
func (m *Manager) unhold(seid uint64, n int) {
	if m.held[seid] -= n; m.held[seid] <= 0 {
		delete(m.held, seid)
	}
	m.total -= n
}

// SetLimit sets how many packets a session's buffers hold at most (the
// BAR's Suggested Buffering Packets Count); 0 restores the default.
func (m *Manager) SetLimit(seid uint64, packets int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if packets <= 0 {
		delete(m.limits, seid)
	} else {
		m.limits[seid] = packets
	}
}

// Stats are a slot's figures; false for a slot not in use.
func (m *Manager) Stats(slot uint32) (Stats, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.buffers[slot]
	if b == nil {
		return Stats{}, false
	}
	s := b.stats
	s.Held = len(b.frames)
	s.Dropped += m.dp.BufferDropped(slot)
	return s, true
}

// Run moves packets from the ring into their buffers and out of the
// released ones until ctx is done or the manager is closed.
func (m *Manager) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		p, err := m.ring.Read(time.Now().Add(poll))
		switch {
		case err == nil:
			m.take(p)
			continue // empty the ring first: a release waits for it
		case errors.Is(err, os.ErrClosed):
			return nil
		case !errors.Is(err, os.ErrDeadlineExceeded):
			m.cfg.Log.Error("reading buffered packets", "err", err)
		}
		m.releaseAll()
	}
	return nil
}

// take puts a packet from the ring into its buffer, or drops it when there
// is no room.
func (m *Manager) take(p upfxdp.BufferedPacket) {
	m.mu.Lock()
	m.received++
	b := m.buffers[p.Buffer]
	if b == nil { // discarded while the packet was in the ring
		m.outcomes[discarded]++
		m.mu.Unlock()
		return
	}
	b.received++
	seid := b.owner.SEID
	limit, ok := m.limits[seid]
	if !ok {
		limit = m.cfg.SessionPackets
	}
	// Packets that come while a release is under way are on their way
	// out: only the total bounds them.
	if m.held[seid] >= limit && !b.releasing || m.total >= m.cfg.TotalPackets {
		if b.stats.Dropped == 0 {
			m.cfg.Log.Warn("a downlink buffer is full: dropping packets", "seid", seid, "far", b.owner.FAR,
				"session_limit", limit, "session_held", m.held[seid], "total_held", m.total)
		}
		m.count(b, droppedFull, 1)
		m.mu.Unlock()
		return
	}
	b.frames = append(b.frames, p)
	m.held[seid]++
	m.total++
	first := !b.notified
	b.notified = true
	m.mu.Unlock()
	if f := m.notify.Load(); first && f != nil {
		(*f)(b.owner, p.PDR, p.QFI)
	}
}

// releaseAll sends the packets of the buffers being released and releases
// those whose every packet is out.
func (m *Manager) releaseAll() {
	m.mu.Lock()
	var slots []uint32
	for slot, b := range m.buffers {
		if b.releasing {
			slots = append(slots, slot)
		}
	}
	m.mu.Unlock()
	for _, slot := range slots {
		for m.sendNext(slot) {
		}
		m.mu.Lock()
		if b := m.buffers[slot]; b != nil && b.releasing && len(b.frames) == 0 {
			if handed, _ := m.dp.BufferState(slot); b.adopted && handed < b.received {
				// A packet the data path handed over before Adopt read
				// the count, and put in the ring after Adopt emptied it,
				// was counted twice: the data path's count is right.
				b.received = handed
			}
			ok, err := m.dp.ReleaseBuffer(slot, b.received)
			if err != nil {
				m.cfg.Log.Error("releasing a buffer", "slot", slot, "err", err)
			}
			b.released, b.releasing = ok, !ok
		}
		m.mu.Unlock()
	}
}

// sendNext sends the oldest packet of a slot being released; false when
// there is none.
func (m *Manager) sendNext(slot uint32) bool {
	m.mu.Lock()
	b := m.buffers[slot]
	if b == nil || !b.releasing || len(b.frames) == 0 {
		m.mu.Unlock()
		return false
	}
	p := b.frames[0]
	b.frames = b.frames[1:]
	m.unhold(b.owner.SEID, 1)
	m.mu.Unlock()

	// One goroutine sends, so the frames leave in order.
	out, ifindex, err := m.dp.Release(p.Iface, p.Frame)
	if err == nil && ifindex != 0 {
		err = unix.Sendto(m.sock, out, 0, &unix.SockaddrLinklayer{Ifindex: int(ifindex)})
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case err != nil:
		m.cfg.Log.Error("sending a buffered packet", "seid", b.owner.SEID, "err", err)
		m.count(b, unforwarded, 1)
	case ifindex == 0:
		m.count(b, unforwarded, 1)
	default:
		m.count(b, delivered, 1)
	}
	return true
}
