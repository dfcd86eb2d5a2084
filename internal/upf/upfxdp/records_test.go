package upfxdp

import (
	"bytes"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// cold is the number of packets of u's interface that no record served.
func (u *upf) cold(t *testing.T) uint64 {
	t.Helper()
	all, err := u.d.Counters()
	check(t, err)
	for _, c := range all {
		if c.Ifindex == u.ifindex {
			return c.Cold.Packets
		}
	}
	t.Fatalf("Counters() has no interface %d", u.ifindex)
	return 0
}

// record is k's record once the places held have settled, failing when k
// has none.
func (u *upf) record(t *testing.T, k setKey) *upfSetRecord {
	t.Helper()
	check(t, u.d.sets.settle())
	own, _, _ := u.d.sets.records.find(k)
	if own < 0 {
		t.Fatalf("%+v has no record", k)
	}
	return u.d.sets.records.recs.at(uint32(own))
}

// expectPath runs a frame as expect does, checks the frame it leaves and
// whether a record served it.
func (u *upf) expectPath(t *testing.T, fast bool, in []byte, act xdplink.Action, reason string, out []byte) {
	t.Helper()
	before := u.cold(t)
	testsupport.EqualFrames(t, u.expect(t, in, act, reason), out)
	if went := u.cold(t) - before; went != map[bool]uint64{true: 0, false: 1}[fast] {
		t.Errorf("%d packets went the cold path, want fast %v", went, fast)
	}
}

func needRecords(t *testing.T) {
	t.Helper()
	if !recordsWritten {
		t.Skip("the data path has records on x86-64 only")
	}
}

// A key's record serves its packets as its set would, and a record whose
// kind is taken away (as the control plane takes it before the place is
// written again) sends them through the set: both ways leave the same
// frame.
func TestRecordAndSetAgree(t *testing.T) {
	needRecords(t)
	u := newUPF(t, RoleAccess|RoleCore)
	up := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 100, id: 7}
	down := ipPacket{src: dn4, dst: ue4, ttl: 64, size: 100, id: 99}
	down6 := ipPacket{src: dn6, dst: ue6, ttl: 64, size: 100}
	for _, c := range []struct {
		name   string
		key    setKey
		in     []byte
		reason string
		out    []byte
	}{
		{"uplink", teidKey(teidRoute), gtpFrame(t, fromGNB, n3Addr, gpdu(teidRoute), up.bytes(t)), "uplink_forward",
			up.hop().frame(t, nhL2(nhCore))},
		{"uplink, QFI", teidKey(teidQoS), gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS, ulPSC(9)), up.bytes(t)), "uplink_forward",
			up.hop().frame(t, nhL2(nhCore))},
		{"downlink", ueKey(ue4), down.frame(t, fromDN), "downlink_forward",
			encapFrame(t, nhL2(nhGNB), n3Addr, gnb, dlTEID, 9, down.hop().bytes(t))},
		{"downlink IPv6", ueKey(ue6), down6.frame(t, fromDN), "downlink_forward",
			encapFrame(t, nhL2(nhGNB), n3Addr, gnb, dlTEID6, 0x40|5, down6.hop().bytes(t))},
	} {
		t.Run(c.name, func(t *testing.T) {
			u.expectPath(t, true, c.in, xdplink.Redirect, c.reason, c.out)
			rec := u.record(t, c.key)
			kind := rec.Kind
			atomic.StoreUint32(&rec.Kind, 0)
			u.expectPath(t, false, c.in, xdplink.Redirect, c.reason, c.out)
			atomic.StoreUint32(&rec.Kind, kind)
			u.expectPath(t, true, c.in, xdplink.Redirect, c.reason, c.out)
		})
	}
}

// A record's PDI checks run on its copy: a packet they refuse tries the
// PDR after it, which the record names, then the set's lower PDRs; a
// record that names none (as an older build's) sends it to the set.
func TestRecordPDIRefused(t *testing.T) {
	needRecords(t)
	u := newUPF(t, RoleAccess|RoleCore)
	p := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 100}
	// pdrQoS wants QFI 9: without it, pdrUE4 forwards to nhCoreVLAN.
	in, out := gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS), p.bytes(t)), p.hop().frame(t, nhL2(nhCoreVLAN))
	rec := u.record(t, teidKey(teidQoS))
	if rec.Branch.Next != pdrUE4 {
		t.Fatalf("the record names PDR %d after its own, want %d", rec.Branch.Next, pdrUE4)
	}
	u.expectPath(t, true, in, xdplink.Redirect, "uplink_forward", out)
	withoutNext(t, rec)
	u.expectPath(t, false, in, xdplink.Redirect, "uplink_forward", out)
}

