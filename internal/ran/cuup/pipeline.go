package cuup

import (
	"bytes"
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xdp5g/xdp5g/internal/ran/nru"
	"github.com/xdp5g/xdp5g/internal/upf/gtpu"
)

// Packet is a G-PDU the CU-UP received: its T-PDU in a buffer with room
// around it, and what the classifier (or the socket path's parser) read of
// its headers.
type Packet struct {
	Role Role
	// Bearer indexes the bearer table (the low 24 bits of the TEID) and
	// TEID is the tunnel's, checked against the bearer's.
	Bearer, TEID uint32
	QFI          uint8 // N3: from the PDU Session Container
	RQI          bool
	NRRAN        []byte // F1-U: the NR RAN Container's content; nil if none
	// The T-PDU is Buf[Off:Off+Len]; the octets before it, and after it up
	// to cap(Buf), are the pipeline's to write headers and MAC-I into.
	Buf      []byte
	Off, Len int
	Handle   uint64 // the IO's name for Buf
}

// IO is the I/O layer of a Worker: one queue's sockets.
type IO interface {
	// Send sends the G-PDU buf[start:end] to peer's GTP-U port out of
	// role's interface; buf is a packet's Buf, or one from Buffer, and
	// handle names it. The octets before start are the IO's for its own
	// headers: Headroom of them at least.
	Send(role Role, peer netip.Addr, buf []byte, start, end int, handle uint64)
	// Free takes back a buffer that is not sent.
	Free(handle uint64)
	// Buffer lends an empty buffer, whose payload may start at Headroom; false
	// when none is left.
	Buffer() (buf []byte, handle uint64, ok bool)
	// Headroom is the room the IO needs before a G-PDU.
	Headroom() int
}

// Worker carries the packets of one queue through SDAP and PDCP: the
// downlink from N3 to F1-U, the uplink from F1-U to N3. A Worker is used by
// one goroutine; several Workers share the CU-UP.
type Worker struct {
	c       *CUUP
	name    string
	io      IO
	now     time.Time
	scratch [64]byte  // an NR-U frame
	pulled  [][]byte  // SDUs leaving a DRB's queue
	jobs    []sealJob // the batch's downlink PDUs
	opens   []openJob // its uplink PDUs of pooled DRBs
	stats   WorkerStats
}

// WorkerStats are what a Worker did; each field counts packets. The
// worker adds with atomic operations, so they can be read at any time.
type WorkerStats struct {
	// Worker names the worker: its queue, or the socket it reads.
	Worker        string `json:"worker,omitempty"`
	Downlink      uint64 `json:"downlink"`     // G-PDUs received on N3
	Uplink        uint64 `json:"uplink"`       // on F1-U
	DownlinkSent  uint64 `json:"downlinkSent"` // G-PDUs sent on F1-U
	UplinkSent    uint64 `json:"uplinkSent"`   // on N3
	UnknownTunnel uint64 `json:"unknownTunnel"`
	NoDRB         uint64 `json:"noDrb"` // a QoS flow mapped to no DRB
	// Refused by PDCP (integrity, window, duplicate, malformed: its
	// counters say which) or SDAP.
	Refused uint64 `json:"refused"`
	NoRoom  uint64 `json:"noRoom"` // no headroom, tailroom or buffer for what is to be sent
	Held    uint64 `json:"held"`   // downlink SDUs the DU's flow control held
}

func add(counter *uint64) { atomic.AddUint64(counter, 1) }

// addCounters adds every counter (uint64 field) of from, read atomically
// as its writers add with atomic operations, to to's.
func addCounters[T any](to, from *T) {
	t, f := reflect.ValueOf(to).Elem(), reflect.ValueOf(from).Elem()
	for i := range t.NumField() {
		if t.Field(i).Kind() == reflect.Uint64 {
			t.Field(i).SetUint(t.Field(i).Uint() + atomic.LoadUint64(f.Field(i).Addr().Interface().(*uint64)))
		}
	}
}

// Stats are the CU-UP's user-layer figures: its workers' summed, each
// worker's (one per queue and, on the socket path, per interface), and
// those of the paths.
type Stats struct {
	WorkerStats
	Workers []WorkerStats `json:"workers"`
	Sockets SocketStats   `json:"sockets"`
	XDP     XDPStats      `json:"xdp"`
}

// Stats reads the workers' counters.
func (c *CUUP) Stats() Stats {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var s Stats
	for _, w := range c.workers {
		one := WorkerStats{Worker: w.name}
		addCounters(&one, &w.stats)
		addCounters(&s.WorkerStats, &one)
		s.Workers = append(s.Workers, one)
	}
	addCounters(&s.Sockets, &c.socketStats)
	addCounters(&s.XDP, &c.xdpStats)
	return s
}

