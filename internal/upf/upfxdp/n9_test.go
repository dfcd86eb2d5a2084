package upfxdp

import (
	"net/netip"
	"testing"

	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
)

// Multi-UPF sessions: an I-UPF relays G-PDUs between N3 and N9 (the inner
// packet untouched, in a tunnel from the address of its side), a PSA
// takes the uplink from N9 and sends the downlink back over it, and one
// TEID value at N3 and at N9 names two sets.
var (
	psa  = mustAddr("192.0.2.60") // the next UPF, the central PSA
	iupf = mustAddr("192.0.2.70") // the previous UPF, an I-UPF
	// local is a destination the branching point breaks out locally.
	local = mustAddr("198.51.100.7")
)

const (
	teidShared = 0x77       // at n3Addr and at n9Addr, for two sessions
	psaTEID    = 0x60000001 // the PSA's N9 F-TEID
	iupfTEID   = 0x70000001 // the I-UPF's N9 F-TEID, towards which a PSA sends
	teidAtPSA  = 0x88       // a PSA's N9 F-TEID
	teidBranch = 0x99       // a branching point's N3 F-TEID
	teidVUp    = 0xaa       // a V-UPF's N3 F-TEID (home-routed roaming)
	teidVDown  = 0xbb       // its N9 F-TEID
)

const (
	pdrToPSA     = testPDRs + iota // at n3Addr: over N9 to the PSA, QFI 9 marked
	pdrFromPSA                     // at n9Addr: to the gNB, QFI 5 marked
	pdrPSAUp                       // a PSA's: from N9 to N6
	pdrPSADown                     // a PSA's: from N6 to the I-UPF over N9
	pdrBreakout                    // teidBranch, first: to local's /24, out of N6
	pdrBranchPSA                   // teidBranch, then: the rest over N9 to the PSA
	pdrVUp                         // teidVUp: over N9 to the H-UPF, no QFI of its own
	pdrVDown                       // teidVDown: to the gNB, no QFI of its own
)

// newN9UPF is newUPF with an N9 address and the rules of the tests below.
func newN9UPF(t *testing.T) *upf {
	t.Helper()
	d := openTest(t, Options{MaxSessions: 64, N3Addresses: []netip.Addr{n3Addr, n3Addr2}, N9Addresses: []netip.Addr{n9Addr}})
	installRules(t, d)
	for slot, r := range map[uint32]struct {
		pdr PDR
		far FAR
		sdf SDFSet
	}{
		pdrToPSA:     {pdr: PDR{Flags: MarkQFI, Qfi: 9}, far: encap(psaTEID, n9Addr, psa, nhCore)},
		pdrFromPSA:   {pdr: PDR{Flags: ToUE | MarkQFI, Qfi: 5}, far: encap(dlTEID, n3Addr, gnb, nhGNB)},
		pdrPSAUp:     {pdr: PDR{Flags: MatchUEv4, Ue: pdrUE(ue4)}, far: forward(nhCoreVLAN)},
		pdrPSADown:   {pdr: PDR{Flags: MarkQFI, Qfi: 9}, far: encap(iupfTEID, n9Addr, iupf, nhGNB)},
		pdrBreakout:  {pdr: PDR{}, far: forward(nhCoreVLAN), sdf: sdfSet(sdfFilter(0, "", local.String()+"/24"))},
		pdrBranchPSA: {pdr: PDR{Flags: MarkQFI, Qfi: 9}, far: encap(psaTEID, n9Addr, psa, nhCore)},
		pdrVUp:       {pdr: PDR{}, far: encap(psaTEID, n9Addr, psa, nhCore)},
		pdrVDown:     {pdr: PDR{Flags: ToUE}, far: encap(dlTEID, n3Addr, gnb, nhGNB)},
	} {
		r.pdr.Far, r.pdr.Id = r.far, uint16(slot+1)
		if r.sdf.Count > 0 {
			r.pdr.Sdf = slot
			check(t, d.PutSDFSet(slot, r.sdf))
		}
		check(t, d.PutPDR(slot, r.pdr))
	}
	check(t, d.PutUplink(FTEID{n3Addr, teidShared}, pdrSet(pdrToPSA)))
	check(t, d.PutUplink(FTEID{n9Addr, teidShared}, pdrSet(pdrFromPSA)))
	check(t, d.PutUplink(FTEID{n9Addr, teidAtPSA}, pdrSet(pdrPSAUp)))
	check(t, d.PutUplink(FTEID{n3Addr, teidBranch}, pdrSet(pdrBreakout, pdrBranchPSA)))
	check(t, d.PutUplink(FTEID{n3Addr, teidVUp}, pdrSet(pdrVUp)))
	check(t, d.PutUplink(FTEID{n9Addr, teidVDown}, pdrSet(pdrVDown)))
	check(t, d.PutDownlink(ue4c, pdrSet(pdrPSADown)))
	return attachTest(t, d, fakeIfindex, "lo", RoleAccess|RoleCore)
}

var ue4c = mustAddr("10.45.0.12") // a PSA's UE, downlink pdrPSADown

