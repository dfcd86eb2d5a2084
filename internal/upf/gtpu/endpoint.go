// Package gtpu is the user-space side of the UPF's GTP-U on N3 (TS 29.281):
// the messages the XDP data path passes to the kernel. It reports Error
// Indications, supervises the paths to gNBs with Echo Requests, answers the
// Echo Requests that reach it, sends End Markers, and answers G-PDUs to
// unknown TEIDs with Error Indications.
//
// Peer restarts are not detected: the restart counter of GTP-U's Recovery
// IE is always 0 and ignored by the receiver (TS 29.281 8.2), and the
// optional Recovery Time Stamp procedure (TS 23.007 18A) is not supported.
package gtpu

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/platform/freebind"
)

// Defaults of the Config settings left zero: a dead path fails after three
// minutes.
const (
	DefaultEchoInterval = 60 * time.Second
	DefaultEchoRetries  = 3
)

const maxDatagram = 64 << 10 // more than any UDP payload

// Config sets up an Endpoint.
type Config struct {
	// Local are the UPF's N3 addresses; the endpoint binds UDP port 2152 on
	// each.
	Local []netip.Addr
	// EchoInterval is the time between Echo Requests on a watched path,
	// and how long each has to be answered.
	EchoInterval time.Duration
	// EchoRetries is how many Echo Requests in a row go unanswered before
	// the path is failed.
	EchoRetries int

	// The callbacks, each optional, run one at a time, in the order of the
	// events, on a goroutine of the endpoint; they may call its methods
	// except Close. Events still queued at Close are dropped.
	OnErrorIndication func(ErrorIndication)
	OnEndMarker       func(EndMarker)
	OnPathFailure     func(Path)
	OnPathRecovery    func(Path)
	// OnGPDU takes a G-PDU the kernel put together from its fragments,
	// which XDP only sees in pieces, with the index of the interface they
	// came in by; not one that came whole (XDP passed it up for a reason
	// of its own: not for the UPF, say). It runs on the socket's reader,
	// datagram valid during the call; G-PDUs from UDP port 0 are not given
	// to it (see upfxdp.Datapath.InjectGPDU).
	OnGPDU func(local netip.Addr, from netip.AddrPort, ifindex int, datagram []byte)

	// TEIDKnown says whether a session has the TEID at a local address. A
	// G-PDU that came whole to one it has not (the data path passes those
	// up, at a rate) is answered with an Error Indication (TS 29.281
	// 7.3.1), at most ErrorIndicationRate a second; the ones beyond are
	// counted and dropped. Asking here, not trusting the data path, spares
	// a session set up since, and a G-PDU that reached the socket past no
	// XDP program. Nil, or a rate of 0: none is sent.
	TEIDKnown           func(local netip.Addr, teid uint32) bool
	ErrorIndicationRate int

	Log *slog.Logger
}

// ErrorIndication is a received Error Indication (TS 29.281 7.3.1): the
// peer had no context for a G-PDU it received. TEID and PeerAddr, the
// destination TEID and address of that G-PDU, are the remote F-TEID to
// report to the SMF.
type ErrorIndication struct {
	From     netip.Addr // the sender
	TEID     uint32     // TEID Data I
	PeerAddr netip.Addr // GTP-U Peer Address
}

// EndMarker is a received End Marker (TS 29.281 7.3.2): nothing more
// comes on the tunnel to the UPF's F-TEID, TEID at Local.
type EndMarker struct {
	Local netip.Addr
	TEID  uint32
}

// Path is a GTP-U path: one of the UPF's N3 addresses and a peer.
type Path struct {
	Local, Peer netip.Addr
}

// Stats counts what the endpoint received and sent.
type Stats struct {
	Received             map[uint8]uint64 // well-formed messages by type (Msg...)
	Malformed            uint64           // datagrams dropped undecoded
	EchoRequestsSent     uint64
	EchoRequestsAnswered uint64 // by a matching Echo Response
	EchoResponsesSent    uint64 // to Echo Requests the data path passed up
	EndMarkersSent       uint64
	// ErrorIndicationsSent answered G-PDUs to unknown TEIDs; the
	// suppressed ones were over ErrorIndicationRate.
	ErrorIndicationsSent       uint64
	ErrorIndicationsSuppressed uint64
	PathFailures               uint64
	PathRecoveries             uint64
}

