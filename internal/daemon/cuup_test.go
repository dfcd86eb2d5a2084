package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/ran/cellsite"
	"github.com/xdp5g/xdp5g/internal/ran/cuup"
	"github.com/xdp5g/xdp5g/internal/ran/e1"
	"github.com/xdp5g/xdp5g/internal/testsupport"
	"github.com/xdp5g/xdp5g/internal/upf/gtpu"
)

// The cell site of the CU-UP tests: the daemon's namespace holds the
// CU-UP's interfaces, n3 towards a UPF stand-in and f1u towards a DU
// stand-in, each in a namespace of its own.
var (
	upfN3 = cellsite.UPFAddr
	cuN3  = cellsite.CUN3Addr
	cuF1U = cellsite.CUF1UAddr
	duF1U = cellsite.DUAddr
)

const (
	qfi     = 9
	duTEID  = 0xd1
	waitFor = 5 * time.Second // for what must arrive, on a loaded machine
)

// bearerContextSetup sets up a UE with one PDU session and one DRB
// carrying QoS flow 9, SDAP headers both ways and 18-bit SNs, without
// ciphering (NEA0) or integrity protection, so that what the DU receives
// can be compared with what the UPF sent.
var bearerContextSetup = fmt.Sprintf(`{
  "gnbCuCpUeE1apId": 3,
  "securityInformation": {
    "securityAlgorithm": {"cipheringAlgorithm": "NEA0"},
    "upSecurityKey": {"encryptionKey": "000102030405060708090a0b0c0d0e0f"}
  },
  "pduSessionResourceToSetupList": [{
    "pduSessionId": 1, "pduSessionType": "ipv4", "snssai": {"sst": 1},
    "securityIndication": {"integrityProtectionIndication": "not-needed", "confidentialityProtectionIndication": "not-needed"},
    "ngUlUpTnlInformation": {"transportLayerAddress": "%s", "gtpTeid": 4096},
    "drbToSetupList": [{
      "drbId": 1,
      "sdapConfiguration": {"defaultDrb": true, "sdapHeaderUl": true, "sdapHeaderDl": true},
      "pdcpConfiguration": {"pdcpSnSizeUl": 18, "pdcpSnSizeDl": 18, "rlcMode": "am"},
      "qosFlowInformationToBeSetup": [{"qosFlowIdentifier": %d, "fiveQi": 9}]
    }]
  }]
}`, upfN3, qfi)

// duTunnel gives DRB 1 the DU's downlink tunnel.
var duTunnel = fmt.Sprintf(`{"pduSessionResourceToModifyList": [{"pduSessionId": 1,
  "drbToModifyList": [{"drbId": 1, "dlUpParameters": {"transportLayerAddress": "%s", "gtpTeid": %d}}]}]}`, duF1U, duTEID)

type cellSite struct {
	*cellsite.Site
	dir, pin string
	listen   string
}

func newCellSite(t *testing.T) *cellSite {
	t.Helper()
	testsupport.NeedRoot(t, "network namespaces and XDP")
	site, err := cellsite.New("dmncu-")
	must(t, err)
	t.Cleanup(func() { must(t, site.Close()) })
	s := &cellSite{Site: site, dir: t.TempDir(), pin: testsupport.PinDir(t), listen: testsupport.FreeAddr(t, "tcp")}
	return s
}

// config writes and loads a configuration of a CU-UP alone with a cuup
// section, a YAML flow mapping.
func (s *cellSite) config(t *testing.T, cuupSection string) *config.Config {
	t.Helper()
	yaml := fmt.Sprintf("xdp_mode: native\nnetns: %s\napi: {listen: %q}\ndatapath: {pin_path: %s}\nstate_file: %s\ncuup: %s\n",
		s.CU.Name, s.listen, s.pin, filepath.Join(s.dir, "state", "sessions.json"), cuupSection)
	path := filepath.Join(s.dir, "xdp5g.yaml")
	must(t, os.WriteFile(path, []byte(yaml), 0o600))
	cfg, err := config.Load(path)
	must(t, err)
	return cfg
}

// listen opens a GTP-U socket in a namespace.
func listen(t *testing.T, ns *namespace.Netns, addr netip.Addr) *net.UDPConn {
	t.Helper()
	conn, err := cellsite.ListenGTPU(ns, addr)
	must(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// encodeGTPU encodes a GTP-U message with gopacket.
func encodeGTPU(t *testing.T, g *layers.GTPv1U, payload []byte) []byte {
	t.Helper()
	g.Version, g.ProtocolType = 1, 1
	buf := gopacket.NewSerializeBuffer()
	must(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, g, gopacket.Payload(payload)))
	return buf.Bytes()
}

// receive reads a GTP-U message, or fails the test.
func receive(t *testing.T, conn *net.UDPConn) layers.GTPv1U {
	t.Helper()
	buf := make([]byte, 4096)
	must(t, conn.SetReadDeadline(time.Now().Add(waitFor)))
	n, _, err := conn.ReadFromUDPAddrPort(buf)
	must(t, err)
	var g layers.GTPv1U
	must(t, g.DecodeFromBytes(buf[:n], gopacket.NilDecodeFeedback))
	return g
}

// userPacket is a UE's downlink IP packet.
func userPacket(t *testing.T) []byte {
	t.Helper()
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP,
		SrcIP: net.IPv4(192, 0, 2, 1), DstIP: net.IPv4(10, 45, 0, 7)}
	udp := &layers.UDP{SrcPort: 5000, DstPort: 6000}
	must(t, udp.SetNetworkLayerForChecksum(ip))
	buf := gopacket.NewSerializeBuffer()
	must(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		ip, udp, gopacket.Payload("downlink to the UE")))
	return buf.Bytes()
}