// withoutNext takes from rec the PDR it names after its own until the
// test ends: its refused packets take the set.
func withoutNext(t *testing.T, rec *upfSetRecord) {
	next := rec.Branch.Next
	rec.Branch.Next = 0
	t.Cleanup(func() { rec.Branch.Next = next })
}

// A packet whose key's record does not serve it takes the set the record
// names, without the index: with the key's index place withdrawn, it
// leaves the frame it left through the index; a slot that holds another
// key's set by then is not taken.
func TestRecordNamesSet(t *testing.T) {
	needRecords(t)
	u := newUPF(t, RoleAccess|RoleCore)
	p := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 100}
	// pdrQoS wants QFI 9: without it, pdrUE4 forwards to nhCoreVLAN.
	in := gtpFrame(t, fromGNB, n3Addr, gpdu(teidQoS), p.bytes(t))
	out := p.hop().frame(t, nhL2(nhCoreVLAN))
	k, sets := teidKey(teidQoS), &u.d.sets
	withoutNext(t, u.record(t, k))
	u.expectPath(t, false, in, xdplink.Redirect, "uplink_forward", out)

	pos := sets.where[k].index
	placed := sets.loadIndex(pos)
	sets.storeIndex(pos, 0)
	defer sets.storeIndex(pos, placed)
	u.expectPath(t, false, in, xdplink.Redirect, "uplink_forward", out)

	rec := u.record(t, k)
	slot := rec.Set
	rec.Set = sets.where[teidKey(teidRoute)].slot
	defer func() { rec.Set = slot }()
	u.expect(t, in, xdplink.Drop, "drop_unknown_teid")
}

// Open5GS puts a PDR for IPv6 router solicitations, with an IPv6 SDF
// filter, before a session's uplink PDR: IPv4 packets pass it by in the
// set, so the record serves them; IPv6 packets take the set.
func TestRecordOpen5GSShape(t *testing.T) {
	needRecords(t)
	u := newUPF(t, RoleAccess)
	const teid = 0x7200
	const (
		pdrRS = testPDRs + iota
		pdrDefault
	)
	check(t, u.d.PutPDR(pdrRS, PDR{Id: 1, Sdf: pdrRS, Far: forward(nhCore)}))
	check(t, u.d.PutPDR(pdrDefault, PDR{Id: 2, Far: forward(nhCoreVLAN)}))
	check(t, u.d.PutSDFSet(pdrRS, sdfSet(sdfFilter(58, "", "ff02::2/128"))))
	set := pdrSet(pdrRS, pdrDefault)
	set.OnlyV6 = 1 << 0
	check(t, u.d.PutUplink(onN3(teid), set))
	if rec := u.record(t, teidKey(teid)); rec.Families != recordIPv4 || rec.PdrSlot != pdrDefault {
		t.Fatalf("record for families %#x, PDR %d; want IPv4's, PDR %d", rec.Families, rec.PdrSlot, pdrDefault)
	}
	v4 := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 100}
	v6 := flowPacket{src: ue6, dst: dn6, proto: layers.IPProtocolUDP, sport: 1, dport: 53, ttl: 64}
	u.expectPath(t, true, gtpFrame(t, fromGNB, n3Addr, gpdu(teid), v4.bytes(t)), xdplink.Redirect, "uplink_forward",
		v4.hop().frame(t, nhL2(nhCoreVLAN)))
	u.expectPath(t, false, gtpFrame(t, fromGNB, n3Addr, gpdu(teid), v6.bytes(t)), xdplink.Redirect, "uplink_forward",
		nhL2(nhCoreVLAN).ipFrame(t, v6.hop().bytes(t)))
}

