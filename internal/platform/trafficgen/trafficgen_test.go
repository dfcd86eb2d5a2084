package trafficgen

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

const (
	packets  = 10000
	dstPort  = 5000
	portAt   = 14 + 20 + 2 // UDP destination port in udpFrame
	sinkAddr = "10.0.0.2"
)

var udpFilter = Filter{EtherType: 0x0800, IPProto: 17, DstPort: dstPort}

// bed is a generator namespace and a sink namespace joined by a veth pair.
type bed struct {
	gen, sink   *namespace.Netns
	genIndex    int
	genMAC      net.HardwareAddr
	sinkMAC     net.HardwareAddr
	generator   *Generator
	sinkIfname  string
	genIfname   string
	udpTemplate []byte
}

func newBed(t *testing.T) *bed {
	t.Helper()
	testsupport.NeedRoot(t, "network namespaces and XDP")
	b := &bed{genIfname: "gen0", sinkIfname: "sink0", gen: testsupport.Netns(t, "tg-"), sink: testsupport.Netns(t, "tg-")}
	var err error
	// Link names only need to be unique within their private namespace.
	if err := namespace.Veth(b.gen, b.genIfname, b.sink, b.sinkIfname); err != nil {
		t.Fatal(err)
	}
	if b.genIndex, b.genMAC, err = b.gen.Link(b.genIfname); err != nil {
		t.Fatal(err)
	}
	if _, b.sinkMAC, err = b.sink.Link(b.sinkIfname); err != nil {
		t.Fatal(err)
	}
	b.generator, err = NewGenerator()
	testsupport.CheckLoad(t, err)
	t.Cleanup(func() { b.generator.Close() })
	b.udpTemplate = udpFrame(t, b.genMAC, b.sinkMAC)
	return b
}

func (b *bed) newSink(t *testing.T, filter Filter, pass bool) *Sink {
	t.Helper()
	s, err := NewSink(b.sink, b.sinkIfname, filter, pass)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// udpFrame is 60 bytes of Ethernet, IPv4 and UDP to dstPort with checksum 0
// (none), so the generator may vary the port.
func udpFrame(t *testing.T, src, dst net.HardwareAddr) []byte {
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP,
		SrcIP: net.ParseIP("10.0.0.1"), DstIP: net.ParseIP(sinkAddr)}
	udp := &layers.UDP{SrcPort: 40000, DstPort: dstPort}
	udp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{SrcMAC: src, DstMAC: dst, EthernetType: layers.EthernetTypeIPv4},
		ip, udp, gopacket.Payload("xdp5g-trafficgen"))
	if err != nil {
		t.Fatal(err)
	}
	frame := buf.Bytes()
	if len(frame) != 60 {
		t.Fatalf("frame is %d bytes", len(frame))
	}
	binary.BigEndian.PutUint16(frame[portAt+4:], 0) // the UDP checksum
	return frame
}

// ringDrops is how many frames the generator's veth has dropped since it
// was made because the sink's XDP ring was full. A generator flat out
// outruns the sink when the host defers the sink's softirq to a thread,
// and those frames never arrive; the veth counts them, and with them any
// of the kernel's own packets (IPv6 neighbour discovery) it dropped, so a
// send that lost frames arrives as count-dropped to count.
func (b *bed) ringDrops(t *testing.T) uint64 {
	t.Helper()
	n, err := b.gen.TxDropped(b.genIfname)
	if err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		t.Logf("the sink's ring was full for %d frames", n)
	}
	return n
}

