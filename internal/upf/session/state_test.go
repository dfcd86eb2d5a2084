package session

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"reflect"
	"strings"
	"testing"
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

// A restart keeps the REST API's sessions and drops the SMFs': their keys
// leave the data path, their slots are given back, and their TEIDs and UE
// addresses are free for new sessions.
func TestRestoreDropsPFCPSessions(t *testing.T) {
	e := newStoreEnv(t)
	check(t, e.store.Create(figure10()))
	check(t, e.store.Create(pfcpSession()))
	saved, err := e.store.MarshalState()
	check(t, err)
	// REST sessions are saved as before origins were recorded, so older
	// state files read the same.
	var raw struct{ Sessions []map[string]any }
	check(t, json.Unmarshal(saved, &raw))
	for _, s := range raw.Sessions {
		if origin, ok := s["Origin"]; ok != (s["SEID"] == 2.0) || ok && origin != "pfcp" {
			t.Errorf("session %v saved with origin %v", s["SEID"], origin)
		}
	}

	restored := e.newStore()
	dropped, err := restored.Restore(saved)
	check(t, err)
	if dropped != 1 {
		t.Errorf("%d sessions dropped, want 1", dropped)
	}
	if got := restored.List(); len(got) != 1 || !reflect.DeepEqual(got[0], figure10()) {
		t.Fatalf("restored %+v, want figure10 alone", got)
	}
	if _, err := e.dp.Uplink(100); err != nil {
		t.Errorf("the REST session's TEID: %v", err)
	}
	if _, err := e.dp.Uplink(200); err == nil {
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
	if _, err := e.dp.Uplink(200); err != nil {
		t.Errorf("TEID 200 after a new session took it: %v", err)
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
	if _, err := restored.Restore(saved); err == nil || !strings.Contains(err.Error(), `unknown session origin "smf"`) {
		t.Fatalf("Restore = %v, want an error naming the origin", err)
	}
	if restored.Len() != 0 || e.snapshot(t) != before {
		t.Errorf("a refused restore changed the store or the data path")
	}
}