// A set whose first PDR has an SDF filter has a record, whose copy's
// filter takes the packets it matches; the others take the set. A key
// whose eight places are full has none: its packets take the set.
func TestRecordNone(t *testing.T) {
	needRecords(t)
	u := setsUPF(t, 16)
	check(t, u.d.PutPDR(3, PDR{Sdf: 1, Far: forward(3)}))
	check(t, u.d.PutSDFSet(1, sdfSet(sdfFilter(0, "", "0.0.0.0/0"))))
	check(t, u.d.PutUplink(onN3(0x3000), pdrSet(3, 0)))
	if rec := u.record(t, teidKey(0x3000)); rec.Pdr.Sdf != 1 {
		t.Errorf("the record copies SDF set %d, want 1", rec.Pdr.Sdf)
	}
	before := u.cold(t)
	u.expectUplink(t, 0x3000, 3)
	if u.cold(t) != before {
		t.Error("a packet the record's filter matches went the cold path")
	}
	check(t, u.d.PutSDFSet(1, sdfSet(sdfFilter(0, "", "198.18.0.0/15"))))
	u.expectColdUplink(t, 0x3000, 1)

	// Keys of one record bucket: those beyond its places take the bucket
	// beside it, then the pair beside theirs, and the one after finds all
	// full.
	var teids []uint32
	want := u.d.sets.records.bucket(teidKey(0x4000))
	for teid := uint32(0x4000); len(teids) <= recordPlaces; teid++ {
		if u.d.sets.records.bucket(teidKey(teid)) == want {
			// A PDR of its own: two records at most copy one.
			slot := uint32(10 + len(teids))
			check(t, u.d.PutPDR(slot, PDR{Far: forward(uint32(len(teids))%3 + 1)}))
			teids = append(teids, teid)
			check(t, u.d.PutUplink(onN3(teid), pdrSet(slot)))
		}
	}
	full := len(teids) - 1
	for i, teid := range teids[:full] {
		u.record(t, teidKey(teid))
		before := u.cold(t)
		u.expectUplink(t, teid, uint32(i%3)+1)
		if u.cold(t) != before {
			t.Errorf("TEID %#x with a record went the cold path", teid)
		}
	}
	last := teids[full]
	u.expectColdUplink(t, last, uint32(full%3)+1)
	// A place freed goes to the next key written once the packets that
	// may still read what it held have ended.
	u.d.sets.stopSettler() // the test settles
	check(t, u.d.DeleteUplink(onN3(teids[0])))
	check(t, u.d.PutUplink(onN3(last), pdrSet(0)))
	u.expectColdUplink(t, last, 1)
	check(t, u.d.sets.settle())
	u.record(t, teidKey(last))
	u.expectUplink(t, last, 1)
}

// A data path of one session has one pair of record buckets, where the
// pair beside a key's is its own: its keys take their places there, and
// their packets find them.
func TestRecordsOfOnePair(t *testing.T) {
	needRecords(t)
	u := setsUPF(t, 1)
	if got := u.d.sets.records.hints.len(); got != 1 {
		t.Fatalf("%d pairs of record buckets, want 1", got)
	}
	for teid := uint32(0x4000); teid < 0x4002; teid++ {
		check(t, u.d.PutUplink(onN3(teid), pdrSet(teid%2)))
		u.record(t, teidKey(teid))
		before := u.cold(t)
		u.expectUplink(t, teid, teid%2+1)
		if u.cold(t) != before {
			t.Errorf("TEID %#x with a record went the cold path", teid)
		}
	}
}

// An F-TEID put to take no record (the CP function's) has none, its
// packets forwarded by its set; put again as any other it takes one, and
// put without again it loses it, its place left to other keys.
func TestUnrecordedUplink(t *testing.T) {
	needRecords(t)
	u := setsUPF(t, 16)
	u.d.sets.stopSettler() // the test settles
	const teid = 0x5000
	noRecord := func(when string) {
		t.Helper()
		check(t, u.d.sets.settle())
		if own, _, _ := u.d.sets.records.find(teidKey(teid)); own >= 0 {
			t.Errorf("%s: the F-TEID has a record", when)
		}
		if n := u.d.UnrecordedKeys(); n != 1 {
			t.Errorf("%s: %d keys unrecorded, want 1", when, n)
		}
	}
	check(t, u.d.PutUnrecordedUplink(onN3(teid), pdrSet(1)))
	noRecord("put unrecorded")
	u.expectColdUplink(t, teid, 2)

	check(t, u.d.PutUplink(onN3(teid), pdrSet(2)))
	u.record(t, teidKey(teid))
	u.expectUplink(t, teid, 3)
	if n := u.d.UnrecordedKeys(); n != 0 {
		t.Errorf("put recorded: %d keys unrecorded, want 0", n)
	}

	check(t, u.d.PutUnrecordedUplink(onN3(teid), pdrSet(0)))
	noRecord("put unrecorded again")
	u.expectColdUplink(t, teid, 1)
	check(t, u.d.DeleteUplink(onN3(teid)))
	if n := u.d.UnrecordedKeys(); n != 0 {
		t.Errorf("deleted: %d keys unrecorded, want 0", n)
	}
}

