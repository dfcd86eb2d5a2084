package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
	"github.com/xdp5g/xdp5g/internal/testsupport"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// A G-PDU whose outer packet the gNB's kernel fragmented (a UE's full-size
// packet over a path of a smaller MTU) is forwarded: XDP sees it only in
// pieces and passes them on, the kernel puts it together, and the daemon
// has the data path forward it whole, once; with PFCP or without.
func TestFragmentedGPDUsAreForwarded(t *testing.T) {
	t.Run("pfcp", func(t *testing.T) { fragmentedGPDUs(t, true, false) })
	t.Run("rest", func(t *testing.T) { fragmentedGPDUs(t, false, false) })
	t.Run("pfcp-ipv6", func(t *testing.T) { fragmentedGPDUs(t, true, true) })
	t.Run("rest-ipv6", func(t *testing.T) { fragmentedGPDUs(t, false, true) })
}

// ip runs the ip command in namespace ns.
func ip(t *testing.T, ns string, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("ip %v: %v: %s", args, err, out)
	}
}

func fragmentedGPDUs(t *testing.T, pfcp, outer6 bool) {
	e := newEnv(t)
	// n3 is an N3 address of the configuration, local to n3n6 here. The
	// gNB's path to it carries 600 octets (IPv6: 1280, and the link 3000 so
	// that G-PDUs of three fragments fit it put together): its kernel
	// fragments what the gNB sends there, and only that.
	n3, gnb, network, mtu, payload, session := "10.1.2.1", "10.1.3.2", "udp4", "600", 1400, doc
	if outer6 {
		n3, gnb, network, mtu, payload = "fd00:12::1", "fd00:12::2", "udp6", "1280", 2600
		e.n3 = []string{n3}
		session = strings.Replace(doc, `"teid": 700,`, `"teid": 700, "localAddress": "fd00:12::1",`, 1)
		ip(t, e.upf.Name, "link", "set", "n3n6", "mtu", "3000")
		ip(t, e.peer.Name, "link", "set", "gnb", "mtu", "3000")
		ip(t, e.upf.Name, "addr", "add", n3+"/64", "dev", "n3n6", "nodad")
		ip(t, e.peer.Name, "addr", "add", gnb+"/64", "dev", "gnb", "nodad")
	}
	// 10.1.9.1, an N3 address that is local nowhere (a virtual address
	// not there yet), changes nothing for the others.
	e.n3 = append(e.n3, "10.1.9.1")
	must(t, e.upf.AddAddr("n3n6", "10.1.2.1/24"))
	ip(t, e.peer.Name, "route", "add", n3, "dev", "gnb", "mtu", mtu)
	if pfcp {
		e.pfcp = fmt.Sprintf("{listen: %q, node_id: upf.xdp5g.test, heartbeat_interval: 1h}", testsupport.FreeAddr(t, "udp"))
	}
	cfg := e.config(t)
	client, stop := runDaemon(t, cfg)
	defer func() { must(t, stop()) }()
	_, err := client.Create(context.Background(), []byte(session))
	must(t, err)
	dp, err := upfxdp.Open(upfxdp.Options{PinPath: e.pin, MaxSessions: 1024, N3Addresses: cfg.N3Addresses})
	must(t, err)
	defer dp.Close()

	// A G-PDU of the UE to dst and the port given.
	gpduToAt := func(dst net.IP, port layers.UDPPort) []byte {
		inner := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.ParseIP(ue), DstIP: dst}
		udp := &layers.UDP{SrcPort: 7000, DstPort: port}
		must(t, udp.SetNetworkLayerForChecksum(inner))
		buf := gopacket.NewSerializeBuffer()
		must(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
			inner, udp, gopacket.Payload(make([]byte, payload))))
		return encodeGTPU(t, &layers.GTPv1U{MessageType: 255, TEID: 700}, buf.Bytes())
	}
	// One to the gNB's own address, back out of n3n6.
	gpduTo := func(port layers.UDPPort) []byte { return gpduToAt(net.IPv4(10, 1, 3, 2), port) }
	var conn net.PacketConn
	must(t, e.peer.Do(func() (err error) {
		conn, err = net.ListenPacket(network, net.JoinHostPort(gnb, "2152"))
		return err
	}))
	defer conn.Close()
	to := &net.UDPAddr{IP: net.ParseIP(n3), Port: 2152}
	send := func(gpdu []byte, count int) {
		for range count {
			_, err := conn.WriteTo(gpdu, to)
			must(t, err)
		}
	}

	// The first may find the data network's next hop unresolved. Those
	// sent until one arrives go to port 7001: the ones still on their way
	// (the daemon puts them through one by one) are not the counted ones.
	sink := newSink(t, e, 7001)
	warmups, fragments := 0, counter(t, dp, "pass_fragment")
	for deadline := time.Now().Add(10 * time.Second); sinkCount(t, sink) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no fragmented G-PDU was forwarded")
		}
		send(gpduTo(7001), 1)
		warmups++
	}
	must(t, sink.Close())
	eventually(t, "the first G-PDUs' fragments to reach XDP", func() bool { return counter(t, dp, "pass_fragment") >= fragments+uint64(3*warmups) })
	// Their PDR counts them too, those the next hop was not ready for as well.
	eventually(t, "the first G-PDUs counted", func() bool { return uplinkPDRCounters(t, client).Packets >= uint64(warmups) })
	sink, fragments = newSink(t, e, 7002), counter(t, dp, "pass_fragment")
	counted := uplinkPDRCounters(t, client)
	const sent = 20
	send(gpduTo(7002), sent)
	eventually(t, fmt.Sprintf("%d fragmented G-PDUs forwarded", sent), func() bool { return sinkCount(t, sink) >= sent })
	time.Sleep(200 * time.Millisecond) // for any forwarded twice
	if got := sinkCount(t, sink); got != sent {
		t.Errorf("%d of %d fragmented G-PDUs forwarded", got, sent)
	}
	if got := counter(t, dp, "pass_fragment") - fragments; got != 3*sent {
		t.Errorf("%d fragments passed to the kernel, want %d: the G-PDUs were not sent in three", got, 3*sent)
	}
	// Its PDR counts each G-PDU once, its inner packet's bytes.
	innerLen := uint64(len(gpduTo(7002)) - 8) // less the GTP-U header
	after := uplinkPDRCounters(t, client)
	if p, b := after.Packets-counted.Packets, after.Bytes-counted.Bytes; p != sent || b != sent*innerLen {
		t.Errorf("the uplink PDR counted %d packets, %d bytes; want %d of %d bytes", p, b, sent, innerLen)
	}

	// The same fragments by spare, which does not run the UPF: the kernel
	// puts them together as well, and the daemon leaves the G-PDU there.
	// (Over IPv6 no neighbour would answer there for an address of n3n6.)
	if outer6 {
		return
	}
	// One whose inner packet the data path hands to the kernel (no next
	// hop to an address of the UPF's own): the kernel takes it, as it takes
	// such a packet that came whole, and delivers it.
	var local net.PacketConn
	must(t, e.upf.Do(func() (err error) {
		local, err = net.ListenPacket("udp4", "10.1.3.1:7003")
		return err
	}))
	defer local.Close()
	send(gpduToAt(net.IPv4(10, 1, 3, 1), 7003), 3)
	must(t, local.SetReadDeadline(time.Now().Add(3*time.Second)))
	if _, _, err := local.ReadFrom(make([]byte, 4096)); err != nil {
		t.Errorf("no fragmented G-PDU handed to the kernel reached its destination: %v", err)
	}
	ip(t, e.peer.Name, "route", "replace", n3, "dev", "spare", "mtu", mtu)
	before := sinkCount(t, sink)
	send(gpduTo(7002), sent)
	time.Sleep(500 * time.Millisecond)
	if got := sinkCount(t, sink) - before; got != 0 {
		t.Errorf("%d of %d fragmented G-PDUs that came in by spare forwarded", got, sent)
	}
}

