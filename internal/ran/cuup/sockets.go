package cuup

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xdp5g/xdp5g/internal/platform/udpbatch"
	"github.com/xdp5g/xdp5g/internal/upf/gtpu"
)

// Socket path sizes: a batch of datagrams per system call, buffers as
// large as AF_XDP frames, and room before each datagram for the headers
// the downlink adds.
const (
	socketBatch    = 64
	socketBuffer   = 4096
	socketHeadroom = 64
	// tick is how often timers run when no packet comes.
	tick = 10 * time.Millisecond
)

// Sockets carry the CU-UP's packets through a UDP socket on each of its
// addresses, read and written in batches (recvmmsg, sendmmsg): the path
// where AF_XDP is not used, and the baseline the AF_XDP path is measured
// against. They answer GTP-U Echo Requests.
type Sockets struct {
	c     *CUUP
	conns map[Role]*udpbatch.Conn
}

// OpenSockets opens the sockets in the calling thread's network namespace,
// the one of the CU-UP's addresses.
func (c *CUUP) OpenSockets() (*Sockets, error) {
	s := &Sockets{c: c, conns: map[Role]*udpbatch.Conn{}}
	for role, addr := range map[Role]netip.Addr{N3: c.cfg.N3, F1U: c.cfg.F1U} {
		conn, err := udpbatch.Listen(netip.AddrPortFrom(addr, gtpu.Port), socketBatch)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("cuup: GTP-U socket on %v: %w", addr, err)
		}
		s.conns[role] = conn
	}
	return s, nil
}

// Close closes the sockets, ending Serve.
func (s *Sockets) Close() error {
	var errs []error
	for _, conn := range s.conns {
		errs = append(errs, conn.Close())
	}
	return errors.Join(errs...)
}

