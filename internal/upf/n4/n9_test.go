package n4

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"

	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// Sessions of UPFs in a chain over N9, as free5GC's SMF shapes them (its
// context/datapath.go): the SMF gives every F-TEID, at the address of the
// side it is on, and reuses one TEID value along the path.
const (
	iupfUE   = "10.60.0.21"
	psaN9    = "192.0.2.60" // the next UPF's N9 address
	psaTEID  = 0x6001
	pathTEID = 0x5a01 // the session's uplink TEID at every UPF of its path
)

// iupfSession is an I-UPF's session: the gNB's uplink at its N3 F-TEID
// goes over N9 to the PSA; the PSA's downlink at its N9 F-TEID goes to the
// gNB.
func iupfSession(cpSEID uint64, ulTEID, dlTEID uint32) [][]byte {
	return [][]byte{nodeIDv4(smfNode), cpFSEID(cpSEID, smfNode),
		createPDR(pdrID(1), precedence(255), pdi(sourceInterface(ifAccess), fteid(ulTEID, n3.String()), networkInstance("internet"),
			ueIPv4(iupfUE, false)), outerHeaderRemoval(0), farID(1), qerID(1)),
		createPDR(pdrID(2), precedence(255), pdi(sourceInterface(ifCore), fteid(dlTEID, n9.String()), networkInstance("internet"),
			ueIPv4(iupfUE, true)), outerHeaderRemoval(0), farID(2), qerID(1)),
		createFAR(farID(1), applyAction1(aaFORW), fwdParams(destinationInterface(ifCore), networkInstance("internet"),
			ohcGTPU(psaTEID, psaN9))),
		createFAR(farID(2), applyAction1(aaFORW), fwdParams(destinationInterface(ifAccess), networkInstance("internet"),
			ohcGTPU(0x100, gnb))),
		createQER(1, qfi(9))}
}

// psaSession is a PSA's session: the uplink at its N9 F-TEID leaves to the
// data network, the downlink goes over N9 to the I-UPF.
func psaSession(cpSEID uint64, ue string, ulTEID uint32) [][]byte {
	return [][]byte{nodeIDv4(smfNode), cpFSEID(cpSEID, smfNode),
		createPDR(pdrID(1), precedence(255), pdi(sourceInterface(ifAccess), fteid(ulTEID, n9.String()), networkInstance("internet"),
			ueIPv4(ue, false)), outerHeaderRemoval(0), farID(1)),
		createPDR(pdrID(2), precedence(255), pdi(sourceInterface(ifCore), networkInstance("internet"), ueIPv4(ue, true)), farID(2)),
		createFAR(farID(1), applyAction1(aaFORW), fwdParams(destinationInterface(ifCore), networkInstance("internet"))),
		createFAR(farID(2), applyAction1(aaFORW), fwdParams(destinationInterface(ifAccess), ohcGTPU(0x7001, "192.0.2.70")))}
}

