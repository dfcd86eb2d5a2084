package n4

// GTP-U over IPv6 transport on N4: F-TEIDs with IPv6 addresses, chosen
// (CH with V6) or given, Outer Header Creation towards IPv6 peers, Outer
// Header Removal 1 and 6; and what is still refused, with its cause.

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/xdp5g/xdp5g/internal/upf/session"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

var (
	n3v6 = netip.MustParseAddr("2001:db8:3::10") // the UPF's IPv6 N3 address
	gnb6 = netip.MustParseAddr("2001:db8:5::50")
)

const (
	causeInvalidFTEIDAllocation = 71
	fteidFlagV4, fteidFlagV6    = 0x01, 0x02
	fteidFlagCH, fteidFlagCHID  = 0x04, 0x08
)

// fteid6 §8.2.3: flags V6, TEID, IPv6.
func fteid6(teid uint32, addr netip.Addr) []byte {
	return tlv(tFTEID, []byte{fteidFlagV6}, be32(teid), addr.AsSlice())
}

// fteidChooseOf is CH with CHOOSE ID id and the families flags asks for.
func fteidChooseOf(flags byte, id byte) []byte {
	return tlv(tFTEID, []byte{flags | fteidFlagCH | fteidFlagCHID, id})
}

// ohcOf §8.2.56: description desc, TEID, then an IPv4 and an IPv6 address
// when valid.
func ohcOf(desc uint16, teid uint32, v4addr, v6addr netip.Addr) []byte {
	value := [][]byte{be16(desc), be32(teid)}
	for _, a := range []netip.Addr{v4addr, v6addr} {
		if a.IsValid() {
			value = append(value, a.AsSlice())
		}
	}
	return tlv(tOuterHeaderCreation, value...)
}

// v6Session is an establishment of an IPv4 UE's session: uplink PDR 1 on
// ulFTEID removing ohr, downlink PDR 2, FAR 1 to the core and FAR 2 to
// the gNB with outer header creation ohc. The UE address is 10.60.0.x, x
// the CP SEID's low octet.
func v6Session(cpSEID uint64, ulFTEID []byte, ohr byte, ohc []byte) [][]byte {
	ue := fmt.Sprintf("10.60.0.%d", uint8(cpSEID))
	return [][]byte{nodeIDv4("127.0.0.4"), cpFSEID(cpSEID, "127.0.0.4"),
		createPDR(pdrID(1), precedence(255), pdi(sourceInterface(ifAccess), ulFTEID, ueIPv4(ue, false)),
			outerHeaderRemoval(ohr), farID(1)),
		createPDR(pdrID(2), precedence(255), pdi(sourceInterface(ifCore), ueIPv4(ue, true)), farID(2)),
		coreFAR(), createFAR(farID(2), applyAction(aaFORW), fwdParams(destinationInterface(ifAccess), ohc))}
}

// chosenFTEIDOf checks a Created PDR's F-TEID: flags, a TEID, then the
// addresses, and returns the TEID.
func chosenFTEIDOf(t *testing.T, c []wireIE, flags byte, addrs ...netip.Addr) uint32 {
	t.Helper()
	f := one(t, c, tFTEID)
	want := []byte{flags}
	for _, a := range addrs {
		want = append(want, a.AsSlice()...)
	}
	if len(f) != len(want)+4 || f[0] != flags || !bytes.Equal(f[5:], want[1:]) || binaryUint32(f[1:5]) == 0 {
		t.Fatalf("Created PDR F-TEID % x, want flags %#x, a TEID, %v", f, flags, addrs)
	}
	return binaryUint32(f[1:5])
}

