package n4

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xdp5g/xdp5g/internal/upf/session"
)

// The rules of an OAI SMF (oai-cn5g-smf v1.5/v2.x: smf_procedure.cpp's
// pfcp_create_pdr/far, its PFCP encoder in src/pfcp/3gpp_29.244.hpp), one
// PDR and FAR per direction. The establishment carries only the uplink:
// F-TEID chosen by the UPF (it advertises FTUP) with CHOOSE ID 42, the
// Network Instances of the UPF's N3 and N6 interfaces, the UE address the
// SMF allocated, QFI; precedence 0 when no PCC rule picked the UPF; Apply
// Action of one octet; no QER, no URR (only with enable_usage_reporting).
// The N2 setup creates the downlink PDR and its FAR to the gNB. When the UE
// goes idle every PDR and FAR is removed; the service request creates them
// again with new IDs and precedence one higher, a new uplink F-TEID first,
// then the downlink once the gNB's tunnel is known.
const (
	oaiUE        = "12.1.1.2"
	oaiCPSEID    = 0x0a11
	oaiChooseID  = 42
	oaiQFI       = 9
	oaiAccessNWI = "access.oai.org"
	oaiCoreNWI   = "core.oai.org"
)

// oaiUplink is an uplink PDR whose F-TEID the UPF chooses, and its FAR.
func oaiUplink(pdr uint16, far uint32, prec uint32) [][]byte {
	return oaiUplinkOn(fteidChoose(oaiChooseID), pdr, far, prec)
}

// oaiUplinkOn is oaiUplink on the F-TEID IE given.
func oaiUplinkOn(fteid []byte, pdr uint16, far uint32, prec uint32) [][]byte {
	return [][]byte{
		createPDR(pdrID(pdr), precedence(prec), pdi(sourceInterface(ifAccess), fteid,
			networkInstance(oaiAccessNWI), ueIPv4(oaiUE, false), qfi(oaiQFI)), outerHeaderRemoval(0), farID(far)),
		createFAR(farID(far), applyAction1(aaFORW), fwdParams(destinationInterface(ifCore), networkInstance(oaiCoreNWI))),
	}
}

func oaiDownlink(pdr uint16, far uint32, prec uint32, gnbTEID uint32) [][]byte {
	return [][]byte{
		createPDR(pdrID(pdr), precedence(prec), pdi(sourceInterface(ifCore), networkInstance(oaiCoreNWI), ueIPv4(oaiUE, true)), farID(far)),
		createFAR(farID(far), applyAction1(aaFORW), fwdParams(destinationInterface(ifAccess), networkInstance(oaiAccessNWI),
			ohcGTPU(gnbTEID, gnb))),
	}
}