// Serve carries packets until ctx is done or the sockets are closed: a
// goroutine reads each socket, and sends on the other (and on its own,
// to answer echoes).
func (s *Sockets) Serve(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, 0, len(s.conns))
	var mu sync.Mutex
	for _, role := range []Role{N3, F1U} { // the workers' order in the stats
		io := &socketIO{conns: s.conns, role: role, stats: &s.c.socketStats}
		io.worker = s.c.NewWorker(fmt.Sprintf("%v socket", role), io)
		defer io.worker.Close()
		wg.Go(func() {
			if err := io.run(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// socketIO is the IO of the goroutine that reads one socket.
type socketIO struct {
	conns     map[Role]*udpbatch.Conn
	role      Role // the socket read
	worker    *Worker
	in        []udpbatch.Message
	inHandles []uint64
	pkts      []Packet
	bufs      [][]byte // by handle
	free      []uint64
	out       [F1U + 1][]udpbatch.Message
	sent      []uint64 // handles of out, freed once written
	stats     *SocketStats
}

// SocketStats count what the socket path did besides carrying G-PDUs.
type SocketStats struct {
	Echoes     uint64 `json:"echoes"`     // Echo Requests answered
	NotGPDU    uint64 `json:"notGpdu"`    // other GTP-U messages, dropped
	Malformed  uint64 `json:"malformed"`  // not GTP-U, or not a G-PDU of its interface
	SendErrors uint64 `json:"sendErrors"` // datagrams the kernel refused
}

func (s *socketIO) run(ctx context.Context) error {
	conn := s.conns[s.role]
	for ctx.Err() == nil {
		s.in, s.inHandles = s.in[:0], s.inHandles[:0]
		for range socketBatch {
			buf, handle, ok := s.Buffer()
			if !ok {
				break
			}
			s.in = append(s.in, udpbatch.Message{Buf: buf[socketHeadroom:]})
			s.inHandles = append(s.inHandles, handle)
		}
		conn.SetReadDeadline(time.Now().Add(tick))
		n, err := conn.ReadBatch(s.in)
		now := time.Now()
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("cuup: reading %v: %w", s.role, err)
		}
		s.pkts = s.pkts[:0]
		for i, handle := range s.inHandles {
			if i < n {
				s.receive(s.in[i], handle)
			} else {
				s.Free(handle)
			}
		}
		s.worker.Process(s.pkts, now)
		s.worker.Tick(now)
		s.flush()
	}
	return nil
}

// receive makes a datagram a Packet for the worker, answers an Echo
// Request, and drops the rest.
func (s *socketIO) receive(m udpbatch.Message, handle uint64) {
	p := Packet{Role: s.role, Buf: s.bufs[handle], Handle: handle}
	msg := m.Buf[:m.N]
	h, err := gtpu.ParseHeader(msg)
	switch {
	case err != nil:
		add(&s.stats.Malformed)
	case h.Type == gtpu.MsgEchoRequest && h.HasSeq:
		add(&s.stats.Echoes)
		resp := gtpu.EchoResponse(h.Seq)
		n := copy(p.Buf[socketHeadroom:], resp)
		s.out[s.role] = append(s.out[s.role], udpbatch.Message{Buf: p.Buf[socketHeadroom : socketHeadroom+n], N: n, Addr: m.Addr})
		s.sent = append(s.sent, handle)
		return
	case h.Type != gtpu.MsgGPDU:
		add(&s.stats.NotGPDU)
	default:
		if err := tunnelPacket(&p, h); err != nil {
			add(&s.stats.Malformed)
			break
		}
		p.Off += socketHeadroom
		s.pkts = append(s.pkts, p)
		return
	}
	s.Free(handle)
}

// tunnelPacket reads into p what the XDP classifier would: the bearer and
// QFI of an N3 G-PDU (which must carry a DL PDU Session Container), the NR
// RAN Container of an F1-U one; the T-PDU's place relative to the message.
func tunnelPacket(p *Packet, h gtpu.Header) error {
	p.TEID, p.Bearer = h.TEID, h.TEID&(maxBearers-1)
	p.Off, p.Len = h.Len, h.End-h.Len
	switch p.Role {
	case N3:
		pduType, qfi, rqi, ok := gtpu.PDUSession(h.PDUSession)
		if !ok || pduType != gtpu.PDUSessionDL {
			return errors.New("an N3 G-PDU without a DL PDU Session Container")
		}
		p.QFI, p.RQI = qfi, rqi
		if p.Len == 0 {
			return errors.New("an empty N3 G-PDU")
		}
	case F1U:
		if h.PDUSession != nil {
			return errors.New("an F1-U G-PDU with a PDU Session Container")
		}
		p.NRRAN = h.NRRAN
		if p.Len == 0 && p.NRRAN == nil {
			return errors.New("an F1-U G-PDU with neither T-PDU nor NR RAN Container")
		}
	}
	return nil
}

// Send queues a G-PDU for the next flush.
func (s *socketIO) Send(role Role, peer netip.Addr, buf []byte, start, end int, handle uint64) {
	s.out[role] = append(s.out[role], udpbatch.Message{Buf: buf[start:end], N: end - start, Addr: netip.AddrPortFrom(peer, gtpu.Port)})
	s.sent = append(s.sent, handle)
}

// flush writes what the batch sent, a system call per socket.
func (s *socketIO) flush() {
	for role, msgs := range s.out {
		if len(msgs) == 0 {
			continue
		}
		if n, err := s.conns[Role(role)].WriteBatch(msgs); err != nil {
			atomic.AddUint64(&s.stats.SendErrors, uint64(len(msgs)-n))
		}
		clear(msgs)
		s.out[role] = msgs[:0]
	}
	for _, h := range s.sent {
		s.Free(h)
	}
	s.sent = s.sent[:0]
}

// Free takes a buffer back.
func (s *socketIO) Free(handle uint64) { s.free = append(s.free, handle) }

// Buffer lends a buffer; there is always one: the pool grows.
func (s *socketIO) Buffer() ([]byte, uint64, bool) {
	if n := len(s.free); n > 0 {
		h := s.free[n-1]
		s.free = s.free[:n-1]
		return s.bufs[h], h, true
	}
	s.bufs = append(s.bufs, make([]byte, socketBuffer))
	return s.bufs[len(s.bufs)-1], uint64(len(s.bufs) - 1), true
}

// Headroom is none: the kernel adds the headers below GTP-U.
func (s *socketIO) Headroom() int { return 0 }
