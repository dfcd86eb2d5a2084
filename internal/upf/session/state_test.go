package session

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/xdp5g/xdp5g/internal/upf/nexthop"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// pfcpSession is figure10 as an SMF would have it installed, on keys of
// its own (TEID 200, UE 10.1.3.28) and with a URR.
func pfcpSession() Session {
	s := withURRs([]URR{{ID: 1}})
	s.SEID, s.Origin = 2, OriginPFCP
	for i := range s.PDRs {
		s.PDRs[i].PDI.TEID = 200
		s.PDRs[i].PDI.UEAddress = netip.MustParsePrefix("10.1.3.28/32")
	}
	return s
}

// A restart keeps the REST API's sessions and, without their PFCP state,
// drops the SMFs': the state file holds the REST API's alone, so the keys
// of the others leave the data path, their slots are given back, and their
// TEIDs and UE addresses are free for new sessions. A state file of a
// version that saved the SMFs' sessions there too has them dropped as
// well.
func TestRestoreWithoutPFCPStateDropsPFCPSessions(t *testing.T) {
	e := newStoreEnv(t)
	check(t, e.store.Create(figure10()))
	check(t, e.store.Create(pfcpSession()))
	saved, err := e.store.MarshalState()
	check(t, err)
	// REST sessions are saved as before origins were recorded, so older
	// state files read the same.
	var raw struct{ Sessions []map[string]any }
	check(t, json.Unmarshal(saved, &raw))
	if len(raw.Sessions) != 1 || raw.Sessions[0]["SEID"] != 1.0 || raw.Sessions[0]["Origin"] != nil {
		t.Errorf("saved %v; want figure10 alone, without an origin", raw.Sessions)
	}
	older, err := json.Marshal(state{Sessions: []*installed{e.store.sessions[1], e.store.sessions[2]}})
	check(t, err)

	for _, c := range []struct {
		name               string
		saved              []byte
		dropped, strayKeys int
	}{{"state file of the REST API's sessions", saved, 0, 2}, {"state file with the SMFs' sessions", older, 1, 2}} {
		t.Run(c.name, func(t *testing.T) {
			restored := e.newStore()
			res, err := restored.Restore(c.saved, nil)
			check(t, err)
			if res.Dropped != c.dropped || res.StrayKeys != c.strayKeys || res.Sessions != 1 {
				t.Errorf("restored %+v; want %d dropped, %d stray keys, 1 session", res, c.dropped, c.strayKeys)
			}
			if got := restored.List(); len(got) != 1 || !reflect.DeepEqual(got[0], figure10()) {
				t.Fatalf("restored %+v, want figure10 alone", got)
			}
			if _, err := e.dp.Uplink(atN3(100)); err != nil {
				t.Errorf("the REST session's TEID: %v", err)
			}
			if _, err := e.dp.Uplink(atN3(200)); err == nil {
				t.Error("the PFCP session's TEID is still in the data path")
			}
			if _, err := e.dp.Downlink(netip.MustParseAddr("10.1.3.28")); err == nil {
				t.Error("the PFCP session's UE address is still in the data path")
			}
			if n, want := restored.pdrSlots.InUse(), len(figure10().PDRs); n != want {
				t.Errorf("%d PDR slots in use, want %d", n, want)
			}
			if n := restored.urrSlots.InUse(); n != 0 {
				t.Errorf("%d URR slots in use, want 0: the dropped session's URR kept its slot", n)
			}
			check(t, restored.Create(pfcpSession()))
			if _, err := e.dp.Uplink(atN3(200)); err != nil {
				t.Errorf("TEID 200 after a new session took it: %v", err)
			}
		})
	}
}

