package cuup

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xdp5g/xdp5g/internal/platform/afxdp"
	"github.com/xdp5g/xdp5g/internal/platform/ipheader"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/ran/cuupxdp"
	"github.com/xdp5g/xdp5g/internal/upf/gtpu"
)

// Defaults of XDPConfig.
const (
	DefaultFrames = 8192 // per queue: both fill rings, the rings in flight and what the worker holds
	xskBatch      = 64
)

// XDPConfig sets up the AF_XDP path.
type XDPConfig struct {
	// N3 and F1U name the interfaces that hold the CU-UP's addresses.
	N3, F1U string
	Mode    xdplink.Mode
	// Queues are the receive queues served, a socket and a worker each;
	// queue 0 alone when empty.
	Queues []int
	Frames int // per queue's UMEM; DefaultFrames when 0
	// BusyPoll spins on the rings instead of sleeping in poll(2).
	BusyPoll bool
}

// XDP is the AF_XDP path: the classifier on both interfaces redirects the
// CU-UP's G-PDUs, with what it read of them, to a socket per queue; a
// worker per queue carries them and sends from the same frames.
type XDP struct {
	c      *CUUP
	dp     *cuupxdp.Datapath
	links  []io.Closer
	queues []*xskQueue
	nbrs   *neighbours
}

// OpenXDP attaches the classifier dp (the CU-UP's Tunnels) to the
// interfaces and opens the sockets, in the calling thread's network
// namespace, the one of the interfaces.
func (c *CUUP) OpenXDP(dp *cuupxdp.Datapath, cfg XDPConfig) (_ *XDP, err error) {
	if cfg.Frames == 0 {
		cfg.Frames = DefaultFrames
	}
	if len(cfg.Queues) == 0 {
		cfg.Queues = []int{0}
	}
	x := &XDP{c: c, dp: dp}
	defer func() {
		if err != nil {
			x.Close()
		}
	}()
	if x.nbrs, err = newNeighbours(); err != nil {
		return nil, err
	}
	ifaces := map[Role]*net.Interface{}
	for role, name := range map[Role]string{N3: cfg.N3, F1U: cfg.F1U} {
		if ifaces[role], err = net.InterfaceByName(name); err != nil {
			return nil, fmt.Errorf("cuup: %v interface: %w", role, err)
		}
	}
	for _, q := range cfg.Queues {
		xq, err := x.openQueue(ifaces, q, cfg)
		if err != nil {
			return nil, fmt.Errorf("cuup: queue %d: %w", q, err)
		}
		x.queues = append(x.queues, xq)
	}
	// Attached last: before, the classifier would send to no socket.
	for role, ifi := range ifaces {
		l, err := dp.Attach(ifi.Name, role, cfg.Mode)
		if err != nil {
			return nil, err
		}
		x.links = append(x.links, l)
	}
	return x, nil
}

func (x *XDP) openQueue(ifaces map[Role]*net.Interface, queue int, cfg XDPConfig) (*xskQueue, error) {
	u, err := afxdp.NewUMEM(cfg.Frames, afxdp.UMEMOptions{})
	if err != nil {
		return nil, err
	}
	q := &xskQueue{umem: u, nbrs: x.nbrs, busyPoll: cfg.BusyPoll, stats: &x.c.xdpStats}
	q.addrs = map[Role]netip.Addr{N3: x.c.cfg.N3, F1U: x.c.cfg.F1U}
	for _, role := range []Role{N3, F1U} {
		s, err := afxdp.NewSocket(u, ifaces[role].Index, queue, afxdp.Options{BusyPoll: cfg.BusyPoll})
		if err == nil {
			err = x.dp.RegisterSocket(role, queue, s)
		}
		if err != nil {
			q.close()
			return nil, err
		}
		q.socks[role] = s
		q.macs[role] = ifaces[role].HardwareAddr
		if q.kernel[role], err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(q.addrs[role], 0))); err != nil {
			q.close()
			return nil, err
		}
	}
	q.worker = x.c.NewWorker(fmt.Sprintf("queue %d", queue), q)
	return q, nil
}