// settle waits until the sink has seen at least sent packets, then a little
// longer to catch any surplus.
func settle(t *testing.T, s *Sink, sent uint64) Counts {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := s.Counts()
		if err != nil {
			t.Fatal(err)
		}
		if c.Packets >= sent || time.Now().After(deadline) {
			time.Sleep(50 * time.Millisecond)
			if c, err = s.Counts(); err != nil {
				t.Fatal(err)
			}
			return c
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSendArrivesIntact(t *testing.T) {
	b := newBed(t)
	sink := b.newSink(t, udpFilter, false)
	var progress uint64
	sent, elapsed, err := b.generator.Send(b.gen, b.genIndex, b.udpTemplate, packets, Options{
		Progress: func(n uint64) { progress = n },
	})
	if err != nil {
		t.Fatal(err)
	}
	if sent != packets || progress != packets {
		t.Errorf("sent %d, last progress %d, want %d", sent, progress, packets)
	}
	t.Logf("%d packets in %v: %.2f Mpps", sent, elapsed, float64(sent)/elapsed.Seconds()/1e6)

	dropped := b.ringDrops(t)
	c := settle(t, sink, packets-dropped)
	if c.MatchPackets > packets || c.MatchPackets+dropped < packets || c.MatchBytes != c.MatchPackets*uint64(len(b.udpTemplate)) {
		t.Errorf("sink matched %d packets, %d bytes, the ring dropped %d; want %d packets of %d bytes, arrived or dropped",
			c.MatchPackets, c.MatchBytes, dropped, packets, len(b.udpTemplate))
	}
	if c.Packets < c.MatchPackets {
		t.Errorf("sink counted %d packets in all but %d matching", c.Packets, c.MatchPackets)
	}
	sample, err := sink.Sample()
	if err != nil {
		t.Fatal(err)
	}
	if diff := testsupport.FrameDiff(sample, b.udpTemplate); diff != "" {
		t.Errorf("sample: %s", diff)
	}
}

// A signal interrupts a test run, and the library runs it again whole; the
// count must stay exact all the same.
func TestSendExactWhenInterrupted(t *testing.T) {
	const (
		count      = 1_000_000 // a few hundred milliseconds
		interrupts = 20
	)
	b := newBed(t)
	sink := b.newSink(t, udpFilter, false)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range interrupts {
			time.Sleep(2 * time.Millisecond)
			interruptEveryThread(t)
		}
	}()
	sent, _, err := b.generator.Send(b.gen, b.genIndex, b.udpTemplate, count, Options{})
	<-done
	if err != nil {
		t.Fatal(err)
	}
	dropped := b.ringDrops(t)
	if c := settle(t, sink, count-dropped); sent != count || c.MatchPackets > count || c.MatchPackets+dropped < count {
		t.Errorf("sent %d, sink matched %d, the ring dropped %d; want %d sent and arrived or dropped",
			sent, c.MatchPackets, dropped, count)
	}
}

// interruptEveryThread sends SIGURG, which the Go runtime takes for a
// preemption request and otherwise ignores, to each thread of the process.
func interruptEveryThread(t *testing.T) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Error(err)
		return
	}
	for _, task := range tasks {
		if tid, err := strconv.Atoi(task.Name()); err == nil {
			unix.Tgkill(os.Getpid(), tid, unix.SIGURG)
		}
	}
}

func TestSinkFilterRejects(t *testing.T) {
	b := newBed(t)
	sink := b.newSink(t, Filter{EtherType: 0x0800, IPProto: 6}, false)
	if _, _, err := b.generator.Send(b.gen, b.genIndex, b.udpTemplate, packets, Options{}); err != nil {
		t.Fatal(err)
	}
	dropped := b.ringDrops(t)
	c := settle(t, sink, packets-dropped)
	if c.Packets+dropped < packets || c.MatchPackets != 0 {
		t.Errorf("TCP filter: %d packets (the ring dropped %d), %d matching; want >= %d, 0", c.Packets, dropped, c.MatchPackets, packets)
	}
	if sample, err := sink.Sample(); sample != nil || err != nil {
		t.Errorf("sample %x, %v; want none", sample, err)
	}
}