// NewWorker returns a worker that sends through io, named in the stats by
// name (named before the stats can see it).
func (c *CUUP) NewWorker(name string, io IO) *Worker {
	w := &Worker{c: c, io: io, name: name}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.workers = append(c.workers, w)
	return w
}

// Close takes the worker out of the CU-UP's stats: its queue or socket is
// closed.
func (w *Worker) Close() {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	w.c.workers = slices.DeleteFunc(w.c.workers, func(o *Worker) bool { return o == w })
}

// Process handles a batch of received packets at now; each packet's buffer
// is sent or freed through the IO.
func (w *Worker) Process(pkts []Packet, now time.Time) {
	w.now = now
	w.c.mu.RLock()
	defer w.c.mu.RUnlock()
	for i := range pkts {
		p := &pkts[i]
		b := w.c.bearer(p)
		if p.Role == N3 {
			add(&w.stats.Downlink)
			if b.session != nil {
				w.downlink(p, b.session)
				continue
			}
		} else {
			add(&w.stats.Uplink)
			if b.drb != nil {
				w.uplink(p, b.drb)
				continue
			}
		}
		add(&w.stats.UnknownTunnel)
		w.io.Free(p.Handle)
	}
	w.sendBatch()
}

// bearer is the table's entry for a packet's tunnel, nil fields if the
// tunnel is no bearer's.
func (c *CUUP) bearer(p *Packet) bearer {
	if p.Bearer >= uint32(len(c.bearers)) {
		return bearer{}
	}
	b := c.bearers[p.Bearer]
	switch {
	case p.Role == N3 && b.session != nil && b.drb == nil && b.session.dlTEID == p.TEID:
		return b
	case p.Role == F1U && b.drb != nil && b.drb.ulTEID == p.TEID:
		return b
	}
	return bearer{}
}

// downlink takes a packet from the UPF of PDU session ps.
func (w *Worker) downlink(p *Packet, ps *pduSession) {
	id, start, err := ps.sdap.Downlink(p.Buf, p.Off, p.QFI, p.RQI)
	if err != nil {
		add(&w.stats.NoDRB)
		w.io.Free(p.Handle)
		return
	}
	d := ps.byID[id]
	st := d.state
	st.mu.Lock()
	defer st.mu.Unlock()
	end := p.Off + p.Len
	st.stats.DownlinkSDUs++
	st.stats.DownlinkBytes += uint64(p.Len)
	switch {
	case d.dlTunnel == nil:
		st.stats.NoDUTunnel++
		w.io.Free(p.Handle)
	case st.limited && (st.credit < int64(end-start) || st.queue.Len() > 0):
		// Held as a copy: the DU may take seconds, frames are few.
		w.hold(d, p.Buf[start:end])
		w.io.Free(p.Handle)
	default:
		w.sendDownlink(d, p.Buf, start, end, p.Handle)
	}
}

// hold queues a downlink SDU until the DU's flow control lets it go.
func (w *Worker) hold(d *drb, sdu []byte) {
	st := d.state
	if err := st.queue.Push(bytes.Clone(sdu), len(sdu), w.now); err != nil {
		st.stats.QueueDropped++
		return
	}
	st.stats.Queued++
	add(&w.stats.Held)
	w.c.timers.schedule(d)
}

// f1uHeaderLen is the GTP-U header of a downlink F1-U G-PDU: its NR RAN
// Container carries a DL USER DATA frame of fixed length.
var f1uHeaderLen = gtpu.GPDUHeaderLen((&nru.DLUserData{}).Len())

// sealJob is a downlink PDU between numbering and sending: its security
// runs on the worker or on the crypto pool, and the batch's PDUs are sent
// in the order they were numbered.
type sealJob struct {
	d        *drb
	buf      []byte // buf[:off] headers, buf[off:] the SDU; then with the MAC-I
	pdu, off int
	count    uint32
	nruSN    uint32
	handle   uint64
	pooled   bool
	done     *sync.WaitGroup
}

func (j *sealJob) crypto() { j.buf = j.d.state.tx.Seal(j.buf, j.off, j.count) }
func (j *sealJob) finish() { j.done.Done() }

// openJob is an uplink PDU of a pooled DRB between its Check, in order,
// and its Accept, in order: its Open runs on the pool.
type openJob struct {
	d      *drb
	pdu    []byte
	count  uint64
	handle uint64
	sdu    []byte
	intact bool
	done   *sync.WaitGroup
}

func (j *openJob) crypto() { j.sdu, j.intact = j.d.state.rx.Open(j.pdu, j.count) }
func (j *openJob) finish() { j.done.Done() }

