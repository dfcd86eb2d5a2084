package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/testsupport"
)

func TestCUUPFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // in the error
	}{
		{args: []string{"--cuup", "--cuup-size", "27"}, want: "--cuup-size"},
		{args: []string{"--cuup", "--cuup-size", "1441"}, want: "--cuup-size"},
		{args: []string{"--cuup", "--cuup-flows", "1,0"}, want: "--cuup-flows"},
		{args: []string{"--cuup", "--cuup-flows", "4097"}, want: "--cuup-flows"},
		{args: []string{"--cuup", "--cuup-rounds", "0"}, want: "--cuup-rounds"},
		{args: []string{"--cuup", "--cuup-packets", "0"}, want: "--cuup-packets"},
	} {
		if _, err := parseFlags(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one about %s", c.args, err, c.want)
		}
	}
	cfg, err := parseFlags([]string{"--cuup", "--quick", "--cuup-rounds", "4"})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.cuup || cfg.cuupPackets != 2_000_000 || cfg.cuupRounds != 4 || len(cfg.cuupFlows) != 4 || cfg.cuupSize != 1400 {
		t.Errorf("--cuup --quick --cuup-rounds 4: %+v", cfg)
	}
}

// The generator's frame is the G-PDU the CU-UP's classifier and socket
// path take: a DL PDU Session Container of QFI 9, the user packet of the
// size asked, valid IPv4 header checksums, the flow field where the user
// packet's UDP source port is.
func TestCUUPFrame(t *testing.T) {
	dst, src := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}
	for _, size := range []int{28, 1400, maxCUUPSize} {
		frame, portAt := cuupFrame(dst, src, 0x1234, size)
		pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
		gtp, ok := pkt.Layer(layers.LayerTypeGTPv1U).(*layers.GTPv1U)
		if !ok {
			t.Fatalf("%d octets: no GTP-U in %v", size, pkt)
		}
		if gtp.TEID != 0x1234 || len(gtp.GTPExtensionHeaders) != 1 || gtp.GTPExtensionHeaders[0].Type != 0x85 ||
			!bytes.Equal(gtp.GTPExtensionHeaders[0].Content, []byte{0x00, cuupQFI}) {
			t.Errorf("%d octets: GTP-U %+v", size, gtp)
		}
		if len(gtp.Payload) != size {
			t.Errorf("user packet of %d octets, want %d", len(gtp.Payload), size)
		}
		user := len(frame) - size
		for _, at := range []int{14, user} {
			if sum := gopacket.FoldChecksum(gopacket.ComputeChecksum(frame[at:at+20], 0)); sum != 0 {
				t.Errorf("%d octets: IPv4 header at %d does not check (%#x)", size, at, sum)
			}
		}
		if port := binary.BigEndian.Uint16(frame[portAt:]); port != cuupFirstPort {
			t.Errorf("%d octets: port %d at %d, want %d", size, port, portAt, cuupFirstPort)
		}
	}
}

// TestCUUPBench runs `xdp5g-lab bench --cuup` at a tiny size: every path
// delivers, what the DU gets the CU-UP's workers sent, and the stack alone
// sends every packet; the report has its tables.
func TestCUUPBench(t *testing.T) {
	testsupport.NeedRoot(t, "network namespaces and XDP")
	args := []string{"--cuup", "--cuup-packets", "100000", "--cuup-rounds", "1", "--cuup-flows", "1,8"}
	cfg, err := parseFlags(args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := measureCUUP(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for path, cases := range res.points {
		for c, points := range cases {
			if len(points) != 1 {
				t.Fatalf("%s, case %d: %d points, want 1", cuupPaths[path].name, c, len(points))
			}
			p := points[0]
			if p.delivered == 0 || p.delivered > p.sent || p.elapsed <= 0 || p.span < p.elapsed {
				t.Errorf("%s, case %d: %+v", cuupPaths[path].name, c, p)
			}
			if path <= pathSockets && (p.received > p.sent || p.forwarded > p.received || p.delivered > p.forwarded) {
				t.Errorf("%s, case %d: sent %d, the CU-UP received %d and sent %d, the DU got %d", cuupPaths[path].name, c,
					p.sent, p.received, p.forwarded, p.delivered)
			}
		}
	}
	for i := range res.stack {
		for sec, ns := range res.stack[i] {
			if len(ns) != 1 || ns[0] <= 0 {
				t.Errorf("the stack alone over %d frames, %s: %v", stackFrameCounts[i], cuupSecurities[sec].name, ns)
			}
		}
	}
	var out bytes.Buffer
	reportCUUP(&out, args, cfg, res)
	for _, want := range []string{"#### Downlink throughput", "| NEA2 | 8 |", "#### The stack alone", "#### Targets"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
}
