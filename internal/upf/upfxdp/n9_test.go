package upfxdp

import (
	"bytes"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cilium/ebpf"

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
	pdrToPSA      = testPDRs + iota // at n3Addr: over N9 to the PSA, QFI 9 marked
	pdrFromPSA                      // at n9Addr: to the gNB, QFI 5 marked
	pdrPSAUp                        // a PSA's: from N9 to N6
	pdrPSADown                      // a PSA's: from N6 to the I-UPF over N9
	pdrBreakout                     // teidBranch, first: to local's /24, out of N6
	pdrBranchPSA                    // teidBranch, then: the rest over N9 to the PSA
	pdrVUp                          // teidVUp: over N9 to the H-UPF, no QFI of its own
	pdrVDown                        // teidVDown: to the gNB, no QFI of its own
	pdrBranchQFI5                   // a branching point's middle PDR: QFI 5, out of N6 untagged
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
		pdrToPSA:      {pdr: PDR{Flags: MarkQFI, Qfi: 9}, far: encap(psaTEID, n9Addr, psa, nhCore)},
		pdrFromPSA:    {pdr: PDR{Flags: ToUE | MarkQFI, Qfi: 5}, far: encap(dlTEID, n3Addr, gnb, nhGNB)},
		pdrPSAUp:      {pdr: PDR{Flags: MatchUEv4, Ue: pdrUE(ue4)}, far: forward(nhCoreVLAN)},
		pdrPSADown:    {pdr: PDR{Flags: MarkQFI, Qfi: 9}, far: encap(iupfTEID, n9Addr, iupf, nhGNB)},
		pdrBreakout:   {pdr: PDR{}, far: forward(nhCoreVLAN), sdf: sdfSet(sdfFilter(0, "", local.String()+"/24"))},
		pdrBranchPSA:  {pdr: PDR{Flags: MarkQFI, Qfi: 9}, far: encap(psaTEID, n9Addr, psa, nhCore)},
		pdrVUp:        {pdr: PDR{}, far: encap(psaTEID, n9Addr, psa, nhCore)},
		pdrVDown:      {pdr: PDR{Flags: ToUE}, far: encap(dlTEID, n3Addr, gnb, nhGNB)},
		pdrBranchQFI5: {pdr: PDR{Flags: MatchQFI, Qfi: 5}, far: forward(nhCore)},
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

// Precedence at a branching point across its record and its set: the
// record's PDR decides by its filter, held on the record's line; a packet
// it refuses tries the PDR after it, read without the set, then the set's
// third PDR. An IPv6 packet, which the record's IPv4 form of the filter
// does not stand for, meets the filter itself.
func TestN9BranchingPrecedence(t *testing.T) {
	needRecords(t)
	u := newN9UPF(t)
	const teid = 0x9a
	check(t, u.d.PutUplink(FTEID{n3Addr, teid}, pdrSet(pdrBreakout, pdrBranchQFI5, pdrBranchPSA)))
	if rec := u.record(t, teidKey(teid)); rec.PdrSlot != pdrBreakout || rec.Branch.SdfV4 != 1 || rec.Branch.Next != pdrBranchQFI5 {
		t.Fatalf("record of PDR %d, its filter held %d, then PDR %d; want %d, 1, %d", rec.PdrSlot, rec.Branch.SdfV4,
			rec.Branch.Next, pdrBreakout, pdrBranchQFI5)
	}
	toLocal := ipPacket{src: ue4, dst: local, ttl: 64, size: 30}
	toCentral := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 30}
	toCentral6 := ipPacket{src: ue6, dst: dn6, ttl: 64, size: 30}
	in := func(qfi uint8, p ipPacket) []byte {
		return gtpFrame(t, fromGNB, n3Addr, gpdu(teid, ulPSC(qfi)), p.bytes(t))
	}
	ulQFI9 := ulPSC(9)
	for _, c := range []struct {
		name   string
		fast   bool
		in     []byte
		reason string
		out    []byte
	}{
		{"local, QFI 9: the first PDR", true, in(9, toLocal), "uplink_forward", toLocal.hop().frame(t, nhL2(nhCoreVLAN))},
		{"local, QFI 5: the first PDR, not the one after", true, in(5, toLocal), "uplink_forward", toLocal.hop().frame(t, nhL2(nhCoreVLAN))},
		{"central, QFI 5: the PDR after it", true, in(5, toCentral), "uplink_forward", toCentral.hop().frame(t, nhL2(nhCore))},
		{"central, QFI 9: the set's third, over N9", false, in(9, toCentral), "relay_forward",
			tunnelFrame(t, 0, nhL2(nhCore), n9Addr, psa, psaTEID, &ulQFI9, toCentral.bytes(t))},
		{"IPv6, QFI 5: past the IPv4 filter", true, in(5, toCentral6), "uplink_forward", toCentral6.hop().frame(t, nhL2(nhCore))},
	} {
		t.Run(c.name, func(t *testing.T) { u.expectPath(t, c.fast, c.in, xdplink.Redirect, c.reason, c.out) })
	}
}

