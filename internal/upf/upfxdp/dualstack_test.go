package upfxdp

import (
	"net/netip"
	"testing"

	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
)

// A dual-stack UE's uplink PDR (both flags, PDRUE of its IPv4 address and
// IPv6 prefix) takes an IPv4 packet from its IPv4 address and an IPv6 one
// from its /64, each forwarded byte for byte; a packet from another
// address of either family matches no PDR.
func TestUplinkDualStackUE(t *testing.T) {
	u := newUPF(t, RoleAccess|RoleCore)
	const teidDual = 0x700
	ue, flags := PDRUE(netip.PrefixFrom(ue4, 32), netip.PrefixFrom(ue6, 64))
	if flags != MatchUEv4|MatchUEv6 {
		t.Fatalf("PDRUE flags %#x, want both families'", flags)
	}
	check(t, u.d.PutPDR(testPDRs, PDR{Id: testPDRs + 1, Flags: flags, Ue: ue, Far: forward(nhCore)}))
	check(t, u.d.PutUplink(onN3(teidDual), pdrSet(testPDRs)))
	v4 := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 100, id: 7}
	v6 := ipPacket{src: ue6b, dst: dn6, ttl: 64, size: 100} // another host of the /64
	dropped := func(name string, p ipPacket) pktCase {
		return pktCase{name: name, in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidDual), p.bytes(t)), act: xdplink.Drop, reason: "drop_no_pdr"}
	}
	u.runCases(t, []pktCase{
		{name: "IPv4 from the UE's address", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidDual), v4.bytes(t)), act: xdplink.Redirect,
			reason: "uplink_forward", out: v4.hop().frame(t, nhL2(nhCore))},
		{name: "IPv6 from the UE's prefix", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidDual, ulPSC(9)), v6.bytes(t)), act: xdplink.Redirect,
			reason: "uplink_forward", out: v6.hop().frame(t, nhL2(nhCore))},
		dropped("IPv4 from another address", ipPacket{src: ue4b, dst: dn4, ttl: 64}),
		dropped("IPv6 from another /64", ipPacket{src: ue6Other, dst: dn6, ttl: 64}),
		// The IPv6 prefix's words do not stand for an IPv4 address.
		dropped("IPv4 from the prefix's first word", ipPacket{src: netip.AddrFrom4([4]byte(ue6.AsSlice()[:4])), dst: dn4, ttl: 64}),
	})
}

// IPv6 multi-homing: a branching point's uplink PDRs on one F-TEID, each
// with one of the UE's /64 prefixes, send a packet by its source prefix:
// one prefix's out of N6 (local breakout), the other's over N9 to its PSA,
// whatever their precedence; a source of neither prefix matches no PDR.
func TestMultiHomingBranchesBySourcePrefix(t *testing.T) {
	u := newUPF(t, RoleAccess|RoleCore)
	const teidBranch, teidPSA = 0x710, 0x4e9
	const pdrLocal, pdrCentral = testPDRs, testPDRs + 1
	local, central := ue6, ue6Other
	ueLocal, flags := PDRUE(netip.Prefix{}, netip.PrefixFrom(local, 64))
	ueCentral, _ := PDRUE(netip.Prefix{}, netip.PrefixFrom(central, 64))
	check(t, u.d.PutPDR(pdrLocal, PDR{Id: 1, Flags: flags, Ue: ueLocal, Far: forward(nhCore)}))
	check(t, u.d.PutPDR(pdrCentral, PDR{Id: 2, Flags: flags, Ue: ueCentral, Far: encap(teidPSA, n9Addr, psa, nhCoreVLAN)}))
	for _, set := range []PDRSet{pdrSet(pdrLocal, pdrCentral), pdrSet(pdrCentral, pdrLocal)} {
		check(t, u.d.PutUplink(onN3(teidBranch), set))
		fromLocal := ipPacket{src: local, dst: dn6, ttl: 64, size: 100}
		fromCentral := ipPacket{src: central, dst: dn6, ttl: 64, size: 100}
		u.runCases(t, []pktCase{
			{name: "from the local prefix", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidBranch), fromLocal.bytes(t)),
				act: xdplink.Redirect, reason: "uplink_forward", out: fromLocal.hop().frame(t, nhL2(nhCore))},
			{name: "from the central prefix", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidBranch), fromCentral.bytes(t)),
				act: xdplink.Redirect, reason: "relay_forward",
				out: encapFrame(t, nhL2(nhCoreVLAN), n9Addr, psa, teidPSA, -1, fromCentral.bytes(t))},
			{name: "from neither", in: gtpFrame(t, fromGNB, n3Addr, gpdu(teidBranch), ipPacket{src: mustAddr("2001:db8:1:4::5"), dst: dn6, ttl: 64}.bytes(t)),
				act: xdplink.Drop, reason: "drop_no_pdr"},
		})
	}
}