// withRecordedTEID is a data path whose TEID recordedTEID points at PDR
// 0, with the key and the place of its record; the test settles the
// places held.
func withRecordedTEID(t *testing.T) (u *upf, k setKey, pos int) {
	t.Helper()
	needRecords(t)
	u = setsUPF(t, 16)
	k = teidKey(recordedTEID)
	u.d.sets.stopSettler()
	check(t, u.d.PutUplink(onN3(recordedTEID), pdrSet(0)))
	pos, _, _ = u.d.sets.records.find(k)
	return u, k, pos
}

const recordedTEID = 0x6000

// Packets read records where they lie: a record that changes is written
// in another place, and the place it leaves is held, no key's record
// written there, until the packets that may be reading it have ended.
func TestRecordPlaceHeld(t *testing.T) {
	u, k, old := withRecordedTEID(t)
	r := &u.d.sets.records
	check(t, u.d.PutUplink(onN3(recordedTEID), pdrSet(1)))
	if own, free, held := r.find(k); own == old || free == old || !held || !r.held[old] {
		t.Fatalf("record at %d, first free place %d, a place held %v: want the record moved from %d, held", own, free,
			held, old)
	}
	if kind := r.recs.at(uint32(old)).Kind; kind != 0 {
		t.Errorf("the place left has kind %d, want none", kind)
	}
	before := u.cold(t)
	u.expectUplink(t, recordedTEID, 2)
	if u.cold(t) != before {
		t.Error("the packet after the change went the cold path")
	}
	check(t, u.d.sets.settle())
	if _, _, held := r.find(k); held || len(r.held) != 0 {
		t.Errorf("places still held after the packets under way ended: %v", r.held)
	}
}

func (u *upf) expectColdUplink(t *testing.T, teid, nh uint32) {
	t.Helper()
	before := u.cold(t)
	u.expectUplink(t, teid, nh)
	if u.cold(t) != before+1 {
		t.Errorf("TEID %#x: the packet did not go the cold path", teid)
	}
}

// Every write leaves the records exact: a packet after a change of the
// set, of the PDR the record copies, or of its next hop sees the change,
// and after a delete no record is left.
func TestRecordFollowsWrites(t *testing.T) {
	needRecords(t)
	u := setsUPF(t, 16)
	const teid = 0x5000
	k := teidKey(teid)
	check(t, u.d.PutUplink(onN3(teid), pdrSet(0)))
	u.expectUplink(t, teid, 1)
	check(t, u.d.PutUplink(onN3(teid), pdrSet(1)))
	u.expectUplink(t, teid, 2)
	check(t, u.d.PutPDR(1, PDR{Far: forward(3)}))
	u.expectUplink(t, teid, 3)
	check(t, u.d.SetPDRNexthop(1, 1))
	u.expectUplink(t, teid, 1)
	if rec := u.record(t, k); rec.Pdr.Far.Nexthop != 1 || rec.Seq&1 != 0 {
		t.Errorf("record next hop %d, sequence %d", rec.Pdr.Far.Nexthop, rec.Seq)
	}
	// The PDR gains an SDF filter that refuses the packet: the record
	// copies it, and the packet finds no PDR.
	check(t, u.d.PutSDFSet(1, sdfSet(sdfFilter(0, "", "198.18.0.0/15"))))
	check(t, u.d.PutPDR(1, PDR{Sdf: 1, Far: forward(2)}))
	if rec := u.record(t, k); rec.Pdr.Sdf != 1 {
		t.Errorf("the record copies SDF set %d, want 1", rec.Pdr.Sdf)
	}
	p := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 40}
	u.expect(t, gtpFrame(t, fromGNB, n3Addr, gpdu(teid), p.bytes(t)), xdplink.Drop, "drop_no_pdr")
	// Without them again, the record is back when the set is written.
	check(t, u.d.PutPDR(1, PDR{Far: forward(2)}))
	check(t, u.d.PutUplink(onN3(teid), pdrSet(1)))
	u.record(t, k)
	check(t, u.d.DeleteUplink(onN3(teid)))
	if own, _, _ := u.d.sets.records.find(k); own >= 0 {
		t.Error("a deleted key keeps its record")
	}
	if refs := u.d.sets.records.copiedBy[1]; refs != [2]uint32{} {
		t.Errorf("PDR 1 is still copied by %v", refs)
	}
	u.expectUplink(t, teid, 0)
}

