package n4

import (
	"bytes"
	"errors"
	"net/netip"
	"reflect"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xdp5g/xdp5g/internal/upf/n4state"
	"github.com/xdp5g/xdp5g/internal/upf/session"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// ueIPv4v6 is the UE IP Address (§8.2.62) of an IPv4v6 PDU session as
// Open5GS's SMF writes it: flags V6, V4 and S/D, the IPv4 address, then
// the IPv6 one, its /64 without a prefix length; CHV4 and no IPv4 address
// when v4addr is "".
func ueIPv4v6(v4addr string, v6addr netip.Addr) func(sd bool) []byte {
	return func(sd bool) []byte {
		if v4addr == "" {
			return tlv(tUEIPAddress, []byte{0x01 | 0x02 | 0x10 | sdBit(sd)}, v6addr.AsSlice())
		}
		return tlv(tUEIPAddress, []byte{0x01 | 0x02 | sdBit(sd)}, v4(v4addr), v6addr.AsSlice())
	}
}

// downlinkKey is the PDR set a UE address finds, ok false for none.
func (e *env) downlinkKey(ue netip.Addr) (upfxdp.PDRSet, bool) {
	e.t.Helper()
	set, err := e.dp.Downlink(ue)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return set, false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return set, true
}

// An Open5GS IPv4v6 PDU session: both addresses of the UE IP Address IE
// go to its PDRs, the uplink PDR asks for each family's and the downlink
// PDR is found by both, its IPv4 address given or chosen (CHV4). A session
// taking either address is refused, changing nothing. A handler restarted
// from its journal keeps both keys; deleting the session frees both.
func TestDualStackOpen5GSSession(t *testing.T) {
	e := newEnv(t)
	dir := journaled(t, e)
	ue4, ue6 := netip.MustParseAddr("10.60.0.1"), netip.MustParseAddr("2001:db8:60:1::")
	seid := e.establish("smf1", open5gs(0x1001, ueIPv4v6(ue4.String(), ue6), 0x0a0b0c0d)...).upSEID(t)
	stored, _ := e.store.Get(seid)
	for _, i := range []int{0, 1} { // PDRs 1 and 2
		if pdi := stored.PDRs[i].PDI; pdi.UEAddress != netip.PrefixFrom(ue4, 32) || pdi.UEIPv6Prefix != netip.PrefixFrom(ue6, 64) {
			t.Errorf("PDR %d: UE addresses %v and %v, want %v and %v/64", stored.PDRs[i].ID, pdi.UEAddress, pdi.UEIPv6Prefix, ue4, ue6)
		}
	}
	set4, ok4 := e.downlinkKey(ue4)
	set6, ok6 := e.downlinkKey(ue6)
	if !ok4 || !ok6 || set4 != set6 || set4.Count != 1 {
		t.Errorf("downlink keys: %v %+v, %v %+v; want both to the downlink PDR", ue4, set4, ue6, set6)
	}
	uplink, err := e.dp.Uplink(atN3(stored.PDRs[0].PDI.TEID))
	fatalIf(t, err)
	wantUE, wantFlags := upfxdp.PDRUE(netip.PrefixFrom(ue4, 32), netip.PrefixFrom(ue6, 64))
	var p1 upfxdp.PDR
	for _, slot := range uplink.Pdr[:uplink.Count] {
		if p, err := e.dp.PDR(slot); err == nil && p.Id == 1 {
			p1 = p
		}
	}
	if p1.Flags&(upfxdp.MatchUEv4|upfxdp.MatchUEv6) != wantFlags || p1.Ue != wantUE {
		t.Errorf("uplink PDR 1 %+v; want it asking for both addresses", p1)
	}

	before := e.state()
	for _, c := range []struct {
		name string
		ue   func(bool) []byte
	}{
		{name: "its IPv6 prefix", ue: ueIPv4v6("10.60.0.2", ue6)},
		{name: "its IPv6 prefix alone", ue: func(sd bool) []byte { return ueIPv6(ue6.Next(), sd) }},
		{name: "its IPv4 address", ue: ueIPv4v6(ue4.String(), netip.MustParseAddr("2001:db8:60:2::"))},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.establish("smf1", open5gs(0x1002, c.ue, 0x0a0b0c0e)...).expect(t, causeRuleFailure, failedPDR(2), nil)
			e.unchanged(before)
		})
	}

	// CHV4 beside an IPv6 address: the UPF picks the IPv4 one and reports
	// it alone (V4 and the address, S/D on the downlink PDR's).
	chosenV6 := netip.MustParseAddr("2001:db8:60:3::")
	r := e.establish("smf1", open5gs(0x1003, ueIPv4v6("", chosenV6), 0x0a0b0c0f)...)
	chosenSEID := r.upSEID(t)
	created := r.created(t)
	ul, dl := one(t, created[1], tUEIPAddress), one(t, created[2], tUEIPAddress)
	if len(ul) != 5 || ul[0] != 0x02 || len(dl) != 5 || dl[0] != 0x06 || !bytes.Equal(ul[1:], dl[1:]) {
		t.Fatalf("Created PDR UE IP addresses % x and % x", ul, dl)
	}
	chosenV4 := netip.AddrFrom4([4]byte(ul[1:]))
	for _, ue := range []netip.Addr{chosenV4, chosenV6} {
		if _, ok := e.downlinkKey(ue); !ok {
			t.Errorf("no downlink key %v of the session whose IPv4 address the UPF chose", ue)
		}
	}

	h, store, _ := restarted(t, e, dir)
	e.h, e.store = h, store
	for _, ue := range []netip.Addr{ue4, ue6, chosenV4, chosenV6} {
		if _, ok := e.downlinkKey(ue); !ok {
			t.Errorf("no downlink key %v after the restart", ue)
		}
		owner, ok := store.KeyOwner(session.PDR{PDI: session.PDI{SourceInterface: session.InterfaceCore, UEAddress: netip.PrefixFrom(ue, ue.BitLen())}})
		if want := map[bool]uint64{true: seid, false: chosenSEID}[ue == ue4 || ue == ue6]; !ok || owner != want {
			t.Errorf("%v is session %d's (%v) after the restart, want %d's", ue, owner, ok, want)
		}
	}
	e.delete("smf1", seid).expect(t, causeAccepted, nil, nil)
	e.delete("smf1", chosenSEID).expect(t, causeAccepted, nil, nil)
	for _, ue := range []netip.Addr{ue4, ue6, chosenV4, chosenV6} {
		if set, ok := e.downlinkKey(ue); ok {
			t.Errorf("%v still a key after the deletion: %+v", ue, set)
		}
	}
	// Free: a session takes them again.
	e.establish("smf1", open5gs(0x1004, ueIPv4v6(ue4.String(), ue6), 0x0a0b0c0d)...).upSEID(t)
}

