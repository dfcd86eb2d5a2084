package report

import (
	"log/slog"
	"net"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/classify/intent"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// The classifier's figures are there from the first scrape, before any
// report, and move with the packets an intent's rule matches.
func TestMetrics(t *testing.T) {
	dp := openDatapath(t)
	intents := intent.NewStore(dp, nil, nil)
	if _, _, err := intents.Apply([]byte(`{"Resources": [{"dstPort": "5004"}], "Action": {"actionType": "INSERT", "actionName": "SLICE", "cpus": "0", "priority": "high"}}`)); err != nil {
		t.Fatal(err)
	}
	c := New(dp, intents, nil, slog.New(slog.DiscardHandler)).Metrics()
	testsupport.HasLines(t, testsupport.Exposition(t, c), "# TYPE xdp5g_intent_packets_total counter", `xdp5g_intent_packets_total{action="SLICE",intent="1"} 0`,
		`xdp5g_slice_offloaded_packets_total{slice="255"} 0`, `xdp5g_cpu_queue_backlog_packets{cpu="0"} 0`,
		"xdp5g_classify_rules 1", "xdp5g_classify_slices 1")

	buf := gopacket.NewSerializeBuffer()
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP,
		SrcIP: net.IPv4(10, 45, 0, 2).To4(), DstIP: net.IPv4(10, 100, 6, 2).To4()}
	u := &layers.UDP{SrcPort: 40000, DstPort: 5004}
	if err := u.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4},
		ip, u, gopacket.Payload("media")); err != nil {
		t.Fatal(err)
	}
	if _, err := dp.Program().Run(&ebpf.RunOptions{Data: buf.Bytes()}); err != nil {
		t.Fatal(err)
	}
	// 60 octets: the frame padded to Ethernet's minimum.
	testsupport.HasLines(t, testsupport.Exposition(t, c), `xdp5g_intent_packets_total{action="SLICE",intent="1"} 1`,
		`xdp5g_intent_bytes_total{action="SLICE",intent="1"} 60`, `xdp5g_cpu_queue_enqueued_packets_total{cpu="0"} 1`)
}