// A saved origin this version does not know stops the restore before it
// changes anything.
func TestRestoreRefusesAnUnknownOrigin(t *testing.T) {
	e := newStoreEnv(t)
	check(t, e.store.Create(figure10()))
	saved, err := e.store.MarshalState()
	check(t, err)
	saved = bytes.Replace(saved, []byte(`"SEID":1,`), []byte(`"SEID":1,"Origin":"smf",`), 1)
	before := e.snapshot(t)

	restored := e.newStore()
	if _, err := restored.Restore(saved, nil); err == nil || !strings.Contains(err.Error(), `unknown session origin "smf"`) {
		t.Fatalf("Restore = %v, want an error naming the origin", err)
	}
	if restored.Len() != 0 || e.snapshot(t) != before {
		t.Errorf("a refused restore changed the store or the data path")
	}
}

// kept is a session of e.store as its PFCP state keeps it.
func (e *storeEnv) kept(t *testing.T, seid uint64) Kept {
	t.Helper()
	sess, ok := e.store.Get(seid)
	slots, ok2 := e.store.Slots(seid)
	if !ok || !ok2 {
		t.Fatalf("no session %d", seid)
	}
	return Kept{Session: sess, Slots: slots}
}

// restartResolver is a restarted daemon's next-hop resolver over e's data
// path, in place of e's.
func (e *storeEnv) restartResolver(t *testing.T) {
	t.Helper()
	check(t, e.nh.Close())
	ns, err := netns.GetFromName(e.ns)
	check(t, err)
	defer ns.Close()
	e.nh, err = nexthop.New(e.dp, ns, nil)
	check(t, err)
	t.Cleanup(func() { e.nh.Close() })
}

// A kept PFCP session that the data path holds as kept is taken over in
// place: its keys keep pointing at the same slots, its URRs keep their
// counts, the next hop of its gNB keeps its slot, and it changes and goes
// as any other.
func TestRestoreTakesOverKeptSessionsInPlace(t *testing.T) {
	e := newStoreEnv(t)
	check(t, e.store.Create(figure10()))
	check(t, e.store.Create(pfcpSession()))
	kept := e.kept(t, 2)
	urrSlot := kept.Slots.URR[0].Slot
	counted := rawURR{Bytes: [3]uint64{1500, 1000, 500}, Packets: [3]uint64{3, 2, 1}}
	check(t, e.urrMap(t).Put(urrSlot, &counted))
	ue := netip.MustParseAddr("10.1.3.28")
	ul, err := e.dp.Uplink(atN3(200))
	check(t, err)
	dl, err := e.dp.Downlink(ue)
	check(t, err)
	dlPDR := e.firstPDR(t, dl)
	saved, err := e.store.MarshalState()
	check(t, err)

	e.restartResolver(t)
	restored := e.newStore()
	res, err := restored.Restore(saved, []Kept{kept})
	check(t, err)
	if res.Kept != 1 || len(res.Repaired) != 0 || res.StrayKeys != 0 || res.Sessions != 1 {
		t.Errorf("restored %+v; want the REST session and the kept one in place", res)
	}
	if got, ok := restored.Get(2); !ok || !reflect.DeepEqual(got, pfcpSession()) {
		t.Errorf("the kept session is %+v, want %+v", got, pfcpSession())
	}
	if slots, _ := restored.Slots(2); !reflect.DeepEqual(slots, kept.Slots) {
		t.Errorf("its slots are %+v, want %+v", slots, kept.Slots)
	}
	if now, err := e.dp.Uplink(atN3(200)); err != nil || now != ul {
		t.Errorf("its uplink set is %+v (%v), was %+v", now, err, ul)
	}
	if now, err := e.dp.Downlink(ue); err != nil || now != dl || e.firstPDR(t, now) != dlPDR {
		t.Errorf("its downlink set or PDR changed: the next hop's slot %d was %d", e.firstPDR(t, now).Far.Nexthop, dlPDR.Far.Nexthop)
	}
	if usage, err := restored.URRUsage(2, 1); err != nil || usage.Bytes != counted.Bytes || usage.Packets != counted.Packets {
		t.Errorf("its URR counted %+v (%v), want %v bytes, %v packets", usage, err, counted.Bytes, counted.Packets)
	}
	if n, want := restored.pdrSlots.InUse(), 4; n != want {
		t.Errorf("%d PDR slots in use, want %d", n, want)
	}
	if seid, _, ok := restored.URRBySlot(urrSlot); !ok || seid != 2 {
		t.Errorf("the URR's slot names session %d (%v)", seid, ok)
	}
	// New sessions take other slots than the kept one's.
	kept2 := pfcpSession()
	kept2.SEID = 3
	for i := range kept2.PDRs {
		kept2.PDRs[i].PDI.TEID = 300
		kept2.PDRs[i].PDI.UEAddress = netip.MustParsePrefix("10.1.3.29/32")
	}
	check(t, restored.Create(kept2))
	taken, _ := restored.Slots(3)
	for i, slots := range [][2][]RuleSlot{{kept.Slots.PDR, taken.PDR}, {kept.Slots.URR, taken.URR}} {
		for _, a := range slots[0] {
			for _, b := range slots[1] {
				if a.Slot == b.Slot {
					t.Errorf("a new session took slot %d of kind %d, the kept session's", b.Slot, i)
				}
			}
		}
	}
	moved := pfcpSession()
	moved.FARs[0].OuterHeaderCreation.TEID = 101
	check(t, restored.Replace(moved))
	check(t, restored.Delete(2))
	if _, err := e.dp.Uplink(atN3(200)); err == nil {
		t.Error("the deleted session's TEID is still in the data path")
	}
}

