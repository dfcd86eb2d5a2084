package cuup

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"testing"

	"github.com/xdp5g/xdp5g/internal/fielderr"
	"github.com/xdp5g/xdp5g/internal/ran/e1"
)

var (
	n3Addr  = netip.MustParseAddr("10.1.0.2")
	f1uAddr = netip.MustParseAddr("10.2.0.2")
	upfAddr = netip.MustParseAddr("10.1.0.1")
	duAddr  = netip.MustParseAddr("10.2.0.1")
)

// tunnelTable is the classifier's map as the CU-UP programs it; failAt
// makes the n-th addition from now fail, as a full map would.
type tunnelTable struct {
	entries map[string]uint32
	failAt  int
}

func key(teid uint32, role Role) string { return fmt.Sprintf("%d/%#x", role, teid) }

func (t *tunnelTable) AddTunnel(teid uint32, role Role, bearer uint32) error {
	if t.failAt--; t.failAt == 0 {
		return errors.New("map full")
	}
	if _, ok := t.entries[key(teid, role)]; ok {
		return fmt.Errorf("tunnel %s exists", key(teid, role))
	}
	t.entries[key(teid, role)] = bearer
	return nil
}

func (t *tunnelTable) DeleteTunnel(teid uint32, role Role) error {
	delete(t.entries, key(teid, role))
	return nil
}

func newCUUP(t *testing.T) (*CUUP, *tunnelTable) {
	t.Helper()
	tunnels := &tunnelTable{entries: map[string]uint32{}}
	c, err := New(Config{N3: n3Addr, F1U: f1uAddr, Tunnels: tunnels})
	if err != nil {
		t.Fatal(err)
	}
	return c, tunnels
}

func drbSetup(id uint8, qfis ...uint8) e1.DRBToSetup {
	d := e1.DRBToSetup{ID: id, SDAP: e1.SDAPConfiguration{HeaderUL: true, HeaderDL: true},
		PDCP: e1.PDCPConfiguration{SNSizeUL: 18, SNSizeDL: 18, RLCMode: e1.RLCAM}}
	for _, q := range qfis {
		d.QoSFlows = append(d.QoSFlows, e1.QoSFlow{QFI: q, FiveQI: 9})
	}
	return d
}

func sessionSetup(id uint8, drbs ...e1.DRBToSetup) e1.PDUSessionToSetup {
	drbs[0].SDAP.DefaultDRB = true
	return e1.PDUSessionToSetup{ID: id, Type: e1.IPv4, SNSSAI: e1.SNSSAI{SST: 1},
		SecurityIndication: e1.SecurityIndication{Integrity: e1.NotNeeded, Confidentiality: e1.Required},
		ULTunnel:           e1.UPTunnel{Address: upfAddr, TEID: 0x1000 + uint32(id)}, DRBs: drbs}
}

func setupRequest(sessions ...e1.PDUSessionToSetup) e1.BearerContextSetupRequest {
	return e1.BearerContextSetupRequest{CUCPUEID: 42, PDUSessions: sessions, Security: e1.SecurityInformation{
		Algorithm: e1.SecurityAlgorithm{Ciphering: 2}, Key: e1.UPSecurityKey{Encryption: make(e1.Key, 16)}}}
}

// snapshot is everything a refused request must leave as it was.
func snapshot(c *CUUP, tunnels *tunnelTable) string {
	return fmt.Sprintf("%v %v %d", tunnels.entries, c.List(), len(c.bearers)-len(c.free))
}