// An OAI session through its life: association, establishment, N2 setup,
// the UE going idle and coming back, deletion.
func TestChainOAISession(t *testing.T) {
	c := newChain(t)
	// OAI's request adds CP Function Features LOAD and OVRL (§8.2.58).
	c.exchange(t, c.smf, nodeMsg(mAssociationSetupRequest, c.next(), nodeIDv4(smfNode), recoveryTimeStamp(3_900_000_100),
		cpFunctionFeatures(0x03))).expect(t, causeAccepted, nil, nil)

	ue := netip.MustParseAddr(oaiUE)
	r := c.session(t, mSessionEstablishmentRequest, 0, slices.Concat([][]byte{nodeIDv4(smfNode), cpFSEID(oaiCPSEID, smfNode)},
		oaiUplink(1, 1, 0))...)
	seid := r.upSEID(t)
	created := r.created(t)
	teid := chosenTEID(t, created[1])
	if len(created) != 1 || r.seid != oaiCPSEID {
		t.Fatalf("establishment: header SEID %#x, Created PDRs %v; want the CP SEID, PDR 1", r.seid, created)
	}
	if _, err := c.dp.Downlink(ue); !errors.Is(err, ebpf.ErrKeyNotExist) {
		t.Errorf("UE address before the N2 setup: %v, want no key", err)
	}

	farOf := func(id uint32) (f session.FAR, ok bool) {
		c.locked(func() {
			s, _ := c.store.Get(seid)
			if i := slices.IndexFunc(s.FARs, func(f session.FAR) bool { return f.ID == id }); i >= 0 {
				f, ok = s.FARs[i], true
			}
		})
		return f, ok
	}
	// established checks the data path once both directions are there:
	// the uplink TEID and the UE address lead to one PDR each, and the
	// downlink FAR forwards to the gNB's tunnel.
	established := func(step string, teid uint32, downlinkFAR, gnbTEID uint32) {
		t.Helper()
		if ul, err := c.dp.Uplink(atN3(teid)); err != nil || ul.Count != 1 {
			t.Errorf("%s: TEID %#x: %+v, %v; want one PDR", step, teid, ul, err)
		}
		if dl, err := c.dp.Downlink(ue); err != nil || dl.Count != 1 {
			t.Errorf("%s: UE address: %+v, %v; want one PDR", step, dl, err)
		}
		want := session.OuterHeaderCreation{TEID: gnbTEID, Peer: netip.MustParseAddr(gnb)}
		if f, ok := farOf(downlinkFAR); !ok || f.Action != session.ActionForward || f.OuterHeaderCreation == nil || *f.OuterHeaderCreation != want {
			t.Errorf("%s: FAR %d %+v (present %v), want it to forward to %+v", step, downlinkFAR, f, ok, want)
		}
	}
	// modify sends an OAI Session Modification Request, which carries no
	// CP F-SEID: the response goes to the establishment's.
	modify := func(step string, ies ...[]byte) reply {
		t.Helper()
		r := c.session(t, mSessionModificationRequest, seid, ies...)
		r.expect(t, causeAccepted, nil, nil)
		if r.seid != oaiCPSEID {
			t.Errorf("%s: response SEID %#x, want the CP SEID", step, r.seid)
		}
		return r
	}

	if r := modify("N2 setup", oaiDownlink(2, 2, 0, 0x100)...); len(all(r.ies, tCreatedPDR)) != 0 {
		t.Errorf("N2 setup: Created PDRs %+v for rules without F-TEID", r.ies)
	}
	established("N2 setup", teid, 2, 0x100)

	// AN release: the downlink edge's PDR 2 and FAR 1, then the uplink
	// edge's PDR 1 and FAR 2. The session stays, with no rules.
	modify("AN release", removePDR(2), removeFAR(1), removePDR(1), removeFAR(2))
	c.gone(teid, ue)
	c.locked(func() {
		s, ok := c.store.Get(seid)
		if !ok || len(s.PDRs)+len(s.FARs) != 0 || len(c.nh.refs) != 0 || len(c.h.chosen) != 0 {
			t.Errorf("after the AN release: session %+v (present %v), next hops %v, chosen TEIDs %v; want it empty and no references",
				s, ok, c.nh.refs, c.h.chosen)
		}
	})

	r = modify("service request", oaiUplink(3, 3, 1)...)
	newTEID := chosenTEID(t, r.created(t)[3])
	if _, err := c.dp.Downlink(ue); !errors.Is(err, ebpf.ErrKeyNotExist) {
		t.Errorf("UE address before the service request's N2 setup: %v, want no key", err)
	}
	modify("service request's N2 setup", oaiDownlink(4, 4, 1, 0x200)...)
	established("service request", newTEID, 4, 0x200)

	r = c.session(t, mSessionDeletionRequest, seid)
	r.expect(t, causeAccepted, nil, nil)
	if r.seid != oaiCPSEID || len(all(r.ies, tUsageReportDelResp)) != 0 {
		t.Errorf("deletion response: header SEID %#x, IEs %+v; want the CP SEID and no usage report", r.seid, r.ies)
	}
	c.gone(newTEID, ue)
	c.locked(func() {
		if _, ok := c.store.Get(seid); ok {
			t.Error("the session outlived its deletion")
		}
	})
}

// Older OAI SMFs cleared V4 in an F-TEID with CHOOSE (their encoder set it
// only for a given F-TEID; fixed since, openair-spgwc#24): §8.2.3 wants V4
// or V6 with CH, so the UPF cannot tell which address to choose, and
// refuses (cause 71, Invalid F-TEID allocation option) without changing
// anything.
func TestChainOAIChooseWithoutV4IsRefused(t *testing.T) {
	c := newChain(t)
	var before state
	c.locked(func() { before = c.state() })
	uplink := oaiUplinkOn(tlv(tFTEID, []byte{0x04 | 0x08, oaiChooseID}), 1, 1, 0) // CH and CHID, no V4
	r := c.session(t, mSessionEstablishmentRequest, 0, slices.Concat([][]byte{nodeIDv4(smfNode), cpFSEID(oaiCPSEID, smfNode)}, uplink)...)
	r.expect(t, causeBadFTEIDChoice, nil, nil)
	if r.seid != oaiCPSEID {
		t.Errorf("response SEID %#x, want the CP SEID", r.seid)
	}
	c.locked(func() { c.unchanged(before) })
}