// sendDownlink numbers the SDU buf[start:end] of a DRB (whose lock the
// caller holds) as the next PDCP PDU and NR-U frame; the batch's end seals
// and sends it.
func (w *Worker) sendDownlink(d *drb, buf []byte, start, end int, handle uint64) {
	st := d.state
	if start-st.tx.Headroom()-f1uHeaderLen < w.io.Headroom() {
		add(&w.stats.NoRoom)
		w.io.Free(handle)
		return
	}
	pdu, count, err := st.tx.Number(buf[:end], start)
	if err != nil {
		add(&w.stats.NoRoom) // the checks of Number are of room, or COUNT exhausted
		w.io.Free(handle)
		return
	}
	w.jobs = append(w.jobs, sealJob{d: d, buf: buf[:end], pdu: pdu, off: start, count: count, nruSN: st.nruSN,
		handle: handle, pooled: d.placement.Load() == uint32(Pool) && w.c.pool != nil})
	st.nruSN = (st.nruSN + 1) & nru.MaxSN
	st.credit -= int64(end - start)
}

// sendBatch seals the PDUs the batch numbered and opens the uplink PDUs of
// pooled DRBs it checked, those of pooled DRBs on the pool with this
// worker's help, the others here; then it sends the downlink in order
// (header of the NR-U frame, GTP-U to the DU) and has the uplink receivers
// accept theirs in order.
func (w *Worker) sendBatch() {
	var pooled sync.WaitGroup
	for i := range w.jobs {
		if j := &w.jobs[i]; j.pooled {
			pooled.Add(1)
			j.done = &pooled
			w.c.pool.jobs <- j
		} else {
			j.crypto()
		}
	}
	for i := range w.opens {
		j := &w.opens[i]
		pooled.Add(1)
		j.done = &pooled
		w.c.pool.jobs <- j
	}
	w.c.pool.help(&pooled)
	for i := range w.jobs {
		j := &w.jobs[i]
		frame := nru.DLUserData{SN: j.nruSN}
		n, _ := frame.Put(w.scratch[:]) // fits: its length is fixed
		start := j.pdu - f1uHeaderLen
		gtpu.PutGPDUHeader(j.buf[start:], j.d.dlTunnel.TEID, len(j.buf)-j.pdu, nru.ExtensionType, w.scratch[:n])
		w.io.Send(F1U, j.d.dlTunnel.Address, j.buf, start, len(j.buf), j.handle)
		add(&w.stats.DownlinkSent)
	}
	clear(w.jobs)
	w.jobs = w.jobs[:0]
	for i := range w.opens {
		j := &w.opens[i]
		st := j.d.state
		st.mu.Lock()
		st.worker = w
		if err := st.rx.Accept(j.count, j.sdu, j.intact, w.now); err != nil {
			add(&w.stats.Refused)
		}
		st.worker = nil
		w.c.timers.schedule(j.d)
		st.mu.Unlock()
		w.io.Free(j.handle)
	}
	clear(w.opens)
	w.opens = w.opens[:0]
}

// uplink takes a packet from the DU of DRB d.
func (w *Worker) uplink(p *Packet, d *drb) {
	st := d.state
	st.mu.Lock()
	defer st.mu.Unlock()
	if p.NRRAN != nil {
		w.deliveryStatus(d, p.NRRAN)
	}
	pdu := p.Buf[p.Off : p.Off+p.Len]
	switch {
	case p.Len == 0:
	case d.placement.Load() == uint32(Pool) && w.c.pool != nil:
		count, data, err := st.rx.Check(pdu)
		if err != nil {
			add(&w.stats.Refused)
		}
		if data {
			// The frame is freed once the batch's end accepted it.
			w.opens = append(w.opens, openJob{d: d, pdu: pdu, count: count, handle: p.Handle})
			return
		}
	default:
		st.worker = w
		if err := st.rx.Receive(pdu, w.now); err != nil {
			add(&w.stats.Refused)
		}
		st.worker = nil
		w.c.timers.schedule(d)
	}
	w.io.Free(p.Handle)
}

