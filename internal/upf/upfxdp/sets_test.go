package upfxdp

import (
	"errors"
	"maps"
	"net/netip"
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// teidKey is the key of a TEID at the first GTP-U address, index 0.
func teidKey(teid uint32) setKey { return setKey{upfSetKindSET_TEID, uint64(NetworkOrder32(teid))} }

// sameBucket returns n TEIDs from first on whose sets share one bucket.
func sameBucket(d *Datapath, n int, first uint32) []uint32 {
	want := d.sets.bucket(teidKey(first))
	teids := []uint32{first}
	for teid := first + 1; len(teids) < n; teid++ {
		if d.sets.bucket(teidKey(teid)) == want {
			teids = append(teids, teid)
		}
	}
	return teids
}

// setsUPF is a data path with PDR slot i forwarding to next hop i+1
// (testNexthops), for telling by the frame which set a packet found.
func setsUPF(t *testing.T, maxSessions uint32) *upf {
	t.Helper()
	d := openTest(t, Options{MaxSessions: maxSessions})
	for slot, nh := range testNexthops {
		if err := d.PutNexthop(slot, Nexthop{Ifindex: 10 + slot, Dmac: [6]uint8(nh.l2.dst), Smac: [6]uint8(nh.l2.src), Valid: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for slot := range uint32(3) {
		if err := d.PutPDR(slot, PDR{Far: forward(slot + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	return attachTest(t, d, fakeIfindex, "lo", RoleAccess|RoleCore)
}

// expectUplink checks that a G-PDU for teid leaves through next hop nh, or
// is dropped as unknown when nh is 0.
func (u *upf) expectUplink(t *testing.T, teid, nh uint32) {
	t.Helper()
	p := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 40}
	in := gtpFrame(t, fromGNB, n3Addr, gpdu(teid), p.bytes(t))
	if nh == 0 {
		u.expect(t, in, xdplink.Drop, "drop_unknown_teid")
		return
	}
	testsupport.EqualFrames(t, u.expect(t, in, xdplink.Redirect, "uplink_forward"), p.hop().frame(t, l2{dst: nhL2(nh).dst, src: nhL2(nh).src}))
}

// dropRecord takes k's record away, if it has one, so that its packets
// find its set as a test left it.
func (u *upf) dropRecord(k setKey) {
	if own, _, _ := u.d.sets.records.find(k); own >= 0 {
		u.d.sets.records.clear(own)
	}
}

func (u *upf) placeOf(t *testing.T, teid uint32) place {
	t.Helper()
	at, ok := u.d.sets.where[teidKey(teid)]
	if !ok {
		t.Fatalf("TEID %#x has no set", teid)
	}
	return at
}

// A packet reads only the set of a place whose tag is its key's: a place
// that holds the key's own set under another tag is passed by.
func TestSetTag(t *testing.T) {
	u := setsUPF(t, 16)
	const teid = 0x2000
	check(t, u.d.PutUplink(onN3(teid), pdrSet(1)))
	u.expectUplink(t, teid, 2)
	at := u.placeOf(t, teid)
	placed := u.d.sets.loadIndex(at.index)
	if placed == at.slot {
		t.Fatalf("place %d holds slot %d without a tag", at.index, at.slot)
	}
	u.d.sets.storeIndex(at.index, placed^1<<31) // the same slot, another tag
	u.dropRecord(teidKey(teid))
	u.expectUplink(t, teid, 0)
	// Opening the maps again, as a restarted daemon does, tags the sets
	// it finds in their buckets as this build tags them.
	again, err := Open(u.d.opts)
	check(t, err)
	defer again.Close()
	u.expectUplink(t, teid, 2)
}

// Only a full bucket's keys are looked for in set_overflow: a key there
// whose bucket has room is not found, until the maps are opened again,
// which moves it in.
func TestOverflowOnlyForFullBuckets(t *testing.T) {
	u := setsUPF(t, 16)
	teids := sameBucket(u.d, 2, 0x3000)
	for i, teid := range teids {
		check(t, u.d.PutUplink(onN3(teid), pdrSet(uint32(i))))
	}
	// The second key's set, moved by hand from its place to set_overflow.
	moved := u.placeOf(t, teids[1])
	check(t, u.d.maps.SetOverflow.Put(teidKey(teids[1]).overflowKey(), moved.slot))
	u.d.sets.storeIndex(moved.index, 0)
	u.dropRecord(teidKey(teids[1]))
	u.expectUplink(t, teids[0], 1)
	u.expectUplink(t, teids[1], 0)
	again, err := Open(u.d.opts)
	check(t, err)
	defer again.Close()
	if at := again.sets.where[teidKey(teids[1])]; at.index != moved.index {
		t.Fatalf("reopened, the key is at %+v, want place %d", at, moved.index)
	}
	u.expectUplink(t, teids[1], 2)
	var k upfSetKey
	var slot uint32
	if it := u.d.maps.SetOverflow.Iterate(); it.Next(&k, &slot) {
		t.Fatalf("set_overflow still holds %+v", k)
	}
}

// A full bucket sends the next key to set_overflow; the packet finds keys
// in both, and a key replaced after its bucket freed up moves into it.
func TestSetOverflow(t *testing.T) {
	u := setsUPF(t, 16)
	freeBefore := len(u.d.sets.free)
	teids := sameBucket(u.d, 3, 0x1000)
	for i, teid := range teids {
		if err := u.d.PutUplink(onN3(teid), pdrSet(uint32(i))); err != nil {
			t.Fatal(err)
		}
	}
	if u.placeOf(t, teids[0]).index == noPlace || u.placeOf(t, teids[1]).index == noPlace {
		t.Fatal("the first two TEIDs of a bucket are not in it")
	}
	if u.placeOf(t, teids[2]).index != noPlace {
		t.Fatal("the third TEID of a bucket is not in set_overflow")
	}
	for i, teid := range teids {
		u.expectUplink(t, teid, uint32(i)+1)
	}

	if err := u.d.DeleteUplink(onN3(teids[0])); err != nil {
		t.Fatal(err)
	}
	u.expectUplink(t, teids[0], 0)
	u.expectUplink(t, teids[2], 3)
	if at := u.placeOf(t, teids[2]); at.index == noPlace || len(u.d.sets.overflowed) != 0 {
		t.Fatalf("the bucket's overflowed key stayed in set_overflow (%+v, %v) when a place freed", at, u.d.sets.overflowed)
	}
	if err := u.d.PutUplink(onN3(teids[2]), pdrSet(0)); err != nil {
		t.Fatal(err)
	}
	if u.placeOf(t, teids[2]).index == noPlace {
		t.Fatal("a replaced set stayed in set_overflow although its bucket has room")
	}
	var k upfSetKey
	var slot uint32
	if it := u.d.maps.SetOverflow.Iterate(); it.Next(&k, &slot) {
		t.Fatalf("set_overflow still holds %+v", k)
	}
	u.expectUplink(t, teids[2], 1)

	for _, teid := range teids[1:] {
		if err := u.d.DeleteUplink(onN3(teid)); err != nil {
			t.Fatal(err)
		}
		u.expectUplink(t, teid, 0)
	}
	taken := false
	for pos := range u.d.sets.places() {
		taken = taken || u.d.sets.loadIndex(pos) != 0
	}
	if len(u.d.sets.free) != freeBefore || taken {
		t.Errorf("after deleting every set: %d free slots (want %d), places taken: %v",
			len(u.d.sets.free), freeBefore, taken)
	}
}

// Replacing a set writes a new slot, publishes it in the same place and
// frees the old one.
func TestSetReplace(t *testing.T) {
	u := setsUPF(t, 16)
	if err := u.d.PutUplink(onN3(0x77), pdrSet(0)); err != nil {
		t.Fatal(err)
	}
	before := u.placeOf(t, 0x77)
	free := len(u.d.sets.free)
	if err := u.d.PutUplink(onN3(0x77), pdrSet(1, 0)); err != nil {
		t.Fatal(err)
	}
	after := u.placeOf(t, 0x77)
	if after.index != before.index || after.slot == before.slot || len(u.d.sets.free) != free {
		t.Errorf("replaced: %+v -> %+v, free slots %d -> %d", before, after, free, len(u.d.sets.free))
	}
	if got, err := u.d.Uplink(onN3(0x77)); err != nil || got != pdrSet(1, 0) {
		t.Errorf("Uplink = %+v, %v", got, err)
	}
	u.expectUplink(t, 0x77, 2)
}

// When every set is in use a new key is refused and changes nothing, while
// existing keys can still be replaced.
func TestSetsFull(t *testing.T) {
	u := setsUPF(t, 1)
	var n uint32
	for ; int(n) < u.d.sets.maxKeys; n++ {
		if err := u.d.PutUplink(onN3(n), pdrSet(0)); err != nil {
			t.Fatalf("key %d of %d: %v", n, u.d.sets.maxKeys, err)
		}
	}
	if err := u.d.PutDownlink(ue4, pdrSet(0)); err == nil {
		t.Fatal("a key beyond the capacity was accepted")
	}
	if _, err := u.d.Downlink(ue4); !errors.Is(err, ebpf.ErrKeyNotExist) {
		t.Errorf("the refused key is there: %v", err)
	}
	if err := u.d.PutUplink(onN3(0), pdrSet(1)); err != nil {
		t.Errorf("replacing in a full table: %v", err)
	}
	u.expectUplink(t, 0, 2)
}

// A restarted daemon finds every set where it was, in the index and in the
// overflow, drops the entries it cannot account for, and frees the rest.
func TestSetsReopen(t *testing.T) {
	u := setsUPF(t, 16)
	d := u.d
	teids := sameBucket(d, 3, 0x2000)
	for i, teid := range teids {
		if err := d.PutUplink(onN3(teid), pdrSet(uint32(i))); err != nil {
			t.Fatal(err)
		}
	}
	ue6 := netip.MustParseAddr("2001:db8:5::1")
	if err := errors.Join(d.PutDownlink(ue4, pdrSet(1)), d.PutDownlink(ue6, pdrSet(2))); err != nil {
		t.Fatal(err)
	}
	// A stray entry: a published slot in a bucket that is not its key's.
	stray := teidKey(teids[0])
	strayPos := 0
	for d.sets.loadIndex(strayPos) != 0 || d.sets.isPlaceOf(stray, strayPos) {
		strayPos++ // a free place of another bucket
	}
	d.sets.storeIndex(strayPos, d.sets.placed(stray, d.sets.where[stray].slot))
	// And an overflow entry pointing at another key's set.
	bogus := teidKey(0xdead)
	if err := d.maps.SetOverflow.Put(upfSetKey{Key: bogus.key, Kind: uint32(bogus.kind)}, d.sets.where[teidKey(teids[1])].slot); err != nil {
		t.Fatal(err)
	}
	where, free := d.sets.where, len(d.sets.free)

	again, err := Open(d.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if !maps.Equal(again.sets.where, where) || len(again.sets.free) != free {
		t.Errorf("reopened: %v with %d free, want %v with %d", again.sets.where, len(again.sets.free), where, free)
	}
	if again.sets.loadIndex(strayPos) != 0 {
		t.Error("the stray index entry survived")
	}
	var got []uint32
	for _, f := range again.UplinkFTEIDs() {
		if f.Addr != n3Addr {
			t.Errorf("UplinkFTEIDs has %v, at no address installed", f)
		}
		got = append(got, f.TEID)
	}
	slices.Sort(got)
	if !slices.Equal(got, teids) {
		t.Errorf("UplinkFTEIDs have TEIDs %v, want %v", got, teids)
	}
	ues := again.DownlinkUEs()
	if len(ues) != 2 || !slices.Contains(ues, ue4) || !slices.Contains(ues, netip.MustParseAddr("2001:db8:5::")) {
		t.Errorf("DownlinkUEs = %v", ues)
	}
	for i, teid := range teids {
		u.expectUplink(t, teid, uint32(i)+1)
	}
	u.expectUplink(t, 0xdead, 0)
}

// Sequential TEIDs and UE addresses, byte-swapped as the maps hold them,
// must spread over the buckets like random keys do (about 2-3% overflow at
// full capacity), not pile up as they do under one multiplication.
func TestBucketsSpreadSequentialKeys(t *testing.T) {
	for _, sessions := range []uint32{1000, 100_000, 1_000_000} {
		p := pdrSets{bits: indexBits(sessions*setsPerSession + 1 + spareSets)}
		load := make([]uint8, 1<<p.bits)
		overflow := 0
		for i := range sessions {
			for _, k := range []setKey{teidKey(i + 1), ueKey(netip.AddrFrom4([4]byte{100, 64 + byte(i>>16), byte(i >> 8), byte(i)}))} {
				if load[p.bucket(k)]++; int(load[p.bucket(k)]) > setWays {
					overflow++
				}
			}
		}
		if share := float64(overflow) / float64(2*sessions); share > 0.05 {
			t.Errorf("%d sessions: %.1f%% of the keys overflow", sessions, 100*share)
		}
	}
}