// A PDR record with one UE address is written as before dual-stack UEs
// were, so that older journals and state files read as they did; a
// dual-stack PDR's reads back with both addresses.
func TestPDRRecordOfOneOrTwoUEAddresses(t *testing.T) {
	ohr := uint8(0)
	single := session.PDR{ID: 1, Precedence: 255, FARID: 2, OuterHeaderRemoval: &ohr, PDI: session.PDI{SourceInterface: session.InterfaceAccess,
		TEID: 0x1234, LocalAddress: n3, UEAddress: netip.MustParsePrefix("10.60.0.1/32"), QFI: 9}}
	var older n4state.Enc // the layout of the records of earlier versions
	older.Uint(1)
	older.Uint(255)
	older.Uint(2)
	older.Uint(uint64(session.InterfaceAccess))
	older.Uint(0x1234)
	older.Addr(n3)
	older.Prefix(single.PDI.UEAddress)
	older.Uint(9)
	older.Uint(0) // SDF filters
	older.Bool(true)
	older.Uint(0)
	older.Uint(0) // QER IDs
	older.Uint(0) // URR IDs
	var e n4state.Enc
	encodePDR(&e, &single)
	if !bytes.Equal(e.B, older.B) {
		t.Errorf("a single-address PDR's record\n% x\nwant, as before,\n% x", e.B, older.B)
	}
	dual := single
	dual.PDI.UEIPv6Prefix = netip.MustParsePrefix("2001:db8:60:1::/64")
	for _, p := range []session.PDR{single, dual} {
		var e n4state.Enc
		encodePDR(&e, &p)
		d := n4state.NewDec(e.B)
		got := decodePDR(d, NewSaved().shards[0])
		fatalIf(t, d.Done())
		if !reflect.DeepEqual(got, p) {
			t.Errorf("read back\n%+v\nwant\n%+v", got, p)
		}
	}
}
