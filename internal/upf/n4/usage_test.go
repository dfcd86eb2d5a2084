package n4

import (
	"bytes"
	"testing"
	"time"
)

// PFCP traffic for URRs with no packets: the report flow itself. Volumes
// under real traffic are TestQoSAndUsageUnderTraffic's.
func TestUsageReports(t *testing.T) {
	e := newEnv(t)
	withURRs := func(pdr []byte, ids ...uint32) []byte {
		c := [][]byte{pdr[4:]}
		for _, id := range ids {
			c = append(c, urrID(id))
		}
		return tlv(tCreatePDR, c...)
	}
	start := time.Now()
	r := e.establish("smf1", nodeIDv4("127.0.0.4"), cpFSEID(0x55, "127.0.0.4"),
		withURRs(uplinkPDR(fixedUE("10.60.0.1")), 1, 2), withURRs(downlinkPDR(fixedUE("10.60.0.1"), 2), 1), coreFAR(), accessFAR(7, gnb),
		createURR(1, mmVOLUM|mmDURAT, rtgPERIO, measurementPeriod(10), measurementInformation(0x08)), // ISTM
		createURR(2, mmVOLUM, rtgVOLTH, volumeThreshold(1000)))
	seid := r.upSEID(t)

	sessionReports := func() (out []usage) {
		for _, rep := range e.h.out.drain() {
			b, err := rep.req.Marshal()
			fatalIf(t, err)
			_, hdrSEID, ies := decodeMsg(t, b)
			if hdrSEID != 0x55 || rep.smf.NodeID != "smf1" {
				t.Errorf("report to %s for SEID %#x", rep.smf.NodeID, hdrSEID)
			}
			for _, v := range all(ies, tUsageReportReport) {
				out = append(out, decodeUsage(t, v))
			}
		}
		return out
	}
	e.h.tick(start.Add(5 * time.Second))
	if got := sessionReports(); len(got) != 0 {
		t.Fatalf("reports before the period: %+v", got)
	}
	e.h.tick(start.Add(11 * time.Second))
	got := sessionReports()
	if len(got) != 1 || got[0].urr != 1 || got[0].trigger != rtgPERIO || got[0].seqn != 0 || !got[0].hasVolume || got[0].tvol != 0 {
		t.Fatalf("periodic reports %+v", got)
	}
	// URR 1 measures duration from its creation on (ISTM), a little after
	// start, in whole seconds.
	if !got[0].hasDuration || got[0].duration != 10 {
		t.Errorf("periodic report's duration %d s (present: %v), want 10", got[0].duration, got[0].hasDuration)
	}
	e.h.tick(start.Add(15 * time.Second)) // the next period counts from the report
	if got := sessionReports(); len(got) != 0 {
		t.Fatalf("reports within the second period: %+v", got)
	}

	// Query URR 2: its report comes in the response, with the request's
	// Query URR Reference.
	ref := tlv(tQueryURRReference, be32(0xfeed))
	r = e.modify("smf1", seid, queryURR(2), ref)
	r.expect(t, causeAccepted, nil, nil)
	q := all(r.ies, tUsageReportModResp)
	if len(q) != 1 || decodeUsage(t, q[0]).urr != 2 || decodeUsage(t, q[0]).trigger != 1<<7 || // IMMER
		!bytes.Contains(q[0], ref) {
		t.Fatalf("query response %+v", r.ies)
	}
	if decodeUsage(t, q[0]).hasDuration {
		t.Error("URR 2 measures volume only, yet its report has a Duration Measurement")
	}

	// Refused: an unknown URR, and a URR still named by a PDR; nothing changes.
	before := e.state()
	e.modify("smf1", seid, removeURR(9)).expect(t, causeRuleFailure, failedURR(9), nil)
	e.modify("smf1", seid, queryURR(9)).expect(t, causeRuleFailure, failedURR(9), nil)
	e.modify("smf1", seid, removeURR(1)).expect(t, causeRuleFailure, failedPDR(1), nil)
	e.modify("smf1", seid, queryURR(2), tlv(tPFCPSMReqFlags, []byte{0x08})).expect(t, causeNotServed, nil, offendingIE(tPFCPSMReqFlags)) // SUMPC
	e.unchanged(before)

	// Removing URR 1 reports it (termination) and stops its clock.
	r = e.modify("smf1", seid, removeURR(1), updatePDR(pdrID(1), urrID(2)), tlv(tUpdatePDR, pdrID(2), urrID(2)))
	r.expect(t, causeAccepted, nil, nil)
	if q := all(r.ies, tUsageReportModResp); len(q) != 1 || decodeUsage(t, q[0]).urr != 1 || decodeUsage(t, q[0]).trigger != 1<<11 ||
		decodeUsage(t, q[0]).seqn != 1 {
		t.Fatalf("removal response %+v", r.ies)
	}
	e.h.tick(start.Add(time.Minute))
	if got := sessionReports(); len(got) != 0 {
		t.Fatalf("a removed URR reported: %+v", got)
	}

	// Deletion reports what is left.
	r = e.delete("smf1", seid)
	r.expect(t, causeAccepted, nil, nil)
	if q := all(r.ies, tUsageReportDelResp); len(q) != 1 || decodeUsage(t, q[0]).urr != 2 || decodeUsage(t, q[0]).seqn != 1 {
		t.Fatalf("deletion response %+v", r.ies)
	}
}

// drain takes every queued report, as the sender would.
func (o *outbox) drain() (out []report) {
	for r, ok := o.next(); ok; r, ok = o.next() {
		out = append(out, r)
	}
	return out
}