// sentDownlink reads the CU-UP's statistics once its workers have counted
// a downlink G-PDU sent, or gives up after waitFor.
func sentDownlink(t *testing.T, client *api.Client) *api.CUUPStats {
	t.Helper()
	for deadline := time.Now().Add(waitFor); ; time.Sleep(time.Millisecond) {
		st, err := client.CUUPStats(context.Background())
		must(t, err)
		if st.User.DownlinkSent > 0 || time.Now().After(deadline) {
			return st
		}
	}
}

// The daemon runs a CU-UP alone, on either path: bearer contexts are set
// up, modified and released over REST, a downlink packet from the UPF
// reaches the DU through SDAP and PDCP, the statistics count it, and the
// socket path answers echoes. The AF_XDP path's classifier leaves the
// interfaces with the daemon, and a CU-UP alone pins nothing.
func TestCUUPAlone(t *testing.T) {
	for _, io := range []config.CUUPIO{config.CUUPSockets, config.CUUPAFXDP} {
		t.Run(string(io), func(t *testing.T) {
			s := newCellSite(t)
			upfConn, duConn := listen(t, s.UPF, upfN3), listen(t, s.DU, duF1U)
			cfg := s.config(t, fmt.Sprintf("{n3: {interface: n3, address: %s}, f1u: {interface: f1u, address: %s}, io: %s}", cuN3, cuF1U, io))
			client, stop := runDaemon(t, cfg)
			ctx := context.Background()
			for _, name := range []string{"n3", "f1u"} {
				if got := testsupport.XDPAttached(t, s.CU, name); got != (io == config.CUUPAFXDP) {
					t.Errorf("%s: XDP program attached %v with io %s", name, got, io)
				}
			}

			// GTP-U echoes are the socket path's on both.
			echo := encodeGTPU(t, &layers.GTPv1U{MessageType: 1, SequenceNumberFlag: true, SequenceNumber: 77}, nil)
			_, err := upfConn.WriteToUDPAddrPort(echo, netip.AddrPortFrom(cuN3, gtpu.Port))
			must(t, err)
			if g := receive(t, upfConn); g.MessageType != 2 || g.SequenceNumber != 77 {
				t.Errorf("echo answered with message type %d, sequence number %d", g.MessageType, g.SequenceNumber)
			}

			doc, err := client.SetupBearerContext(ctx, []byte(bearerContextSetup))
			must(t, err)
			var setup e1.BearerContextSetupResponse
			must(t, json.Unmarshal(doc, &setup))
			if len(setup.PDUSessions) != 1 || len(setup.PDUSessions[0].DRBs) != 1 ||
				setup.PDUSessions[0].DLTunnel.Address != cuN3 || setup.PDUSessions[0].DRBs[0].ULTunnel.Address != cuF1U {
				t.Fatalf("setup response %s", doc)
			}
			_, err = client.ModifyBearerContext(ctx, setup.CUUPUEID, []byte(duTunnel))
			must(t, err)

			// DL PDU SESSION INFORMATION with the QFI.
			pkt := userPacket(t)
			msg := encodeGTPU(t, &layers.GTPv1U{MessageType: 255, TEID: setup.PDUSessions[0].DLTunnel.TEID, ExtensionHeaderFlag: true,
				GTPExtensionHeaders: []layers.GTPExtensionHeader{{Type: 0x85, Content: []byte{0x00, qfi}}}}, pkt)
			_, err = upfConn.WriteToUDPAddrPort(msg, netip.AddrPortFrom(cuN3, gtpu.Port))
			must(t, err)
			g := receive(t, duConn)
			if g.MessageType != 255 || g.TEID != duTEID || len(g.GTPExtensionHeaders) != 1 || g.GTPExtensionHeaders[0].Type != 0x84 {
				t.Fatalf("F1-U message type %d, TEID %#x, extensions %+v; want a G-PDU on TEID %#x with an NR RAN Container",
					g.MessageType, g.TEID, g.GTPExtensionHeaders, duTEID)
			}
			// PDCP data PDU of SN 0 (18 bits), SDAP DL header with the QFI,
			// the packet in clear (NEA0), no MAC-I.
			if want := append([]byte{0x80, 0, 0, qfi}, pkt...); !bytes.Equal(g.Payload, want) {
				t.Errorf("F1-U payload\n% x\nwant\n% x", g.Payload, want)
			}

			// A worker counts what it sent once sent: the DU may be faster.
			st := sentDownlink(t, client)
			if st.User.Downlink != 1 || st.User.DownlinkSent != 1 {
				t.Errorf("the workers counted %d downlink G-PDUs and sent %d, want 1 and 1", st.User.Downlink, st.User.DownlinkSent)
			}
			var perWorker uint64
			for _, w := range st.User.Workers {
				perWorker += w.Downlink
			}
			if perWorker != 1 {
				t.Errorf("the workers' own counters add up to %d downlink G-PDUs, want 1", perWorker)
			}
			if st.User.Sockets.Echoes != 1 {
				t.Errorf("the socket path answered %d echoes, want 1", st.User.Sockets.Echoes)
			}
			if io == config.CUUPSockets {
				if st.Kernel != nil {
					t.Errorf("kernel counters on the socket path: %+v", st.Kernel)
				}
			} else {
				n3 := st.Kernel["n3"]
				var perCPU uint64
				for _, c := range n3.PerCPU {
					perCPU += c["redirect"].Packets
				}
				if n3.Total["redirect"].Packets != 1 || perCPU != 1 {
					t.Errorf("the N3 classifier redirected %d G-PDUs, %d by its CPUs' counters; want 1", n3.Total["redirect"].Packets, perCPU)
				}
				if n3.Total["pass_signalling"].Packets != 1 {
					t.Errorf("the N3 classifier passed %d signalling messages to the kernel, want the echo", n3.Total["pass_signalling"].Packets)
				}
				// The worker of queue 0 carried it.
				metrics := strings.Join(scrape(t, cfg.API.Listen), "\n")
				for _, want := range []string{`xdp5g_cuup_worker_packets_total\{counter="downlinkSent",worker="queue 0"\} 1`,
					`xdp5g_cuup_classifier_packets_total\{cpu="\d+",reason="redirect",role="n3"\} 1`} {
					if !regexp.MustCompile(`(?m)^` + want + `$`).MatchString(metrics) {
						t.Errorf("no line %s in /metrics:\n%s", want, metrics)
					}
				}
			}
			doc, err = client.BearerContext(ctx, setup.CUUPUEID)
			must(t, err)
			var bc cuup.Context
			must(t, json.Unmarshal(doc, &bc))
			if d := bc.PDUSessions[0].DRBs[0]; d.Stats.DownlinkSDUs != 1 || d.DLTunnel == nil || d.DLTunnel.TEID != duTEID {
				t.Errorf("DRB 1: %s", doc)
			}

			must(t, client.ReleaseBearerContext(ctx, setup.CUUPUEID))
			var gone *api.Error
			if _, err := client.BearerContext(ctx, setup.CUUPUEID); !errors.As(err, &gone) || gone.Status != http.StatusNotFound {
				t.Errorf("a released bearer context: %v, want 404", err)
			}
			must(t, stop())
			for _, name := range []string{"n3", "f1u"} {
				if testsupport.XDPAttached(t, s.CU, name) {
					t.Errorf("%s keeps an XDP program after the daemon stopped", name)
				}
			}
			if _, err := os.Stat(s.pin); !os.IsNotExist(err) {
				t.Errorf("a CU-UP alone made the pin directory: %v", err)
			}
		})
	}
}