// The UPF chooses an F-TEID at its first N3 address of a family asked
// for; asked for both, the order of its addresses decides. The data path
// finds the TEID at that address, not at the other family's.
func TestIPv6ChosenFTEID(t *testing.T) {
	e := newEnvOn(t, 64, n3, n3v6)
	v6First := newEnvOn(t, 64, n3v6, n3)
	ohc := ohcOf(0x0200, 0x100, netip.Addr{}, gnb6)
	for _, c := range []struct {
		name        string
		e           *env
		ask         byte
		flags       byte
		addr, other netip.Addr
	}{
		{name: "V6", e: e, ask: fteidFlagV6, flags: fteidFlagV6, addr: n3v6, other: n3},
		{name: "V4 and V6", e: e, ask: fteidFlagV4 | fteidFlagV6, flags: fteidFlagV4, addr: n3, other: n3v6},
		{name: "V4 and V6, IPv6 listed first", e: v6First, ask: fteidFlagV4 | fteidFlagV6, flags: fteidFlagV6, addr: n3v6, other: n3},
		{name: "V4", e: e, ask: fteidFlagV4, flags: fteidFlagV4, addr: n3, other: n3v6},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.e.establish("smf1", v6Session(uint64(c.ask), fteidChooseOf(c.ask, 1), 1, ohc)...)
			if c.e == v6First { // the UP F-SEID has the first N3 address: flags V6, SEID, IPv6
				r.expect(t, causeAccepted, nil, nil)
				if f := one(t, r.ies, tFSEID); len(f) != 25 || f[0] != 0x01 || !bytes.Equal(f[9:], n3v6.AsSlice()) {
					t.Fatalf("UP F-SEID % x, want flags V6, SEID, %v", f, n3v6)
				}
			} else {
				r.upSEID(t)
			}
			teid := chosenFTEIDOf(t, r.created(t)[1], c.flags, c.addr)
			if set, err := c.e.dp.Uplink(upfxdp.FTEID{Addr: c.addr, TEID: teid}); err != nil || set.Count != 1 {
				t.Errorf("TEID %#x at %v: %+v, %v", teid, c.addr, set, err)
			}
			if set, err := c.e.dp.Uplink(upfxdp.FTEID{Addr: c.other, TEID: teid}); err == nil {
				t.Errorf("TEID %#x at %v too: %+v", teid, c.other, set)
			}
		})
	}
}

// Only IPv4 N3 addresses: CH with V6 alone has nothing to choose from.
func TestIPv6ChosenFTEIDWithoutIPv6N3(t *testing.T) {
	e := newEnv(t)
	before := e.state()
	e.establish("smf1", v6Session(1, fteidChooseOf(fteidFlagV6, 1), 0, ohcGTPU(0x100, gnb))...).
		expect(t, causeInvalidFTEIDAllocation, nil, nil)
	e.unchanged(before)
	// Asked for both, the IPv4 one.
	r := e.establish("smf1", v6Session(2, fteidChooseOf(fteidFlagV4|fteidFlagV6, 1), 0, ohcGTPU(0x100, gnb))...)
	r.upSEID(t)
	chosenFTEIDOf(t, r.created(t)[1], fteidFlagV4, n3)
}

// A FAR's tunnel to an IPv6 peer: the PDR's FAR is FARGTPUv6 at the peer's
// next hop, whose slot holds the tunnel's endpoints; Outer Header Removal
// 1 and 6 are taken, and IPv6 F-TEIDs given by the SMF that are ours.
func TestIPv6OuterHeaderCreation(t *testing.T) {
	e := newEnvOn(t, 64, n3, n3v6)
	const gnbTEID = 0x0a0b0c0d
	for _, c := range []struct {
		name  string
		ie    []byte
		peer  netip.Addr
		flags uint8
	}{
		{name: "GTP-U/UDP/IPv6", ie: ohcOf(0x0200, gnbTEID, netip.Addr{}, gnb6), peer: gnb6, flags: upfxdp.FARGTPUv6},
		{name: "both families: IPv4 first", ie: ohcOf(0x0300, gnbTEID, netip.MustParseAddr(gnb), gnb6), peer: netip.MustParseAddr(gnb), flags: upfxdp.FARGTPUv4},
	} {
		t.Run(c.name, func(t *testing.T) {
			teid := uint32(len(c.name)) // one of each session's own
			seid := e.establish("smf1", v6Session(uint64(teid), fteid6(teid, n3v6), 6, c.ie)...).upSEID(t)
			in, ok := e.store.Get(seid)
			if !ok || in.FARs[1].OuterHeaderCreation == nil || in.FARs[1].OuterHeaderCreation.Peer != c.peer {
				t.Fatalf("session %d: %+v", seid, in)
			}
			slots, _ := e.store.Slots(seid)
			for _, s := range slots.PDR {
				if s.ID != 2 {
					continue
				}
				p, err := e.dp.PDR(s.Slot)
				if err != nil || p.Far.Flags != c.flags || p.Far.Teid != upfxdp.NetworkOrder32(gnbTEID) {
					t.Fatalf("downlink PDR: %+v, %v", p, err)
				}
				if c.flags != upfxdp.FARGTPUv6 {
					continue
				}
				want := upfxdp.Tunnel6{Peer: gnb6.As16(), Local: n3v6.As16()}
				if got, err := e.dp.Tunnel6(p.Far.Nexthop); err != nil || got != want {
					t.Errorf("tunnel endpoints at next hop %d: %+v, %v, want %+v", p.Far.Nexthop, got, err, want)
				}
			}
		})
	}
}

