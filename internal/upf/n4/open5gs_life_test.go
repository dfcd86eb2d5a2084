package n4

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xdp5g/xdp5g/internal/testsupport"
	"github.com/xdp5g/xdp5g/internal/upf/buffer"
	"github.com/xdp5g/xdp5g/internal/upf/pfcp"
	"github.com/xdp5g/xdp5g/internal/upf/session"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// An Open5GS 2.7 session (v2.7.3 on: 3GPP Interface Types) as its SMF
// builds it: src/smf/context.c (smf_qos_flow_add,
// smf_sess_create_cp_up_data_forwarding,
// smf_sess_create_indirect_data_forwarding), npcf-handler.c (F-TEIDs),
// n4-build.c (smf_n4_build_pdr_to_modify_list), ngap-handler.c,
// pfcp-path.c, n4-handler.c, lib/pfcp/build.c and context.h. Its encoder
// writes children in TS 29.244's table order, Apply Action in two octets,
// no message priority. Its pools number the rules: PDR 1 downlink, 2
// uplink, 3 from the CP function, 4 to it; FAR 1 downlink (the CP
// function's too), 2 uplink, 3 to the CP function; URR 1, QER 1, BAR 1.
const (
	o5gsCPSEID = 0x3001
	o5gsUE     = "10.60.0.9"
	o5gsQFI    = 1
	// Downlink Data Service Information (§8.2.33): its QFII flag, then the QFI.
	tDownlinkDataServiceInfo = 45
	ddsiQFII                 = 0x02
	// 3GPP Interface Types (§8.2.118).
	itDLForwarding = 10 // SGW/UPF GTP-U interface for DL data forwarding
	itN3           = 11
	itN6           = 17
	itULForwarding = 28 // SGW/UPF GTP-U interface for UL data forwarding
	// lib/pfcp/context.h.
	o5gsPrecedence         = 65535
	o5gsCPPrecedence       = 255
	o5gsIndirectPrecedence = 4096
	o5gsChooseID           = 5
	o5gsIndirectChooseID   = 10
)

var internet = networkInstance("internet")

// The downlink FAR starts buffering (BUFF|NOCP, BAR 1): the gNB's tunnel
// comes with the N2 PDU Session Resource Setup Response.
func o5gsEstablishment() [][]byte {
	return [][]byte{nodeIDv4(smfNode), cpFSEID(o5gsCPSEID, smfNode),
		createPDR(pdrID(1), precedence(o5gsPrecedence),
			pdi(sourceInterface(ifCore), internet, ueIPv4(o5gsUE, true), interfaceType(itN6)), farID(1), urrID(1), qerID(1)),
		createPDR(pdrID(2), precedence(o5gsPrecedence), pdi(sourceInterface(ifAccess), fteidChooseV4V6(o5gsChooseID), internet,
			ueIPv4(o5gsUE, false), qfi(o5gsQFI), interfaceType(itN3)), outerHeaderRemoval(0), farID(2), qerID(1)),
		createPDR(pdrID(3), precedence(o5gsCPPrecedence), pdi(sourceInterface(ifCPFunction), fteidChooseAnyV4V6()),
			outerHeaderRemoval(0), farID(1)),
		createPDR(pdrID(4), precedence(o5gsCPPrecedence), pdi(sourceInterface(ifAccess), fteidChooseV4V6(o5gsChooseID), internet,
			sdfFilterFD("permit out 58 from ff02::2/128 to assigned"), interfaceType(itN3)), outerHeaderRemoval(0), farID(3)),
		createFAR(farID(1), applyAction(aaBUFF|aaNOCP), barID(1)),
		createFAR(farID(2), applyAction(aaFORW), fwdParams(destinationInterface(ifCore), internet, interfaceType(itN6))),
		createFAR(farID(3), applyAction(aaFORW), fwdParams(destinationInterface(ifCPFunction), ohcGTPU(0x5f01, smfGTPU))),
		createURR(1, mmVOLUM, rtgVOLTH, volumeThreshold(100<<20)),
		createQER(1, bitRate(tMBR, 1_000_000, 1_000_000), qfi(o5gsQFI)),
		createBARID(1),
		tlv(tPDNType, []byte{1}),
		userIDIMSI(0x00, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0xf1), // IMSI 001010000000001
		tlv(tAPNDNN, []byte("\x08internet")),
		tlv(tSNSSAI, []byte{1, 0xff, 0xff, 0xff})}
}

// o5gsActivate is ogs_pfcp_build_update_far_activate for the downlink FAR:
// FORW, the gNB's tunnel, SNDEM when the path switched.
func o5gsActivate(teid uint32, gnbAddr string, flags ...[]byte) []byte {
	return updateFAR(farID(1), applyAction(aaFORW), updFwdParams(slices.Concat([][]byte{destinationInterface(ifAccess), internet,
		ohcGTPU(teid, gnbAddr)}, flags, [][]byte{interfaceType(itN3)})...))
}