func TestSetupHandsOutTunnels(t *testing.T) {
	c, tunnels := newCUUP(t)
	resp, err := c.Setup(setupRequest(sessionSetup(1, drbSetup(1, 9), drbSetup(2, 1, 5)), sessionSetup(2, drbSetup(3, 9))))
	if err != nil {
		t.Fatal(err)
	}
	if resp.CUCPUEID != 42 || resp.CUUPUEID == 0 || len(resp.PDUSessions) != 2 {
		t.Fatalf("response %+v", resp)
	}
	teids := map[uint32]bool{}
	for _, s := range resp.PDUSessions {
		if s.DLTunnel.Address != n3Addr || tunnels.entries[key(s.DLTunnel.TEID, N3)] != s.DLTunnel.TEID&0xffffff {
			t.Errorf("session %d: N3 tunnel %+v, map %v", s.ID, s.DLTunnel, tunnels.entries)
		}
		if s.SecurityResult != (e1.SecurityResult{Integrity: e1.NotPerformed, Confidentiality: e1.Performed}) {
			t.Errorf("session %d: security result %+v", s.ID, s.SecurityResult)
		}
		teids[s.DLTunnel.TEID] = true
		for _, d := range s.DRBs {
			if d.ULTunnel.Address != f1uAddr || tunnels.entries[key(d.ULTunnel.TEID, F1U)] != d.ULTunnel.TEID&0xffffff {
				t.Errorf("DRB %d: F1-U tunnel %+v, map %v", d.ID, d.ULTunnel, tunnels.entries)
			}
			teids[d.ULTunnel.TEID] = true
		}
	}
	if len(teids) != 5 || len(tunnels.entries) != 5 {
		t.Errorf("%d distinct TEIDs and %d map entries, want 5 of each", len(teids), len(tunnels.entries))
	}
	if got := resp.PDUSessions[0].DRBs[1].Flows; !reflect.DeepEqual(got, e1.IDs{1, 5}) {
		t.Errorf("DRB 2 flows %v", got)
	}

	if err := c.Release(resp.CUUPUEID); err != nil {
		t.Fatal(err)
	}
	if len(tunnels.entries) != 0 || len(c.List()) != 0 {
		t.Errorf("after the release: map %v, contexts %v", tunnels.entries, c.List())
	}
	var nf *NotFoundError
	if err := c.Release(resp.CUUPUEID); !errors.As(err, &nf) {
		t.Errorf("second release: %v", err)
	}
	// A released TEID is not the next one handed out.
	again, err := c.Setup(setupRequest(sessionSetup(1, drbSetup(1, 9))))
	if err != nil {
		t.Fatal(err)
	}
	if teids[again.PDUSessions[0].DLTunnel.TEID] || teids[again.PDUSessions[0].DRBs[0].ULTunnel.TEID] {
		t.Errorf("TEIDs %+v handed out again at once", again.PDUSessions[0])
	}
}