// uplinkPDRCounters are the live counters of doc's uplink PDR, PDR 1.
func uplinkPDRCounters(t *testing.T, client *api.Client) (c struct{ Packets, Bytes uint64 }) {
	t.Helper()
	raw, err := client.Session(context.Background(), 7)
	must(t, err)
	var d struct {
		PDRs []struct {
			PDRID    uint16 `json:"pdrId"`
			Counters struct{ Packets, Bytes uint64 }
		}
	}
	must(t, json.Unmarshal(raw, &d))
	for _, p := range d.PDRs {
		if p.PDRID == 1 {
			return p.Counters
		}
	}
	t.Fatal("the session has no PDR 1")
	return c
}

// newSink counts the UDP datagrams to port that arrive at the gNB,
// until the test ends.
func newSink(t *testing.T, e *env, port uint16) *trafficgen.Sink {
	t.Helper()
	sink, err := trafficgen.NewSink(e.peer, "gnb", trafficgen.Filter{EtherType: 0x0800, IPProto: 17, DstPort: port}, true)
	must(t, err)
	t.Cleanup(func() { sink.Close() })
	return sink
}

func sinkCount(t *testing.T, sink *trafficgen.Sink) uint64 {
	t.Helper()
	c, err := sink.Counts()
	must(t, err)
	return c.MatchPackets
}

// counter is a reason's packets on n3n6.
func counter(t *testing.T, dp *upfxdp.Datapath, reason string) uint64 {
	t.Helper()
	ifaces, err := dp.Counters()
	must(t, err)
	for _, i := range ifaces {
		if i.Name == "n3n6" {
			return i.Reasons[reason].Packets
		}
	}
	t.Fatal("n3n6 has no counters")
	return 0
}

