package pfcptest

import (
	"net/netip"
	"slices"

	"github.com/xdp5g/xdp5g/internal/lab/pfcpwire"
)

// The PFCP messages a free5GC SMF sends to set up a PDU session with an
// uplink classifier (its context/datapath.go ActivateTunnelAndPDR, its
// processor/ulcl_procedure.go and the builders of its pfcp/message
// build.go), encoded here by hand, independently of go-pfcp, which the
// UPF decodes with. The default path is gNB, I-UPF, central PSA; the
// specific path of the destination ULCL.Local is gNB, I-UPF, local PSA.
// free5GC gives every node of a path the same uplink TEID and the same
// downlink TEID (smContext.LocalULTeid, LocalDLTeid), numbers PDRs, FARs
// and QERs per UPF from 1 and URRs per session (N9N6 3 and 4 at a PSA,
// N3N9 5 and 6 at an I-UPF; the first of each pair measures before QoS
// enforcement), marks every QER with the default QFI, and writes IEs in
// the order of its pfcp library's structs (URR IDs before QER IDs in a
// PDR, Create URR before Create QER, PDN Type last). Modifications have
// message priority 12 (free5GCPriority).

// free5GCPriority is the message priority of free5GC's modifications.
const free5GCPriority = 12

// The UPFs of a ULCL session, indexes of ULCL.Steps' UPF.
const (
	IUPF = iota
	CentralPSA
	LocalPSA
)

// ULCL is a PDU session with an uplink classifier at the I-UPF. The
// tunnels' addresses are all IPv4 or all IPv6 (F-TEIDs, Outer Header
// Creation and Removal of that family); the UE's is either.
type ULCL struct {
	SMF      netip.Addr // Node ID and CP F-SEID address
	CPSEID   uint64     // the first UPF's CP SEID; the others' follow it
	IUPFN3   netip.Addr
	IUPFN9   netip.Addr
	PSAN9    [2]netip.Addr // the central PSA's, then the local PSA's
	GNB      netip.Addr
	GNBTEID  uint32
	UE       netip.Addr
	Local    netip.Prefix // the destination the local PSA serves
	ULTEID   uint32
	DLTEID   uint32
	QFI      uint8
	AMBRKbps [2]uint64 // session AMBR, uplink then downlink
	// URRPeriod (seconds) and URRThreshold (octets each way) are the SMF's
	// urrPeriod and urrThreshold.
	URRPeriod    uint32
	URRThreshold uint64
}

// Step is one request of the SMF, to UPF IUPF, CentralPSA or LocalPSA.
type Step struct {
	Name   string
	UPF    int
	CPSEID uint64
	// Establishment: a Session Establishment Request; else a
	// modification of the session Establishment made at the same UPF.
	Establishment bool
	// Priority is a modification's message priority (MP set); 0: none.
	Priority uint8
	ies      []byte
}

// Message encodes the step's request with the header SEID (0 for an
// establishment, the UP SEID for a modification) and sequence number.
func (s Step) Message(seid uint64, seq uint32) []byte {
	typ := uint8(52) // Session Modification Request
	if s.Establishment {
		typ = 50
	}
	b := pfcpwire.Message(typ, true, seid, seq, s.ies)
	if !s.Establishment && s.Priority != 0 {
		b[0], b[15] = b[0]|0x02, s.Priority<<4 // MP, and the priority in the header's last octet
	}
	return b
}