// deliver is the uplink PDCP receiver's: an SDU for the UPF, sent with the
// PDU Session Container of its QoS flow (TS 38.415 UL PDU SESSION
// INFORMATION).
func (d *drb) deliver(_ uint32, sdu []byte) {
	st, ps := d.state, d.session
	w := st.worker
	ul, err := ps.sdap.Uplink(d.cfg.ID, sdu)
	switch {
	case err != nil:
		add(&w.stats.Refused)
		return
	case ul.EndMarker:
		st.stats.EndMarkers++
		return
	}
	st.stats.UplinkSDUs++
	st.stats.UplinkBytes += uint64(len(ul.SDU))
	buf, handle, ok := w.io.Buffer()
	container := gtpu.PDUSessionContent(gtpu.PDUSessionUL, ul.QFI)
	start := w.io.Headroom()
	hdr := gtpu.GPDUHeaderLen(len(container))
	if !ok || start+hdr+len(ul.SDU) > len(buf) {
		if ok {
			w.io.Free(handle)
		}
		add(&w.stats.NoRoom)
		return
	}
	n := copy(buf[start+hdr:], ul.SDU)
	gtpu.PutGPDUHeader(buf[start:], ps.ulTunnel.TEID, n, gtpu.ExtPDUSessionContainer, container[:])
	w.io.Send(N3, ps.ulTunnel.Address, buf, start, start+hdr+n, handle)
	add(&w.stats.UplinkSent)
}

// deliveryStatus takes the DU's flow control from a DL DATA DELIVERY
// STATUS (TS 38.425 5.4.2): the DRB may send the desired buffer size, and
// what its queue holds goes first.
func (w *Worker) deliveryStatus(d *drb, frame []byte) {
	st := d.state
	if t, err := nru.TypeOf(frame); err != nil || t != nru.TypeDLDataDeliveryStatus {
		return // assistance information: nothing to act on
	}
	if err := st.status.Decode(frame); err != nil {
		add(&w.stats.Refused)
		return
	}
	st.stats.StatusReports++
	st.stats.DesiredBuffer = st.status.DesiredBufferSize
	st.limited, st.credit = true, int64(st.status.DesiredBufferSize)
	w.sendHeld(d)
}

// sendHeld sends what a DRB's queue holds as far as its credit goes.
func (w *Worker) sendHeld(d *drb) {
	st := d.state
	for st.credit > 0 && st.queue.Len() > 0 {
		w.pulled = st.queue.Pull(w.pulled[:0], int(min(st.credit, 1<<30)), w.now)
		if len(w.pulled) == 0 {
			return
		}
		for _, sdu := range w.pulled {
			buf, handle, ok := w.io.Buffer()
			start := w.io.Headroom() + f1uHeaderLen + st.tx.Headroom()
			if !ok || start+len(sdu)+st.tx.Tailroom() > cap(buf) {
				if ok {
					w.io.Free(handle)
				}
				add(&w.stats.NoRoom)
				continue
			}
			n := copy(buf[start:cap(buf)], sdu)
			w.sendDownlink(d, buf[:cap(buf)], start, start+n, handle)
		}
		clear(w.pulled)
	}
}

// Tick runs the timers that are due at now: t-Reordering of uplink
// receivers, the discard timers of held downlink SDUs.
func (w *Worker) Tick(now time.Time) {
	w.now = now
	w.c.mu.RLock()
	defer w.c.mu.RUnlock()
	for _, d := range w.c.timers.due(now) {
		if w.c.bearers[d.index].drb != d {
			continue // removed since
		}
		st := d.state
		st.mu.Lock()
		st.scheduled = time.Time{} // due took it off the set
		st.worker = w
		st.rx.Expire(now)
		st.worker = nil
		st.queue.Expire(now)
		w.c.timers.schedule(d)
		st.mu.Unlock()
	}
}

// timerSet keeps the DRBs with a timer running, by when it expires.
type timerSet struct {
	mu       sync.Mutex
	deadline map[*drb]time.Time
}

// schedule notes when a DRB's next timer expires, or forgets it if none
// runs; the caller holds the DRB's lock. The set, shared by the workers,
// is only locked when the DRB's deadline changed: not for every packet.
func (t *timerSet) schedule(d *drb) {
	st := d.state
	next, ok := st.rx.NextDeadline()
	if q, qok := st.queue.NextDeadline(); qok && (!ok || q.Before(next)) {
		next, ok = q, true
	}
	if !ok {
		next = time.Time{}
	}
	if next.Equal(st.scheduled) {
		return
	}
	st.scheduled = next
	t.mu.Lock()
	defer t.mu.Unlock()
	if !ok {
		delete(t.deadline, d)
		return
	}
	if t.deadline == nil {
		t.deadline = map[*drb]time.Time{}
	}
	t.deadline[d] = next
}

// due takes the DRBs whose timer has expired at now off the set.
func (t *timerSet) due(now time.Time) []*drb {
	t.mu.Lock()
	defer t.mu.Unlock()
	var list []*drb
	for d, at := range t.deadline {
		if !at.After(now) {
			list = append(list, d)
			delete(t.deadline, d)
		}
	}
	return slices.Clip(list)
}