// Endpoint is the UPF's GTP-U endpoint in user space.
type Endpoint struct {
	cfg   Config
	log   *slog.Logger
	conns map[netip.Addr]*net.UDPConn // by local address, those bound
	// unbound are the local addresses without a socket, with why.
	unbound map[netip.Addr]error
	wg      sync.WaitGroup

	mu     sync.Mutex
	closed bool
	paths  map[Path]*path
	stats  Stats
	// errorIndications is how many Error Indications went out in the
	// second since the start of errorSecond.
	errorSecond      time.Time
	errorIndications int
	// events are the callbacks due, run in order by dispatch, so that
	// none runs with mu held or blocks the readers.
	events      []func()
	eventsReady chan struct{}
	done        chan struct{}
}

// path is the supervision state of a watched Path, guarded by mu.
type path struct {
	watchers   int
	nextSeq    uint16
	unanswered int // Echo Requests sent since the last answer
	failed     bool
	stop       chan struct{}
}

// Open binds a socket on each local address and starts serving them. An
// address need not be on the host yet (a virtual address that keepalived
// or a Kubernetes service adds later): it binds all the same (IP_FREEBIND)
// and serves once it is there. An address binds on its own: one that
// cannot be bound (its port taken, say) has no socket, and Unbound says
// why, while the others work. Open fails only on an invalid Config. A
// socket belongs to the network namespace it is created in: to serve N3
// addresses in another namespace, call Open on a thread in that namespace
// (e.g. inside namespace.Netns.Do); the endpoint then works from any
// goroutine.
func Open(cfg Config) (*Endpoint, error) {
	if len(cfg.Local) == 0 {
		return nil, errors.New("gtpu: no local address")
	}
	cfg.EchoInterval = cmp.Or(cfg.EchoInterval, DefaultEchoInterval)
	cfg.EchoRetries = cmp.Or(cfg.EchoRetries, DefaultEchoRetries)
	if cfg.EchoInterval < 0 || cfg.EchoRetries < 0 || cfg.ErrorIndicationRate < 0 {
		return nil, errors.New("gtpu: negative echo interval, echo retries or Error Indication rate")
	}
	for i, local := range cfg.Local {
		if !local.IsValid() || slices.Contains(cfg.Local[:i], local) {
			return nil, fmt.Errorf("gtpu: invalid or repeated local address %v", local)
		}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	e := &Endpoint{
		cfg:         cfg,
		log:         cfg.Log,
		conns:       map[netip.Addr]*net.UDPConn{},
		unbound:     map[netip.Addr]error{},
		paths:       map[Path]*path{},
		stats:       Stats{Received: map[uint8]uint64{}},
		eventsReady: make(chan struct{}, 1),
		done:        make(chan struct{}),
	}
	for _, local := range cfg.Local {
		conn, err := listen(local, cfg.OnGPDU != nil)
		if err != nil {
			e.unbound[local] = err
			continue
		}
		e.conns[local] = conn
		e.wg.Go(func() { e.read(local, conn) })
	}
	e.wg.Go(e.dispatch)
	return e, nil
}

// listen binds the GTP-U port of local, whether or not local is on the
// host yet, and with arrivals has the kernel tell each datagram's arrival
// (tellArrival).
func listen(local netip.Addr, arrivals bool) (*net.UDPConn, error) {
	network := "udp4"
	if !local.Is4() {
		network = "udp6"
	}
	conn, err := freebind.ListenUDP(network, netip.AddrPortFrom(local, Port).String())
	if err != nil {
		return nil, err
	}
	if arrivals {
		if err := tellArrival(conn, local); err != nil {
			conn.Close()
			return nil, fmt.Errorf("%v: %w", local, err)
		}
	}
	return conn, nil
}

// Unbound returns the local addresses that have no socket, each with why
// it could not be bound: nothing is received on them or sent from them.
func (e *Endpoint) Unbound() map[netip.Addr]error {
	return maps.Clone(e.unbound)
}

// Close stops supervision and callbacks and closes the sockets.
func (e *Endpoint) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return net.ErrClosed
	}
	e.closed = true
	for _, s := range e.paths {
		close(s.stop)
	}
	e.mu.Unlock()
	close(e.done)
	var errs []error
	for _, conn := range e.conns {
		errs = append(errs, conn.Close())
	}
	e.wg.Wait()
	return errors.Join(errs...)
}