// Steps are the requests in the order free5GC sends them: the default
// path's sessions at the I-UPF and the central PSA, the gNB's tunnel at
// the I-UPF (N2 PDU Session Resource Setup Response), then the addition of
// the local PSA: its session with the uplink (EstablishPSA2), the
// branching PDRs at the I-UPF (EstablishULCL), the local PSA's downlink
// (UpdatePSA2DownLink).
func (u *ULCL) Steps() []Step {
	const (
		access, core = 0, 1
		forw         = 0x02
		precedence   = 255
		branching    = 30
		urrMBQE      = 0x01 | 0x10 // Measurement Information: MBQE, MNOP
		urrMAQE      = 0x10
	)
	ni := pfcpwire.IE(22, []byte{8}, []byte("internet")) // Network Instance, as a DNN
	ue := func(sd bool) []byte { return pfcpwire.UEIPAddress(u.UE, sd) }
	fteid, ohc := pfcpwire.FTEID, pfcpwire.OuterHeaderCreation
	ids := func(typ uint16, ids ...uint32) []byte {
		var b []byte
		for _, id := range ids {
			b = append(b, pfcpwire.IE(typ, pfcpwire.U32(id))...)
		}
		return b
	}
	// pdr is a Create (or Update, 9) PDR's content.
	pdr := func(id uint16, prec uint32, pdi []byte, ohr bool, far uint32, urrs, qers []uint32) []byte {
		b := slices.Concat(pfcpwire.IE(56, pfcpwire.U16(id)), pfcpwire.IE(29, pfcpwire.U32(prec)), pfcpwire.IE(2, pdi))
		if ohr { // GTP-U/UDP/IPv4, or IPv6 over an IPv6 transport
			b = append(b, pfcpwire.IE(95, []byte{u.removal()})...)
		}
		return slices.Concat(b, pfcpwire.IE(108, pfcpwire.U32(far)), ids(81, urrs...), ids(109, qers...))
	}
	far := func(typ uint16, id uint32, params ...[]byte) []byte {
		fwd := uint16(4)
		if typ == 10 { // Update FAR: Update Forwarding Parameters
			fwd = 11
		}
		return pfcpwire.IE(typ, pfcpwire.IE(108, pfcpwire.U32(id)), pfcpwire.IE(44, []byte{forw}), pfcpwire.IE(fwd, params...))
	}
	urr := func(id uint32, measurement byte) []byte {
		return pfcpwire.IE(6, pfcpwire.IE(81, pfcpwire.U32(id)), pfcpwire.IE(62, []byte{0x02}), pfcpwire.IE(37, []byte{0x03, 0, 0}), // VOLUM; PERIO, VOLTH
			pfcpwire.IE(64, pfcpwire.U32(u.URRPeriod)), pfcpwire.IE(31, []byte{0x06}, pfcpwire.U64(u.URRThreshold), pfcpwire.U64(u.URRThreshold)),
			pfcpwire.IE(100, []byte{measurement}))
	}
	qer := func(id uint32, ambr bool) []byte {
		b := slices.Concat(pfcpwire.IE(109, pfcpwire.U32(id)), pfcpwire.IE(25, []byte{0}))
		if ambr {
			b = append(b, pfcpwire.MBR(u.AMBRKbps[0], u.AMBRKbps[1])...)
		}
		return pfcpwire.IE(7, b, pfcpwire.IE(124, []byte{u.QFI}))
	}
	node := func(cpSEID uint64) []byte {
		return slices.Concat(pfcpwire.NodeID(u.SMF), u.fseid(cpSEID))
	}
	pdnType := pfcpwire.IE(113, []byte{1}) // IPv4
	if u.UE.Is6() {
		pdnType = pfcpwire.IE(113, []byte{2})
	}
	gnbFAR := [][]byte{pfcpwire.IE(42, []byte{access}), ni, ohc(u.GNBTEID, u.GNB)}
	iupfDown := func(id uint16, far uint32, qers ...uint32) []byte {
		return pdr(id, precedence, slices.Concat(pfcpwire.IE(20, []byte{core}), fteid(u.DLTEID, u.IUPFN9), ni, ue(true)), true, far,
			[]uint32{5, 6}, qers)
	}
	psaUp := func(psa int, qers ...uint32) []byte {
		return pfcpwire.IE(1, pdr(1, precedence, slices.Concat(pfcpwire.IE(20, []byte{access}), fteid(u.ULTEID, u.PSAN9[psa]), ni, ue(false)), true, 1,
			[]uint32{3, 4}, qers))
	}
	psaDown := func(qers ...uint32) []byte {
		return pfcpwire.IE(1, pdr(2, precedence, slices.Concat(pfcpwire.IE(20, []byte{core}), ni, ue(true)), false, 2, []uint32{3, 4}, qers))
	}
	psaUpFAR := far(3, 1, pfcpwire.IE(42, []byte{core}), ni)
	psaDownFAR := far(3, 2, pfcpwire.IE(42, []byte{access}), ohc(u.DLTEID, u.IUPFN9))
	cp := func(upf int) uint64 { return u.CPSEID + uint64(upf) }
	flow := "permit out ip from " + u.Local.String() + " to " + u.UE.String()
	return []Step{
		{Name: "the default path at the I-UPF", UPF: IUPF, CPSEID: cp(IUPF), Establishment: true, ies: slices.Concat(node(cp(IUPF)),
			pfcpwire.IE(1, pdr(1, precedence, slices.Concat(pfcpwire.IE(20, []byte{access}), fteid(u.ULTEID, u.IUPFN3), ni, ue(false)), true, 1,
				[]uint32{5, 6}, []uint32{2, 1})),
			pfcpwire.IE(1, iupfDown(2, 2, 2, 1)),
			far(3, 1, pfcpwire.IE(42, []byte{core}), ni, ohc(u.ULTEID, u.PSAN9[0])), far(3, 2, pfcpwire.IE(42, []byte{access})),
			urr(5, urrMBQE), urr(6, urrMAQE), qer(1, true), qer(2, false), pdnType)},
		{Name: "the default path at the central PSA", UPF: CentralPSA, CPSEID: cp(CentralPSA), Establishment: true,
			ies: slices.Concat(node(cp(CentralPSA)), psaUp(0, 2, 1), psaDown(2, 1), psaUpFAR, psaDownFAR,
				urr(3, urrMBQE), urr(4, urrMAQE), qer(1, true), qer(2, false), pdnType)},
		{Name: "the gNB's tunnel at the I-UPF", UPF: IUPF, CPSEID: cp(IUPF), Priority: free5GCPriority, ies: slices.Concat(u.fseid(cp(IUPF)),
			pfcpwire.IE(9, iupfDown(2, 2, 2, 1)), far(10, 2, append(gnbFAR, pfcpwire.IE(49, []byte{0}))...))}, // PFCPSMReq-Flags: no SNDEM
		{Name: "the uplink at the local PSA", UPF: LocalPSA, CPSEID: cp(LocalPSA), Establishment: true,
			ies: slices.Concat(node(cp(LocalPSA)), psaUp(1, 1), psaUpFAR,
				urr(3, urrMBQE), urr(4, urrMAQE), qer(1, true), pdnType)},
		{Name: "the branching point at the I-UPF", UPF: IUPF, CPSEID: cp(IUPF), Priority: free5GCPriority, ies: slices.Concat(u.fseid(cp(IUPF)),
			pfcpwire.IE(1, pdr(3, branching, slices.Concat(pfcpwire.IE(20, []byte{access}), fteid(u.ULTEID, u.IUPFN3), ni, ue(false),
				pfcpwire.SDFFilter(flow)), true, 3, []uint32{5, 6}, []uint32{1})),
			pfcpwire.IE(1, iupfDown(4, 4, 1)),
			far(3, 3, pfcpwire.IE(42, []byte{core}), ni, ohc(u.ULTEID, u.PSAN9[1])), far(3, 4, gnbFAR...))},
		{Name: "the downlink at the local PSA", UPF: LocalPSA, CPSEID: cp(LocalPSA), Priority: free5GCPriority, ies: slices.Concat(u.fseid(cp(LocalPSA)),
			psaDown(1), psaDownFAR)},
	}
}

// DefaultPath are the first three of Steps, a chain of two UPFs: the
// sessions of the I-UPF and the central PSA, and the gNB's tunnel.
func (u *ULCL) DefaultPath() []Step {
	return u.Steps()[:3]
}

// removal is the Outer Header Removal of the tunnels' family: free5GC
// asks for GTP-U/UDP/IPv4 (0); over IPv6 it is GTP-U/UDP/IPv6 (1).
func (u *ULCL) removal() byte {
	if u.IUPFN3.Is6() {
		return 1
	}
	return 0
}

// fseid is the CP F-SEID IE at the SMF's address.
func (u *ULCL) fseid(seid uint64) []byte { return pfcpwire.FSEID(seid, u.SMF) }