// A usage report still queued when its session is deleted goes in the
// Deletion Response: the SMF would not know the session any more.
func TestUnsentReportsGoInTheDeletionResponse(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	seid := e.establish("smf1", nodeIDv4("127.0.0.4"), cpFSEID(0x55, "127.0.0.4"),
		tlv(tCreatePDR, uplinkPDR(fixedUE("10.60.0.1"))[4:], urrID(1)), coreFAR(),
		createURR(1, mmVOLUM, rtgPERIO, measurementPeriod(10), measurementInformation(0x08))).upSEID(t)
	e.h.tick(start.Add(11 * time.Second)) // queued, not sent
	r := e.delete("smf1", seid)
	r.expect(t, causeAccepted, nil, nil)
	q := all(r.ies, tUsageReportDelResp)
	if len(q) != 2 {
		t.Fatalf("deletion response has %d usage reports, want 2", len(q))
	}
	if u := decodeUsage(t, q[0]); u.urr != 1 || u.seqn != 0 || u.trigger != rtgPERIO {
		t.Errorf("first report %+v, want the periodic one", u)
	}
	if u := decodeUsage(t, q[1]); u.urr != 1 || u.seqn != 1 || u.trigger != 1<<11 { // TERMR
		t.Errorf("second report %+v, want the final one", u)
	}
	if left := e.h.out.drain(); len(left) != 0 {
		t.Errorf("%d reports still queued for a deleted session", len(left))
	}
}

// A quota's validity time (VTIME): its end is reported once with QUVTI,
// and a quota granted anew is valid for the validity time from then.
func TestQuotaValidityTime(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	seid := e.establish("smf1", nodeIDv4("127.0.0.4"), cpFSEID(0x55, "127.0.0.4"),
		tlv(tCreatePDR, uplinkPDR(fixedUE("10.60.0.1"))[4:], urrID(1)), coreFAR(),
		createURR(1, mmVOLUM, rtgVOLQU|rtgQUVTI, volumeQuota(1e6), quotaValidityTime(30))).upSEID(t)
	const quvti = 1 << 19 // Usage Report Trigger, octet 7 bit 4 (§8.2.41)
	reports := func(at time.Duration) (triggers []uint32) {
		e.h.tick(start.Add(at))
		for _, rep := range e.h.out.drain() {
			b, err := rep.req.Marshal()
			fatalIf(t, err)
			_, _, ies := decodeMsg(t, b)
			for _, v := range all(ies, tUsageReportReport) {
				triggers = append(triggers, decodeUsage(t, v).trigger)
			}
		}
		return triggers
	}
	if got := reports(29 * time.Second); len(got) != 0 {
		t.Fatalf("reports before the validity time ended: %#x", got)
	}
	if got := reports(31 * time.Second); len(got) != 1 || got[0] != quvti {
		t.Fatalf("at the end of the validity time reported %#x, want one QUVTI (%#x)", got, quvti)
	}
	if got := reports(2 * time.Minute); len(got) != 0 {
		t.Fatalf("an expired quota reported again: %#x", got)
	}
	e.modify("smf1", seid, tlv(tUpdateURR, urrID(1), volumeQuota(2e6))).expect(t, causeAccepted, nil, nil)
	granted := time.Since(start)
	if got := reports(granted + 29*time.Second); len(got) != 0 {
		t.Fatalf("a new quota expired early: %#x", got)
	}
	if got := reports(granted + 31*time.Second); len(got) != 1 || got[0] != quvti {
		t.Fatalf("the new quota's end reported %#x", got)
	}
}

func TestURRRefusals(t *testing.T) {
	e := newEnv(t)
	base := func(extra ...[]byte) [][]byte {
		return append(open5gs(0x1001, fixedUE("10.60.0.1"), 0x0a0b0c0d), extra...)
	}
	e.refusesEstablishments(t, []refusalCase{
		{name: "dropped traffic threshold trigger", ies: base(createURR(4, mmVOLUM, 0x40)), cause: causeRuleFailure, failedRule: failedURR(4)},
		{name: "event measurement", ies: base(createURR(4, 0x04, rtgVOLQU, volumeQuota(10))), cause: causeRuleFailure, failedRule: failedURR(4)},
		{name: "volume threshold trigger without threshold", ies: base(createURR(4, mmVOLUM, rtgVOLTH)), cause: causeRuleFailure, failedRule: failedURR(4)},
		{name: "quota validity trigger without a validity time", ies: base(createURR(4, mmVOLUM, rtgVOLQU|rtgQUVTI, volumeQuota(10))), cause: causeRuleFailure, failedRule: failedURR(4)},
		{name: "volume quota measuring duration only", ies: base(createURR(4, mmDURAT, rtgVOLQU, volumeQuota(10))), cause: causeRuleFailure, failedRule: failedURR(4)},
		{name: "no measurement method", ies: base(tlv(tCreateURR, urrID(4), tlv(tReportingTriggers, []byte{1, 0}))), cause: causeMissingIE, offending: offendingIE(tMeasurementMethod)},
		{name: "PDR naming no URR", ies: [][]byte{nodeIDv4("127.0.0.4"), cpFSEID(1, "127.0.0.4"),
			tlv(tCreatePDR, uplinkPDR(fixedUE("10.60.0.1"))[4:], urrID(8)), coreFAR()}, cause: causeRuleFailure, failedRule: failedPDR(1)},
	})
}