// A restart from the pinned maps keeps the records that are exact, writes
// those missing and takes away those of no key.
func TestRecordsAfterRestart(t *testing.T) {
	needRecords(t)
	d := openTest(t, Options{MaxSessions: 16, N3Addresses: []netip.Addr{n3Addr}})
	check(t, d.PutPDR(0, PDR{Far: forward(1)}))
	check(t, d.PutPDR(1, PDR{Far: forward(2)}))
	for teid := range uint32(4) {
		check(t, d.PutUplink(onN3(0x6000+teid), pdrSet(teid%2)))
	}
	kept := teidKey(0x6000)
	own, _, _ := d.sets.records.find(kept)
	// What a previous run may leave: a record of no key, one gone.
	stray, _, _ := d.sets.records.find(teidKey(0x7000))
	d.sets.records.write(stray, upfSetRecord{Kind: uint32(upfSetKindSET_TEID), Key: teidKey(0x7000).key, Families: recordIPv4})
	gone, _, _ := d.sets.records.find(teidKey(0x6001))
	d.sets.records.clear(gone)
	check(t, d.Close())

	d, err := Open(d.opts)
	check(t, err)
	defer d.Close()
	if now, _, _ := d.sets.records.find(kept); now != own {
		t.Errorf("an exact record was rewritten: at %d, was at %d", now, own)
	}
	if own, _, _ := d.sets.records.find(teidKey(0x7000)); own >= 0 {
		t.Error("the record of no key stayed")
	}
	for teid := range uint32(4) {
		own, _, _ := d.sets.records.find(teidKey(0x6000 + teid))
		if own < 0 {
			t.Fatalf("TEID %#x has no record", 0x6000+teid)
		}
		if rec := d.sets.records.recs.at(uint32(own)); rec.PdrSlot != teid%2 || rec.Pdr.Far.Nexthop != teid%2+1 {
			t.Errorf("TEID %#x: record of PDR %d to next hop %d", 0x6000+teid, rec.PdrSlot, rec.Pdr.Far.Nexthop)
		}
	}
	if refs := d.sets.records.copiedBy[0]; refs[0] == 0 || refs[1] == 0 {
		t.Errorf("PDR 0 is copied by %v, want two records", refs)
	}
}

