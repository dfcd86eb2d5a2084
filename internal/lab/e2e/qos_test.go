package e2e

import (
	"math"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/demo/demotest"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// A QER's downlink MBR holds the traffic a data network application sends
// the UE, offered at about twice the rate for a second, to the rate: what
// reaches the gNB is within 5% of what a token bucket of the rate, holding
// 40 ms of it as the QER's does, lets through of the packets as they went.
func TestDownlinkMBRUnderTraffic(t *testing.T) {
	tb := demotest.Testbed(t)
	cfg := pfcpConfig(t, tb, uePool)
	_, stop := startDaemon(t, cfg)
	smf := associatedSMF(t, cfg)
	const mbrKbps = 8000 // 1 MB/s: about 17,000 of the packets below a second
	req := smf.PDUSessionRequest(0x5eed, netip.Addr{}, demo.GNBAddr, demo.DownlinkTEID, demo.QFI)
	withDownlinkMBR(req, mbrKbps)
	sess, err := smf.Establish(req)
	if err != nil {
		t.Fatal(err)
	}

	const udpPayload = 32
	size := float64(20 + 8 + udpPayload) // the policer counts the user packet's octets
	rate := float64(mbrKbps * 1000 / 8)
	down := tb.Downlink()
	before, err := down.Sink.Counts()
	if err != nil {
		t.Fatal(err)
	}
	sentAt := sendFromDN(t, tb, sess.UE, make([]byte, udpPayload), int(2*rate/size))
	sent, elapsed := uint64(len(sentAt)), sentAt[len(sentAt)-1]
	arrived, err := down.Delivered(before.MatchPackets + sent)
	if err != nil {
		t.Fatal(err)
	}
	delivered := float64(arrived - before.MatchPackets)
	// What the policer lets through of the packets as they were sent, late
	// ones (a busy host) included; its bucket holds 40 ms at the rate. The
	// sender must have offered enough above the MBR for the count to tell
	// a policer from none.
	want := float64(testsupport.Policed(sentAt, uint64(rate), uint64(size), 40*time.Millisecond))
	if want > 0.75*float64(sent) {
		t.Fatalf("offered %d packets in %v, of which a policer lets %.0f through: too little above the MBR of %.0f B/s to test it",
			sent, elapsed, want, rate)
	}
	t.Logf("downlink at the MBR: %.0f of %d packets in %v, %.4f of the expected", delivered, sent, elapsed, delivered/want)
	if math.Abs(delivered-want) > 0.05*want {
		t.Errorf("downlink at the MBR: %.0f packets in %v, want %.0f ±5%%", delivered, elapsed, want)
	}
	if err := stop(); err != nil {
		t.Error(err)
	}
}

// withDownlinkMBR has the downlink PDR (2) of a
// pfcptest.PDUSessionRequest enforce a QER with a downlink MBR of kbps.
func withDownlinkMBR(req *message.SessionEstablishmentRequest, kbps uint64) {
	const qerID = 1
	req.CreateQER = append(req.CreateQER, ie.NewCreateQER(ie.NewQERID(qerID),
		ie.NewGateStatus(ie.GateStatusOpen, ie.GateStatusOpen), ie.NewMBR(0, kbps)))
	for i, pdr := range req.CreatePDR {
		if id, err := pdr.PDRID(); err == nil && id == 2 {
			// A new group: the old one's length does not follow its children.
			req.CreatePDR[i] = ie.NewCreatePDR(append(slices.Clip(pdr.ChildIEs), ie.NewQERID(qerID))...)
		}
	}
}

// sendFromDN sends count UDP datagrams of payload from the DN's stack to
// the UE, one a second's countth, each when it is due; it returns when each
// went, after the start. Sleeping between them, the sender keeps its pace
// on a busy machine as well as it can: a program spinning on one CPU is
// the one the scheduler preempts, and the traffic would pause.
func sendFromDN(t *testing.T, tb *demo.Testbed, ue netip.Addr, payload []byte, count int) (sentAt []time.Duration) {
	t.Helper()
	// Through the UPF, without ARP: the DN's sink drops the replies.
	err := tb.DN.AddRoute(netip.PrefixFrom(ue, 32).String(), demo.N6Addr.String(), demo.N6)
	if err == nil {
		err = tb.DN.SetNeigh(demo.N6, demo.N6Addr.String(), tb.N6MAC)
	}
	if err == nil {
		err = tb.DN.Do(func() error {
			conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(ue, 40000)))
			if err != nil {
				return err
			}
			defer conn.Close()
			start := time.Now()
			for n := range count {
				if wait := time.Until(start.Add(time.Duration(n) * time.Second / time.Duration(count))); wait > 0 {
					time.Sleep(wait)
				}
				at := time.Since(start)
				if _, err := conn.Write(payload); err != nil {
					return err
				}
				sentAt = append(sentAt, at)
			}
			return nil
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return sentAt
}