// The data path may hold a kept session otherwise than kept: a request
// changed or deleted it after the state last recorded it, and the process
// stopped before it could record that. Such a session is installed again
// as kept, its URRs keeping their slots and counts; a session installed
// and never recorded is removed.
func TestRestoreRepairsWhatTheStateDoesNotHave(t *testing.T) {
	e := newStoreEnv(t)
	changed, deleted, unrecorded := pfcpSession(), pfcpSession(), pfcpSession()
	deleted.SEID, unrecorded.SEID = 3, 4
	for i, s := range []*Session{&deleted, &unrecorded} {
		for j := range s.PDRs {
			s.PDRs[j].PDI.TEID = uint32(300 + i)
			s.PDRs[j].PDI.UEAddress = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 1, 3, byte(40 + i)}), 32)
		}
	}
	check(t, e.store.Create(changed))
	check(t, e.store.Create(deleted))
	kept := []Kept{e.kept(t, 2), e.kept(t, 3)}
	urrSlot := kept[0].Slots.URR[0].Slot
	counted := rawURR{Bytes: [3]uint64{700, 300, 400}, Packets: [3]uint64{2, 1, 1}}
	check(t, e.urrMap(t).Put(urrSlot, &counted))
	// What the state does not have.
	moved := pfcpSession()
	moved.FARs[0].OuterHeaderCreation.TEID = 101
	check(t, e.store.Replace(moved))
	check(t, e.store.Delete(3))
	check(t, e.store.Create(unrecorded))

	e.restartResolver(t)
	restored := e.newStore()
	res, err := restored.Restore(nil, kept)
	check(t, err)
	slices.Sort(res.Repaired)
	if res.Kept != 0 || !reflect.DeepEqual(res.Repaired, []uint64{2, 3}) || res.StrayKeys != 2 {
		t.Errorf("restored %+v; want sessions 2 and 3 repaired, the 2 keys of session 4 removed", res)
	}
	for _, k := range kept {
		if got, ok := restored.Get(k.Session.SEID); !ok || !reflect.DeepEqual(got, k.Session) {
			t.Errorf("session %d is %+v, want it as kept", k.Session.SEID, got)
		}
	}
	dl, err := e.dp.Downlink(netip.MustParseAddr("10.1.3.28"))
	check(t, err)
	if teid := e.firstPDR(t, dl).Far.Teid; teid != upfxdp.NetworkOrder32(100) {
		t.Errorf("session 2 tunnels to TEID %d, want the kept 100", upfxdp.NetworkOrder32(teid))
	}
	if slots, _ := restored.Slots(2); slots.URR[0].Slot != urrSlot {
		t.Errorf("session 2's URR moved from slot %d to %d", urrSlot, slots.URR[0].Slot)
	}
	if usage, err := restored.URRUsage(2, 1); err != nil || usage.Bytes != counted.Bytes {
		t.Errorf("session 2's URR counted %+v (%v), want %v bytes", usage, err, counted.Bytes)
	}
	if _, err := e.dp.Uplink(atN3(300)); err != nil {
		t.Errorf("session 3's TEID is not in the data path again: %v", err)
	}
	if _, err := e.dp.Uplink(atN3(301)); err == nil {
		t.Error("the unrecorded session's TEID is still in the data path")
	}
	if n, want := restored.pdrSlots.InUse(), 4; n != want {
		t.Errorf("%d PDR slots in use, want %d", n, want)
	}
}