// A record that holds its PDR's SDF filter matches an IPv4 packet against
// it as the SDF set would: every packet leaves as it does when the record
// leaves the filter to the set. Filters with ports or of IPv6 addresses
// stay in the set.
func TestRecordHoldsFilter(t *testing.T) {
	needRecords(t)
	u := newUPF(t, RoleAccess)
	const teid = 0x7300
	const (
		pdrFiltered = testPDRs + iota // to nhCore, its SDF set in its slot
		pdrRest                       // to nhCoreVLAN
	)
	check(t, u.d.PutPDR(pdrFiltered, PDR{Id: 1, Sdf: pdrFiltered, Far: forward(nhCore)}))
	check(t, u.d.PutPDR(pdrRest, PDR{Id: 2, Far: forward(nhCoreVLAN)}))
	check(t, u.d.PutSDFSet(pdrFiltered, sdfSet(sdfFilter(0, "", "203.0.113.0/24"))))
	check(t, u.d.PutUplink(onN3(teid), pdrSet(pdrFiltered, pdrRest)))
	pkt := func(proto layers.IPProtocol, src, dst netip.Addr) flowPacket {
		return flowPacket{src: src, dst: dst, proto: proto, sport: 40000, dport: 53, ttl: 64}
	}
	udp, tcp := layers.IPProtocolUDP, layers.IPProtocolTCP
	fragment := pkt(udp, ue4, dn4)
	fragment.fragOffset = 100
	otherUE := mustAddr("10.45.0.200")
	packets := []flowPacket{pkt(udp, ue4, dn4), pkt(udp, ue4, dn4b), pkt(udp, ue4, other4), pkt(udp, otherUE, dn4),
		pkt(tcp, ue4, dn4), pkt(layers.IPProtocolICMPv4, ue4, dn4), fragment, pkt(udp, ue6, dn6)}
	for _, c := range []struct {
		name   string
		filter SDFFilter
		held   bool
		takes  int // of the packets
	}{
		{"to a /24", sdfFilter(0, "", "203.0.113.0/24"), true, 6},
		{"UDP from the UE to an address", sdfFilter(17, ue4.String()+"/32", dn4.String()+"/32"), true, 2},
		{"TCP, any address", sdfFilter(6, "", ""), true, 1},
		{"any packet", SDFFilter{}, true, len(packets)},
		{"with ports", sdfFilter(17, "", "203.0.113.0/24", 0, 0xffff, 1, 100), false, 3},
		{"IPv6", sdfFilter(0, "", "2001:db8:ff::/48"), false, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			check(t, u.d.PutSDFSet(pdrFiltered, sdfSet(c.filter)))
			rec := u.record(t, teidKey(teid))
			if held := rec.Branch.SdfV4 == 1; held != c.held {
				t.Fatalf("the record holds the filter: %v, want %v", held, c.held)
			}
			taken := 0
			for _, p := range packets {
				in := gtpFrame(t, fromGNB, n3Addr, gpdu(teid), p.bytes(t))
				act, out := u.run(t, in)
				rec.Branch.SdfV4 = 0
				setAct, setOut := u.run(t, in)
				rec.Branch.SdfV4 = map[bool]uint8{true: 1}[c.held]
				if act != setAct || !testsupport.EqualFrames(t, out, setOut) {
					t.Errorf("%v to %v: %v with the record's filter, %v with the set's", p.src, p.dst, act, setAct)
				}
				if bytes.Equal(out, nhL2(nhCore).ipFrame(t, p.hop().bytes(t))) {
					taken++
				}
			}
			if taken != c.takes {
				t.Errorf("the filter took %d of %d packets, want %d", taken, len(packets), c.takes)
			}
		})
	}
}

// A record names no PDR after its own when the packets of a family it
// serves skip that PDR in the set (its filters all of the other family):
// they go on as the set has them, past it.
func TestRecordNextHonoursSkips(t *testing.T) {
	needRecords(t)
	u := newUPF(t, RoleAccess)
	const teid = 0x7400
	const (
		pdrFiltered = testPDRs + iota // to nhCore
		pdrV6Only                     // to nhCore too, any UDP packet, marked IPv6's alone in the set
		pdrRest                       // to the routes: dn4b's is nhCoreVLAN
	)
	for slot, pdr := range map[uint32]PDR{pdrFiltered: {Sdf: pdrFiltered, Far: forward(nhCore)},
		pdrV6Only: {Sdf: pdrV6Only, Far: forward(nhCore)}, pdrRest: {Far: forward(NexthopRoute)}} {
		pdr.Id = uint16(slot)
		check(t, u.d.PutPDR(slot, pdr))
	}
	check(t, u.d.PutSDFSet(pdrFiltered, sdfSet(sdfFilter(0, "", "198.18.0.0/15"))))
	check(t, u.d.PutSDFSet(pdrV6Only, sdfSet(sdfFilter(17, "", "", 0, 0xffff, 0, 0xffff))))
	set := pdrSet(pdrFiltered, pdrV6Only, pdrRest)
	set.OnlyV6 = 1 << 1
	check(t, u.d.PutUplink(onN3(teid), set))
	if rec := u.record(t, teidKey(teid)); rec.PdrSlot != pdrFiltered || rec.Branch.Next != 0 {
		t.Fatalf("record of PDR %d, then PDR %d; want %d, then none", rec.PdrSlot, rec.Branch.Next, pdrFiltered)
	}
	p := flowPacket{src: ue4, dst: dn4b, proto: layers.IPProtocolUDP, sport: 1, dport: 53, ttl: 64}
	u.expectPath(t, false, gtpFrame(t, fromGNB, n3Addr, gpdu(teid), p.bytes(t)), xdplink.Redirect, "uplink_forward",
		nhL2(nhCoreVLAN).ipFrame(t, p.hop().bytes(t)))
}

