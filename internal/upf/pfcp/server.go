// Package pfcp is the UPF's PFCP node layer (3GPP TS 29.244 Release 16/17)
// over UDP: heartbeats, associations with SMFs, retransmission handling, and
// the dispatch of session requests to a SessionHandler that gives them their
// meaning.
package pfcp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/platform/freebind"
	"github.com/xdp5g/xdp5g/internal/upf/n4state"
)

// Defaults of the Config settings left zero.
const (
	DefaultPort              = 8805
	DefaultListen            = ":8805" // all addresses
	DefaultHeartbeatInterval = 10 * time.Second
	DefaultT1                = 3 * time.Second
	DefaultN1                = 3
)

const (
	maxDatagram = 64 << 10 // more than any UDP payload
	queueLen    = 1024     // requests waiting for the worker, and responses for the sender
	// receiveBuffer holds a burst of requests while the worker is busy
	// (the kernel caps it at net.core.rmem_max).
	receiveBuffer = 4 << 20
)

// Config sets up a Server.
type Config struct {
	// Listen is the UDP address to serve.
	Listen string
	// NodeID is the UPF's Node ID: an IPv4 or IPv6 address or an FQDN.
	NodeID string
	// Peers are the SMFs ("host:port") the UPF sets up associations with
	// itself, retrying until they accept.
	Peers []string
	// AllowedPeers are where messages are taken from, besides the
	// addresses Peers resolve to; messages from elsewhere are dropped
	// unread (Stats.NotAllowed). nil takes them from everywhere.
	AllowedPeers []netip.Prefix
	// Features are the UP Function Features the UPF advertises: exactly
	// these, none when empty.
	Features []UPFeature
	// HeartbeatInterval is the time between heartbeats to each associated
	// peer, and between association attempts to a configured peer.
	HeartbeatInterval time.Duration
	// T1 is how long a request waits for its response before it is sent
	// again, N1 times at most.
	T1 time.Duration
	N1 int

	Handler SessionHandler
	// Journal, if set, keeps the server's state and the handler's across
	// restarts (see state.go): each request is served in a transaction
	// (n4state.Log.Begin), which its response waits for. Restored is the
	// state a previous run kept, to take up; without one, the server has
	// a new Recovery Time Stamp, the time of New.
	Journal  *n4state.Log
	Restored *State
	// OnPeerRestarted and OnPeerLost, if set, are told of an associated
	// peer's restart (after which Handler.DropPeer follows) and of its
	// heartbeats going unanswered. They are called like Handler.
	OnPeerRestarted func(nodeID string)
	OnPeerLost      func(nodeID string)
	Log             *slog.Logger
}

