package n4

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/xdp5g/xdp5g/internal/upf/gtpu"
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

// 3GPP Interface Types of N9 (§8.2.118); itN3 and itN6 are Open5GS's.
const (
	itN9        = 15
	itN9Roaming = 21
)

// sideSession is a session of one PDR from source with PDI extras at
// F-TEID f, UE ue: one from access forwards to the core, one from the
// core to access (no tunnel yet).
func sideSession(cpSEID uint64, source byte, ue string, f []byte, extras ...[]byte) [][]byte {
	dest := byte(ifCore)
	if source == ifCore {
		dest = ifAccess
	}
	return [][]byte{nodeIDv4(smfNode), cpFSEID(cpSEID, smfNode),
		createPDR(pdrID(1), precedence(255), pdi(slices.Concat([][]byte{sourceInterface(source), f, ueIPv4(ue, source == ifCore)},
			extras)...), outerHeaderRemoval(6), farID(1)),
		createFAR(farID(1), applyAction1(aaFORW), fwdParams(destinationInterface(dest)))}
}

// Which side an F-TEID is on, over the PFCP server: a PDI's 3GPP Interface
// Type of N9 (Open5GS's H-SMF gives its H-UPF's uplink PDR, from access,
// N9 for roaming), or a Network Instance of N9Instances, put it on N9
// whatever the source interface; an N3 type puts it on N3; with neither,
// the source interface says, as before. The UPF chooses there; a given
// F-TEID at an address of the other side is refused, the request changing
// nothing. Without an N9 address of the family, N3's serve N9.
func TestN9ByInterfaceTypeAndInstance(t *testing.T) {
	c := newChain(t)
	c.locked(func() { c.h.cfg.N9Instances = []string{"n9.internet"} })
	choose := fteidChooseV4V6(5) // as Open5GS asks (ftup)
	seid := uint64(0x4000)
	for i, tc := range []struct {
		name   string
		source byte
		extras [][]byte
		want   netip.Addr
	}{
		{name: "from access, N9 for roaming", source: ifAccess, extras: [][]byte{interfaceType(itN9Roaming)}, want: n9},
		{name: "from access, N9", source: ifAccess, extras: [][]byte{internet, interfaceType(itN9)}, want: n9},
		{name: "from access, an N9 network instance", source: ifAccess, extras: [][]byte{networkInstance("n9.internet")}, want: n9},
		{name: "an N9 network instance, an N3 type", source: ifAccess, extras: [][]byte{networkInstance("n9.internet"), interfaceType(itN3)}, want: n9},
		{name: "from access, N3", source: ifAccess, extras: [][]byte{internet, interfaceType(itN3)}, want: n3},
		{name: "from access, N6 (no side)", source: ifAccess, extras: [][]byte{interfaceType(itN6)}, want: n3},
		{name: "from access, another network instance", source: ifAccess, extras: [][]byte{internet}, want: n3},
		{name: "from the core", source: ifCore, want: n9},
		{name: "from the core, N3", source: ifCore, extras: [][]byte{interfaceType(itN3)}, want: n3},
	} {
		seid++
		r := c.session(t, mSessionEstablishmentRequest, 0, sideSession(seid, tc.source, fmt.Sprintf("10.60.1.%d", i+1), choose, tc.extras...)...)
		f := one(t, r.created(t)[1], tFTEID)
		if len(f) != 9 || f[0] != fteidFlagV4 || !bytes.Equal(f[5:], tc.want.AsSlice()) {
			t.Errorf("%s: Created PDR F-TEID % x, want V4 at %s", tc.name, f, tc.want)
			continue
		}
		c.locked(func() {
			if set, err := c.dp.Uplink(upfxdp.FTEID{Addr: tc.want, TEID: binaryUint32(f[1:5])}); err != nil || set.Count != 1 {
				t.Errorf("%s: %+v, %v", tc.name, set, err)
			}
		})
	}

	var before state
	c.locked(func() { before = c.state() })
	for i, tc := range []struct {
		name   string
		f      []byte
		extras [][]byte
	}{
		{name: "N9 for roaming at the N3 address", f: fteid(0x4101, n3.String()), extras: [][]byte{interfaceType(itN9Roaming)}},
		{name: "N3 at the N9 address", f: fteid(0x4102, n9.String()), extras: [][]byte{interfaceType(itN3)}},
		{name: "an N9 network instance at the N3 address", f: fteid(0x4103, n3.String()), extras: [][]byte{networkInstance("n9.internet")}},
	} {
		seid++
		c.session(t, mSessionEstablishmentRequest, 0, sideSession(seid, ifAccess, fmt.Sprintf("10.60.2.%d", i+1), tc.f, tc.extras...)...).
			expect(t, causeRuleFailure, failedPDR(1), nil)
	}
	c.locked(func() { c.unchanged(before) })
	seid++
	c.session(t, mSessionEstablishmentRequest, 0, sideSession(seid, ifAccess, "10.60.2.9", fteid(0x4104, n9.String()), interfaceType(itN9Roaming))...).upSEID(t)

	// A UPF without N9 addresses: N3's serve N9.
	c.locked(func() { c.h.cfg.N9 = nil })
	seid++
	r := c.session(t, mSessionEstablishmentRequest, 0, sideSession(seid, ifAccess, "10.60.3.1", choose, interfaceType(itN9Roaming))...)
	if f := one(t, r.created(t)[1], tFTEID); len(f) != 9 || !bytes.Equal(f[5:], n3.AsSlice()) {
		t.Errorf("N9 for roaming on a UPF without N9 addresses: Created PDR F-TEID % x, want one at %s", f, n3)
	}
	seid++
	c.session(t, mSessionEstablishmentRequest, 0, sideSession(seid, ifAccess, "10.60.3.2", fteid(0x4105, n3.String()), interfaceType(itN9Roaming))...).upSEID(t)
}