// A record an older build left, without its filter and next PDR, is made
// whole by a restart, and one of this build's is kept as it is; the
// restarted daemon keeps the filter either holds exact.
func TestRecordBranchAfterRestart(t *testing.T) {
	needRecords(t)
	d := openTest(t, Options{MaxSessions: 16, N3Addresses: []netip.Addr{n3Addr}})
	// By TEID: the slot of its first PDR and of that PDR's SDF set.
	const older, kept = 0x6100, 0x6101
	first := map[uint32]uint32{older: 1, kept: 3}
	check(t, d.PutPDR(2, PDR{Far: forward(2)}))
	places := map[uint32]int{}
	for teid, slot := range first {
		check(t, d.PutSDFSet(slot, sdfSet(sdfFilter(0, "", "198.51.100.0/24"))))
		check(t, d.PutPDR(slot, PDR{Sdf: slot, Far: forward(1)}))
		check(t, d.PutUplink(onN3(teid), pdrSet(slot, 2)))
		places[teid], _, _ = d.sets.records.find(teidKey(teid))
	}
	rec := *d.sets.records.recs.at(uint32(places[older]))
	rec.Branch = upfRecordBranch{}
	d.sets.records.write(places[older], rec)
	check(t, d.Close())

	d, err := Open(d.opts)
	check(t, err)
	defer d.Close()
	if now, _, _ := d.sets.records.find(teidKey(kept)); now != places[kept] {
		t.Errorf("an exact record was rewritten: at %d, was at %d", now, places[kept])
	}
	for _, c := range []struct {
		filter, dst string
	}{{"", "198.51.100.0"}, {"203.0.113.0/24", "203.0.113.0"}} {
		for teid := range places {
			if c.filter != "" {
				check(t, d.PutSDFSet(first[teid], sdfSet(sdfFilter(0, "", c.filter))))
			}
			check(t, d.sets.settle())
			place, _, _ := d.sets.records.find(teidKey(teid))
			if b := d.sets.records.recs.at(uint32(place)).Branch; b.Next != 2 || b.SdfV4 != 1 || b.Dst != AddrKey(mustAddr(c.dst)) {
				t.Errorf("TEID %#x, filter to %s: the record holds %+v", teid, c.dst, b)
			}
		}
	}
}

// hintOf is what the hints say of the record at pos.
func (r *records) hintOf(pos int) (tag, usage, urr uint32) {
	h := r.hints.at(uint32(pos / pairPlaces)).Place[pos%pairPlaces]
	return h.Tag, h.UsageSlot, h.UrrSlot
}

// A record's hint names the usage lines its packets read next, its first
// QER's and its first URR's (the URR's alone without a QER or when they
// share a line), with its key's tag; a restart writes the hints of the
// records it keeps, which a build before them left none of.
func TestRecordHints(t *testing.T) {
	needRecords(t)
	d := openTest(t, Options{MaxSessions: 16, N3Addresses: []netip.Addr{n3Addr}})
	check(t, d.PutPDR(3, PDR{Far: forward(1), Qer: [QERsPerPDR]uint32{5}, Urr: [URRsPerPDR]uint32{6}}))
	check(t, d.PutPDR(4, PDR{Far: forward(1), Urr: [URRsPerPDR]uint32{7}}))
	check(t, d.PutPDR(5, PDR{Far: forward(1), Qer: [QERsPerPDR]uint32{8}, Urr: [URRsPerPDR]uint32{8}}))
	check(t, d.PutUplink(onN3(0x6100), pdrSet(3)))
	check(t, d.PutUplink(onN3(0x6101), pdrSet(4)))
	check(t, d.PutUplink(onN3(0x6102), pdrSet(5)))
	want := func(d *Datapath) {
		t.Helper()
		for _, c := range []struct{ teid, usage, urr uint32 }{{0x6100, 5, 6}, {0x6101, 7, 0}, {0x6102, 8, 0}} {
			k := teidKey(c.teid)
			own, _, _ := d.sets.records.find(k)
			if own < 0 {
				t.Fatalf("TEID %#x has no record", c.teid)
			}
			if tag, usage, urr := d.sets.records.hintOf(own); tag != uint32(hash(k)) || usage != c.usage || urr != c.urr {
				t.Errorf("TEID %#x: hint of tag %#x, usage lines %d and %d; want %#x, %d and %d",
					c.teid, tag, usage, urr, uint32(hash(k)), c.usage, c.urr)
			}
		}
	}
	want(d)
	clear(d.sets.records.hints.mem)
	check(t, d.Close())
	d, err := Open(d.opts)
	check(t, err)
	defer d.Close()
	want(d)
}

