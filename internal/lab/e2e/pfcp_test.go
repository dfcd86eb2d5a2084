package e2e

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/demo/demotest"
	"github.com/xdp5g/xdp5g/internal/lab/pfcptest"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
)

// pfcpPackets are sent each way at each step, paced so that all arrive.
const (
	pfcpPackets = 1000
	pfcpRate    = 10_000
)

var uePool = netip.MustParsePrefix("10.45.0.0/16")

// An SMF sets up an association and establishes a session as Open5GS's
// does, leaving the F-TEID and the UE address to the UPF; GTP-U uplink and
// plain IP downlink then flow through the data path with what the UPF
// chose. Once the SMF deletes the session its traffic is dropped.
func TestPFCPSessionCarriesTraffic(t *testing.T) {
	tb := demotest.Testbed(t)
	cfg := pfcpConfig(t, tb, uePool)
	client, stop := startDaemon(t, cfg)
	smf := associatedSMF(t, cfg)
	sess, err := smf.EstablishPDUSession(0x5eed, demo.GNBAddr, demo.DownlinkTEID, demo.QFI)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the UPF chose TEID %#x at %v and UE %v; UP SEID %#x", sess.TEID, sess.N3, sess.UE, sess.SEID)
	if sess.N3 != demo.N3Addr || !uePool.Contains(sess.UE) {
		t.Fatalf("F-TEID at %v, UE %v; want %v and an address of %v", sess.N3, sess.UE, demo.N3Addr, uePool)
	}
	if _, err := client.Session(t.Context(), sess.SEID); err != nil {
		t.Errorf("the REST API does not show the session: %v", err)
	}

	upFrame, downFrame := sessionFrames(tb, sess.TEID, sess.UE)
	delivered(t, tb, "the session", upFrame, downFrame)
	uplink, downlink := tb.Uplink(), tb.Downlink()
	for _, c := range []struct {
		dir  demo.Direction
		want []byte
	}{
		{dir: uplink, want: decapsulated(tb, demo.UEPacket(sess.UE, demo.DNAddr, true, demo.UETTL-1))},
		{dir: downlink, want: encapsulated(tb, demo.UEPacket(sess.UE, demo.DNAddr, false, demo.UETTL-1))},
	} {
		sample, err := c.dir.Sink.Sample()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(sample, c.want) {
			t.Errorf("%s arrived:\n%swant:\n%s", c.dir.Name, hex.Dump(sample), hex.Dump(c.want))
		}
	}

	if err := smf.Delete(sess.SEID); err != nil {
		t.Fatal(err)
	}
	var apiErr *api.Error
	if _, err := client.Session(t.Context(), sess.SEID); !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
		t.Errorf("the REST API after the deletion: %v; want 404", err)
	}
	notForwarded(t, tb, client, "after the deletion", upFrame, downFrame)
	if err := stop(); err != nil {
		t.Error(err)
	}
}

// pfcpConfig is daemonConfig with PFCP served (servedPFCP).
func pfcpConfig(t *testing.T, tb *demo.Testbed, pool netip.Prefix, settings ...string) *config.Config {
	t.Helper()
	return daemonConfig(t, tb, servedPFCP(t, pool, settings...))
}

// servedPFCP is the pfcp section of a daemon serving PFCP on a free
// loopback port with UE addresses from pool, and more settings, "key:
// value" each.
func servedPFCP(t *testing.T, pool netip.Prefix, settings ...string) string {
	t.Helper()
	// No heartbeats during the test: they would go to port 8805.
	return pfcpSection(freeLoopbackUDP(t), append([]string{"heartbeat_interval: 1h", "ue_pool: " + pool.String()}, settings...)...)
}

// pfcpSection is the pfcp section of a daemon serving PFCP on listen, with
// settings, "key: value" each.
func pfcpSection(listen string, settings ...string) string {
	return fmt.Sprintf("{listen: %q, node_id: upf.e2e.test, %s}", listen, strings.Join(settings, ", "))
}

