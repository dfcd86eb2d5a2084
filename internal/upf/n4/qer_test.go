package n4

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/xdp5g/xdp5g/internal/upf/session"
)

// free5GC-shaped QoS: a session QER (session AMBR) and a flow QER (QFI, MBR,
// GBR, RQI) on the same PDRs; both apply.
func free5GCQoS(cpSEID uint64) [][]byte {
	withQERs := func(pdr []byte) []byte { // appends QER IDs 1 and 2 to a Create PDR
		return tlv(tCreatePDR, pdr[4:], qerID(1), qerID(2))
	}
	return [][]byte{nodeIDv4("127.0.0.4"), cpFSEID(cpSEID, "127.0.0.4"),
		withQERs(uplinkPDR(fixedUE("10.60.0.1"))), withQERs(downlinkPDR(fixedUE("10.60.0.1"), 2)), coreFAR(), accessFAR(0x0a0b0c0d, gnb),
		createQER(1, bitRate(tMBR, 200_000, 100_000)),
		createQER(2, bitRate(tMBR, 50_000, 60_000), bitRate(tGBR, 10_000, 20_000), qfi(9), rqi())}
}

func TestQERs(t *testing.T) {
	e := newEnv(t)
	seid := e.establish("smf1", free5GCQoS(0x1001)...).upSEID(t)
	got, _ := e.store.Get(seid)
	want := []session.QER{{ID: 1, MBRUL: 200e6, MBRDL: 100e6},
		{ID: 2, MBRUL: 50e6, MBRDL: 60e6, GBRUL: 10e6, GBRDL: 20e6, QFI: 9, RQI: true}}
	if !reflect.DeepEqual(got.QERs, want) || !reflect.DeepEqual(got.PDRs[0].QERIDs, []uint32{1, 2}) {
		t.Fatalf("QERs %+v, PDR QERs %v", got.QERs, got.PDRs[0].QERIDs)
	}
	set, err := e.dp.Downlink(netip.MustParseAddr("10.60.0.1"))
	fatalIf(t, err)
	dl, err := e.dp.PDR(set.Pdr[0])
	fatalIf(t, err)
	flow, err := e.dp.QER(dl.Qer[1])
	fatalIf(t, err)
	if dl.Qfi != 9 || flow.Bucket[1].Rate != 60e6/8 || flow.GateClosed != 0 {
		t.Fatalf("downlink PDR %+v, flow QER %+v", dl, flow)
	}

	// The gates close, the flow QER leaves PDR 1, then goes.
	e.modify("smf1", seid, updateQER(1, gateStatus(1, 1)), updatePDR(pdrID(1), qerID(1))).expect(t, causeAccepted, nil, nil)
	got, _ = e.store.Get(seid)
	if !got.QERs[0].GateULClosed || !got.QERs[0].GateDLClosed || got.QERs[1].MBRUL != 50e6 ||
		!reflect.DeepEqual(got.PDRs[0].QERIDs, []uint32{1}) {
		t.Fatalf("after the update: %+v", got)
	}
	before := e.state()
	// PDR 2 still names QER 2.
	e.modify("smf1", seid, removeQER(2)).expect(t, causeRuleFailure, failedPDR(2), nil)
	e.unchanged(before)
	e.modify("smf1", seid, removeQER(2), updatePDR(pdrID(2), qerID(1))).expect(t, causeAccepted, nil, nil)
	if got, _ = e.store.Get(seid); len(got.QERs) != 1 {
		t.Fatalf("after the removal: %+v", got.QERs)
	}
}

func TestQERRefusals(t *testing.T) {
	e := newEnv(t)
	base := func(extra ...[]byte) [][]byte {
		return append(open5gs(0x1001, fixedUE("10.60.0.1"), 0x0a0b0c0d), extra...)
	}
	e.refusesEstablishments(t, []refusalCase{
		{name: "spare gate status", ies: base(tlv(tCreateQER, qerID(4), gateStatus(2, 0))), cause: causeRuleFailure, failedRule: failedQER(4)},
		{name: "QER correlation ID", ies: base(createQER(4, tlv(tQERCorrelationID, be32(1)))), cause: causeRuleFailure, failedRule: failedQER(4)},
		{name: "no gate status", ies: base(tlv(tCreateQER, qerID(4))), cause: causeMissingIE, offending: offendingIE(tGateStatus)},
		{name: "short MBR", ies: base(createQER(4, tlv(tMBR, make([]byte, 9)))), cause: causeRuleFailure, failedRule: failedQER(4)},
		{name: "twice the same QER", ies: base(createQER(4), createQER(4)), cause: causeRuleFailure, failedRule: failedQER(4)},
		{name: "PDR naming no QER", ies: [][]byte{nodeIDv4("127.0.0.4"), cpFSEID(1, "127.0.0.4"),
			tlv(tCreatePDR, uplinkPDR(fixedUE("10.60.0.1"))[4:], qerID(8)), coreFAR()}, cause: causeRuleFailure, failedRule: failedPDR(1)},
		{name: "three QERs on a PDR", ies: [][]byte{nodeIDv4("127.0.0.4"), cpFSEID(1, "127.0.0.4"),
			tlv(tCreatePDR, uplinkPDR(fixedUE("10.60.0.1"))[4:], qerID(1), qerID(2), qerID(3)), coreFAR(),
			createQER(1), createQER(2), createQER(3)}, cause: causeRuleFailure, failedRule: failedPDR(1)},
	})
}

func fatalIf(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