// An I-UPF: the gNB's uplink goes over N9 to the PSA in an UL PDU Session
// Container with the PDR's QFI, from the N9 address; the PSA's downlink to
// the same TEID value at the N9 address goes to the gNB in a DL one, from
// the N3 address. Neither inner packet is touched, TTL included.
func TestN9Relay(t *testing.T) {
	u := newN9UPF(t)
	up := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 40}
	down := ipPacket{src: dn4, dst: ue4, ttl: 63, size: 60}
	ulQFI9, dlQFI5 := ulPSC(9), dlPSC(5)
	u.runCases(t, []pktCase{
		{name: "uplink over N9", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidShared, ulPSC(1)), up.bytes(t)), act: xdplink.Redirect,
			reason: "relay_forward", out: tunnelFrame(t, 0, nhL2(nhCore), n9Addr, psa, psaTEID, &ulQFI9, up.bytes(t))},
		{name: "downlink from N9, same TEID value", in: gtpFrame(t, fromGNB, n9Addr, gpdu(teidShared, dlPSC(9)), down.bytes(t)),
			act: xdplink.Redirect, reason: "relay_forward", out: tunnelFrame(t, 0, nhL2(nhGNB), n3Addr, gnb, dlTEID, &dlQFI5, down.bytes(t))},
		{name: "downlink from N9 without a container", in: gtpFrame(t, fromGNB, n9Addr, gpdu(teidShared), down.bytes(t)),
			act: xdplink.Redirect, reason: "relay_forward", out: tunnelFrame(t, 0, nhL2(nhGNB), n3Addr, gnb, dlTEID, &dlQFI5, down.bytes(t))},
		{name: "padding trimmed", in: pad(gtpFrame(t, fromGNB, n3Addr, gpdu(teidShared), up.bytes(t)), 14), act: xdplink.Redirect,
			reason: "relay_forward", out: tunnelFrame(t, 0, nhL2(nhCore), n9Addr, psa, psaTEID, &ulQFI9, up.bytes(t))},
		{name: "the TEID at the second N3 address", in: gtpFrame(t, fromGNB, n3Addr2, gpdu(teidShared), up.bytes(t)),
			act: xdplink.Drop, reason: "drop_unknown_teid"},
	})
	for slot, want := range map[uint32]uint64{pdrToPSA: 2, pdrFromPSA: 2} {
		if c, err := u.d.PDRCounter(slot); err != nil || c.Packets != want {
			t.Errorf("PDR slot %d counted %+v, %v; want %d packets", slot, c, err, want)
		}
	}
}

// A relay without QoS rules, as Open5GS's V-SMF sets its V-UPF up for
// home-routed roaming: the packet keeps the QFI it came with, in a
// container of its new direction; without one it gets none.
func TestN9RelayKeepsQFI(t *testing.T) {
	u := newN9UPF(t)
	up := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 40}
	down := ipPacket{src: dn4, dst: ue4, ttl: 63, size: 60}
	ulQFI1, dlQFI1 := ulPSC(1), dlPSC(1)
	u.runCases(t, []pktCase{
		{name: "uplink over N9", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidVUp, ulPSC(1)), up.bytes(t)), act: xdplink.Redirect,
			reason: "relay_forward", out: tunnelFrame(t, 0, nhL2(nhCore), n9Addr, psa, psaTEID, &ulQFI1, up.bytes(t))},
		{name: "downlink from N9", in: gtpFrame(t, fromGNB, n9Addr, gpdu(teidVDown, dlPSC(1)), down.bytes(t)), act: xdplink.Redirect,
			reason: "relay_forward", out: tunnelFrame(t, 0, nhL2(nhGNB), n3Addr, gnb, dlTEID, &dlQFI1, down.bytes(t))},
		{name: "downlink from N9 in an UL container", in: gtpFrame(t, fromGNB, n9Addr, gpdu(teidVDown, ulPSC(1)), down.bytes(t)),
			act: xdplink.Redirect, reason: "relay_forward", out: tunnelFrame(t, 0, nhL2(nhGNB), n3Addr, gnb, dlTEID, &dlQFI1, down.bytes(t))},
		{name: "uplink without a container", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidVUp), up.bytes(t)), act: xdplink.Redirect,
			reason: "relay_forward", out: tunnelFrame(t, 0, nhL2(nhCore), n9Addr, psa, psaTEID, nil, up.bytes(t))},
	})
}

// A PSA: the uplink from the I-UPF's N9 tunnel leaves decapsulated to the
// data network, and the downlink goes back over N9 from the N9 address.
func TestN9PSA(t *testing.T) {
	u := newN9UPF(t)
	up := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 30}
	down := ipPacket{src: dn4, dst: ue4c, ttl: 64, size: 30}
	u.runCases(t, []pktCase{
		{name: "uplink from N9", in: gtpFrame(t, fromGNB, n9Addr, gpdu(teidAtPSA, ulPSC(9)), up.bytes(t)), act: xdplink.Redirect,
			reason: "uplink_forward", out: up.hop().frame(t, nhL2(nhCoreVLAN))},
		{name: "its TEID at the N3 address", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidAtPSA), up.bytes(t)), act: xdplink.Drop,
			reason: "drop_unknown_teid"},
		{name: "downlink to N9", in: down.frame(t, fromDN), act: xdplink.Redirect, reason: "downlink_forward",
			out: encapFrame(t, nhL2(nhGNB), n9Addr, iupf, iupfTEID, 9, down.hop().bytes(t))},
	})
}

// A branching point: one F-TEID, two uplink PDRs; what the first one's SDF
// filter takes breaks out to N6, the rest goes over N9 to the PSA.
func TestN9Branching(t *testing.T) {
	u := newN9UPF(t)
	toLocal := ipPacket{src: ue4, dst: local, ttl: 64, size: 30}
	toCentral := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 30}
	ulQFI9 := ulPSC(9)
	u.runCases(t, []pktCase{
		{name: "local breakout", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidBranch, ulPSC(9)), toLocal.bytes(t)), act: xdplink.Redirect,
			reason: "uplink_forward", out: toLocal.hop().frame(t, nhL2(nhCoreVLAN))},
		{name: "to the central PSA", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidBranch, ulPSC(9)), toCentral.bytes(t)), act: xdplink.Redirect,
			reason: "relay_forward", out: tunnelFrame(t, 0, nhL2(nhCore), n9Addr, psa, psaTEID, &ulQFI9, toCentral.bytes(t))},
	})
}
