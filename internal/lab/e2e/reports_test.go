package e2e

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/wmnsk/go-pfcp/ie"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/demo/demotest"
	"github.com/xdp5g/xdp5g/internal/lab/pfcptest"
)

const (
	smfNodeID = "smf.e2e.test"
	urrID     = 1
	// urrThreshold is crossed a few times by the URR's traffic, pfcpPackets
	// of about 60 octets each way.
	urrThreshold = 25_000
	// otherUEPort is the UE's port of the flow of the PDR pair without the
	// URR; demo.UEPacket uses 40000.
	otherUEPort = 40001
	// reportWait bounds the wait for the reports expected, generously: a
	// busy host sends them late.
	reportWait = 30 * time.Second
	// trafficStopAfter is the silence after which the UPF says the
	// traffic stopped: longer than the pause between the URR's uplink and
	// downlink traffic, which a busy host stretches (a sink, a generator
	// loaded in between).
	trafficStopAfter = 2 * time.Second
)

// An SMF sets up a session whose PDR pair uses a URR asking for reports at
// the first packet (START), at a volume threshold (VOLTH), every second
// (PERIO) and when the traffic stops (STOPT), beside a PDR pair for one flow without the URR. Traffic through
// both, and the session's deletion, has the UPF send the SMF what it asked
// for over UDP: the usage reports, Session Report Requests and the final
// one in the deletion's response, add up exactly to what the sinks
// received of the URR's flows, in inner IP octets and packets per
// direction, and to nothing of the other flow.
func TestPFCPUsageReports(t *testing.T) {
	tb := demotest.Testbed(t)
	smf, client, stop := reportingSMF(t, tb, "heartbeat_interval: 200ms", fmt.Sprintf("traffic_stop_after: %s", trafficStopAfter))

	const cpSEID = 0x5eed
	req := smf.PDUSessionRequest(cpSEID, netip.Addr{}, demo.GNBAddr, demo.DownlinkTEID, demo.QFI)
	triggers := uint32(pfcptest.TriggerSTART | pfcptest.TriggerVOLTH | pfcptest.TriggerPERIO | pfcptest.TriggerSTOPT)
	if err := pfcptest.AddURR(req, pfcptest.VolumeURR(urrID, triggers, time.Second, urrThreshold), 1, 2); err != nil {
		t.Fatal(err)
	}
	flow := ie.NewSDFFilter(fmt.Sprintf("permit out udp from any to assigned %d", otherUEPort), "", "", "", 0)
	req.CreatePDR = append(req.CreatePDR, pfcptest.PDRPair(3, 4, 100, netip.Addr{}, demo.QFI, flow)...)
	sess, err := smf.Establish(req)
	if err != nil {
		t.Fatal(err)
	}

	uplink, downlink := tb.Uplink(), tb.Downlink()
	up := demo.UEPacket(sess.UE, demo.DNAddr, true, demo.UETTL)
	down := demo.UEPacket(sess.UE, demo.DNAddr, false, demo.UETTL)
	for _, c := range []struct {
		what  string
		dir   demo.Direction
		frame []byte
	}{
		{what: "uplink without the URR", dir: uplink, frame: tb.UplinkFrame(sess.TEID, demo.QFI, onUEPort(up, true, otherUEPort))},
		{what: "downlink without the URR", dir: downlink, frame: tb.DownlinkFrame(onUEPort(down, false, otherUEPort))},
		{what: "uplink", dir: uplink, frame: tb.UplinkFrame(sess.TEID, demo.QFI, up)},
		{what: "downlink", dir: downlink, frame: tb.DownlinkFrame(down)},
	} {
		if got := send(t, c.dir, c.frame); got != pfcpPackets {
			t.Fatalf("%s: %d of %d packets delivered", c.what, got, pfcpPackets)
		}
	}
	// Every packet of the URR's flows arrived: the sinks received that many
	// of their inner packets.
	upOctets, downOctets := pfcpPackets*uint64(len(up)), pfcpPackets*uint64(len(down))
	want := volumes{upOctets + downOctets, upOctets, downOctets, 2 * pfcpPackets, pfcpPackets, pfcpPackets}

	reports := &usageReports{t: t, smf: smf, cpSEID: cpSEID}
	reports.await("two periodic reports and the stop of traffic", func() bool {
		return reports.count(pfcptest.TriggerPERIO) >= 2 && reports.count(pfcptest.TriggerSTOPT) == 1
	})
	final, err := smf.DeleteUsage(sess.SEID)
	if err != nil {
		t.Fatal(err)
	}
	// Reports the UPF had not sent yet come first in the response.
	var last pfcptest.UsageReport
	for _, u := range final {
		last = reports.add(u)
	}
	if last.Trigger != pfcptest.TriggerTERMR {
		t.Errorf("the deletion's last usage report has trigger %#x, want TERMR", last.Trigger)
	}
	// Reports sent before the deletion may still be on their way.
	reports.await("the reports numbered before the final one", func() bool { return len(reports.bySEQN) == int(last.SEQN)+1 })

	var sum volumes
	var started, stopped bool
	for seqn := range last.SEQN + 1 {
		r := reports.bySEQN[seqn]
		v := r.Volume
		t.Logf("report %d: trigger %#05x, octets and packets (total, up, down) %v", seqn, r.Trigger, volumesOf(v))
		switch {
		case r.Trigger&pfcptest.TriggerSTART != 0 && started:
			t.Errorf("report %d: START once more", seqn)
		case r.Trigger&pfcptest.TriggerSTART != 0 && v.TotalNumberOfPackets == 0:
			t.Errorf("report %d: START without a packet", seqn)
		case r.Trigger&pfcptest.TriggerSTART == 0 && !started && v.TotalNumberOfPackets > 0:
			t.Errorf("report %d: packets before START", seqn)
		case r.Trigger&pfcptest.TriggerSTOPT != 0 && !started:
			t.Errorf("report %d: STOPT before START", seqn)
		case stopped && v.TotalNumberOfPackets > 0: // it came too early
			t.Errorf("report %d: packets after STOPT", seqn)
		}
		started = started || r.Trigger&pfcptest.TriggerSTART != 0
		stopped = stopped || r.Trigger&pfcptest.TriggerSTOPT != 0
		if r.Trigger&pfcptest.TriggerVOLTH != 0 && v.TotalVolume < urrThreshold {
			t.Errorf("report %d: volume threshold %d reported at %d octets", seqn, urrThreshold, v.TotalVolume)
		}
		if v.Flags != allVolumes {
			t.Errorf("report %d: volume measurement flags %#x, want %#x", seqn, v.Flags, allVolumes)
		}
		for i, n := range volumesOf(v) {
			sum[i] += n
		}
	}
	if !started {
		t.Error("no START report")
	}
	if n := reports.count(pfcptest.TriggerVOLTH); n == 0 {
		t.Error("no volume threshold report")
	}
	if sum != want {
		t.Errorf("the reports add up to %v octets and packets (total, up, down); the sinks received %v", sum, want)
	}

	// Heartbeats go every 200 ms; a busy host may answer one late.
	for deadline := time.Now().Add(reportWait); ; time.Sleep(10 * time.Millisecond) {
		a := association(t, client)
		if !a.LastHeartbeat.IsZero() && !a.Lost {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the SMF answered no heartbeat: %+v", a)
			break
		}
	}
	if err := stop(); err != nil {
		t.Error(err)
	}
}