// The refusals of multi-UPF shapes that other tests do not send (the
// F-TEIDs' sides, IPv6 and DUPL have theirs), each with its cause and
// failed rule; none changes anything.
func TestMultiUPFRefusals(t *testing.T) {
	e := newEnv(t)
	const sgiLAN = 2
	// iupf is iupfSession with its element i replaced.
	iupf := func(i int, with []byte) [][]byte {
		ies := iupfSession(0x4001, pathTEID, pathTEID+1)
		ies[i] = with
		return ies
	}
	// Nine uplink PDRs at one F-TEID: a branching point of one more than
	// the data path's set holds.
	branching := iupfSession(0x4001, pathTEID, pathTEID+1)
	for id := uint16(3); id <= 10; id++ {
		branching = append(branching, createPDR(pdrID(id), precedence(uint32(id)), pdi(sourceInterface(ifAccess), fteid(pathTEID, n3.String()),
			ueIPv4(iupfUE, false), sdfFilterFD(fmt.Sprintf("permit out ip from 198.51.100.%d to %s", id, iupfUE))), outerHeaderRemoval(0), farID(1)))
	}
	before := e.state()
	for _, c := range []struct {
		name       string
		ies        [][]byte
		failedRule []byte
	}{
		{name: "an uplink PDR that removes no GTP-U, its FAR forwarding", failedRule: failedPDR(1),
			ies: iupf(2, createPDR(pdrID(1), precedence(255), pdi(sourceInterface(ifAccess), fteid(pathTEID, n3.String())), farID(1)))},
		{name: "a PDR from the core at its N9 F-TEID without a UE address, removing no GTP-U, its FAR forwarding", failedRule: failedPDR(2),
			ies: iupf(3, createPDR(pdrID(2), precedence(255), pdi(sourceInterface(ifCore), fteid(pathTEID+1, n9.String())), farID(2)))},
		{name: "an uplink FAR that buffers", failedRule: failedPDR(1),
			ies: iupf(4, createFAR(farID(1), applyAction1(aaBUFF)))},
		{name: "a 3GPP Interface Type without its value", failedRule: failedPDR(1),
			ies: iupf(2, createPDR(pdrID(1), precedence(255), pdi(sourceInterface(ifAccess), fteid(pathTEID, n3.String()), tlv(160)),
				outerHeaderRemoval(0), farID(1)))},
		{name: "a tunnel towards SGi-LAN", failedRule: failedFAR(1),
			ies: iupf(4, createFAR(farID(1), applyAction1(aaFORW), fwdParams(destinationInterface(sgiLAN), ohcGTPU(psaTEID, psaN9))))},
		{name: "GTP-U removed from a PDR from the core without an F-TEID", failedRule: failedPDR(2),
			ies: iupf(3, createPDR(pdrID(2), precedence(255), pdi(sourceInterface(ifCore), ueIPv4(iupfUE, true)), outerHeaderRemoval(0), farID(2)))},
		{name: "nine PDRs at one F-TEID", failedRule: failedPDR(10), ies: branching},
		{name: "a UDP/IPv4 tunnel over N9", failedRule: failedFAR(1),
			ies: iupf(4, createFAR(farID(1), applyAction1(aaFORW), fwdParams(destinationInterface(ifCore), ohc(0x0400, psaTEID, psaN9))))},
		{name: "an IPv6 UE prefix for the UPF to choose (CHV6)", failedRule: failedPDR(1),
			ies: iupf(2, createPDR(pdrID(1), precedence(255), pdi(sourceInterface(ifAccess), fteid(pathTEID, n3.String()),
				tlv(tUEIPAddress, []byte{0x01 | 0x20})), outerHeaderRemoval(0), farID(1)))}, // §8.2.62: V6, CHV6
	} {
		t.Run(c.name, func(t *testing.T) {
			e.establish("smf1", c.ies...).expect(t, causeRuleFailure, c.failedRule, nil)
			e.unchanged(before)
		})
	}
}