// A data path detached and pinned again for fewer sessions (max_sessions
// lowered) takes the REST API's sessions into slots of its own tables: a
// slot the state names past them, where the larger one had the session's
// PDRs and URRs, is none to keep, and the sessions' counters and usage
// read back.
func TestRestoreIntoSmallerMaps(t *testing.T) {
	large, small := newStoreEnvSized(t, 1024), newStoreEnvSized(t, 1)
	sess := withURRs([]URR{{ID: 1}})
	check(t, large.store.Create(sess))
	saved, err := large.store.MarshalState()
	check(t, err)
	// The PDRs at the large tables' top, as a full data path has them.
	var state struct{ Sessions []map[string]any }
	check(t, json.Unmarshal(saved, &state))
	pdrs := state.Sessions[0]["pdrSlots"].(map[string]any)
	top := large.dp.PDRCapacity()
	for id := range pdrs {
		top--
		pdrs[id] = top
	}
	saved, err = json.Marshal(state)
	check(t, err)

	if _, err := small.store.Restore(saved, nil); err != nil {
		t.Fatalf("restoring %s into the smaller maps: %v", saved, err)
	}
	slots, _ := small.store.Slots(sess.SEID)
	for _, e := range slots.PDR {
		if e.Slot >= small.dp.PDRCapacity() {
			t.Errorf("PDR %d in slot %d, past the small table", e.ID, e.Slot)
		}
	}
	for _, e := range slots.URR {
		if e.Slot >= small.dp.URRCapacity() {
			t.Errorf("URR %d in slot %d, past the small table", e.ID, e.Slot)
		}
	}
	if _, err := small.store.PDRCounters(sess.SEID); err != nil {
		t.Error(err)
	}
	if _, err := small.store.URRUsage(sess.SEID, 1); err != nil {
		t.Error(err)
	}
}

// A REST session saved on the URR slot that a kept PFCP session holds too
// (a run without the pfcp section freed the slot, a REST session took it,
// and the section came back) does not share it: it counts in a slot of its
// own, and the slot stays the PFCP session's.
func TestRestoreGivesAURRSlotClaimedTwiceToOne(t *testing.T) {
	e := newStoreEnv(t)
	check(t, e.store.Create(withURRs([]URR{{ID: 1}})))
	check(t, e.store.Create(pfcpSession()))
	kept := e.kept(t, 2)
	saved, err := e.store.MarshalState()
	check(t, err)
	var state struct{ Sessions []map[string]any }
	check(t, json.Unmarshal(saved, &state))
	state.Sessions[0]["urrSlots"] = map[string]any{"1": kept.Slots.URR[0].Slot}
	saved, err = json.Marshal(state)
	check(t, err)

	e.restartResolver(t)
	restored := e.newStore()
	_, err = restored.Restore(saved, []Kept{kept})
	check(t, err)
	rest, _ := restored.Slots(1)
	if rest.URR[0].Slot == kept.Slots.URR[0].Slot {
		t.Errorf("the REST session counts in slot %d, the PFCP session's", rest.URR[0].Slot)
	}
	if seid, _, ok := restored.URRBySlot(kept.Slots.URR[0].Slot); !ok || seid != 2 {
		t.Errorf("the PFCP session's URR slot names session %d (%v)", seid, ok)
	}
}
