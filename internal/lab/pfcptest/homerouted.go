package pfcptest

import (
	"net/netip"
	"slices"

	"github.com/xdp5g/xdp5g/internal/lab/pfcpwire"
)

// The PFCP messages Open5GS's SMFs send for a home-routed roaming PDU
// session, encoded here by hand from its sources (v2.7): the V-SMF's
// src/smf/nsmf-handler.c (smf_nsmf_handle_create_sm_context, then
// smf_nsmf_handle_created_data_in_vsmf once the H-SMF answered),
// context.c (smf_vcn_tunnel_add) and ngap-handler.c
// (ngap_handle_pdu_session_resource_setup_response_transfer); the
// H-SMF's npcf-handler.c (smf_npcf_smpolicycontrol_handle_create) and
// context.c (smf_qos_flow_add, smf_sess_create_cp_up_data_forwarding
// with HOME_ROUTED_ROAMING_IN_HSMF); n4-build.c
// (smf_n4_build_session_establishment_request,
// smf_n4_build_qos_flow_to_modify_list,
// smf_n4_build_pdr_to_modify_list) and lib/pfcp/build.c.
//
// The V-SMF has its V-UPF choose the F-TEIDs of a tunnel from the gNB to
// the H-UPF and back (its "VCN tunnel": PDR 1 from the core, 3GPP
// Interface Type N9 for roaming; PDR 2 from access, N3), without UE
// address, QoS or usage rules, without Outer Header Removal yet, both
// FARs buffering. The H-SMF, given the V-UPF's downlink F-TEID, sets its
// H-UPF up as the anchor of an ordinary Open5GS session whose uplink PDRs
// are from access with Interface Type N9 for roaming and whose downlink
// FAR tunnels to the V-UPF at once. The V-SMF then sends the uplink to the
// H-UPF's F-TEID, removing GTP-U from PDR 2, and, once the gNB answered,
// the downlink to the gNB, removing GTP-U from PDR 1. The H-SMF sends
// nothing more: the downlink FAR already tunnels where the V-SMF's update
// says. Both write Apply Action in two octets and Network Instances as
// DNNs, number rules from 1, and send modifications without CP F-SEID or
// message priority.

// The UPFs of a home-routed session, indexes of its Steps' UPF.
const (
	VUPF = iota
	HUPF
)

// HomeRouted is a home-routed roaming PDU session of an IPv4 UE over
// IPv4 transport.
type HomeRouted struct {
	SMF     netip.Addr // both SMFs' Node ID and F-SEID address, and the H-SMF's GTP-U one (N4-u)
	VCPSEID uint64     // the V-SMF's SEID
	HCPSEID uint64     // the H-SMF's
	UE      netip.Addr // the H-SMF's choice
	QFI     uint8      // the default QoS flow's
	// AMBRKbps is the session AMBR, uplink then downlink: the H-UPF's QER.
	AMBRKbps [2]uint64
	GNB      netip.Addr
	GNBTEID  uint32
}

// Open5GS's IE values.
const (
	o5gsPrecedence   = 65535 // OGS_PFCP_DEFAULT_PDR_PRECEDENCE
	o5gsCPPrecedence = 255   // OGS_PFCP_UP2CP_PDR_PRECEDENCE, CP2UP
	o5gsChooseID     = 5     // OGS_PFCP_DEFAULT_CHOOSE_ID
	itN3             = 11    // 3GPP Interface Types (§8.2.118)
	itN6             = 17
	itN9Roaming      = 21
	hrAccess         = 0 // interfaces (§8.2.2, §8.2.24)
	hrCore           = 1
	hrCPFunction     = 3
	aaFORW           = 0x02 // Apply Action octet 5 (§8.2.26)
	aaBUFFNOCP       = 0x04 | 0x08
	ohrGTPUUDPIP     = 6 // Outer Header Removal: GTP-U/UDP/IP
)