// volumes are the octets, then the packets, of a Volume Measurement: in
// total, uplink and downlink.
type volumes [6]uint64

// allVolumes are the Volume Measurement flags of them all: TOVOL, ULVOL,
// DLVOL, TONOP, ULNOP, DLNOP.
const allVolumes = 0x3f

func volumesOf(v ie.VolumeMeasurementFields) volumes {
	return volumes{v.TotalVolume, v.UplinkVolume, v.DownlinkVolume,
		v.TotalNumberOfPackets, v.UplinkNumberOfPackets, v.DownlinkNumberOfPackets}
}

// usageReports are the usage reports the SMF received for a session, by
// their UR-SEQN (the test has one URR).
type usageReports struct {
	t      *testing.T
	smf    *pfcptest.SMF
	cpSEID uint64
	bySEQN map[uint32]pfcptest.UsageReport
}

// add records a Usage Report IE and returns what it says.
func (r *usageReports) add(report *ie.IE) pfcptest.UsageReport {
	r.t.Helper()
	u, err := pfcptest.ParseUsageReport(report)
	if err != nil {
		r.t.Fatal(err)
	}
	if u.URRID != urrID {
		r.t.Fatalf("a usage report of URR %d", u.URRID)
	}
	if _, twice := r.bySEQN[u.SEQN]; twice {
		r.t.Fatalf("UR-SEQN %d reported twice", u.SEQN)
	}
	if r.bySEQN == nil {
		r.bySEQN = map[uint32]pfcptest.UsageReport{}
	}
	r.bySEQN[u.SEQN] = u
	return u
}