// Stats returns a snapshot of the counters.
func (e *Endpoint) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.stats
	s.Received = maps.Clone(s.Received)
	return s
}

// SendEndMarker sends an End Marker for the tunnel with the peer's TEID
// (the downlink tunnel being replaced) from a local address.
func (e *Endpoint) SendEndMarker(local, peer netip.Addr, teid uint32) error {
	conn, ok := e.conns[local]
	if !ok {
		return e.noSocket(local)
	}
	if _, err := conn.WriteToUDPAddrPort(endMarker(teid), netip.AddrPortFrom(peer, Port)); err != nil {
		return fmt.Errorf("gtpu: End Marker to %v: %w", peer, err)
	}
	e.mu.Lock()
	e.stats.EndMarkersSent++
	e.mu.Unlock()
	return nil
}

// Watch starts supervising the path, or counts one more user of it: Echo
// Requests go out at once and every EchoInterval until as many Unwatch
// calls as Watch calls. A failed path is still probed, and recovers with
// the next answer. A path from an unbound address is not supervised, and
// watching it is no error: Unbound says so once, not each session.
func (e *Endpoint) Watch(p Path) error {
	if _, ok := e.conns[p.Local]; !ok {
		if _, unbound := e.unbound[p.Local]; unbound {
			return nil
		}
		return e.noSocket(p.Local)
	}
	if !p.Peer.IsValid() {
		return errors.New("gtpu: invalid peer address")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return net.ErrClosed
	}
	s := e.paths[p]
	if s == nil {
		s = &path{stop: make(chan struct{})}
		e.paths[p] = s
		e.wg.Go(func() { e.supervise(p, s) })
	}
	s.watchers++
	return nil
}

// noSocket is the error of sending from local, which has no socket.
func (e *Endpoint) noSocket(local netip.Addr) error {
	if err, unbound := e.unbound[local]; unbound {
		return fmt.Errorf("gtpu: no socket on %v: %w", local, err)
	}
	return fmt.Errorf("gtpu: %v is not a local address", local)
}

// Unwatch undoes one Watch; after the last, no more Echo Requests are sent
// on the path and no callbacks are made for it.
func (e *Endpoint) Unwatch(p Path) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.paths[p]
	if s == nil || e.closed {
		return
	}
	if s.watchers--; s.watchers == 0 {
		delete(e.paths, p)
		close(s.stop)
	}
}

// supervise probes a path every interval, the first time one interval
// after Watch: a tunnel just set up has a gNB that just spoke to the SMF.
func (e *Endpoint) supervise(p Path, s *path) {
	ticker := time.NewTicker(e.cfg.EchoInterval)
	defer ticker.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-ticker.C:
		}
		e.probe(p, s)
	}
}

// probe fails the path if the last EchoRetries requests went unanswered,
// each having had an interval, then sends the next request. It sends with
// mu held so that none goes out after Unwatch returns.
func (e *Endpoint) probe(p Path, s *path) {
	e.mu.Lock()
	defer e.mu.Unlock()
	select {
	case <-s.stop:
		return
	default:
	}
	if s.unanswered >= e.cfg.EchoRetries && !s.failed {
		s.failed = true
		e.stats.PathFailures++
		e.log.Warn("GTP-U path failed", "local", p.Local, "peer", p.Peer, "unanswered", s.unanswered)
		notify(e, e.cfg.OnPathFailure, p)
	}
	seq := s.nextSeq
	s.nextSeq++
	s.unanswered++
	if _, err := e.conns[p.Local].WriteToUDPAddrPort(echoRequest(seq), netip.AddrPortFrom(p.Peer, Port)); err != nil {
		// Counts as unanswered: the path is down from here.
		e.log.Debug("GTP-U Echo Request not sent", "local", p.Local, "peer", p.Peer, "err", err)
		return
	}
	e.stats.EchoRequestsSent++
}