// The indirect forwarding tunnel of an N2 handover: PDR 5 on an F-TEID of
// its own CHOOSE ID, FAR 4 to the target gNB's forwarding tunnel.
func o5gsIndirectForwarding(teid uint32, target string) [][]byte {
	return [][]byte{
		createPDR(pdrID(5), precedence(o5gsIndirectPrecedence), pdi(sourceInterface(ifAccess), fteidChooseV4V6(o5gsIndirectChooseID),
			internet, qfi(o5gsQFI), interfaceType(itULForwarding)), outerHeaderRemoval(0), farID(4), qerID(1)),
		createFAR(farID(4), applyAction(aaFORW), fwdParams(destinationInterface(ifAccess), internet, ohcGTPU(teid, target),
			interfaceType(itDLForwarding)))}
}

// An Open5GS session through its life: N2 setup; AN release and a
// Downlink Data Report; the service request; an N2 handover with
// indirect forwarding; an Xn handover; deletion.
func TestChainOpen5GSLife(t *testing.T) {
	c := newChain(t)
	// Reports go over the server to the SMF's PFCP port, as the daemon
	// has them.
	c.h.cfg.SendReport = c.srv.SendSessionReport
	var smfPFCP *net.UDPConn
	fatalIf(t, c.ns.Do(func() (err error) {
		smfPFCP, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(smfNode), pfcp.DefaultPort)))
		return err
	}))
	t.Cleanup(func() { smfPFCP.Close() })
	testsupport.Go(t, func(ctx context.Context) error { c.h.sendReports(ctx); return nil })

	r := c.session(t, mSessionEstablishmentRequest, 0, o5gsEstablishment()...)
	seid := r.upSEID(t)
	created := r.created(t)
	if len(created) != 3 || r.seid != o5gsCPSEID {
		t.Fatalf("establishment: header SEID %#x, Created PDRs %d; want the CP SEID, 2, 3 and 4", r.seid, len(created))
	}
	teid := chosenTEID(t, created[2])
	if chosenTEID(t, created[4]) != teid || chosenTEID(t, created[3]) == teid {
		t.Errorf("CHOOSE ID %d gave PDRs 2 and 4 different TEIDs, or PDR 3 theirs", o5gsChooseID)
	}
	ue := netip.MustParseAddr(o5gsUE)
	c.installed(teid, ue)

	far := func(id uint32) (f session.FAR) {
		s, _ := c.store.Get(seid)
		if i := slices.IndexFunc(s.FARs, func(f session.FAR) bool { return f.ID == id }); i >= 0 {
			f = s.FARs[i]
		}
		return f
	}
	buffering := func() bool {
		slot, ok := c.store.BufferSlot(seid, 1)
		return ok && c.buffers.Pending(slot)
	}
	tunnel := func(teid uint32, to string) session.OuterHeaderCreation {
		return session.OuterHeaderCreation{TEID: teid, Peer: netip.MustParseAddr(to)}
	}
	modify := func(name string, ies ...[]byte) {
		t.Helper()
		r := c.session(t, mSessionModificationRequest, seid, ies...)
		r.expect(t, causeAccepted, nil, nil)
		if r.seid != o5gsCPSEID {
			t.Errorf("%s: response SEID %#x, want the CP SEID", name, r.seid)
		}
	}
	downlinkIs := func(name string, action session.Action, to session.OuterHeaderCreation) {
		t.Helper()
		c.locked(func() {
			if f := far(1); f.Action != action || f.OuterHeaderCreation == nil || *f.OuterHeaderCreation != to {
				t.Errorf("%s: downlink FAR %+v, want action %d to %+v", name, f, action, to)
			}
			if action == session.ActionBuffer && !buffering() {
				t.Errorf("%s: the downlink FAR buffers with no armed buffer", name)
			}
		})
	}
	c.locked(func() {
		if f := far(1); f.Action != session.ActionBuffer || !buffering() {
			t.Errorf("downlink FAR after establishment %+v, armed %t; want it buffering", f, buffering())
		}
	})

	// (1) The N2 PDU Session Resource Setup Response: DL_ONLY|ACTIVATE.
	modify("N2 setup", o5gsActivate(0x100, gnb))
	downlinkIs("N2 setup", session.ActionForward, tunnel(0x100, gnb))

	// (2) AN release: DL_ONLY|DEACTIVATE (ogs_pfcp_build_update_far_deactivate).
	modify("AN release", updateFAR(farID(1), applyAction(aaBUFF|aaNOCP), barID(1)))
	downlinkIs("AN release", session.ActionBuffer, tunnel(0x100, gnb))

	// Downlink data while idle: the buffer's first packet is reported.
	// Open5GS pages only for a report whose Downlink Data Service
	// Information names a QoS flow, and answers with the Cause alone.
	set, err := c.dp.Downlink(ue)
	fatalIf(t, err)
	pdr, err := c.dp.PDR(set.Pdr[0])
	fatalIf(t, err)
	c.h.Buffered(buffer.Owner{SEID: seid, FAR: 1}, pdr.Id, pdr.Qfi)
	report := receive(t, smfPFCP)
	typ, hdrSEID, ies := decodeMsg(t, report)
	dldr := decodeIEs(t, one(t, ies, tDownlinkDataRep))
	if ddsi := one(t, dldr, tDownlinkDataServiceInfo); typ != mSessionReportResponse-1 || hdrSEID != o5gsCPSEID ||
		binary.BigEndian.Uint16(one(t, dldr, tPDRID)) != 1 || len(ddsi) != 2 || ddsi[0] != ddsiQFII || ddsi[1] != o5gsQFI {
		t.Errorf("report: type %d, SEID %#x, Downlink Data Report %+v; want PDR 1 and QFI %d", typ, hdrSEID, dldr, o5gsQFI)
	}
	_, err = smfPFCP.WriteToUDPAddrPort(sessionMsg(mSessionReportResponse, seid, sequence(report), causeIE(1)), c.srv.Addr())
	fatalIf(t, err)

	// (3) The service request: the new tunnel, no End Marker asked for.
	modify("service request", o5gsActivate(0x200, gnb))
	downlinkIs("service request", session.ActionForward, tunnel(0x200, gnb))

	// (4) N2 handover to gnb2 with indirect forwarding: INDIRECT|CREATE;
	// at completion DL_ONLY|ACTIVATE|N2_HANDOVER|END_MARKER; then
	// INDIRECT|REMOVE.
	r = c.session(t, mSessionModificationRequest, seid, o5gsIndirectForwarding(0x4f01, gnb2)...)
	r.expect(t, causeAccepted, nil, nil)
	forwarding := chosenTEID(t, r.created(t)[5])
	c.locked(func() {
		set, err := c.dp.Uplink(atN3(forwarding))
		if err != nil || set.Count != 1 || forwarding == teid {
			t.Fatalf("forwarding TEID %#x: %+v, %v; want one PDR of its own", forwarding, set, err)
		}
		p, err := c.dp.PDR(set.Pdr[0])
		// The data path keeps them in network order.
		if inHost := binary.NativeEndian.Uint32; err != nil || p.Far.Teid != inHost(be32(0x4f01)) || p.Far.Peer != inHost(v4(gnb2)) {
			t.Errorf("forwarding PDR %+v, %v; want a tunnel to %s TEID 0x4f01", p, err, gnb2)
		}
		// Downlink data on its way to the UE, re-tunnelled with its QFI.
		if want := uint8(upfxdp.ToUE | upfxdp.MatchQFI | upfxdp.MarkQFI); p.Flags != want || p.Qfi != o5gsQFI {
			t.Errorf("forwarding PDR flags %#x QFI %d, want %#x and %d", p.Flags, p.Qfi, want, o5gsQFI)
		}
		if c.nh.refs[netip.MustParseAddr(gnb2)] != 1 {
			t.Errorf("next hops %v, want one reference to %s", c.nh.refs, gnb2)
		}
	})
	sndem := tlv(tPFCPSMReqFlags, []byte{0x02})
	modify("N2 handover", o5gsActivate(0x300, gnb2, sndem))
	downlinkIs("N2 handover", session.ActionForward, tunnel(0x300, gnb2))
	if em := c.endMarker(t); em != 0x200 {
		t.Errorf("End Marker for TEID %#x, want 0x200", em)
	}
	modify("indirect forwarding removal", removePDR(5), removeFAR(4))
	c.locked(func() {
		if _, err := c.dp.Uplink(atN3(forwarding)); !errors.Is(err, ebpf.ErrKeyNotExist) || c.h.chosen[forwarding] {
			t.Errorf("forwarding TEID %#x after its removal: %v, chosen %t", forwarding, err, c.h.chosen[forwarding])
		}
		if far(4).ID != 0 || c.nh.refs[netip.MustParseAddr(gnb2)] != 1 {
			t.Errorf("FAR 4 %+v, next hops %v; want it gone and one reference to %s left", far(4), c.nh.refs, gnb2)
		}
	})

	// Xn handover back to gnb: DL_ONLY|ACTIVATE|XN_HANDOVER|END_MARKER.
	modify("Xn handover", o5gsActivate(0x400, gnb, sndem))
	downlinkIs("Xn handover", session.ActionForward, tunnel(0x400, gnb))

	// (5) Deletion: no IEs; the response carries URR 1's final report.
	r = c.session(t, mSessionDeletionRequest, seid)
	r.expect(t, causeAccepted, nil, nil)
	if reports := all(r.ies, tUsageReportDelResp); r.seid != o5gsCPSEID || len(reports) != 1 || decodeUsage(t, reports[0]).urr != 1 {
		t.Errorf("deletion response: SEID %#x, usage reports %d; want the CP SEID and URR 1's", r.seid, len(reports))
	}
	c.gone(teid, ue)
	c.locked(func() {
		if len(c.h.chosen) != 0 || len(c.nh.refs) != 0 {
			t.Errorf("after deletion: chosen TEIDs %v, next hops %v", c.h.chosen, c.nh.refs)
		}
	})
}