// An N3 address whose GTP-U port another socket holds has no socket of
// the daemon's: the start names it and what is lost there, with PFCP and
// without, and /metrics counts it. An address local nowhere yet (a
// virtual address that appears later) binds as the local ones do; the
// start says it is on no interface yet.
func TestUnboundGTPUAddressIsLogged(t *testing.T) {
	for _, pfcp := range []bool{true, false} {
		e := newEnv(t)
		must(t, e.upf.AddAddr("n3n6", "10.1.2.1/24"))
		must(t, e.upf.AddAddr("n3n6", "10.1.2.5/24"))
		var holder net.PacketConn
		must(t, e.upf.Do(func() (err error) {
			holder, err = net.ListenPacket("udp4", "10.1.2.5:2152")
			return err
		}))
		defer holder.Close()
		e.n3 = []string{"10.1.9.1", "10.1.2.5"}
		lost := "fragmented G-PDUs"
		if pfcp {
			e.pfcp = fmt.Sprintf("{listen: %q, node_id: upf.xdp5g.test, heartbeat_interval: 1h}", testsupport.FreeAddr(t, "udp"))
			lost = "Error Indications, path supervision"
		}
		cfg := e.config(t)
		var log bytes.Buffer // written by the start, read once the daemon stopped
		stop := runDaemonLogging(t, cfg, &api.Client{URL: "http://" + cfg.API.Listen}, &log)
		metrics := scrape(t, cfg.API.Listen)
		must(t, stop())
		var named, absent []string
		for line := range strings.Lines(log.String()) {
			if strings.Contains(line, "no GTP-U socket") && strings.Contains(line, lost) {
				named = append(named, line)
			}
			if strings.Contains(line, "on no interface yet") {
				absent = append(absent, line)
			}
		}
		if len(absent) != 1 || !strings.Contains(absent[0], "address=10.1.9.1\n") {
			t.Errorf("pfcp %v: the start did not name 10.1.9.1 alone as on no interface yet:\n%s", pfcp, log.String())
		}
		if len(named) != 1 || !strings.Contains(named[0], "address=10.1.2.5 ") || !strings.Contains(named[0], "address already in use") {
			t.Errorf("pfcp %v: the start did not name 10.1.2.5 alone as without a socket, losing %s:\n%s", pfcp, lost, log.String())
		}
		testsupport.HasLines(t, metrics, `xdp5g_gtpu_unbound_addresses{address="10.1.2.5"} 1`)
		for _, bound := range []string{"10.1.2.1", "10.1.9.1"} {
			if _, ok := testsupport.Value(metrics, `xdp5g_gtpu_unbound_addresses{address="`+bound+`"}`); ok {
				t.Errorf("pfcp %v: %s, bound, counted as unbound", pfcp, bound)
			}
		}
	}
}

// A PFCP listen address on no interface yet (a virtual address that
// appears later) binds, and the start names it, as it names such N3 and N9
// addresses: a mistyped one shows there.
func TestPFCPAddressOnNoInterfaceIsLogged(t *testing.T) {
	e := newEnv(t)
	_, port, err := net.SplitHostPort(testsupport.FreeAddr(t, "udp"))
	must(t, err)
	e.pfcp = fmt.Sprintf("{listen: %q, node_id: upf.xdp5g.test, heartbeat_interval: 1h}", net.JoinHostPort("192.0.2.77", port))
	cfg := e.config(t)
	var log bytes.Buffer // written by the start, read once the daemon stopped
	stop := runDaemonLogging(t, cfg, &api.Client{URL: "http://" + cfg.API.Listen}, &log)
	must(t, stop())
	var absent []string
	for line := range strings.Lines(log.String()) {
		if strings.Contains(line, "PFCP address on no interface yet") {
			absent = append(absent, line)
		}
	}
	if len(absent) != 1 || !strings.Contains(absent[0], "address=192.0.2.77\n") {
		t.Errorf("the start did not name 192.0.2.77 once as a PFCP address on no interface yet:\n%s", log.String())
	}
}

// The start warns when the interfaces' namespace does not forward IPv4,
// and only then: the kernel would drop what the data path hands it.
func TestForwardingOffIsLogged(t *testing.T) {
	for _, forwarding := range []string{"0", "1"} {
		e := newEnv(t)
		must(t, e.upf.Sysctl("net.ipv4.ip_forward", forwarding))
		cfg := e.config(t)
		var log bytes.Buffer // written by the start, read once the daemon stopped
		stop := runDaemonLogging(t, cfg, &api.Client{URL: "http://" + cfg.API.Listen}, &log)
		must(t, stop())
		if warned := strings.Contains(log.String(), "IP forwarding is off"); warned != (forwarding == "0") {
			t.Errorf("ip_forward %s: warned %v:\n%s", forwarding, warned, log.String())
		}
	}
}