// The DU's downlink tunnel comes in a modification; DRBs and sessions come
// and go.
func TestModify(t *testing.T) {
	c, tunnels := newCUUP(t)
	resp, err := c.Setup(setupRequest(sessionSetup(1, drbSetup(1, 9))))
	if err != nil {
		t.Fatal(err)
	}
	id := resp.CUUPUEID
	du := e1.UPTunnel{Address: duAddr, TEID: 0xd0}
	mod, err := c.Modify(id, e1.BearerContextModificationRequest{
		Modify: []e1.PDUSessionToModify{{ID: 1, ModifyDRBs: []e1.DRBToModify{{ID: 1, DLTunnel: &du}},
			SetupDRBs: []e1.DRBToSetup{drbSetup(4, 5)}}},
		Setup: []e1.PDUSessionToSetup{sessionSetup(2, drbSetup(2, 9))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(mod.Setup) != 1 || mod.Setup[0].ID != 2 || len(mod.Modified) != 1 || len(mod.Modified[0].DRBs) != 2 {
		t.Fatalf("response %+v", mod)
	}
	if got := c.context(id).sessions[1].drbs[1].dlTunnel; got == nil || *got != du {
		t.Errorf("DRB 1 DL tunnel %v, want %v", got, du)
	}
	if len(tunnels.entries) != 5 {
		t.Errorf("map %v, want 5 tunnels", tunnels.entries)
	}
	if _, err := c.Modify(id, e1.BearerContextModificationRequest{Remove: []uint8{2},
		Modify: []e1.PDUSessionToModify{{ID: 1, RemoveDRBs: []uint8{4}}}}); err != nil {
		t.Fatal(err)
	}
	if len(tunnels.entries) != 2 || len(c.context(id).sessions) != 1 || len(c.context(id).sessions[1].drbs) != 1 {
		t.Errorf("after removals: map %v, context %+v", tunnels.entries, c.context(id))
	}
}

// Refused requests name the field and change nothing, including when the
// classifier's map fails half-way.
func TestRefusedChangesNothing(t *testing.T) {
	c, tunnels := newCUUP(t)
	resp, err := c.Setup(setupRequest(sessionSetup(1, drbSetup(1, 9), drbSetup(2, 5))))
	if err != nil {
		t.Fatal(err)
	}
	id := resp.CUUPUEID
	before := snapshot(c, tunnels)
	du := e1.UPTunnel{Address: duAddr}
	for _, r := range []struct {
		field string
		req   e1.BearerContextModificationRequest
	}{
		{field: "securityInformation", req: e1.BearerContextModificationRequest{Security: &e1.SecurityInformation{}}},
		{field: "pduSessionResourceToSetupList[0].pduSessionId", req: e1.BearerContextModificationRequest{
			Setup: []e1.PDUSessionToSetup{sessionSetup(1, drbSetup(3, 9))}}},
		{field: "pduSessionResourceToSetupList[0].drbToSetupList[0].drbId", req: e1.BearerContextModificationRequest{
			Setup: []e1.PDUSessionToSetup{sessionSetup(2, drbSetup(2, 9))}}},
		{field: "pduSessionResourceToModifyList[0].pduSessionId", req: e1.BearerContextModificationRequest{
			Modify: []e1.PDUSessionToModify{{ID: 3}}}},
		{field: "pduSessionResourceToModifyList[0].drbToModifyList[0].dlUpParameters", req: e1.BearerContextModificationRequest{
			Modify: []e1.PDUSessionToModify{{ID: 1, ModifyDRBs: []e1.DRBToModify{{ID: 1, DLTunnel: &du}}}}}},
		{field: "pduSessionResourceToModifyList[0].drbToModifyList[0].drbId", req: e1.BearerContextModificationRequest{
			Modify: []e1.PDUSessionToModify{{ID: 1, ModifyDRBs: []e1.DRBToModify{{ID: 7}}}}}},
		{field: "pduSessionResourceToModifyList[0].drbToSetupList[0].qosFlowInformationToBeSetup[0].qosFlowIdentifier",
			req: e1.BearerContextModificationRequest{Modify: []e1.PDUSessionToModify{{ID: 1, SetupDRBs: []e1.DRBToSetup{drbSetup(3, 5)}}}}},
		{field: "pduSessionResourceToModifyList[0].drbToRemoveList[0]", req: e1.BearerContextModificationRequest{
			Modify: []e1.PDUSessionToModify{{ID: 1, RemoveDRBs: []uint8{3}}}}},
		{field: "pduSessionResourceToModifyList[0].drbToRemoveList", req: e1.BearerContextModificationRequest{
			Modify: []e1.PDUSessionToModify{{ID: 1, RemoveDRBs: []uint8{1, 2}}}}},
		{field: "pduSessionResourceToRemoveList[0]", req: e1.BearerContextModificationRequest{Remove: []uint8{9}}},
	} {
		var fe *fielderr.Error
		if _, err := c.Modify(id, r.req); !errors.As(err, &fe) || fe.Field != r.field {
			t.Errorf("refused for %v, want for %s", err, r.field)
		}
		if after := snapshot(c, tunnels); after != before {
			t.Errorf("refusing %s changed %s into %s", r.field, before, after)
		}
	}
	var nf *NotFoundError
	if _, err := c.Modify(id+1, e1.BearerContextModificationRequest{}); !errors.As(err, &nf) {
		t.Errorf("modifying a context that does not exist: %v", err)
	}

	// The map fails at the third tunnel of a modification and of a setup.
	for _, change := range []func() error{
		func() error {
			_, err := c.Modify(id, e1.BearerContextModificationRequest{
				Modify: []e1.PDUSessionToModify{{ID: 1, SetupDRBs: []e1.DRBToSetup{drbSetup(3, 1)}}},
				Setup:  []e1.PDUSessionToSetup{sessionSetup(2, drbSetup(4, 9))}})
			return err
		},
		func() error {
			_, err := c.Setup(setupRequest(sessionSetup(1, drbSetup(1, 9)), sessionSetup(2, drbSetup(2, 9))))
			return err
		},
	} {
		tunnels.failAt = 3
		if err := change(); err == nil {
			t.Error("accepted with the map failing")
		}
		if after := snapshot(c, tunnels); after != before {
			t.Errorf("a failed change left %s, want %s", after, before)
		}
	}
}

// A DRB's crypto moves to the pool only when there is one.
func TestSetPlacement(t *testing.T) {
	if _, err := New(Config{N3: n3Addr, F1U: f1uAddr, Placement: Pool}); err == nil {
		t.Error("pool placement without a pool accepted")
	}
	for _, workers := range []int{0, 2} {
		c, err := New(Config{N3: n3Addr, F1U: f1uAddr, CryptoWorkers: workers})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		resp, err := c.Setup(setupRequest(sessionSetup(1, drbSetup(3, 9))))
		if err != nil {
			t.Fatal(err)
		}
		var nf *NotFoundError
		var conflict *ConflictError
		if err := c.SetPlacement(resp.CUUPUEID+1, 3, Pool); !errors.As(err, &nf) {
			t.Errorf("placing in no context: %v", err)
		}
		if err := c.SetPlacement(resp.CUUPUEID, 4, Inline); !errors.As(err, &conflict) {
			t.Errorf("placing a DRB the context lacks: %v", err)
		}
		err = c.SetPlacement(resp.CUUPUEID, 3, Pool)
		d := c.context(resp.CUUPUEID).sessions[1].drbs[3]
		if workers == 0 && (!errors.As(err, &conflict) || d.placement.Load() != uint32(Inline)) {
			t.Errorf("placing on no pool: %v, placement %d", err, d.placement.Load())
		}
		if workers > 0 && (err != nil || d.placement.Load() != uint32(Pool)) {
			t.Errorf("placing on the pool: %v, placement %d", err, d.placement.Load())
		}
		if v, _ := c.Get(resp.CUUPUEID); v.PDUSessions[0].DRBs[0].Placement != Placement(d.placement.Load()) {
			t.Errorf("the view shows placement %v", v.PDUSessions[0].DRBs[0].Placement)
		}
	}
}

// A closed worker leaves the stats; the others stay.
func TestWorkerClose(t *testing.T) {
	c, _ := newCUUP(t)
	a := c.NewWorker("a", nil)
	c.NewWorker("b", nil)
	a.Close()
	if ws := c.Stats().Workers; len(ws) != 1 || ws[0].Worker != "b" {
		t.Errorf("workers %+v after closing a, want b alone", ws)
	}
}

// context is the bearer context id.
func (c *CUUP) context(id uint32) *bearerContext {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.contexts[id]
}

// A peer's tunnel must be of the family of the CU-UP's own address on that
// interface: the data path writes an IPv4 header from an IPv4 address, and
// could not send to an IPv6 UPF or DU (the AF_XDP path would not even build
// the header). Such a setup or modification is refused and changes nothing.
func TestTunnelOfTheOtherFamilyRefused(t *testing.T) {
	c, tunnels := newCUUP(t)
	v6 := netip.MustParseAddr("2001:db8::1")
	s := sessionSetup(1, drbSetup(1, 9))
	s.ULTunnel.Address = v6
	before := snapshot(c, tunnels)
	_, err := c.Setup(setupRequest(s))
	var fe *fielderr.Error
	if !errors.As(err, &fe) || fe.Field != "pduSessionResourceToSetupList[0].ngUlUpTnlInformation" {
		t.Fatalf("setup with an IPv6 UPF on an IPv4 CU-UP: %v", err)
	}
	if after := snapshot(c, tunnels); after != before {
		t.Fatalf("a refused setup changed %s into %s", before, after)
	}
	resp, err := c.Setup(setupRequest(sessionSetup(1, drbSetup(1, 9))))
	if err != nil {
		t.Fatal(err)
	}
	id := resp.CUUPUEID
	s2 := sessionSetup(2, drbSetup(2, 9))
	s2.ULTunnel.Address = v6
	for _, tc := range []struct {
		req   e1.BearerContextModificationRequest
		field string
	}{
		{e1.BearerContextModificationRequest{Setup: []e1.PDUSessionToSetup{s2}}, "pduSessionResourceToSetupList[0].ngUlUpTnlInformation"},
		{e1.BearerContextModificationRequest{Modify: []e1.PDUSessionToModify{{ID: 1, ULTunnel: &e1.UPTunnel{Address: v6, TEID: 7}}}},
			"pduSessionResourceToModifyList[0].ngUlUpTnlInformation"},
		{e1.BearerContextModificationRequest{Modify: []e1.PDUSessionToModify{{ID: 1, ModifyDRBs: []e1.DRBToModify{{ID: 1, DLTunnel: &e1.UPTunnel{Address: v6, TEID: 7}}}}}},
			"pduSessionResourceToModifyList[0].drbToModifyList[0].dlUpParameters"},
	} {
		before := snapshot(c, tunnels)
		_, err := c.Modify(id, tc.req)
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("modification %+v: %v, want a refusal of %s", tc.req, err, tc.field)
		}
		if after := snapshot(c, tunnels); after != before {
			t.Errorf("a refused modification changed %s into %s", before, after)
		}
	}
}