// With flows, the destination port takes flows values in turn, and the
// source port, a second field, with it: a sink filtering on one of them
// sees an even share, one past the range none.
func TestSendFlows(t *testing.T) {
	b := newBed(t)
	const flows = 16
	srcPortAt := portAt - 2
	srcPort := binary.BigEndian.Uint16(b.udpTemplate[srcPortAt:])
	for _, k := range []uint16{0, flows - 1, flows} {
		port := dstPort + k
		droppedBefore := b.ringDrops(t)
		sink := b.newSink(t, Filter{DstPort: port}, false)
		err := onOneCPU(func() error {
			_, _, err := b.generator.Send(b.gen, b.genIndex, b.udpTemplate, packets, Options{FlowOffset: portAt, Flows: flows, FlowOffset2: srcPortAt})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		want := uint64(packets / flows)
		if k == flows {
			want = 0
		}
		// Which port a dropped frame had is not known: each may have been
		// this sink's.
		dropped := b.ringDrops(t) - droppedBefore
		c := settle(t, sink, packets-dropped)
		if c.MatchPackets > want || c.MatchPackets+dropped < want {
			t.Errorf("port %d: %d packets, the ring dropped %d; want %d", port, c.MatchPackets, dropped, want)
		}
		sample, err := sink.Sample()
		if err != nil {
			t.Fatal(err)
		}
		if want == 0 {
			if sample != nil {
				t.Errorf("port %d: sample %x, want none", port, sample)
			}
		} else {
			frame := bytes.Clone(b.udpTemplate)
			binary.BigEndian.PutUint16(frame[portAt:], port)
			binary.BigEndian.PutUint16(frame[srcPortAt:], srcPort+k)
			if diff := testsupport.FrameDiff(sample, frame); diff != "" {
				t.Errorf("port %d: sample: %s", port, diff)
			}
		}
		sink.Close()
	}
}

// onOneCPU runs f with its thread bound to one CPU: each CPU keeps its own
// place in the flow cycle, so the shares are exact only without migration.
func onOneCPU(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var all, first unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		return err
	}
	for cpu := 0; first.Count() == 0; cpu++ {
		if all.IsSet(cpu) {
			first.Set(cpu)
		}
	}
	if err := unix.SchedSetaffinity(0, &first); err != nil {
		return err
	}
	return errors.Join(f(), unix.SchedSetaffinity(0, &all))
}

// A paced send takes count/rate, reports progress along the way, and with
// pass set the sink hands every packet to the stack: a socket receives them.
func TestSendPacedThroughPassingSink(t *testing.T) {
	b := newBed(t)
	// Bursts small enough for the socket: a frame passed on from XDP costs
	// its receive buffer a whole page.
	const count, rate = 50, 100
	if err := b.sink.AddAddr(b.sinkIfname, sinkAddr+"/24"); err != nil {
		t.Fatal(err)
	}
	var conn net.PacketConn
	if err := b.sink.Do(func() (err error) {
		conn, err = net.ListenPacket("udp4", net.JoinHostPort(sinkAddr, "5000"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	received := make(chan int)
	go func() {
		n := 0
		buf := make([]byte, 64)
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		for n < count {
			if _, _, err := conn.ReadFrom(buf); err != nil {
				break
			}
			n++
		}
		received <- n
	}()
	sink := b.newSink(t, udpFilter, true)

	var reports []uint64
	sent, elapsed, err := b.generator.Send(b.gen, b.genIndex, b.udpTemplate, count, Options{
		Rate:     rate,
		Progress: func(n uint64) { reports = append(reports, n) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Duration(count-1) * time.Second / rate; elapsed < want || elapsed > 10*want {
		t.Errorf("%d packets at %d/s took %v", sent, rate, elapsed)
	}
	// Evenly spaced: the total grows report after report.
	if len(reports) < 3 || !slices.IsSorted(reports) || reports[0] >= count || reports[len(reports)-1] != count {
		t.Errorf("progress reports %v", reports)
	}
	if n := <-received; n != count {
		t.Errorf("socket received %d datagrams, want %d", n, count)
	}
	if c := settle(t, sink, count); c.MatchPackets != count {
		t.Errorf("sink matched %d packets, want %d", c.MatchPackets, count)
	}
}

// A paced send far behind its schedule, as after a stall, catches up with
// a burst of at most catchUpMax frames, not with everything it owes, and
// still sends exactly its count.
func TestSendPacedCatchesUpInSmallBursts(t *testing.T) {
	const (
		count, rate = 500, 1000
		catchUpMax  = int(generatorLimitsCATCH_UP_MAX)
		behind      = 10 * time.Second
	)
	b := newBed(t)
	sink := b.newSink(t, udpFilter, false)
	now, err := monotonicNow()
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Rate: rate}
	if err := b.generator.configure(b.udpTemplate, count, opts, now-behind); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	sent, elapsed, err := b.generator.run(b.gen, b.genIndex, b.udpTemplate, count, opts)
	took := time.Since(began)
	if err != nil {
		t.Fatal(err)
	}
	// Owing rate*behind frames, far more than count, a send that caught
	// up in full would be done at once; one that caught up catchUpMax
	// sends the rest at the rate.
	if atRate := time.Duration(count-catchUpMax-1) * time.Second / rate; took < atRate || elapsed < behind+atRate {
		t.Errorf("took %v, %v from the schedule's start; want at least %v, %v", took, elapsed, atRate, behind+atRate)
	}
	if c := settle(t, sink, count); sent != count || c.MatchPackets != count {
		t.Errorf("sent %d, sink matched %d; want %d both", sent, c.MatchPackets, count)
	}
}

// With a stride, the flows come in its steps: of 16 flows in steps of 5,
// the second frame has the sixth, not the second.
func TestSendFlowsInStrides(t *testing.T) {
	b := newBed(t)
	for k, want := range map[uint16]uint64{0: 1, 5: 1, 1: 0} {
		sink := b.newSink(t, Filter{DstPort: dstPort + k}, false)
		err := onOneCPU(func() error {
			_, _, err := b.generator.Send(b.gen, b.genIndex, b.udpTemplate, 2, Options{FlowOffset: portAt, Flows: 16, FlowStride: 5})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if c := settle(t, sink, 2); c.MatchPackets != want {
			t.Errorf("port %d: %d packets, want %d", dstPort+k, c.MatchPackets, want)
		}
		sink.Close()
	}
}

func TestSendRejectsBadInput(t *testing.T) {
	b := newBed(t)
	for name, tc := range map[string]struct {
		frame []byte
		opts  Options
	}{
		"runt":                 {frame: make([]byte, 13), opts: Options{}},
		"too long":             {frame: make([]byte, MaxFrame+1), opts: Options{}},
		"field outside":        {frame: b.udpTemplate, opts: Options{FlowOffset: len(b.udpTemplate) - 1, Flows: 2}},
		"too many flows":       {frame: b.udpTemplate, opts: Options{FlowOffset: portAt, Flows: 1<<16 + 1}},
		"second field outside": {frame: b.udpTemplate, opts: Options{FlowOffset: portAt, Flows: 2, FlowOffset2: len(b.udpTemplate) - 1}},
		"stride missing flows": {frame: b.udpTemplate, opts: Options{FlowOffset: portAt, Flows: 16, FlowStride: 6}},
		"negative stride":      {frame: b.udpTemplate, opts: Options{FlowOffset: portAt, Flows: 16, FlowStride: -1}},
	} {
		if _, _, err := b.generator.Send(b.gen, b.genIndex, tc.frame, 1, tc.opts); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// A full-size frame goes out and arrives whole, stamped: the sink counts
// each slice's frames and their delay and jitter.
func TestStampedSlices(t *testing.T) {
	b := newBed(t)
	buf := gopacket.NewSerializeBuffer()
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.ParseIP("10.0.0.1"), DstIP: net.ParseIP(sinkAddr)}
	udp := &layers.UDP{SrcPort: 40000, DstPort: dstPort}
	udp.SetNetworkLayerForChecksum(ip)
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{SrcMAC: b.genMAC, DstMAC: b.sinkMAC, EthernetType: layers.EthernetTypeIPv4}, ip, udp,
		gopacket.Payload(make([]byte, MaxFrame-42)))
	if err != nil {
		t.Fatal(err)
	}
	frame := buf.Bytes()
	binary.BigEndian.PutUint16(frame[portAt+4:], 0) // no UDP checksum: the generator rewrites the payload
	const stampAt, srcPortAt = 14 + 20 + 8, 14 + 20
	filter := udpFilter
	filter.StampOffset = stampAt
	sink := b.newSink(t, filter, false)
	const count = 8000
	opts := Options{FlowOffset: srcPortAt, Flows: 8, FlowsPerSlice: 4, StampOffset: stampAt, Rate: 100_000}
	var now unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &now); err != nil {
		t.Fatal(err)
	}
	began := time.Duration(now.Nano())
	if _, _, err := b.generator.Send(b.gen, b.genIndex, frame, count, opts); err != nil {
		t.Fatal(err)
	}
	settle(t, sink, count)
	sent := append(opts.SliceCounts(count), 0)
	delays, err := sink.Delays()
	if err != nil {
		t.Fatal(err)
	}
	for slice, want := range []uint64{count / 2, count / 2, 0} {
		d := delays[slice]
		if sent[slice] != want || d.Received != want {
			t.Errorf("slice %d: sent %d, received %d; want %d", slice, sent[slice], d.Received, want)
		}
		if want > 0 && (d.Min <= 0 || d.Min > d.Mean || d.Mean > d.Max || d.Max > time.Second || d.Jitter > d.Max ||
			d.FirstSent < began || d.FirstSent > began+time.Second) {
			t.Errorf("slice %d: delays %+v (the send began at %v)", slice, d, began)
		}
		t.Logf("slice %d: %+v", slice, d)
	}
	sample, err := sink.Sample()
	// Equal but for the flow's port, which depends on the CPU sampled.
	if err != nil || len(sample) != len(frame) || !bytes.Equal(sample[:srcPortAt], frame[:srcPortAt]) ||
		!bytes.Equal(sample[srcPortAt+2:stampAt], frame[srcPortAt+2:stampAt]) {
		t.Errorf("sample of %d octets (%v), want the %d-octet frame", len(sample), err, len(frame))
	}
}