// An End Marker that ends the tunnel to one of a session's F-TEIDs goes on
// into the tunnel of the FAR that F-TEID's packets take: the PSA's, at the
// I-UPF's N9 F-TEID, to the gNB from the N3 address (as TS 23.502 has an
// I-UPF pass the PSA's End Markers on to the source gNB), the gNB's, at
// the N3 F-TEID, to the PSA from the N9 address. One for an F-TEID no
// session has, or the same TEID at another address, goes nowhere.
func TestEndMarkersGoOn(t *testing.T) {
	e := newEnv(t)
	tunnels := &fakeTunnels{}
	e.h.cfg.Tunnels = tunnels
	e.establish("smf1", iupfSession(0x2001, pathTEID, pathTEID+1)...).upSEID(t)
	tunnels.take() // the paths' supervision
	for _, c := range []struct {
		name  string
		at    upfxdp.FTEID
		wants []string
	}{
		{name: "from the PSA", at: upfxdp.FTEID{Addr: n9, TEID: pathTEID + 1}, wants: []string{"end marker 192.0.2.10>192.0.2.50 0x100"}},
		{name: "from the gNB", at: upfxdp.FTEID{Addr: n3, TEID: pathTEID}, wants: []string{"end marker 192.0.2.11>192.0.2.60 0x6001"}},
		{name: "no session's", at: upfxdp.FTEID{Addr: n9, TEID: pathTEID + 2}},
		{name: "the uplink TEID at N9", at: upfxdp.FTEID{Addr: n9, TEID: pathTEID}},
	} {
		e.h.EndMarker(gtpu.EndMarker{Local: c.at.Addr, TEID: c.at.TEID})
		if got := tunnels.take(); !slices.Equal(got, c.wants) {
			t.Errorf("%s: %q, want %q", c.name, got, c.wants)
		}
	}
}
