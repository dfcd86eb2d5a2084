package buffer_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/demo/demotest"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
	"github.com/xdp5g/xdp5g/internal/testsupport"
	"github.com/xdp5g/xdp5g/internal/upf/buffer"
	"github.com/xdp5g/xdp5g/internal/upf/session"
)

// bufferEnv is the demo testbed's UPF with a buffer manager over its data
// path, as the daemon runs it.
type bufferEnv struct {
	tb      *demo.Testbed
	upf     *demo.UPF
	buffers *buffer.Manager
}

func newBufferEnv(t *testing.T, cfg buffer.Config) *bufferEnv {
	t.Helper()
	e := &bufferEnv{}
	e.tb, e.upf, e.buffers = demotest.WithBuffers(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { e.buffers.Run(ctx); close(stopped) }()
	t.Cleanup(func() { cancel(); e.buffers.Close(); <-stopped })
	return e
}

// downlinkSession is a session whose one FAR takes the downlink of ue to
// the gNB with action.
func downlinkSession(seid uint64, ue netip.Addr, action session.Action) session.Session {
	return session.Session{SEID: seid,
		PDRs: []session.PDR{{ID: 1, Precedence: 100, FARID: 1,
			PDI: session.PDI{SourceInterface: session.InterfaceCore, UEAddress: netip.PrefixFrom(ue, 32)}}},
		FARs: []session.FAR{{ID: 1, Action: action, Forwarding: session.Forwarding{DestinationInterface: session.InterfaceAccess,
			OuterHeaderCreation: &session.OuterHeaderCreation{TEID: 0x200 + uint32(seid), Peer: demo.GNBAddr}}}},
	}
}

// send has the DN send n packets to ue.
func (e *bufferEnv) send(t *testing.T, ue netip.Addr, n uint64) {
	t.Helper()
	gen, err := trafficgen.NewGenerator()
	fatalIf(t, err)
	defer gen.Close()
	frame := e.tb.DownlinkFrame(demo.UEPacket(ue, demo.DNAddr, false, demo.UETTL))
	if sent, _, err := e.tb.Downlink().Send(gen, frame, n, trafficgen.Options{Rate: 50_000}); err != nil || sent != n {
		t.Fatalf("sent %d of %d packets: %v", sent, n, err)
	}
}

// expect waits (a while) for a session's buffer to show want.
func (e *bufferEnv) expect(t *testing.T, seid uint64, want buffer.Stats) {
	t.Helper()
	slot, ok := e.upf.Store.BufferSlot(seid, 1)
	if !ok {
		t.Fatalf("session %d has no buffer", seid)
	}
	var got buffer.Stats
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got, _ = e.buffers.Stats(slot); got == want {
			break
		}
	}
	if got != want {
		t.Errorf("session %d: buffer %+v, want %+v", seid, got, want)
	}
	// What was dropped was the manager's doing, not the data path's ring.
	if n := e.upf.Datapath.BufferDropped(slot); n != 0 {
		t.Errorf("session %d: the data path dropped %d packets", seid, n)
	}
}

// The configured total bounds what all sessions hold together, below their
// own limits; what it turns away is counted as dropped by the buffer it was
// meant for, what leaves frees room, and every other packet is held and
// delivered when its FAR forwards.
func TestTotalLimitAcrossSessions(t *testing.T) {
	const sessionLimit, total = 8, 10
	e := newBufferEnv(t, buffer.Config{SessionPackets: sessionLimit, TotalPackets: total})
	a, b := demo.UEAddr, netip.MustParseAddr("10.45.0.3")
	fatalIf(t, e.upf.Store.Create(downlinkSession(1, a, session.ActionBuffer)))
	fatalIf(t, e.upf.Store.Create(downlinkSession(2, b, session.ActionBuffer)))

	e.send(t, a, 6)
	e.expect(t, 1, buffer.Stats{Held: 6})
	e.send(t, b, 6) // 4 fill the total
	e.expect(t, 2, buffer.Stats{Held: 4, Dropped: 2})
	e.send(t, a, 1) // a is under its own limit, but the total is full
	e.expect(t, 1, buffer.Stats{Held: 6, Dropped: 1})
	testsupport.HasLines(t, testsupport.Exposition(t, e.buffers.Metrics()), "xdp5g_upf_buffer_held_packets 10",
		"xdp5g_upf_buffer_received_packets_total 13", `xdp5g_upf_buffer_packets_total{outcome="dropped_full"} 3`,
		`xdp5g_upf_buffer_packets_total{outcome="delivered"} 0`)

	fatalIf(t, e.upf.Store.Replace(downlinkSession(1, a, session.ActionForward)))
	e.expect(t, 1, buffer.Stats{Delivered: 6, Dropped: 1})
	e.send(t, b, 4) // room again, up to b's own limit
	e.expect(t, 2, buffer.Stats{Held: 8, Dropped: 2})
	fatalIf(t, e.upf.Store.Replace(downlinkSession(2, b, session.ActionForward)))
	e.expect(t, 2, buffer.Stats{Delivered: 8, Dropped: 2})

	// 17 sent, 3 dropped: the gNB gets the other 14, no more, no fewer.
	delivered, err := e.tb.Downlink().Delivered(6 + 8 + 1)
	fatalIf(t, err)
	if delivered != 6+8 {
		t.Errorf("the gNB received %d packets, want %d", delivered, 6+8)
	}
	testsupport.HasLines(t, testsupport.Exposition(t, e.buffers.Metrics()), "xdp5g_upf_buffer_held_packets 0",
		"xdp5g_upf_buffer_received_packets_total 17", `xdp5g_upf_buffer_packets_total{outcome="delivered"} 14`,
		`xdp5g_upf_buffer_packets_total{outcome="dropped_full"} 3`, `xdp5g_upf_buffer_packets_total{outcome="discarded"} 0`,
		`xdp5g_upf_buffer_packets_total{outcome="unforwarded"} 0`)
}