// Serve carries packets until ctx is done: a goroutine per queue.
func (x *XDP) Serve(ctx context.Context) error {
	stop := make(chan struct{})
	go x.nbrs.run(stop)
	defer close(stop)
	var wg sync.WaitGroup
	errs := make([]error, len(x.queues))
	for i, q := range x.queues {
		wg.Go(func() { errs[i] = q.run(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close detaches the classifier and closes the sockets; call it after
// Serve returned.
func (x *XDP) Close() error {
	var errs []error
	for _, l := range x.links {
		errs = append(errs, l.Close())
	}
	for _, q := range x.queues {
		errs = append(errs, q.close())
	}
	if x.nbrs != nil {
		x.nbrs.close()
	}
	return errors.Join(errs...)
}

func (q *xskQueue) close() error {
	if q.worker != nil {
		q.worker.Close()
	}
	errs := []error{q.umem.Close()}
	for _, k := range q.kernel {
		if k != nil {
			errs = append(errs, k.Close())
		}
	}
	return errors.Join(errs...)
}

// xskQueue is the IO of one queue's worker: a UMEM with a socket on each
// interface.
type xskQueue struct {
	umem     *afxdp.UMEM
	socks    [F1U + 1]*afxdp.Socket
	macs     [F1U + 1]net.HardwareAddr
	kernel   [F1U + 1]*net.UDPConn // from the role's address, any port
	addrs    map[Role]netip.Addr
	nbrs     *neighbours
	busyPoll bool
	worker   *Worker
	rx       [xskBatch]afxdp.Desc
	pkts     []Packet
	tx       [F1U + 1][]afxdp.Desc
	ipID     uint16
	stats    *XDPStats
}

// XDPStats count what the AF_XDP path could not carry itself.
type XDPStats struct {
	// ThroughKernel went through the kernel's socket while the peer's
	// MAC address was not known.
	ThroughKernel uint64 `json:"throughKernel"`
	SendErrors    uint64 `json:"sendErrors"` // of those, refused by the kernel
	TxFull        uint64 `json:"txFull"`     // dropped with the TX ring full
	BadMeta       uint64 `json:"badMeta"`    // received without the classifier's metadata
}

func (q *xskQueue) run(ctx context.Context) error {
	// The queue's rings are this goroutine's: keep it on one thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	lastTick := time.Now()
	for ctx.Err() == nil {
		if !q.busyPoll {
			if err := q.umem.Wait(tick); err != nil {
				return err
			}
		}
		now := time.Now()
		q.pkts = q.pkts[:0]
		for _, role := range []Role{N3, F1U} {
			n, err := q.socks[role].Receive(q.rx[:])
			if err != nil && n == 0 {
				return fmt.Errorf("cuup: receiving on %v: %w", role, err)
			}
			for _, d := range q.rx[:n] {
				q.receive(role, d)
			}
		}
		q.worker.Process(q.pkts, now)
		if now.Sub(lastTick) >= time.Millisecond {
			q.worker.Tick(now)
			lastTick = now
		}
		q.flush()
	}
	return nil
}

// receive makes a received frame a Packet from its metadata.
func (q *xskQueue) receive(role Role, d afxdp.Desc) {
	m, err := cuupxdp.ReadMeta(q.umem, d)
	if err != nil || Role(m.Role) != role {
		add(&q.stats.BadMeta)
		q.umem.Free(d)
		return
	}
	base := d.Addr &^ (afxdp.FrameSize - 1)
	q.pkts = append(q.pkts, Packet{Role: role, Bearer: m.Bearer, TEID: m.Teid, QFI: m.Qfi, RQI: m.Flags&cuupxdp.MetaRQI != 0,
		NRRAN: m.RANContainer(q.umem.Frame(d)), Buf: q.umem.Frame(afxdp.Desc{Addr: base, Len: afxdp.FrameSize}),
		Off: int(d.Addr-base) + int(m.TpduOff), Len: int(m.TpduLen), Handle: base})
}

// Headroom is the Ethernet, IP and UDP headers Send writes.
func (q *xskQueue) Headroom() int { return 14 + 40 + 8 }

// Buffer takes a free frame.
func (q *xskQueue) Buffer() ([]byte, uint64, bool) {
	var d [1]afxdp.Desc
	if q.umem.Alloc(d[:]) == 0 {
		return nil, 0, false
	}
	base := d[0].Addr &^ (afxdp.FrameSize - 1)
	return q.umem.Frame(afxdp.Desc{Addr: base, Len: afxdp.FrameSize}), base, true
}

// Free gives a frame back.
func (q *xskQueue) Free(handle uint64) { q.umem.Free(afxdp.Desc{Addr: handle}) }

// Send writes the UDP, IP and Ethernet headers before the G-PDU and
// queues the frame on the role's socket.
func (q *xskQueue) Send(role Role, peer netip.Addr, buf []byte, start, end int, handle uint64) {
	mac, ok := q.nbrs.lookup(peer)
	if !ok {
		// The kernel resolves the neighbour and keeps the packet meanwhile.
		add(&q.stats.ThroughKernel)
		if _, err := q.kernel[role].WriteToUDPAddrPort(buf[start:end], netip.AddrPortFrom(peer, gtpu.Port)); err != nil {
			add(&q.stats.SendErrors)
		}
		q.Free(handle)
		return
	}
	src := q.addrs[role]
	udpStart := start - 8
	udp := buf[udpStart:start]
	binary.BigEndian.PutUint16(udp[0:], gtpu.Port)
	binary.BigEndian.PutUint16(udp[2:], gtpu.Port)
	binary.BigEndian.PutUint16(udp[4:], uint16(end-udpStart))
	binary.BigEndian.PutUint16(udp[6:], 0)
	var ipStart int
	var etherType uint16
	if src.Is4() {
		ipStart, etherType = udpStart-20, 0x0800
		q.ipID++
		ipheader.PutIPv4(buf[ipStart:udpStart], src, peer, end-ipStart, q.ipID)
	} else {
		ipStart, etherType = udpStart-40, 0x86dd
		ipheader.PutIPv6(buf[ipStart:udpStart], src, peer, end-udpStart)
		binary.BigEndian.PutUint16(udp[6:], ipheader.UDPChecksum6(src, peer, buf[udpStart:end]))
	}
	eth := buf[ipStart-14 : ipStart]
	copy(eth[0:6], mac)
	copy(eth[6:12], q.macs[role])
	binary.BigEndian.PutUint16(eth[12:], etherType)
	q.tx[role] = append(q.tx[role], afxdp.Desc{Addr: handle + uint64(ipStart-14), Len: uint32(end - ipStart + 14)})
}

// flush transmits what the batch sent; what the TX ring cannot take is
// dropped and counted.
func (q *xskQueue) flush() {
	for _, role := range []Role{N3, F1U} {
		ds := q.tx[role]
		if len(ds) == 0 {
			continue
		}
		n, _ := q.socks[role].Transmit(ds)
		if n < len(ds) {
			atomic.AddUint64(&q.stats.TxFull, uint64(len(ds)-n))
			q.umem.Free(ds[n:]...)
		}
		q.tx[role] = ds[:0]
	}
}