// Open5GS's IEs, each as lib/pfcp/build.c writes it.
var (
	hrDNN        = pfcpwire.IE(22, []byte{8}, []byte("internet")) // Network Instance
	hrChooseAny  = pfcpwire.IE(21, []byte{0x07})                  // F-TEID: V4, V6, CH
	hrChooseFlow = pfcpwire.IE(21, []byte{0x0f, o5gsChooseID})    // and CHID
	hrOHR        = pfcpwire.IE(95, []byte{ohrGTPUUDPIP})
	hrBAR        = pfcpwire.IE(88, []byte{1})
)

func hrU16(typ uint16, v uint16) []byte { return pfcpwire.IE(typ, pfcpwire.U16(v)) }
func hrU32(typ uint16, v uint32) []byte { return pfcpwire.IE(typ, pfcpwire.U32(v)) }
func hrU8(typ uint16, v uint8) []byte   { return pfcpwire.IE(typ, []byte{v}) }

// hrPDR is a Create PDR: ID, precedence, PDI, then the rest.
func hrPDR(id uint16, precedence uint32, pdi []byte, rest ...[]byte) []byte {
	return pfcpwire.IE(1, slices.Concat([][]byte{hrU16(56, id), hrU32(29, precedence), pfcpwire.IE(2, pdi)}, rest)...)
}

// hrFAR is a Create FAR (3) or an Update FAR (10) with its Apply Action
// in two octets, then the rest.
func hrFAR(typ uint16, id uint32, action byte, rest ...[]byte) []byte {
	return pfcpwire.IE(typ, slices.Concat([][]byte{hrU32(108, id), pfcpwire.IE(44, []byte{action, 0})}, rest)...)
}

// hrTunnel is an Outer Header Creation to an F-TEID.
func hrTunnel(to FTEID) []byte { return pfcpwire.OuterHeaderCreation(to.TEID, to.Addr) }

// hrSession is what both SMFs add to an establishment: PDN Type IPv4, the
// User ID (IMSI 001010000000001), the DNN, the S-NSSAI (SST 1).
var hrSession = slices.Concat(hrU8(113, 1), pfcpwire.IE(141, []byte{0x01, 8, 0x00, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0xf1}),
	pfcpwire.IE(159, []byte("\x08internet")), pfcpwire.IE(257, []byte{1, 0xff, 0xff, 0xff}))

func (h *HomeRouted) node(seid uint64) []byte {
	return slices.Concat(pfcpwire.NodeID(h.SMF), pfcpwire.FSEID(seid, h.SMF))
}

// VEstablishment is the V-SMF's Session Establishment Request: the V-UPF
// chooses PDR 1's F-TEID (on N9: the H-UPF's downlink comes there) and
// PDR 2's (on N3: the gNB's uplink).
func (h *HomeRouted) VEstablishment() Step {
	return Step{Name: "the VCN tunnel at the V-UPF", UPF: VUPF, CPSEID: h.VCPSEID, Establishment: true, ies: slices.Concat(h.node(h.VCPSEID),
		hrPDR(1, o5gsPrecedence, slices.Concat(hrU8(20, hrCore), hrChooseAny, hrDNN, hrU8(160, itN9Roaming)), hrU32(108, 1)),
		hrPDR(2, o5gsPrecedence, slices.Concat(hrU8(20, hrAccess), hrChooseAny, hrDNN, hrU8(160, itN3)), hrU32(108, 2)),
		hrFAR(3, 1, aaBUFFNOCP, hrBAR), hrFAR(3, 2, aaBUFFNOCP, hrBAR),
		pfcpwire.IE(85, hrBAR), hrSession)}
}

