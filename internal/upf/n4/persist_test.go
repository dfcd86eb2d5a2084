package n4

import (
	"bytes"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/xdp5g/xdp5g/internal/testsupport"
	"github.com/xdp5g/xdp5g/internal/upf/ippool"
	"github.com/xdp5g/xdp5g/internal/upf/n4state"
	"github.com/xdp5g/xdp5g/internal/upf/pfcp"
	"github.com/xdp5g/xdp5g/internal/upf/sdf"
	"github.com/xdp5g/xdp5g/internal/upf/session"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// everyField is a session with every field a record holds set to a value
// other than its zero, times without a monotonic reading, as read back.
func everyField(t *testing.T) (*pfcpSession, session.Slots) {
	t.Helper()
	filter, err := sdf.Parse("permit out 17 from 192.0.2.0/24 1000-2000 to assigned 53")
	fatalIf(t, err)
	filter.TOS, filter.SPI, filter.HasFlowLabel, filter.FlowLabel, filter.Bidirectional, filter.ID = sdf.TOS{Value: 0xb8, Mask: 0xfc}, 7, true, 0, true, 9
	ohr := uint8(0)
	at := func(s int64) time.Time { return time.Unix(1_800_000_000+s, 250) }
	s := &pfcpSession{
		seid: 0x1234_5678_9abc, cpSEID: 0xfeed, cpAddrs: [2]netip.Addr{netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("2001:db8::7")}, smf: pfcp.Peer{NodeID: "smf.example", Addr: netip.MustParseAddrPort("192.0.2.7:8805")},
		version: 42,
		pdrs: []session.PDR{
			{ID: 1, Precedence: 255, FARID: 1, OuterHeaderRemoval: &ohr, QERIDs: []uint32{1}, URRIDs: []uint32{3, 4},
				PDI: session.PDI{SourceInterface: session.InterfaceAccess, TEID: 0xabcdef, LocalAddress: netip.MustParseAddr("192.0.2.11"),
					UEAddress: netip.MustParsePrefix("10.45.0.3/32"), UEIPv6Prefix: netip.MustParsePrefix("2001:db8:45:3::/64"), QFI: 9,
					SDFFilters: []session.SDFFilter{{Filter: filter}}}},
			{ID: 2, Precedence: 100, FARID: 2, PDI: session.PDI{SourceInterface: session.InterfaceCore,
				UEAddress: netip.MustParsePrefix("2001:db8:1:2::/64")}},
			{ID: 3, Precedence: 200, FARID: 1, OuterHeaderRemoval: &ohr, PDI: session.PDI{SourceInterface: session.InterfaceAccess,
				TEID: 0xabcdf0, LocalAddress: netip.MustParseAddr("2001:db8:3::10")}},
		},
		fars: []session.FAR{
			{ID: 1, Action: session.ActionForward, Forwarding: session.Forwarding{DestinationInterface: session.InterfaceCore, NextHop: netip.MustParseAddr("10.100.6.9")},
				Duplicating: &session.Forwarding{DestinationInterface: session.InterfaceLIFunction, DSCP: 10,
					OuterHeaderCreation: &session.OuterHeaderCreation{TEID: 0x77, Peer: netip.MustParseAddr("192.0.2.99"), Port: 2152}}},
			{ID: 2, Action: session.ActionBuffer, Forwarding: session.Forwarding{DestinationInterface: session.InterfaceAccess, DSCP: 46,
				OuterHeaderCreation: &session.OuterHeaderCreation{TEID: 0x100, Peer: netip.MustParseAddr("192.0.2.50"), Port: 2152}},
				Duplicating: &session.Forwarding{DestinationInterface: session.InterfaceCore, NextHop: netip.MustParseAddr("10.100.6.10")}},
			{ID: 3, Action: session.ActionForward, Forwarding: session.Forwarding{DestinationInterface: session.InterfaceAccess,
				OuterHeaderCreation: &session.OuterHeaderCreation{TEID: 0x200, Peer: netip.MustParseAddr("2001:db8:5::50")}}},
		},
		qers: []session.QER{{ID: 1, GateULClosed: true, MBRUL: 1e6, MBRDL: 2e6, GBRUL: 3e5, GBRDL: 4e5, QFI: 9, RQI: true}},
		urrs: map[uint32]urr{
			3: {id: 3, volume: true, duration: true, triggers: trigPERIO | trigVOLTH | trigQUVTI, period: time.Minute,
				volThreshold: [3]uint64{1000, 0, 500}, volQuota: [3]uint64{1e6, 2e6, 3e6}, timeThreshold: time.Hour, timeQuota: 2 * time.Hour,
				quotaValidity: 30 * time.Second, beforeQoS: true, immediateStart: true, countPackets: true},
			4: {id: 4, volume: true, triggers: trigSTART},
		},
		meters: map[uint32]*meter{
			3: {start: at(1), base: upfxdp.URRUsage{Bytes: [3]uint64{10, 6, 4}, Packets: [3]uint64{3, 2, 1}, FirstPacket: at(2), LastPacket: at(3)},
				periodStart: at(4), seqn: 5, started: true, idlePackets: 7, quotaBase: [3]uint64{8, 9, 10}, exhausted: true,
				timeQuotaStart: at(5), blocked: 11, quotaGiven: at(6), expired: true},
			4: {start: at(7), periodStart: at(7), timeQuotaStart: at(7), quotaGiven: at(7)},
		},
		chosenTEIDs: []uint32{0xabcdef},
		ue4:         netip.MustParseAddr("10.45.0.3"),
		bar:         &bar{id: 5, suggested: 10, ddnDelay: 50 * time.Millisecond},
		notify:      map[uint32]bool{2: true},
		csids:       csidSets{{typ: 0, addr: "\xc0\x00\x02\x07"}: {1, 2}},
	}
	slots := session.Slots{PDR: []session.RuleSlot{{ID: 1, Slot: 0}, {ID: 2, Slot: 17}}, QER: []session.RuleSlot{{ID: 1, Slot: 3}},
		URR: []session.RuleSlot{{ID: 3, Slot: 4}, {ID: 4, Slot: 5}}, SDF: []session.RuleSlot{{ID: 1, Slot: 6}},
		Buffer: []session.RuleSlot{{ID: 2, Slot: 8}}}
	return s, slots
}

// A session's record reads back as the session, field for field.
func TestSessionRecordRoundTrip(t *testing.T) {
	s, slots := everyField(t)
	var e n4state.Enc
	encodeSession(&e, s, s.version, slots)
	d := n4state.NewDec(e.B)
	got, v, gotSlots := decodeSession(d, NewSaved().shards[0])
	fatalIf(t, d.Done())
	if v != s.version || !reflect.DeepEqual(got, s) {
		t.Errorf("read back version %d\n%+v\nwant version %d\n%+v", v, got, s.version, s)
	}
	if !reflect.DeepEqual(gotSlots, slots) {
		t.Errorf("slots read back %+v, want %+v", gotSlots, slots)
	}
	// A record of an earlier version ends before the CP F-SEID's
	// addresses, and reads without them.
	earlier := len(e.B) - 2 - len(s.cpAddrs[0].AsSlice()) - len(s.cpAddrs[1].AsSlice())
	for cut := range len(e.B) { // and a record cut short elsewhere is refused, not misread
		d := n4state.NewDec(e.B[:cut])
		got, _, _ := decodeSession(d, NewSaved().shards[0])
		switch err := d.Done(); {
		case cut == earlier && (err != nil || got.cpAddrs != [2]netip.Addr{}):
			t.Errorf("a record of an earlier version read back with CP F-SEID addresses %v, %v", got.cpAddrs, err)
		case cut != earlier && err == nil:
			t.Fatalf("a record cut at %d of %d octets read without an error", cut, len(e.B))
		}
	}
}

// journaled is e's handler keeping its state in a journal of its own.
func journaled(t *testing.T, e *env) (dir string) {
	t.Helper()
	dir = t.TempDir()
	l, _, err := n4state.Open(n4state.Options{Dir: dir}, nil)
	fatalIf(t, err)
	e.h.cfg.Journal = l
	t.Cleanup(func() { l.Close() })
	return dir
}

// restarted replays the journal in dir into a new store over e's data
// path and a new handler, as a restarted daemon does, and checks what the
// store took over.
func restarted(t *testing.T, e *env, dir string) (*Handler, *session.Store, *ippool.Pool) {
	t.Helper()
	h, store, pool, res := restart(t, e, dir)
	if res.Kept != len(h.sessions) || len(res.Repaired) != 0 || res.StrayKeys != 0 {
		t.Errorf("the store restored %+v of %d sessions; want them all in place", res, len(h.sessions))
	}
	return h, store, pool
}

// restart replays the journal in dir into a new store over e's data path
// and a new handler, as a restarted daemon does, and says what the store
// did.
func restart(t *testing.T, e *env, dir string) (*Handler, *session.Store, *ippool.Pool, session.Restored) {
	t.Helper()
	fatalIf(t, e.h.cfg.Journal.Close())
	saved := NewSaved()
	l, rec, err := n4state.Open(n4state.Options{Dir: dir}, func(kind byte, value []byte) error {
		_, err := saved.Replay(kind, value)
		return err
	})
	fatalIf(t, err)
	t.Cleanup(func() { l.Close() })
	fatalIf(t, saved.Finish())
	if !rec.Restored {
		t.Fatalf("the journal was not restored: %s", rec.Reason)
	}
	store := session.NewStore(e.dp, e.nh, nil)
	store.SetBuffers(e.buffers)
	res, err := store.Restore(nil, saved.Kept())
	fatalIf(t, err)
	pool, err := ippool.New(uePool)
	fatalIf(t, err)
	h := New(Config{Store: store, N3: []netip.Addr{n3}, UEPool: pool, Buffers: e.buffers, Journal: l, Restored: saved,
		Repaired: res.Repaired})
	return h, store, pool, res
}

// record is a session's record, for comparing sessions whatever their
// times' monotonic readings.
func record(t *testing.T, h *Handler, seid uint64) []byte {
	t.Helper()
	s := h.sessions[seid]
	if s == nil {
		return nil
	}
	slots, _ := h.cfg.Store.Slots(seid)
	var e n4state.Enc
	encodeSession(&e, s, s.version, slots)
	return e.B
}

// A handler restarted from its journal has the sessions it had, as the
// requests left them, with the UPF's choices taken again: the TEIDs it
// chose, the UE addresses in their pool; the timed URRs are timed again,
// and the restarted handler serves requests on them.
func TestHandlerRestoresItsSessions(t *testing.T) {
	e := newEnv(t)
	dir := journaled(t, e)
	establish := func(cpSEID uint64, extra ...[]byte) uint64 {
		return e.establish("smf", append([][]byte{nodeIDv4("127.0.0.4"), cpFSEID(cpSEID, "127.0.0.4"),
			createPDR(pdrID(1), precedence(255), pdi(sourceInterface(ifAccess), fteidChooseAny(), ueChooseV4(false)),
				outerHeaderRemoval(0), farID(1), qerID(1), urrID(1)),
			createFAR(farID(1), applyAction(aaFORW), fwdParams(destinationInterface(ifCore))),
			createQER(1, gateStatus(0, 0), bitRate(tMBR, 10000, 20000)),
			createURR(1, mmVOLUM, rtgPERIO|rtgVOLTH, measurementPeriod(60), volumeThreshold(1e6))}, extra...)...).upSEID(t)
	}
	kept := establish(0x51, fqCSID("127.0.0.4", 3))
	gone := establish(0x52)
	e.modify("smf", kept, createBAR(5, 3), createPDR(pdrID(2), precedence(255), pdi(sourceInterface(ifCore), ueIPv4("10.45.0.1", true)), farID(2)),
		createFAR(farID(2), applyAction(aaBUFF|aaNOCP|aaDUPL), barID(5),
			dupParams(destinationInterface(ifLIFunction), ohcGTPU(0x77, collector.String())))).expect(t, causeAccepted, nil, nil)
	e.delete("smf", gone).expect(t, causeAccepted, nil, nil)

	want := record(t, e.h, kept)
	chosen := maps.Clone(e.h.chosen)
	dupls, err := e.dp.Dupls()
	fatalIf(t, err)

	h, _, pool := restarted(t, e, dir)
	if got, err := e.dp.Dupls(); err != nil || len(got) != 1 || !reflect.DeepEqual(got, dupls) {
		t.Errorf("duplicating parameters after the restart %+v (%v), want %+v", got, err, dupls)
	}
	if got := record(t, h, kept); !bytes.Equal(got, want) {
		t.Errorf("the restored session's record\n% x\nwant\n% x", got, want)
	}
	if h.sessions[gone] != nil || len(h.sessions) != 1 {
		t.Errorf("the restored handler has sessions %v; want %d alone", slices.Collect(maps.Keys(h.sessions)), kept)
	}
	for teid := range chosen { // the store's keys keep them from being chosen again
		if seid, ok := h.cfg.Store.KeyOwner(session.PDR{PDI: session.PDI{SourceInterface: session.InterfaceAccess, TEID: teid}}); !ok || seid != kept {
			t.Errorf("the TEID %#x the session chose is not its in the store", teid)
		}
	}
	if pool.Allocated() != 1 || pool.Reserve(h.sessions[kept].ue4) == nil {
		t.Errorf("the pool has %d addresses allocated; want the restored session's %s taken", pool.Allocated(), h.sessions[kept].ue4)
	}
	if !h.timed[meterKey{kept, 1}] {
		t.Error("the periodic URR is not timed after the restart")
	}
	e.h = h
	// The restored session's CP F-SEID names it still; the deleted one's is free.
	e.establish("smf", nodeIDv4("127.0.0.4"), cpFSEID(0x51, "127.0.0.4")).expect(t, causeIncorrectIE, nil, offendingIE(tFSEID))
	e.delete("smf", establish(0x52)).expect(t, causeAccepted, nil, nil)
	e.modify("smf", kept, updateFAR(farID(2), applyAction(aaFORW), updFwdParams(destinationInterface(ifAccess), ohcGTPU(0x300, gnb)))).
		expect(t, causeAccepted, nil, nil)
	e.delete("smf", kept).expect(t, causeAccepted, nil, nil)
}

// A state written by a build that let two sessions share a CP F-SEID
// restores both: each can be modified and deleted, and the F-SEID stays
// taken until the last of them is deleted.
func TestRestoredSessionsSharingACPFSEID(t *testing.T) {
	e := newEnv(t)
	dir := journaled(t, e)
	first := e.establish("smf", open5gs(0x61, fixedUE("10.60.0.1"), 0x0a0b0c0d)...).upSEID(t)
	clear(e.h.byCP.owner) // as such a build, which had no index
	second := e.establish("smf", open5gs(0x61, fixedUE("10.60.0.2"), 0x0a0b0c0e)...).upSEID(t)

	e.h, _, _ = restarted(t, e, dir)
	if len(e.h.sessions) != 2 {
		t.Fatalf("the restored handler has sessions %v; want %d and %d", slices.Collect(maps.Keys(e.h.sessions)), first, second)
	}
	for _, seid := range []uint64{first, second} {
		e.modify("smf", seid, updateFAR(farID(2), applyAction(aaFORW), updFwdParams(destinationInterface(ifAccess), ohcGTPU(0x300, gnb)))).
			expect(t, causeAccepted, nil, nil)
		e.modify("smf", seid, cpFSEID(0x61, "127.0.0.4")).expect(t, causeAccepted, nil, nil)
	}
	another := open5gs(0x61, fixedUE("10.60.0.3"), 0x0a0b0c0f)
	for _, seid := range []uint64{second, first} {
		e.establish("smf", another...).expect(t, causeIncorrectIE, nil, offendingIE(tFSEID))
		e.delete("smf", seid).expect(t, causeAccepted, nil, nil)
	}
	e.establish("smf", another...).upSEID(t)
}

// A session that the data path had otherwise than the journal (a request
// applied as the previous run stopped, before its entry was written) is
// installed again at the restart, in new slots, and recorded with them:
// the restart after takes it over in place.
func TestRepairedSessionRecordedWithItsNewSlots(t *testing.T) {
	e := newEnv(t)
	dir := journaled(t, e)
	seid := e.establish("smf", nodeIDv4("127.0.0.4"), cpFSEID(0x61, "127.0.0.4"),
		createPDR(pdrID(1), precedence(255), pdi(sourceInterface(ifAccess), fteidChooseAny()), outerHeaderRemoval(0), farID(1)),
		createFAR(farID(1), applyAction(aaFORW), fwdParams(destinationInterface(ifCore)))).upSEID(t)
	journal := e.h.cfg.Journal
	e.h.cfg.Journal = nil // applied, not written
	e.modify("smf", seid, updateFAR(farID(1), applyAction(aaDROP))).expect(t, causeAccepted, nil, nil)
	e.h.cfg.Journal = journal
	for run, want := range []int{1, 0} {
		h, _, _, res := restart(t, e, dir)
		if len(res.Repaired)+res.Kept != 1 || len(res.Repaired) != want {
			t.Errorf("restart %d: the store restored %+v; want %d session installed again", run+1, res, want)
		}
		e.h = h
	}
}

// A compaction that runs while sessions come and go writes every session
// that was there when it began and is still there (taken a thousand at a
// time, not at once): the handler restarted from the compacted journal has
// exactly the sessions it had.
func TestCompactionWhileSessionsChange(t *testing.T) {
	e := newSizedEnv(t, 4096)
	dir := journaled(t, e)
	l := e.h.cfg.Journal
	l.Compact(e.h.Snapshot)
	establish := func(cpSEID uint64) uint64 {
		return e.establish("smf", nodeIDv4("127.0.0.4"), cpFSEID(cpSEID, "127.0.0.4"),
			createPDR(pdrID(1), precedence(255), pdi(sourceInterface(ifAccess), fteidChooseAny()), outerHeaderRemoval(0), farID(1)),
			createFAR(farID(1), applyAction(aaFORW), fwdParams(destinationInterface(ifCore)))).upSEID(t)
	}
	var seids []uint64
	for i := range 2500 {
		seids = append(seids, establish(uint64(i+1)))
	}
	compacted := make(chan struct{})
	go func() { l.CompactNow(); close(compacted) }()
	changed := 0
	for ; ; changed++ {
		select {
		case <-compacted:
		default:
			seids = append(seids, establish(uint64(2500+changed+1)))
			e.delete("smf", seids[0]).expect(t, causeAccepted, nil, nil)
			seids = seids[1:]
			continue
		}
		break
	}
	t.Logf("%d sessions established and as many deleted while the compaction ran", changed)
	want := map[uint64][]byte{}
	for _, seid := range seids {
		want[seid] = record(t, e.h, seid)
	}
	h, _, _ := restarted(t, e, dir)
	if len(h.sessions) != len(want) {
		t.Errorf("the restored handler has %d sessions, want %d", len(h.sessions), len(want))
	}
	for seid, rec := range want {
		if got := record(t, h, seid); !bytes.Equal(got, rec) {
			t.Fatalf("session %#x restored as\n% x\nwant\n% x", seid, got, rec)
		}
	}
}

// A session installed again in a data path whose URR counts started anew
// (its maps detached, and pinned again, say for another max_sessions)
// measures from those: its next report says what was counted since, not
// the new counts less what the old ones had reached, which wrapped around
// to some 2^64 octets; and its quota stays what was left of it.
func TestRepairedSessionMeasuresFromCountsStartedAnew(t *testing.T) {
	e := newEnv(t)
	dir := journaled(t, e)
	seid := e.establish("smf", nodeIDv4("127.0.0.4"), cpFSEID(0x71, "127.0.0.4"),
		createPDR(pdrID(1), precedence(255), pdi(sourceInterface(ifAccess), fteidChooseAny()), outerHeaderRemoval(0), farID(1), urrID(1)),
		createFAR(farID(1), applyAction(aaFORW), fwdParams(destinationInterface(ifCore))),
		createURR(1, mmVOLUM, rtgVOLQU, volumeQuota(10000))).upSEID(t)
	// What a report of 6,400 octets uplink leaves, recorded.
	e.h.apart(func() {
		s := e.h.sessions[seid]
		m := *s.meters[1]
		m.base.Bytes = [3]uint64{6400, 6400, 0}
		m.base.Packets = [3]uint64{50, 50, 0}
		s.meters[1] = &m
		e.h.touched[seid] = true
	})
	// The maps detached: the restart's data path is a fresh one.
	fresh, err := upfxdp.Open(upfxdp.Options{PinPath: testsupport.PinDir(t), MaxSessions: 64, N3Addresses: []netip.Addr{n3},
		N9Addresses: []netip.Addr{n9}})
	testsupport.CheckLoad(t, err)
	t.Cleanup(func() { fresh.Close() })
	e.dp = fresh
	h, store, _, res := restart(t, e, dir)
	if len(res.Repaired) != 1 {
		t.Fatalf("the store restored %+v; want the session installed again", res)
	}
	e.h, e.store = h, store
	r := e.modify("smf", seid, queryURR(1))
	r.expect(t, causeAccepted, nil, nil)
	q := all(r.ies, tUsageReportModResp)
	if len(q) != 1 {
		t.Fatalf("query response %+v", r.ies)
	}
	if u := decodeUsage(t, q[0]); u.tvol != 0 || u.uvol != 0 || u.dvol != 0 {
		t.Errorf("the report after the restart says %d octets (%d up, %d down); want 0", u.tvol, u.uvol, u.dvol)
	}
	usage, err := store.URRUsage(seid, 1)
	fatalIf(t, err)
	slots, _ := store.Slots(seid)
	limits, err := fresh.URRLimits(slots.URR[0].Slot)
	fatalIf(t, err)
	if left := limits.Quota[upfxdp.URRTotal] - usage.Bytes[upfxdp.URRTotal]; left != 10000-6400 {
		t.Errorf("the data path lets %d octets more through; want the quota's 3600 left", left)
	}
}