// await records the Session Report Requests the SMF receives until done.
func (r *usageReports) await(what string, done func() bool) {
	r.t.Helper()
	timeout := time.After(reportWait)
	for !done() {
		select {
		case req := <-r.smf.Reports():
			if req.SEID() != r.cpSEID || len(req.UsageReport) == 0 {
				r.t.Fatalf("a Session Report Request for SEID %#x with %d usage reports", req.SEID(), len(req.UsageReport))
			}
			for _, u := range req.UsageReport {
				r.add(u)
			}
		case <-timeout:
			r.t.Fatalf("waiting for %s: %d reports in %v", what, len(r.bySEQN), reportWait)
		}
	}
}

// count is the number of reports with a trigger.
func (r *usageReports) count(trigger uint32) int {
	n := 0
	for _, u := range r.bySEQN {
		if u.Trigger&trigger != 0 {
			n++
		}
	}
	return n
}

// reportingSMF is an SMF associated with a daemon it starts over tb with
// UE addresses from uePool and more pfcp settings, "key: value" each. The
// daemon has the SMF as its peer: the SMF hears the UPF's requests, such as
// reports, on a port of its own, not on 8805 where another one may listen.
func reportingSMF(t *testing.T, tb *demo.Testbed, settings ...string) (*pfcptest.SMF, *api.Client, func() error) {
	t.Helper()
	listen := freeLoopbackUDP(t)
	smf, err := pfcptest.NewSMF(smfNodeID, netip.MustParseAddrPort(listen))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { smf.Close() })
	smfAddr, err := smf.Listen(netip.MustParseAddrPort("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	settings = append([]string{fmt.Sprintf("peers: [%q]", smfAddr), "ue_pool: " + uePool.String()}, settings...)
	client, stop := startDaemon(t, daemonConfig(t, tb, pfcpSection(listen, settings...)))
	association(t, client) // set up by the UPF
	return smf, client, stop
}

// association waits for the daemon's association with the SMF.
func association(t *testing.T, client *api.Client) api.Association {
	t.Helper()
	for deadline := time.Now().Add(reportWait); ; time.Sleep(10 * time.Millisecond) {
		list, err := client.Associations(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range list.Associations {
			if a.NodeID == smfNodeID {
				return a
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no association with %s after %v", smfNodeID, reportWait)
		}
	}
}

// onUEPort is a packet demo.UEPacket built for IPv4 with the UE's port
// changed to port.
func onUEPort(packet []byte, uplink bool, port layers.UDPPort) []byte {
	p := gopacket.NewPacket(packet, layers.LayerTypeIPv4, gopacket.Default)
	ip, udp := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4), p.Layer(layers.LayerTypeUDP).(*layers.UDP)
	if uplink {
		udp.SrcPort = port
	} else {
		udp.DstPort = port
	}
	udp.SetNetworkLayerForChecksum(ip)
	return demo.Serialize(true, ip, udp, gopacket.Payload(udp.Payload))
}