// A CU-UP that cannot start stops the daemon's start with an error that
// says why, and leaves nothing attached.
func TestCUUPStartFailure(t *testing.T) {
	for _, c := range []struct {
		name, section, want string
		busy                bool // something else holds the N3 address's GTP-U port
	}{
		{name: "no such interface", section: fmt.Sprintf("{n3: {interface: n3, address: %s}, f1u: {interface: f1u9, address: %s}}", cuN3, cuF1U),
			want: "cuup.f1u.interface f1u9", busy: false},
		{name: "address elsewhere", section: fmt.Sprintf("{n3: {interface: n3, address: %s}, f1u: {interface: f1u, address: 10.62.0.3}}", cuN3),
			want: "cuup.f1u.address 10.62.0.3", busy: false},
		// Fails after the classifier was attached.
		{name: "GTP-U port taken", section: fmt.Sprintf("{n3: {interface: n3, address: %s}, f1u: {interface: f1u, address: %s}}", cuN3, cuF1U),
			want: "address already in use", busy: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newCellSite(t)
			if c.busy {
				listen(t, s.CU, cuN3)
			}
			err := Run(context.Background(), s.config(t, c.section), slog.New(slog.DiscardHandler))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Run = %v, want an error with %q", err, c.want)
			}
			for _, name := range []string{"n3", "f1u"} {
				if testsupport.XDPAttached(t, s.CU, name) {
					t.Errorf("%s keeps an XDP program after the failed start", name)
				}
			}
		})
	}
}