// The I-UPF's session is accepted: the uplink PDR is found at its N3
// F-TEID and tunnels from the N9 address; the downlink PDR is found at its
// N9 F-TEID, goes to the UE and tunnels from the N3 address with the
// QER's QFI. A second session (a PSA's, of another SMF) may take the
// uplink TEID at the N9 address: F-TEIDs are told apart by address.
func TestN9Sessions(t *testing.T) {
	e := newEnv(t)
	tunnels := &fakeTunnels{}
	e.h.cfg.Tunnels = tunnels
	e.establish("smf1", iupfSession(0x2001, pathTEID, pathTEID+1)...).upSEID(t)
	e.establish("smf1", psaSession(0x2002, "10.60.0.22", pathTEID)...).upSEID(t)
	// Each path is supervised from where its tunnels leave: the PSA's and
	// the I-UPF's from the N9 address.
	want := []string{"watch 192.0.2.10>192.0.2.50", "watch 192.0.2.11>192.0.2.60", "watch 192.0.2.11>192.0.2.70"}
	if got := slices.Sorted(slices.Values(tunnels.take())); !slices.Equal(got, want) {
		t.Errorf("paths supervised: %q, want %q", got, want)
	}
	for _, c := range []struct {
		name  string
		fteid upfxdp.FTEID
		want  upfxdp.PDR
	}{
		{name: "the I-UPF's uplink", fteid: upfxdp.FTEID{Addr: n3, TEID: pathTEID},
			want: upfxdp.PDR{Id: 1, Flags: upfxdp.MatchUEv4 | upfxdp.MarkQFI, Qfi: 9, Ue: [4]uint32{upfxdp.AddrKey(netip.MustParseAddr(iupfUE))},
				Far: upfxdp.FAR{Action: upfxdp.FARForward, Flags: upfxdp.FARGTPUv4,
					Teid: upfxdp.NetworkOrder32(psaTEID), Peer: upfxdp.AddrKey(netip.MustParseAddr(psaN9)), Local: upfxdp.AddrKey(n9), Nexthop: 1}}},
		{name: "the I-UPF's downlink", fteid: upfxdp.FTEID{Addr: n9, TEID: pathTEID + 1},
			want: upfxdp.PDR{Id: 2, Flags: upfxdp.ToUE | upfxdp.MarkQFI, Qfi: 9, Far: upfxdp.FAR{Action: upfxdp.FARForward, Flags: upfxdp.FARGTPUv4,
				Teid: upfxdp.NetworkOrder32(0x100), Peer: upfxdp.AddrKey(netip.MustParseAddr(gnb)), Local: upfxdp.AddrKey(n3), Nexthop: 1}}},
		{name: "the PSA's uplink, same TEID at N9", fteid: upfxdp.FTEID{Addr: n9, TEID: pathTEID},
			want: upfxdp.PDR{Id: 1, Flags: upfxdp.MatchUEv4, Ue: [4]uint32{upfxdp.AddrKey(netip.MustParseAddr("10.60.0.22"))},
				Far: upfxdp.FAR{Action: upfxdp.FARForward, Nexthop: upfxdp.NexthopRoute}}},
	} {
		set, err := e.dp.Uplink(c.fteid)
		if err != nil || set.Count != 1 {
			t.Errorf("%s: %v: %+v, %v; want one PDR", c.name, c.fteid, set, err)
			continue
		}
		got, err := e.dp.PDR(set.Pdr[0])
		fatalIf(t, err)
		got.Qer, got.Urr = c.want.Qer, c.want.Urr // slots: any
		if got != c.want {
			t.Errorf("%s: PDR\n%+v\nwant\n%+v", c.name, got, c.want)
		}
	}
	// The PSA's downlink tunnel towards the I-UPF leaves from its N9
	// address, where the I-UPF sends the uplink.
	if set, err := e.dp.Downlink(netip.MustParseAddr("10.60.0.22")); err != nil || set.Count != 1 {
		t.Errorf("PSA's UE: %+v, %v", set, err)
	} else if p, _ := e.dp.PDR(set.Pdr[0]); p.Far.Local != upfxdp.AddrKey(n9) {
		t.Errorf("the PSA's downlink tunnel leaves from %#x, want %s", p.Far.Local, n9)
	}
	// The same F-TEID twice is another session's.
	e.establish("smf1", psaSession(0x2003, "10.60.0.23", pathTEID)...).expect(t, causeRuleFailure, failedPDR(1), nil)
}

// An F-TEID the UPF chooses for a PDR from the core is at its N9 address,
// one from access at its N3 address; an F-TEID at an address of neither
// is refused.
func TestN9ChosenFTEID(t *testing.T) {
	e := newEnv(t)
	ies := iupfSession(0x3001, 0, 0)
	ies[2] = createPDR(pdrID(1), precedence(255), pdi(sourceInterface(ifAccess), fteidChooseAny(), ueIPv4(iupfUE, false)),
		outerHeaderRemoval(0), farID(1), qerID(1))
	ies[3] = createPDR(pdrID(2), precedence(255), pdi(sourceInterface(ifCore), fteidChooseAny(), ueIPv4(iupfUE, true)),
		outerHeaderRemoval(0), farID(2), qerID(1))
	r := e.establish("smf1", ies...)
	created := r.created(t)
	for id, at := range map[uint16]netip.Addr{1: n3, 2: n9} {
		f := one(t, created[id], tFTEID)
		if len(f) != 9 || !bytes.Equal(f[5:], at.AsSlice()) {
			t.Errorf("PDR %d: Created PDR F-TEID % x, want one at %s", id, f, at)
			continue
		}
		if set, err := e.dp.Uplink(upfxdp.FTEID{Addr: at, TEID: binaryUint32(f[1:5])}); err != nil || set.Count != 1 {
			t.Errorf("PDR %d: %+v, %v", id, set, err)
		}
	}
	before := e.state()
	bad := iupfSession(0x3002, 0x77, 0x78)
	bad[3] = createPDR(pdrID(2), precedence(255), pdi(sourceInterface(ifCore), fteid(0x78, "192.0.2.99"), ueIPv4(iupfUE, true)),
		outerHeaderRemoval(0), farID(2))
	e.establish("smf1", bad...).expect(t, causeRuleFailure, failedPDR(2), nil)
	e.unchanged(before)
}