// The hints are read from tables of more than 65,536 sessions' records
// on, which outgrow the caches, and not below.
func TestReadAheadFromTablesPastTheCaches(t *testing.T) {
	if !recordsWritten {
		t.Skip("no records on " + runtime.GOARCH)
	}
	for sessions, want := range map[uint32]uint32{1: 0, 65536: 0, 65537: 1, 1_000_000: 1} {
		if got := readsAhead(recordBucketBits(sessions)); got != want {
			t.Errorf("%d sessions: read_ahead %d, want %d", sessions, got, want)
		}
	}
}

// pdrCounted fails unless PDR slot counted packets inner packets of
// expectUplink's: IPv4, UDP and 40 bytes.
func pdrCounted(t *testing.T, d *Datapath, slot uint32, packets uint64) {
	t.Helper()
	const inner = 20 + 8 + 40
	c, err := d.PDRCounter(slot)
	check(t, err)
	if c.Packets != packets || c.Bytes != inner*packets {
		t.Errorf("PDR %d counted %d packets, %d bytes; want %d, %d", slot, c.Packets, c.Bytes, packets, inner*packets)
	}
}

// The packets a record serves count in its place, not in its PDR's rows;
// its PDR's counter adds them, while the record is there, after it has
// moved (its old place held, then folded), and after a restart that
// finds a place taken away and not yet folded.
func TestRecordCountsInItsPlace(t *testing.T) {
	u, k, first := withRecordedTEID(t)
	r := &u.d.sets.records
	for range 3 {
		u.expectUplink(t, recordedTEID, 1)
	}
	for cpu := range u.d.counterRows() {
		if c := u.d.pdrCounter(cpu, 0); c.Packets != 0 {
			t.Errorf("CPU %d counted %d packets in PDR 0's row, want them in the record's place", cpu, c.Packets)
		}
	}
	if c := r.placeCount(first); c.Packets != 3 {
		t.Errorf("the record's place counted %d packets, want 3", c.Packets)
	}
	pdrCounted(t, u.d, 0, 3)

	// The PDR changes: its record moves, the old place is held.
	check(t, u.d.PutPDR(0, PDR{Far: forward(2)}))
	moved, _, _ := r.find(k)
	if moved == first || !r.held[first] {
		t.Fatalf("record at %d, was at %d, held %v", moved, first, r.held)
	}
	u.expectUplink(t, recordedTEID, 2)
	pdrCounted(t, u.d, 0, 4)
	check(t, u.d.sets.settle())
	if c := r.placeCount(first); c.Packets != 0 {
		t.Errorf("the place left still counts %d packets once settled", c.Packets)
	}
	pdrCounted(t, u.d, 0, 4)

	// The key takes another PDR and the run stops before the place of
	// PDR 0's record is folded.
	check(t, u.d.PutUplink(onN3(recordedTEID), pdrSet(1)))
	u.expectUplink(t, recordedTEID, 2)
	pdrCounted(t, u.d, 0, 4)
	pdrCounted(t, u.d, 1, 1)
	check(t, u.d.Close())
	d, err := Open(u.d.opts)
	check(t, err)
	defer d.Close()
	pdrCounted(t, d, 0, 4)
	pdrCounted(t, d, 1, 1)
	check(t, d.ZeroPDRCounters([]uint32{0, 1}))
	pdrCounted(t, d, 0, 0)
	pdrCounted(t, d, 1, 0)
}
