package e2e

import (
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/classify/intent"
	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/demo/demotest"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
	"github.com/xdp5g/xdp5g/internal/testsupport"
	"github.com/xdp5g/xdp5g/internal/upf/session"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// innerFlows are the UE's flows in the one tunnel of the gNB: its
// source ports.
const innerFlows = 64

// Steered packets wait on their CPU for its queue's kernel thread, which
// the other work of a loaded host delays: at this pace a queue of 2048
// packets rides out a second of that.
const (
	steerRate    = 4_000 // packets per second
	steerPackets = 200 * innerFlows
)

// stagedUPF is the testbed's UPF with the demo's session installed, and
// stagesOf its classifier.
func stagedUPF(t *testing.T) (*demo.Testbed, *demo.UPF, *classifyxdp.Datapath, classifyxdp.Slice) {
	t.Helper()
	tb := demotest.Testbed(t)
	upf := demotest.UPF(t, tb)
	if err := upf.Install(); err != nil {
		t.Fatal(err)
	}
	rules, slice := stagesOf(t, upf)
	return tb, upf, rules, slice
}

// stagesOf is a classifier whose stages run in the chains of upf, with
// a slice over every CPU.
func stagesOf(t *testing.T, upf *demo.UPF) (*classifyxdp.Datapath, classifyxdp.Slice) {
	t.Helper()
	rules, err := classifyxdp.OpenDatapath(classifyxdp.Config{Chain: upf.Datapath.ChainMaps()})
	testsupport.CheckLoad(t, err)
	t.Cleanup(func() { rules.Close() })
	slice := classifyxdp.Slice{ID: 1}
	for cpu := range runtime.NumCPU() {
		slice.CPUs = append(slice.CPUs, cpu)
	}
	if err := rules.SetSlice(slice); err != nil {
		t.Fatal(err)
	}
	return rules, slice
}

// chainN3 runs the chain on the UPF's N3: classify when classify, then
// steer to slice when steer, then the UPF.
func chainN3(t *testing.T, tb *demo.Testbed, upf *demo.UPF, rules *classifyxdp.Datapath, classify, steer bool, slice uint32) {
	t.Helper()
	c := upfxdp.NewChain(rules, classify, steer, slice)
	if err := tb.UPF.Do(func() error {
		return upf.Datapath.SetStages(demo.N3, c)
	}); err != nil {
		t.Fatal(err)
	}
}

// uplinkFlows is the gNB's uplink G-PDU and the offset of the inner UDP
// source port, which the generator cycles through innerFlows values.
func uplinkFlows(tb *demo.Testbed) (frame []byte, portAt int) {
	inner := demo.UEPacket(demo.UEAddr, demo.DNAddr, true, demo.UETTL)
	frame = tb.UplinkFrame(demo.UplinkTEID, demo.QFI, inner)
	return frame, len(frame) - len(inner) + 20 // behind the inner IPv4 header, without options
}

// With the steer stage on N3, the inner flows of one gNB's tunnel (one
// outer 5-tuple, which a NIC's receive-side scaling keeps on one CPU)
// spread over the slice's CPUs, where the UPF forwards them: every packet
// reaches the data network once, the UPF counts every one as forwarded,
// and the per-CPU counters show each flow on exactly one CPU, so no flow
// is reordered.
func TestSteerSpreadsUplinkOverCPUs(t *testing.T) {
	tb, upf, rules, slice := stagedUPF(t)
	if len(slice.CPUs) < 2 {
		t.Skip("steering needs two CPUs")
	}
	chainN3(t, tb, upf, rules, false, true, slice.ID)
	flows := sendInnerFlows(t, tb, upf, rules)
	perCPU := map[int]uint64{}
	var total uint64
	for hash, cpus := range flows {
		on := 0
		for cpu, c := range cpus {
			if c.Packets > 0 {
				on++
				perCPU[cpu] += c.Packets
				total += c.Packets
			}
		}
		if on != 1 {
			t.Errorf("flow %#x ran on %d CPUs, want 1", hash, on)
		}
	}
	if total != steerPackets {
		t.Errorf("the CPUs took %d packets, want %d", total, steerPackets)
	}
	if len(perCPU) < 2 {
		t.Errorf("the flows ran on CPUs %v, want every CPU of the slice %v", perCPU, slice.CPUs)
	}
	t.Logf("packets per CPU: %v", perCPU)
}

// Stages added to and removed from N3 while the gNB sends lose nothing:
// each change is one atomic update, and the packets queued for a CPU
// still find the UPF there.
func TestStagesChangeUnderTraffic(t *testing.T) {
	tb, upf, rules, slice := stagedUPF(t)
	frame, portAt := uplinkFlows(tb)
	dir := tb.Uplink()
	gen := newGenerator(t)
	var sent, asked uint64
	var sendErr error
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		sent, asked, sendErr = sendUntil(gen, dir, frame, steerRate, trafficgen.Options{FlowOffset: portAt, Flows: innerFlows}, stop)
	}()
	// Each chain in turn.
	chains := []struct{ classify, steer bool }{{true, false}, {true, true}, {false, true}, {false, false}, {false, true},
		{true, true}, {false, false}}
	for _, c := range chains {
		time.Sleep(50 * time.Millisecond)
		start := time.Now()
		chainN3(t, tb, upf, rules, c.classify, c.steer, slice.ID)
		t.Logf("classify %v, steer %v: %v", c.classify, c.steer, time.Since(start))
	}
	close(stop)
	<-done
	if sendErr != nil {
		t.Fatal(sendErr)
	}
	checkForwarded(t, upf, dir, sent, asked)
}