// Server is a PFCP endpoint of the UPF.
type Server struct {
	cfg     Config
	handler SessionHandler
	log     *slog.Logger
	conn    *net.UDPConn
	rawConn syscall.RawConn // conn's, for the ioctl of nothingToRead

	nodeID, recovery, features *ie.IE // the UPF's own IEs; features nil for none

	// jobs are everything that calls the handler, so that it sees one
	// call at a time, in order: they run on the worker goroutine, or on
	// the reader when nothing else is queued or running (see
	// receiveMessage). running is held by the job that runs; pending
	// counts those queued or running.
	jobs    chan func()
	running sync.Mutex
	pending atomic.Int32
	// sends are the responses of the sender goroutine: a job leaves the
	// encoding, journaling, caching and sending of a response to it and
	// serves the next request, when one is waiting.
	sends  chan outgoing
	unsent atomic.Int32 // responses given to the sender and not sent yet
	cache  *responseCache
	tx     *transactions
	assocs associations
	stats  counters
	// peerAddrs are the addresses Peers resolved to: messages from them
	// are taken whatever AllowedPeers says.
	peerAddrs sync.Map // netip.Addr → struct{}

	metrics *metrics // what Stats does not count, for Prometheus

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// New starts a server listening on cfg.Listen, and its association
// attempts to cfg.Peers. Its Recovery Time Stamp is the time of the call.
func New(cfg Config) (*Server, error) {
	if cfg.Handler == nil {
		return nil, errors.New("pfcp: no session handler")
	}
	if err := CheckNodeID(cfg.NodeID); err != nil {
		return nil, fmt.Errorf("pfcp: node ID: %w", err)
	}
	cfg.Listen = cmp.Or(cfg.Listen, DefaultListen)
	cfg.HeartbeatInterval = cmp.Or(cfg.HeartbeatInterval, DefaultHeartbeatInterval)
	cfg.T1 = cmp.Or(cfg.T1, DefaultT1)
	cfg.N1 = cmp.Or(cfg.N1, DefaultN1)
	if cfg.HeartbeatInterval < 0 || cfg.T1 < 0 || cfg.N1 < 0 {
		return nil, errors.New("pfcp: negative heartbeat interval, T1 or N1")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	laddr, err := net.ResolveUDPAddr("udp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("pfcp: listen address: %w", err)
	}
	conn, err := freebind.ListenUDP("udp", laddr.String())
	if err != nil {
		return nil, fmt.Errorf("pfcp: %w", err)
	}
	if err := conn.SetReadBuffer(receiveBuffer); err != nil {
		cfg.Log.Warn("PFCP receive buffer not enlarged", "err", err)
	}
	rawConn, err := conn.SyscallConn()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("pfcp: %w", err)
	}
	s := &Server{
		cfg:      cfg,
		handler:  cfg.Handler,
		log:      cfg.Log,
		conn:     conn,
		rawConn:  rawConn,
		nodeID:   nodeIDIE(cfg.NodeID),
		features: upFeaturesIE(cfg.Features),
		jobs:     make(chan func(), queueLen),
		sends:    make(chan outgoing, queueLen),
		// Keep responses while the peer may still retransmit, assuming it
		// uses the same T1 and N1.
		cache:   newResponseCache(cfg.T1 * time.Duration(cfg.N1+1)),
		tx:      newTransactions(),
		assocs:  associations{byNode: map[string]*association{}, log: cfg.Journal},
		metrics: newMetrics(),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if st := cfg.Restored; st != nil && st.Recovery != 0 {
		s.restore(st)
	} else {
		s.recovery = ie.NewRecoveryTimeStamp(time.Now())
		ts, _ := recoveryStamp(s.recovery)
		txn := cfg.Journal.Txn()
		txn.Put(n4state.KindRecovery, func(e *n4state.Enc) { e.Uint(uint64(ts)) })
		txn.Commit()
		txn.Wait()
	}
	s.wg.Go(s.readLoop)
	s.wg.Go(func() { s.drain(s.jobs, s.runJob) })
	s.wg.Go(s.sendAll)
	for _, peer := range cfg.Peers {
		s.wg.Go(func() { s.keepAssociated(peer) })
	}
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() netip.AddrPort { return s.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

// Stats returns the server's counters.
func (s *Server) Stats() Stats { return s.stats.snapshot() }

// Recovery is the server's Recovery Time Stamp.
func (s *Server) Recovery() time.Time {
	ts, _ := recoveryStamp(s.recovery)
	return recoveryTime(ts)
}

// Snapshot writes the server's part of the state into a compaction of its
// journal (n4state.Log.Compact).
func (s *Server) Snapshot(l *n4state.Log) { s.snapshot(l) }

// Associations lists the established associations by Node ID.
func (s *Server) Associations() []Association { return s.assocs.list() }

// Close stops the server and waits for its goroutines. Sessions stay: Close
// calls no DropPeer. It must not be called from a handler.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		s.closeErr = s.conn.Close()
		s.wg.Wait()
		// Responses the sender had not got to: what their requests
		// changed is journaled all the same, and nothing waits behind.
		var left []outgoing
		for len(s.sends) > 0 {
			left = append(left, <-s.sends)
		}
		s.sendBatch(left)
	})
	return s.closeErr
}

func (s *Server) readLoop() {
	buf := make([]byte, maxDatagram)
	for {
		n, from, err := s.conn.ReadFromUDPAddrPort(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			s.log.Warn("PFCP receive failed", "err", err)
			continue
		}
		s.stats.received.Add(1)
		// Decoded messages alias the bytes and outlive the buffer.
		s.receive(slices.Clone(buf[:n]), netip.AddrPortFrom(from.Addr().Unmap(), from.Port()), time.Now())
	}
}

// receive serves a datagram read at time read.
func (s *Server) receive(datagram []byte, from netip.AddrPort, read time.Time) {
	defer s.recoverPanic()
	if !s.allowed(from.Addr()) {
		s.stats.notAllowed.Add(1)
		s.log.Debug("PFCP datagram dropped: the source is not an allowed peer", "from", from)
		return
	}
	for rest := datagram; ; {
		msg, next, err := nextMessage(rest)
		if err != nil {
			s.countDropped(err)
			if seq, ok := otherVersionRequest(rest); ok {
				if b, err := message.NewVersionNotSupportedResponse(seq).Marshal(); err == nil {
					s.metrics.sent(b, true)
					s.send(b, from)
				}
			}
			s.log.Debug("PFCP datagram dropped", "from", from, "err", err)
			return
		}
		s.receiveMessage(msg, from, read)
		if len(next) == 0 {
			return
		}
		rest = next
	}
}

// allowed says whether messages from ip are taken.
func (s *Server) allowed(ip netip.Addr) bool {
	if s.cfg.AllowedPeers == nil {
		return true
	}
	if _, ok := s.peerAddrs.Load(ip); ok {
		return true
	}
	for _, p := range s.cfg.AllowedPeers {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

func (s *Server) countDropped(err error) {
	switch err {
	case errTruncated:
		s.stats.truncated.Add(1)
	case errBadLength:
		s.stats.badLength.Add(1)
	case errBadVersion:
		s.stats.badVersion.Add(1)
	}
}

func (s *Server) receiveMessage(b []byte, from netip.AddrPort, read time.Time) {
	k := kindOf(b[1])
	switch {
	case k == unserved:
		s.stats.unknownType.Add(1)
		return
	case (b[0]&flagS != 0) != (b[1] >= firstSessionType):
		s.stats.badHeader.Add(1)
		return
	}
	msg, err := message.Parse(b)
	if err == nil && !framed(b[headerLen(b):]) {
		err = errIEPastEnd
	}
	if err != nil {
		s.stats.undecodable.Add(1)
		s.log.Debug("PFCP message undecodable", "from", from, "type", b[1], "err", err)
		return
	}
	if k == response {
		if s.tx.deliver(from.Addr(), msg) {
			s.metrics.responseReceived(b)
		} else {
			s.stats.unmatchedResponses.Add(1)
		}
		return
	}
	key := cacheKey{from: from, seq: msg.Sequence(), msgType: msg.MessageType()}
	if cached, fresh := s.cache.begin(key, read); !fresh {
		s.stats.retransmissions.Add(1)
		if cached != nil {
			s.send(cached, from)
		}
		return
	}
	body := b[headerLen(b):]
	job := func() { s.serve(msg, body, from, key, read) }
	// With nothing queued or running, and no request behind this one,
	// the reader serves it itself: waking the worker would only delay it.
	// With requests behind it, the worker serves it while the reader
	// parses the next.
	if s.pending.Add(1) == 1 && s.nothingToRead() {
		s.runJob(job)
		return
	}
	select {
	case s.jobs <- job:
	default: // the peer retransmits
		s.pending.Add(-1)
		s.cache.forget(key)
		s.stats.overload.Add(1)
	}
}

// nothingToRead says no datagram waits on the socket.
func (s *Server) nothingToRead() bool {
	var waiting int
	var err error
	ctlErr := s.rawConn.Control(func(fd uintptr) { waiting, err = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
	return ctlErr == nil && err == nil && waiting == 0
}

// serve answers a request, as a job, and leaves the response to the
// sender.
func (s *Server) serve(req message.Message, body []byte, from netip.AddrPort, key cacheKey, read time.Time) {
	s.metrics.requestReceived(req.MessageType())
	answered := false
	txn := s.cfg.Journal.Begin()
	defer func() {
		if !answered {
			txn.Commit() // what the request changed, without its response
			s.cache.forget(key)
		}
	}()
	resp := func() message.Message {
		defer s.cfg.Journal.End()
		return s.answer(req, body, from)
	}()
	if resp == nil {
		return
	}
	resp.SetSequenceNumber(req.Sequence())
	// With no other job waiting and no response before it still to send,
	// the job sends the response itself: the hand-over to the sender
	// would only delay it.
	if s.pending.Load() == 1 && s.unsent.Load() == 0 {
		answered = true
		s.sendResponse(resp, key, read, txn)
		return
	}
	s.unsent.Add(1)
	select {
	case s.sends <- outgoing{msg: resp, key: key, read: read, txn: txn}:
	case <-s.ctx.Done():
		// Closing: not sent, but journaled with what the request changed
		// (waiting would wait for the responses queued before it, which
		// Close journals once this job is done).
		s.unsent.Add(-1)
		s.cache.forget(key)
		s.journalResponse(resp, key, txn)
		s.cfg.Journal.Flush()
	}
	answered = true
}

// sendResponse encodes, caches and sends the response to a request read at
// time read, by the job (see serve), once what the request changed and the
// response are written (journalResponse).
func (s *Server) sendResponse(resp message.Message, key cacheKey, read time.Time, txn *n4state.Txn) {
	r := outgoing{msg: resp, key: key, read: read, txn: txn}
	r.encode(s)
	s.cfg.Journal.Flush()
	r.send(s)
}

// outgoing is a response the sender sends.
type outgoing struct {
	msg     message.Message
	key     cacheKey
	read    time.Time
	txn     *n4state.Txn
	encoded []byte
	at      time.Time // when encoded
}

// sendAll sends the responses the jobs hand over until the server closes:
// those waiting together are written to the journal with one call (group
// commit), then sent.
func (s *Server) sendAll() {
	batch := make([]outgoing, 0, queueLen)
	for {
		select {
		case <-s.ctx.Done():
			return
		case r := <-s.sends:
			batch = append(batch[:0], r)
		}
		for more := true; more && len(batch) < cap(batch); {
			select {
			case r := <-s.sends:
				batch = append(batch, r)
			default:
				more = false
			}
		}
		s.sendBatch(batch)
	}
}

func (s *Server) sendBatch(batch []outgoing) {
	for i := range batch {
		s.run(func() { batch[i].encode(s) })
	}
	s.cfg.Journal.Flush()
	for i := range batch {
		s.run(func() { batch[i].send(s) })
		s.unsent.Add(-1)
	}
}

// encode encodes the response and journals it (journalResponse), leaving
// the writing to a Flush; a response it cannot encode is not cached, so a
// retransmission is served afresh.
func (r *outgoing) encode(s *Server) {
	var err error
	defer func() {
		if r.encoded == nil {
			s.cache.forget(r.key)
		}
	}()
	if r.encoded, r.at, err = s.journalResponse(r.msg, r.key, r.txn); err != nil {
		r.encoded = nil
		s.log.Error("PFCP response not encodable", "response", r.msg.MessageTypeName(), "err", err)
	}
}

// send caches and sends an encoded response once its entry is written.
func (r *outgoing) send(s *Server) {
	if r.encoded == nil {
		return
	}
	r.txn.Wait()
	s.cache.finish(r.key, r.encoded, r.at)
	s.metrics.sent(r.encoded, true)
	s.send(r.encoded, r.key.from)
	s.stats.handled(time.Since(r.read))
}

// journalResponse encodes a response and completes its request's
// transaction, with the response if the request changed the state (after
// a restart, a retransmission of the request gets it again rather than
// being served twice); a Flush writes it.
func (s *Server) journalResponse(resp message.Message, key cacheKey, txn *n4state.Txn) ([]byte, time.Time, error) {
	defer txn.Complete()
	b, err := encode(resp)
	now := time.Now()
	if err == nil && !txn.Empty() {
		txn.Put(n4state.KindResponse, func(e *n4state.Enc) {
			encodeResponse(e, key, cachedResponse{encoded: b, expires: now.Add(s.cache.ttl)})
		})
	}
	return b, now, err
}

// drain runs the functions of a queue with do, one at a time, until the
// server closes.
func (s *Server) drain(queue chan func(), do func(func())) {
	for {
		select {
		case <-s.ctx.Done():
			return
		case f := <-queue:
			do(f)
		}
	}
}

// runJob runs a job counted in pending, alone.
func (s *Server) runJob(job func()) {
	s.running.Lock()
	defer s.pending.Add(-1)
	defer s.running.Unlock()
	s.run(job)
}

func (s *Server) run(job func()) {
	defer s.recoverPanic()
	job()
}

// onWorker runs f on the worker and waits for it; false when the server
// closed first or f panicked.
func (s *Server) onWorker(f func()) bool {
	done := make(chan bool, 1)
	job := func() {
		completed := false
		txn := s.cfg.Journal.Begin()
		defer func() {
			s.cfg.Journal.End()
			txn.Commit()
			done <- completed
		}()
		f()
		completed = true
	}
	s.pending.Add(1)
	select {
	case s.jobs <- job:
	case <-s.ctx.Done():
		s.pending.Add(-1)
		return false
	}
	select {
	case completed := <-done:
		return completed
	case <-s.ctx.Done():
		return false
	}
}

// recoverPanic is the last line of defence against a malformed message
// (or a handler) crashing the daemon; it must be deferred directly.
func (s *Server) recoverPanic() {
	if r := recover(); r != nil {
		s.stats.panics.Add(1)
		s.log.Error("PFCP panic recovered", "panic", r, "stack", string(debug.Stack()))
	}
}

func (s *Server) send(b []byte, to netip.AddrPort) {
	if _, err := s.conn.WriteToUDPAddrPort(b, to); err != nil && !errors.Is(err, net.ErrClosed) {
		s.log.Warn("PFCP send failed", "to", to, "err", err)
	}
}

func (s *Server) notify(callback func(string), nodeID string) {
	if callback != nil {
		callback(nodeID)
	}
}