// What is refused about IPv6 transport, and why; each refusal changes
// nothing.
func TestIPv6Refusals(t *testing.T) {
	e := newEnv(t) // IPv4 N3 only
	e6 := newEnvOn(t, 64, n3, n3v6)
	v6Only := newEnvOn(t, 64, n3v6)
	ohc6 := ohcOf(0x0200, 0x100, netip.Addr{}, gnb6)
	// Copies go in GTP-U/UDP/IPv4 tunnels, from the first IPv4 N3 address.
	copiesInATunnel := createFAR(farID(7), applyAction(aaFORW|aaDUPL), fwdParams(destinationInterface(ifCore)),
		dupParams(destinationInterface(ifLIFunction), ohcGTPU(1, "192.0.2.99")))
	for _, c := range []struct {
		name       string
		e          *env
		ies        [][]byte
		cause      byte
		failedRule []byte
	}{
		{name: "tunnel to an IPv6 peer without an IPv6 N3 address", e: e, ies: v6Session(1, fteidChooseOf(fteidFlagV4, 1), 0, ohc6),
			cause: causeRuleFailure, failedRule: failedFAR(2)},
		{name: "F-TEID at an IPv4 and an IPv6 address", e: e6,
			ies:   v6Session(1, tlv(tFTEID, []byte{fteidFlagV4 | fteidFlagV6}, be32(0x77), n3.AsSlice(), n3v6.AsSlice()), 1, ohc6),
			cause: causeRuleFailure, failedRule: failedPDR(1)},
		{name: "a tunnel for copies without an IPv4 N3 address", e: v6Only,
			ies:   append(v6Session(1, fteidChooseOf(fteidFlagV6, 1), 1, ohc6), copiesInATunnel),
			cause: causeRuleFailure, failedRule: failedFAR(7)},
		{name: "IPv6 F-TEID not ours", e: e6, ies: v6Session(1, fteid6(0x77, netip.MustParseAddr("2001:db8:3::99")), 1, ohc6),
			cause: causeRuleFailure, failedRule: failedPDR(1)},
		{name: "UDP/IPv6 outer header (not GTP-U)", e: e6, ies: v6Session(1, fteidChooseOf(fteidFlagV6, 1), 1, ohcOf(0x0800, 0x100, netip.Addr{}, gnb6)),
			cause: causeRuleFailure, failedRule: failedFAR(2)},
		{name: "GTP-U/UDP/IPv6 outer header without the address", e: e6, ies: v6Session(1, fteidChooseOf(fteidFlagV6, 1), 1, ohcOf(0x0200, 0x100, netip.Addr{}, netip.Addr{})),
			cause: causeRuleFailure, failedRule: failedFAR(2)},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := c.e.state()
			c.e.establish("smf1", c.ies...).expect(t, c.cause, c.failedRule, nil)
			c.e.unchanged(before)
		})
	}
}

// A tunnel leaves from its side's addresses: with IPv6 on N9 alone, a
// session whose PDR from access is at the N3 (IPv4) F-TEID cannot tunnel
// to an IPv6 gNB (73, the FAR), and a PSA's, whose PDR from access is at
// the N9 F-TEID, tunnels to an IPv6 I-UPF from the N9 address.
func TestIPv6TunnelSide(t *testing.T) {
	n9v6 := netip.MustParseAddr("2001:db8:9::11")
	e := newEnvOnSides(t, 64, []netip.Addr{n3}, []netip.Addr{n9v6})
	ohc6 := ohcOf(0x0200, 0x100, netip.Addr{}, gnb6)
	before := e.state()
	e.establish("smf1", v6Session(1, fteid(1, n3.String()), 0, ohc6)...).expect(t, causeRuleFailure, failedFAR(2), nil)
	e.unchanged(before)

	seid := e.establish("smf1", v6Session(2, fteid6(2, n9v6), 1, ohc6)...).upSEID(t)
	slots, _ := e.store.Slots(seid)
	downlink := slices.IndexFunc(slots.PDR, func(s session.RuleSlot) bool { return s.ID == 2 })
	p, err := e.dp.PDR(slots.PDR[downlink].Slot)
	fatalIf(t, err)
	want := upfxdp.Tunnel6{Peer: gnb6.As16(), Local: n9v6.As16()}
	if got, err := e.dp.Tunnel6(p.Far.Nexthop); p.Far.Flags != upfxdp.FARGTPUv6 || err != nil || got != want {
		t.Errorf("the PSA's downlink: FAR flags %d, tunnel %+v, %v; want %+v", p.Far.Flags, got, err, want)
	}
}