// sendInnerFlows sends steerPackets of the innerFlows flows in the gNB's
// tunnel, checks that the UPF forwarded each packet once and returns
// where each flow was steered, by its hash.
func sendInnerFlows(t *testing.T, tb *demo.Testbed, upf *demo.UPF, rules *classifyxdp.Datapath) map[uint32][]classifyxdp.Counter {
	t.Helper()
	frame, portAt := uplinkFlows(tb)
	dir := tb.Uplink()
	sent, _, err := dir.Send(newGenerator(t), frame, steerPackets, trafficgen.Options{Rate: steerRate, FlowOffset: portAt,
		Flows: innerFlows})
	if err != nil {
		t.Fatal(err)
	}
	checkForwarded(t, upf, dir, sent, steerPackets)
	flows, err := rules.FlowCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(flows) != innerFlows {
		t.Errorf("%d flows steered, want %d", len(flows), innerFlows)
	}
	return flows
}

// checkForwarded checks that want packets were sent the way dir goes, that
// the UPF forwarded each from N3 and that each arrived.
func checkForwarded(t *testing.T, upf *demo.UPF, dir demo.Direction, sent, want uint64) {
	t.Helper()
	delivered, err := dir.Delivered(sent)
	if err != nil {
		t.Fatal(err)
	}
	if sent != want || delivered != want {
		t.Errorf("sent %d, delivered %d; want %d both", sent, delivered, want)
	}
	if got := reasonCount(t, upf.Datapath, demo.N3, "uplink_forward"); got != want {
		t.Errorf("uplink_forward on N3 counted %d packets, want %d", got, want)
	}
}

// An intent that names the gNB's tunnel (its TEID) applies to the UPF's
// traffic on N3 through the classify stage: a SLICE intent on one CPU
// sends each of the tunnel's flows there, where the UPF forwards it; an
// intent naming another TEID leaves the traffic alone.
func TestIntentsApplyToUPFTraffic(t *testing.T) {
	tb, upf, rules, _ := stagedUPF(t)
	if runtime.NumCPU() < 2 {
		t.Skip("the slice's CPU must differ from the one the traffic comes in on")
	}
	const cpu = 1
	intents := intent.NewStore(rules, func(name string) (*net.Interface, error) {
		return nil, fmt.Errorf("no interface %s here", name)
	}, nil)
	sliceOf := func(teid uint32) string {
		return fmt.Sprintf(`{"Resources": [{"encapsulationType1": "gtp", "encapsulationID1": "%08x"}],
			"Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "%d"}}`, teid, cpu)
	}
	other, _, err := intents.Apply([]byte(sliceOf(demo.UplinkTEID + 1)))
	if err != nil {
		t.Fatal(err)
	}
	ours, _, err := intents.Apply([]byte(sliceOf(demo.UplinkTEID)))
	if err != nil {
		t.Fatal(err)
	}
	chainN3(t, tb, upf, rules, true, false, 0)
	flows := sendInnerFlows(t, tb, upf, rules)
	for hash, cpus := range flows {
		for c, n := range cpus {
			if (n.Packets > 0) != (c == cpu) {
				t.Errorf("flow %#x: %d packets on CPU %d, want them all on CPU %d", hash, n.Packets, c, cpu)
			}
		}
	}
	for _, c := range []struct {
		id      uint32
		packets uint64
	}{{ours.ID, steerPackets}, {other.ID, 0}} {
		st, err := intents.Get(c.id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Stats.Packets != c.packets {
			t.Errorf("intent %d counted %d packets, want %d", c.id, st.Stats.Packets, c.packets)
		}
	}
}

// Behind the steer stage the UPF runs on the flow's CPU with all it does
// there: a FAR that duplicates (DUPL) sends each steered packet on and
// its copy to the LI collector.
func TestSteeredUplinkDuplicated(t *testing.T) {
	tb := demotest.Testbed(t)
	upf := demotest.UPF(t, tb)
	collector, err := tb.NewCollector()
	if err != nil {
		t.Fatal(err)
	}
	testsupport.Cleanup(t, collector.Close)
	if err := upf.AttachCollector(); err != nil {
		t.Fatal(err)
	}
	s := demo.Session()
	for i := range s.FARs {
		s.FARs[i].Duplicating = &session.Forwarding{DestinationInterface: session.InterfaceLIFunction,
			OuterHeaderCreation: &session.OuterHeaderCreation{TEID: 0xd0d0, Peer: demo.CollectorAddr}}
	}
	if err := upf.Store.Create(s); err != nil {
		t.Fatal(err)
	}
	copies, err := collector.Copies()
	if err != nil {
		t.Fatal(err)
	}
	testsupport.Cleanup(t, copies.Sink.Close)
	rules, slice := stagesOf(t, upf)
	chainN3(t, tb, upf, rules, false, true, slice.ID)
	sendInnerFlows(t, tb, upf, rules)
	if n, err := copies.Delivered(steerPackets); err != nil || n != steerPackets {
		t.Errorf("%d copies reached the collector (%v), want %d", n, err, steerPackets)
	}
	if got := reasonCount(t, upf.Datapath, demo.N3, "duplicate"); got != steerPackets {
		t.Errorf("duplicate on N3 counted %d packets, want %d", got, steerPackets)
	}
}