// HEstablishment is the H-SMF's Session Establishment Request, the
// V-UPF's downlink F-TEID given: downlink PDR 1 by the UE address, uplink
// PDR 2 and PDR 4 (router solicitations to the SMF) on one F-TEID the
// H-UPF chooses (on N9), PDR 3 from the SMF on its own; FAR 1 tunnels to
// the V-UPF, FAR 2 to N6, FAR 3 to the SMF; URR 1 measures the downlink,
// QER 1 the session AMBR with the flow's QFI; BAR 1.
func (h *HomeRouted) HEstablishment(vDown FTEID) Step {
	ue := pfcpwire.UEIPAddress(h.UE, true)
	rs := "permit out 58 from ff02::2/128 to assigned"
	qfi := hrU8(124, h.QFI)
	mbr := pfcpwire.MBR(h.AMBRKbps[0], h.AMBRKbps[1])
	return Step{Name: "the session at the H-UPF", UPF: HUPF, CPSEID: h.HCPSEID, Establishment: true, ies: slices.Concat(h.node(h.HCPSEID),
		hrPDR(1, o5gsPrecedence, slices.Concat(hrU8(20, hrCore), hrDNN, ue, hrU8(160, itN6)), hrU32(108, 1), hrU32(81, 1), hrU32(109, 1)),
		hrPDR(2, o5gsPrecedence, slices.Concat(hrU8(20, hrAccess), hrChooseFlow, hrDNN, qfi, hrU8(160, itN9Roaming)),
			hrOHR, hrU32(108, 2), hrU32(109, 1)),
		hrPDR(3, o5gsCPPrecedence, slices.Concat(hrU8(20, hrCPFunction), hrChooseAny), hrOHR, hrU32(108, 1)),
		hrPDR(4, o5gsCPPrecedence, slices.Concat(hrU8(20, hrAccess), hrChooseFlow, hrDNN,
			pfcpwire.SDFFilter(rs), hrU8(160, itN9Roaming)), hrOHR, hrU32(108, 3)),
		hrFAR(3, 1, aaFORW, pfcpwire.IE(4, hrU8(42, hrAccess), hrDNN, hrTunnel(vDown), hrU8(160, itN9Roaming))),
		hrFAR(3, 2, aaFORW, pfcpwire.IE(4, hrU8(42, hrCore), hrDNN, hrU8(160, itN6))),
		hrFAR(3, 3, aaFORW, pfcpwire.IE(4, hrU8(42, hrCPFunction), hrTunnel(FTEID{uint32(h.HCPSEID), h.SMF}))),
		pfcpwire.IE(6, hrU32(81, 1), hrU8(62, 0x02), pfcpwire.IE(37, []byte{0x02, 0, 0}), // VOLUM; VOLTH
			pfcpwire.IE(31, []byte{0x01}, pfcpwire.U64(100<<20))), // TOVOL, 100 MiB
		pfcpwire.IE(7, hrU32(109, 1), hrU8(25, 0), mbr, qfi),
		pfcpwire.IE(85, hrBAR), hrSession)}
}

// VUplink is the V-SMF's modification once the H-SMF answered with the
// H-UPF's uplink F-TEID: PDR 2 removes GTP-U, FAR 2 tunnels there.
func (h *HomeRouted) VUplink(hUp FTEID) Step {
	return Step{Name: "the uplink to the H-UPF at the V-UPF", UPF: VUPF, CPSEID: h.VCPSEID, ies: slices.Concat(
		pfcpwire.IE(9, hrU16(56, 2), hrOHR),
		hrFAR(10, 2, aaFORW, pfcpwire.IE(11, hrU8(42, hrCore), hrDNN, hrTunnel(hUp), hrU8(160, itN9Roaming))))}
}

// VDownlink is the V-SMF's modification once the gNB answered: PDR 1
// removes GTP-U, FAR 1 tunnels to the gNB.
func (h *HomeRouted) VDownlink() Step {
	return Step{Name: "the gNB's tunnel at the V-UPF", UPF: VUPF, CPSEID: h.VCPSEID, ies: slices.Concat(
		pfcpwire.IE(9, hrU16(56, 1), hrOHR),
		hrFAR(10, 1, aaFORW, pfcpwire.IE(11, hrU8(42, hrAccess), hrDNN, hrTunnel(FTEID{h.GNBTEID, h.GNB}), hrU8(160, itN3))))}
}
