package upfxdp

import (
	"testing"

	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// collector is where the tests' copies go in their tunnel.
var collector = mustAddr("198.51.100.99")

const duplTEID = 0xd1

// A packet whose FAR drops it, and duplicates (DUPL), leaves as its own
// copy: the IP packet as its PDR matched it, in the tunnel of the
// Duplicating Parameters or plain, behind the copy's next hop's Ethernet
// header; counted dropped and copied. A copy without a next hop is lost,
// counted. One whose FAR forwards it leaves as without DUPL when no fanout
// takes it and its copy (the test interfaces have none): the copy is
// counted lost.
func TestDuplicate(t *testing.T) {
	u := newUPF(t, RoleAccess|RoleCore)
	for _, slot := range []uint32{pdrFARDrop, pdrDownFARDrop, pdrRoute} {
		changePDR(t, u.d, slot, func(p *PDR) { p.Far.Flags |= FARDuplicate })
	}
	up := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 100, id: 7}
	up6 := ipPacket{src: ue6, dst: dn6, ttl: 9, size: 20}
	down := ipPacket{src: dn4, dst: ue4FARDrop, ttl: 64, size: 50}
	tunnel := func(nh uint32) Dupl {
		return Dupl{Flags: FARGTPUv4, Tos: 0xb8, Teid: NetworkOrder32(duplTEID), Peer: AddrKey(collector), Local: AddrKey(n3Addr), Nexthop: nh}
	}
	tunnelled := func(nh uint32, p ipPacket) []byte {
		return markedEncapFrame(t, 0xb8, nhL2(nh), n3Addr, collector, duplTEID, -1, p.bytes(t))
	}
	uplink := func(teid uint32, p ipPacket) []byte {
		return gtpFrame(t, fromGNB, n3Addr, gpdu(teid, ulPSC(9)), p.bytes(t))
	}
	for _, c := range []struct {
		name    string
		slot    uint32
		dupl    Dupl
		in      []byte
		act     xdplink.Action
		reasons []string
		out     []byte // nil: not checked
	}{
		{name: "uplink dropped, copy in a tunnel", slot: pdrFARDrop, dupl: tunnel(nhCoreVLAN), in: uplink(teidFARDrop, up),
			act: xdplink.Redirect, reasons: []string{"drop_far", "duplicate"}, out: tunnelled(nhCoreVLAN, up)},
		{name: "uplink dropped, plain copy to a next hop", slot: pdrFARDrop, dupl: Dupl{Nexthop: nhCore}, in: uplink(teidFARDrop, up),
			act: xdplink.Redirect, reasons: []string{"drop_far", "duplicate"}, out: up.frame(t, nhL2(nhCore))},
		{name: "uplink dropped, plain copy along its route", slot: pdrFARDrop, dupl: Dupl{Nexthop: NexthopRoute}, in: uplink(teidFARDrop, up),
			act: xdplink.Redirect, reasons: []string{"drop_far", "duplicate"}, out: up.frame(t, nhL2(nhCore))},
		{name: "uplink IPv6 dropped, plain copy along its route", slot: pdrFARDrop, dupl: Dupl{Nexthop: NexthopRoute}, in: uplink(teidFARDrop, up6),
			act: xdplink.Redirect, reasons: []string{"drop_far", "duplicate"}, out: up6.frame(t, nhL2(nhCoreVLAN))},
		{name: "uplink IPv6 dropped, copy in a tunnel", slot: pdrFARDrop, dupl: tunnel(nhCore), in: uplink(teidFARDrop, up6),
			act: xdplink.Redirect, reasons: []string{"drop_far", "duplicate"}, out: tunnelled(nhCore, up6)},
		{name: "uplink dropped, no next hop for the copy", slot: pdrFARDrop, dupl: tunnel(nhInvalid), in: uplink(teidFARDrop, up),
			act: xdplink.Drop, reasons: []string{"drop_far", "drop_duplicate"}},
		{name: "uplink dropped, no route for the copy", slot: pdrFARDrop, dupl: Dupl{Nexthop: NexthopRoute},
			in: uplink(teidFARDrop, ipPacket{src: ue4, dst: dn4NoRoute, ttl: 64}), act: xdplink.Drop, reasons: []string{"drop_far", "drop_duplicate"}},
		{name: "downlink dropped, copy in a tunnel", slot: pdrDownFARDrop, dupl: tunnel(nhGNBVLAN), in: down.frame(t, fromDN),
			act: xdplink.Redirect, reasons: []string{"drop_far", "duplicate"}, out: tunnelled(nhGNBVLAN, down)},
		{name: "uplink forwarded, no fanout for the copy", slot: pdrRoute, dupl: tunnel(nhCore), in: uplink(teidRoute, up),
			act: xdplink.Redirect, reasons: []string{"uplink_forward", "drop_duplicate"}, out: up.hop().frame(t, nhL2(nhCore))},
	} {
		t.Run(c.name, func(t *testing.T) {
			check(t, u.d.PutDupl(c.slot, c.dupl))
			out := u.expect(t, c.in, c.act, c.reasons...)
			if c.out != nil {
				testsupport.EqualFrames(t, out, c.out)
			}
		})
	}
}