// echoAnswered takes an Echo Response on the path: it answers one of the
// last EchoRetries requests if still unanswered, and is ignored otherwise.
func (e *Endpoint) echoAnswered(p Path, seq uint16) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.paths[p]
	if s == nil {
		return
	}
	if age := int(s.nextSeq - seq); age < 1 || age > min(s.unanswered, e.cfg.EchoRetries) {
		e.log.Debug("GTP-U Echo Response unmatched", "local", p.Local, "peer", p.Peer, "seq", seq)
		return
	}
	s.unanswered = 0
	e.stats.EchoRequestsAnswered++
	if s.failed {
		s.failed = false
		e.stats.PathRecoveries++
		e.log.Info("GTP-U path recovered", "local", p.Local, "peer", p.Peer)
		notify(e, e.cfg.OnPathRecovery, p)
	}
}

// notify queues a call of callback, if set, with arg; mu must be held.
func notify[T any](e *Endpoint, callback func(T), arg T) {
	if callback == nil {
		return
	}
	e.events = append(e.events, func() { callback(arg) })
	select {
	case e.eventsReady <- struct{}{}:
	default: // dispatch has yet to take the earlier signal
	}
}

func (e *Endpoint) dispatch() {
	for {
		select {
		case <-e.done:
			return
		case <-e.eventsReady:
		}
		e.mu.Lock()
		events := e.events
		e.events = nil
		e.mu.Unlock()
		for _, event := range events {
			event()
		}
	}
}

// tellArrival has the kernel say of each datagram conn receives whether
// it put it together from fragments (the largest fragment's size,
// IP_RECVFRAGSIZE) and by which interface it came in (IP_PKTINFO), for
// OnGPDU.
func tellArrival(conn *net.UDPConn, local netip.Addr) error {
	level, opts := unix.IPPROTO_IP, []int{unix.IP_RECVFRAGSIZE, unix.IP_PKTINFO}
	if !local.Is4() {
		level, opts = unix.IPPROTO_IPV6, []int{unix.IPV6_RECVFRAGSIZE, unix.IPV6_RECVPKTINFO}
	}
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var setErr error
	if err := raw.Control(func(fd uintptr) {
		for _, opt := range opts {
			setErr = errors.Join(setErr, unix.SetsockoptInt(int(fd), level, opt, 1))
		}
	}); err != nil {
		return err
	}
	return setErr
}

// arrival reads a datagram's control messages: whether the kernel put it
// together from fragments, and the index of the interface it came in by
// (0: not told).
func arrival(oob []byte) (reassembled bool, ifindex int) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return false, 0
	}
	for _, m := range msgs {
		switch {
		case m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_RECVFRAGSIZE,
			m.Header.Level == unix.IPPROTO_IPV6 && m.Header.Type == unix.IPV6_RECVFRAGSIZE:
			reassembled = true
		case m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_PKTINFO && len(m.Data) >= unix.SizeofInet4Pktinfo:
			ifindex = int(int32(binary.NativeEndian.Uint32(m.Data)))
		case m.Header.Level == unix.IPPROTO_IPV6 && m.Header.Type == unix.IPV6_PKTINFO && len(m.Data) >= unix.SizeofInet6Pktinfo:
			ifindex = int(binary.NativeEndian.Uint32(m.Data[16:]))
		}
	}
	return reassembled, ifindex
}