// newSMF is an SMF of the daemon running cfg, not associated yet.
func newSMF(t *testing.T, cfg *config.Config) *pfcptest.SMF {
	t.Helper()
	smf, err := pfcptest.NewSMF(smfNodeID, netip.MustParseAddrPort(cfg.PFCP.Listen))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { smf.Close() })
	return smf
}

// associatedSMF is an SMF associated with the daemon running cfg.
func associatedSMF(t *testing.T, cfg *config.Config) *pfcptest.SMF {
	t.Helper()
	smf := newSMF(t, cfg)
	if _, err := smf.Associate(); err != nil {
		t.Fatal(err)
	}
	return smf
}

// sessionFrames are the uplink and downlink frames of a session with an
// uplink TEID and a UE address.
func sessionFrames(tb *demo.Testbed, teid uint32, ue netip.Addr) (up, down []byte) {
	return tb.UplinkFrame(teid, demo.QFI, demo.UEPacket(ue, demo.DNAddr, true, demo.UETTL)),
		tb.DownlinkFrame(demo.UEPacket(ue, demo.DNAddr, false, demo.UETTL))
}

// delivered checks that a session's frames arrive, every one.
func delivered(t *testing.T, tb *demo.Testbed, what string, up, down []byte) {
	t.Helper()
	if got := send(t, tb.Uplink(), up); got != pfcpPackets {
		t.Errorf("%s: uplink: %d of %d packets delivered", what, got, pfcpPackets)
	}
	if got := send(t, tb.Downlink(), down); got != pfcpPackets {
		t.Errorf("%s: downlink: %d of %d packets delivered", what, got, pfcpPackets)
	}
}

// notForwarded checks that the frames of a session that is gone are not:
// its uplink TEID is unknown (dropped, or a few passed up for an Error
// Indication, all drop_unknown_teid), and nothing is forwarded to its UE.
func notForwarded(t *testing.T, tb *demo.Testbed, client *api.Client, when string, up, down []byte) {
	t.Helper()
	unknownTEID := reasonPackets(t, client, demo.N3, "drop_unknown_teid")
	forwarded := reasonPackets(t, client, demo.N6, "downlink_forward")
	if got := send(t, tb.Uplink(), up); got != 0 {
		t.Errorf("uplink %s: %d packets delivered", when, got)
	}
	if got := send(t, tb.Downlink(), down); got != 0 {
		t.Errorf("downlink %s: %d packets delivered", when, got)
	}
	if got := reasonPackets(t, client, demo.N3, "drop_unknown_teid") - unknownTEID; got != pfcpPackets {
		t.Errorf("drop_unknown_teid on %s counted %d packets %s, want %d", demo.N3, got, when, pfcpPackets)
	}
	if got := reasonPackets(t, client, demo.N6, "downlink_forward"); got != forwarded {
		t.Errorf("downlink_forward on %s counted %d packets %s", demo.N6, got-forwarded, when)
	}
}

// send sends pfcpPackets copies of frame one way and returns how many of
// them arrived.
func send(t *testing.T, dir demo.Direction, frame []byte) uint64 {
	t.Helper()
	before, err := dir.Sink.Counts()
	if err != nil {
		t.Fatal(err)
	}
	sent, _, err := dir.Send(newGenerator(t), frame, pfcpPackets, trafficgen.Options{Rate: pfcpRate})
	if err != nil {
		t.Fatal(err)
	}
	if sent != pfcpPackets {
		t.Fatalf("%s: sent %d of %d packets", dir.Name, sent, pfcpPackets)
	}
	delivered, err := dir.Delivered(before.MatchPackets + sent)
	if err != nil {
		t.Fatal(err)
	}
	return delivered - before.MatchPackets
}

// reasonPackets is what the daemon counted for a reason on an interface.
func reasonPackets(t *testing.T, client *api.Client, iface, reason string) uint64 {
	t.Helper()
	st, err := client.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range st.Interfaces {
		if i.Name == iface {
			return i.Reasons[reason].Packets
		}
	}
	t.Fatalf("no counters for %s", iface)
	return 0
}

// freeLoopbackUDP is a loopback address that nothing listens on.
func freeLoopbackUDP(t *testing.T) string {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.LocalAddr().String()
}
