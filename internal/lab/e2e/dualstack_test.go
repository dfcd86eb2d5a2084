package e2e

import (
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/demo/demotest"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// An IPv4v6 PDU session as Open5GS's SMF establishes it: one UE IP Address
// with both families on each of its PDRs, the IPv4 address left to the UPF.
// The UE's IPv4 and IPv6 uplink reach the DN and its IPv4 and IPv6
// downlink reaches the gNB in the session's tunnel, byte for byte as
// gopacket builds them; a packet from another address of either family is
// dropped. The REST API shows both addresses; a restarted daemon keeps
// both keys; deleting the session frees both, for a session to take again.
func TestDualStackPDUSession(t *testing.T) {
	tb := demotest.Testbed(t)
	check(t, tb.EnableIPv6())
	cfg := pfcpConfig(t, tb, uePool)
	client, stop := startDaemon(t, cfg)
	smf := associatedSMF(t, cfg)
	ue6 := netip.PrefixFrom(demo.UE6Addr, 64).Masked()
	const cpSEID = 0xd5
	sess, err := smf.Establish(smf.DualStackPDUSessionRequest(cpSEID, netip.Addr{}, ue6, demo.GNBAddr, demo.DownlinkTEID, demo.QFI))
	check(t, err)
	if !uePool.Contains(sess.UE) {
		t.Fatalf("the UPF chose UE address %v, want one of %v", sess.UE, uePool)
	}
	families := []struct {
		name    string
		ue, dn  netip.Addr
		strayUE netip.Addr // of the UE's family, not the UE's
	}{
		{name: "IPv4", ue: sess.UE, dn: demo.DNAddr, strayUE: sess.UE.Next()},
		{name: "IPv6", ue: demo.UE6Addr, dn: demo.DN6Addr, strayUE: netip.MustParseAddr("2001:db8:46::2")},
	}
	frames := func(teid uint32, ue, dn netip.Addr) (up, down []byte) {
		return tb.UplinkFrame(teid, demo.QFI, demo.UEPacket(ue, dn, true, demo.UETTL)),
			tb.DownlinkFrame(demo.UEPacket(ue, dn, false, demo.UETTL))
	}
	for _, f := range families {
		check(t, tb.NewSinks()) // to sample this family's frames
		up, down := frames(sess.TEID, f.ue, f.dn)
		delivered(t, tb, f.name, up, down)
		sample, err := tb.DNSink.Sample()
		check(t, err)
		testsupport.EqualFrames(t, sample, decapsulated(tb, demo.UEPacket(f.ue, f.dn, true, demo.UETTL-1)))
		sample, err = tb.GNBSink.Sample()
		check(t, err)
		testsupport.EqualFrames(t, sample, encapsulated(tb, demo.UEPacket(f.ue, f.dn, false, demo.UETTL-1)))

		noPDR := reasonPackets(t, client, demo.N3, "drop_no_pdr")
		stray, _ := frames(sess.TEID, f.strayUE, f.dn)
		if got := send(t, tb.Uplink(), stray); got != 0 {
			t.Errorf("%s uplink from %v: %d packets delivered", f.name, f.strayUE, got)
		}
		if got := reasonPackets(t, client, demo.N3, "drop_no_pdr") - noPDR; got != pfcpPackets {
			t.Errorf("%s uplink from %v: drop_no_pdr counted %d packets, want %d", f.name, f.strayUE, got, pfcpPackets)
		}
	}

	doc, err := client.Session(t.Context(), sess.SEID)
	check(t, err)
	var shown struct {
		PDRs []struct {
			ID  uint16 `json:"pdrId"`
			PDI struct {
				UEIPAddress  string `json:"ueIPAddress"`
				UEIPv6Prefix string `json:"ueIPv6Prefix"`
			} `json:"pdi"`
		} `json:"pdrs"`
	}
	check(t, json.Unmarshal(doc, &shown))
	for _, p := range shown.PDRs {
		if p.ID != 1 && p.ID != 2 {
			continue
		}
		if p.PDI.UEIPAddress != sess.UE.String() || p.PDI.UEIPv6Prefix != ue6.String() {
			t.Errorf("PDR %d shows UE addresses %q and %q, want %v and %v", p.ID, p.PDI.UEIPAddress, p.PDI.UEIPv6Prefix, sess.UE, ue6)
		}
	}

	check(t, stop())
	client, stop = startDaemon(t, cfg)
	for _, f := range families {
		up, down := frames(sess.TEID, f.ue, f.dn)
		delivered(t, tb, f.name+" after the restart", up, down)
	}

	check(t, smf.Delete(sess.SEID))
	for _, f := range families {
		up, down := frames(sess.TEID, f.ue, f.dn)
		notForwarded(t, tb, client, "of the deleted session, "+f.name, up, down)
	}
	// Both addresses are free: a session takes them again.
	again, err := smf.Establish(smf.DualStackPDUSessionRequest(cpSEID+1, sess.UE, ue6, demo.GNBAddr, demo.DownlinkTEID, demo.QFI))
	check(t, err)
	for _, f := range families {
		up, down := frames(again.TEID, f.ue, f.dn)
		delivered(t, tb, f.name+" of the session set up again", up, down)
	}
	if err := stop(); err != nil {
		t.Error(err)
	}
}