// The first packet a buffer holds is told (the SMF's Downlink Data
// Report), the next ones not; once the SMF had the held ones dropped
// (DROBU) the next one held is a first again: a UE that did not answer
// the paging is paged again for new data, as long as the FAR buffers and
// notifies.
func TestFirstPacketAfterADrop(t *testing.T) {
	e := newBufferEnv(t, buffer.Config{})
	notified := make(chan buffer.Owner, 4)
	e.buffers.SetNotify(func(o buffer.Owner, _ uint16, _ uint8) { notified <- o })
	fatalIf(t, e.upf.Store.Create(downlinkSession(1, demo.UEAddr, session.ActionBuffer)))
	told := func(want int) {
		t.Helper()
		time.Sleep(100 * time.Millisecond) // the manager has read what the ring holds
		if got := len(notified); got != want {
			t.Errorf("%d first packets told, want %d", got, want)
		}
		for range len(notified) {
			<-notified
		}
	}
	e.send(t, demo.UEAddr, 3)
	e.expect(t, 1, buffer.Stats{Held: 3})
	told(1)
	if n := e.upf.Store.DropBuffered(1); n != 3 {
		t.Fatalf("dropped %d, want 3", n)
	}
	e.send(t, demo.UEAddr, 2)
	e.expect(t, 1, buffer.Stats{Held: 2, Discarded: 3})
	told(1)
}

func fatalIf(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A restarted daemon's manager takes over a buffer as the previous run
// left it: the packets the previous run had taken from the ring went with
// it and are counted lost, those still in the ring are held and delivered
// on release, and the buffer then lets the FAR forward.
func TestAdoptAfterARestart(t *testing.T) {
	tb, upf, previous := demotest.WithBuffers(t, buffer.Config{})
	e := &bufferEnv{tb: tb, upf: upf, buffers: previous}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { previous.Run(ctx); close(stopped) }()
	fatalIf(t, upf.Store.Create(downlinkSession(1, demo.UEAddr, session.ActionBuffer)))
	e.send(t, demo.UEAddr, 5)
	e.expect(t, 1, buffer.Stats{Held: 5})
	cancel()
	fatalIf(t, previous.Close())
	<-stopped
	e.send(t, demo.UEAddr, 3) // into the ring while no manager runs

	slot, _ := upf.Store.BufferSlot(1, 1)
	var next *buffer.Manager
	fatalIf(t, tb.UPF.Do(func() (err error) {
		next, err = buffer.New(upf.Datapath, buffer.Config{})
		return err
	}))
	e.buffers = next
	if lost := next.Adopt(map[uint32]buffer.Owner{slot: {SEID: 1, FAR: 1}}); lost != 5 || next.Lost() != 5 {
		t.Errorf("%d packets lost (Lost %d), want the 5 the previous run held", lost, next.Lost())
	}
	e.expect(t, 1, buffer.Stats{Held: 3})
	ctx, cancel = context.WithCancel(context.Background())
	stopped = make(chan struct{})
	go func() { next.Run(ctx); close(stopped) }()
	t.Cleanup(func() { cancel(); next.Close(); <-stopped })
	upf.Store.SetBuffers(next) // as a restarted daemon's store has it
	fatalIf(t, upf.Store.Replace(downlinkSession(1, demo.UEAddr, session.ActionForward)))
	e.expect(t, 1, buffer.Stats{Delivered: 3})
	e.send(t, demo.UEAddr, 2) // forwarded by the released buffer's FAR
	if delivered, err := tb.Downlink().Delivered(5); err != nil || delivered != 5 {
		t.Errorf("the gNB received %d packets (%v), want the 3 held and the 2 after", delivered, err)
	}
}