// A filter update at a branching point takes effect with the next packet
// and loses none: while the breakout PDR's filter goes back and forth
// between the local destination and the central one, in place or as a
// session modification writes it (a new SDF set and PDR, then the set),
// every packet to the central destination leaves by the one PDR or the
// other; after each update it leaves as the update says, its key's record
// serving it.
func TestN9BranchingFilterUpdate(t *testing.T) {
	needRecords(t)
	u := newN9UPF(t)
	toCentral := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 30}
	in := gtpFrame(t, fromGNB, n3Addr, gpdu(teidBranch, ulPSC(9)), toCentral.bytes(t))
	ulQFI9 := ulPSC(9)
	brokenOut := toCentral.hop().frame(t, nhL2(nhCoreVLAN))
	overN9 := tunnelFrame(t, 0, nhL2(nhCore), n9Addr, psa, psaTEID, &ulQFI9, toCentral.bytes(t))
	filters := [2]SDFSet{sdfSet(sdfFilter(0, "", local.String()+"/24")), sdfSet(sdfFilter(17, "", dn4.String()+"/32"))}
	// Updates alternate between the filters (i%2) and between the ways:
	// in place, or in the slot the breakout PDR does not take (its SDF
	// set's slot is its own), with its PDR.
	breakout := uint32(pdrBreakout)
	update := func(i int) error {
		if i%4 < 2 {
			return u.d.PutSDFSet(breakout, filters[i%2])
		}
		breakout = map[uint32]uint32{pdrBreakout: pdrBranchQFI5 + 1, pdrBranchQFI5 + 1: pdrBreakout}[breakout]
		if err := u.d.PutSDFSet(breakout, filters[i%2]); err != nil {
			return err
		}
		if err := u.d.PutPDR(breakout, PDR{Id: pdrBreakout + 1, Sdf: breakout, Far: forward(nhCoreVLAN)}); err != nil {
			return err
		}
		return u.d.PutUplink(FTEID{n3Addr, teidBranch}, pdrSet(breakout, pdrBranchPSA))
	}
	var wg sync.WaitGroup
	var stop atomic.Bool
	var lost, sent atomic.Int64
	wg.Go(func() {
		for !stop.Load() {
			opts := &ebpf.RunOptions{Data: in, DataOut: make([]byte, len(in)+256)}
			got, err := u.prog.Run(opts)
			sent.Add(1)
			if err != nil || xdplink.Action(got) != xdplink.Redirect ||
				!bytes.Equal(opts.DataOut, brokenOut) && !bytes.Equal(opts.DataOut, overN9) {
				lost.Add(1)
			}
		}
	})
	for i := 0; i < 400 || sent.Load() < 4000; i++ {
		check(t, update(i))
	}
	stop.Store(true)
	wg.Wait()
	if lost.Load() > 0 {
		t.Errorf("%d of %d packets during the updates left by neither PDR", lost.Load(), sent.Load())
	}
	for i := range 8 {
		check(t, update(i))
		check(t, u.d.sets.settle()) // a record written often waits for a place
		u.expectPath(t, true, in, xdplink.Redirect, map[int]string{0: "relay_forward", 1: "uplink_forward"}[i%2],
			[2][]byte{overN9, brokenOut}[i%2])
	}
}