func (e *Endpoint) read(local netip.Addr, conn *net.UDPConn) {
	buf, oob := make([]byte, maxDatagram), make([]byte, 64)
	for {
		n, oobn, _, from, err := conn.ReadMsgUDPAddrPort(buf, oob)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			e.log.Warn("GTP-U receive", "local", local, "err", err)
			continue
		}
		reassembled, ifindex := arrival(oob[:oobn])
		e.handle(conn, local, from, buf[:n], reassembled, ifindex)
	}
}

// answerUnknownTEID sends the sender of a G-PDU to teid at local an Error
// Indication, to its address and the GTP-U port (TS 29.281 4.4.2.3), if
// no session has that TEID and the rate allows.
func (e *Endpoint) answerUnknownTEID(conn *net.UDPConn, local netip.Addr, from netip.AddrPort, teid uint32) {
	if e.cfg.TEIDKnown == nil || e.cfg.ErrorIndicationRate == 0 || e.cfg.TEIDKnown(local, teid) {
		return
	}
	e.mu.Lock()
	if now := time.Now(); now.Sub(e.errorSecond) >= time.Second {
		e.errorSecond, e.errorIndications = now, 0
	}
	allowed := e.errorIndications < e.cfg.ErrorIndicationRate
	if allowed {
		e.errorIndications++
	} else {
		e.stats.ErrorIndicationsSuppressed++
	}
	e.mu.Unlock()
	if !allowed {
		return
	}
	to := netip.AddrPortFrom(from.Addr(), Port)
	if _, err := conn.WriteToUDPAddrPort(errorIndicationOf(teid, local, from.Port()), to); err != nil {
		e.log.Debug("GTP-U Error Indication not sent", "to", to, "err", err)
		return
	}
	e.log.Debug("GTP-U Error Indication sent", "to", to, "teid", teid, "local", local)
	e.mu.Lock()
	e.stats.ErrorIndicationsSent++
	e.mu.Unlock()
}

// handle takes a datagram; reassembled: the kernel put it together from
// fragments that came in by the interface of ifindex.
func (e *Endpoint) handle(conn *net.UDPConn, local netip.Addr, from netip.AddrPort, b []byte, reassembled bool, ifindex int) {
	m, err := decode(b)
	e.mu.Lock()
	if err != nil {
		e.stats.Malformed++
		e.mu.Unlock()
		e.log.Debug("malformed GTP-U message dropped", "from", from, "err", err)
		return
	}
	e.stats.Received[m.Type]++
	e.mu.Unlock()
	switch m.Type {
	case MsgGPDU:
		switch {
		case from.Port() == 0: // handed back by InjectGPDU
		case reassembled:
			if e.cfg.OnGPDU != nil && ifindex > 0 {
				e.cfg.OnGPDU(local, from, ifindex, b)
			}
		default:
			e.answerUnknownTEID(conn, local, from, m.TEID)
		}
	case MsgEchoRequest:
		// The data path answers these; one that got here still deserves
		// an answer, to its source port (TS 29.281 4.4.2.2).
		if _, err := conn.WriteToUDPAddrPort(EchoResponse(m.Seq), from); err != nil {
			e.log.Debug("GTP-U Echo Response not sent", "to", from, "err", err)
			return
		}
		e.mu.Lock()
		e.stats.EchoResponsesSent++
		e.mu.Unlock()
	case MsgEchoResponse:
		e.echoAnswered(Path{Local: local, Peer: from.Addr()}, m.Seq)
	case MsgErrorIndication:
		ind := ErrorIndication{From: from.Addr(), TEID: m.TEIDDataI, PeerAddr: m.PeerAddr}
		// At debug level: a gNB that lost its contexts sends one for every
		// G-PDU of theirs, a flood at INFO. They are counted in Stats and
		// reported to the sessions' SMFs.
		e.log.Debug("GTP-U Error Indication", "from", ind.From, "teid", ind.TEID, "peer", ind.PeerAddr)
		e.mu.Lock()
		notify(e, e.cfg.OnErrorIndication, ind)
		e.mu.Unlock()
	case MsgEndMarker:
		e.mu.Lock()
		notify(e, e.cfg.OnEndMarker, EndMarker{Local: local, TEID: m.TEID})
		e.mu.Unlock()
	}
}
