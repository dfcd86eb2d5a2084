package n4

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// A PFCP encoder and decoder written from TS 29.244, apart from go-pfcp, so
// that the tests do not take go-pfcp's word for the wire format.

// IE and message type numbers (§8.1.2, §7.3).
const (
	tCreatePDR              = 1
	tPDI                    = 2
	tCreateFAR              = 3
	tForwardingParameters   = 4
	tCreateURR              = 6
	tCreateQER              = 7
	tUpdateURR              = 13
	tCreatedPDR             = 8
	tUpdatedPDR             = 256
	tUpdateFAR              = 10
	tUpdatePDR              = 9
	tUpdateQER              = 14
	tUpdateForwardingParam  = 11
	tRemovePDR              = 15
	tRemoveQER              = 18
	tRemoveURR              = 17
	tCause                  = 19
	tReportType             = 39
	tPFCPSMReqFlags         = 49
	tErrorIndicationReport  = 99
	tSourceInterface        = 20
	tFTEID                  = 21
	tNetworkInstance        = 22
	tGateStatus             = 25
	tMBR                    = 26
	tGBR                    = 27
	tQERCorrelationID       = 28
	tPrecedence             = 29
	tReportingTriggers      = 37
	tOffendingIE            = 40
	tDestinationInterface   = 42
	tApplyAction            = 44
	tPDRID                  = 56
	tUsageReportTrigger     = 63
	tMeasurementPeriod      = 64
	tVolumeMeasurement      = 66
	tDurationMeasurement    = 67
	tTimeOfFirstPacket      = 69
	tEndTime                = 76
	tTimeThreshold          = 32
	tTimeQuota              = 74
	tVolumeThreshold        = 31
	tVolumeQuota            = 73
	tQuotaValidityTime      = 181
	tForwardingPolicy       = 41
	tDuplicatingParameters  = 5
	tUpdateDuplicatingParam = 105
	tTransportLevelMarking  = 30
	tQueryURR               = 77
	tUsageReportModResp     = 78
	tUsageReportDelResp     = 79
	tUsageReportReport      = 80
	tFSEID                  = 57
	tNodeID                 = 60
	tMeasurementMethod      = 62
	tURRID                  = 81
	tOuterHeaderCreation    = 84
	tUEIPAddress            = 93
	tOuterHeaderRemoval     = 95
	tFARID                  = 108
	tQERID                  = 109
	tURSEQN                 = 104
	tFailedRuleID           = 114
	tMeasurementInformation = 100
	tRQI                    = 123
	tQFI                    = 124
	tUPInactivityTimer      = 117
	tQueryURRReference      = 125
	tCreateTrafficEndpoint  = 127
	tTrafficEndpointID      = 131
	tCreateMAR              = 165
	tMARID                  = 170
	tPDNType                = 113
	tFQCSID                 = 65
	tAPNDNN                 = 159
	tSNSSAI                 = 257
	tPFCPSEReqFlags         = 186
	tPFCPSRRspFlags         = 50
	tUpdateBARReportResp    = 12

	mSessionSetDeletionRequest   = 14
	mSessionEstablishmentRequest = 50
	mSessionModificationRequest  = 52
	mSessionDeletionRequest      = 54
	mSessionReportResponse       = 57
)

// Cause values (§8.2.1).
const (
	causeAccepted       = 1
	causeNoSession      = 65 // Session context not found
	causeMissingIE      = 66 // Mandatory IE missing
	causeConditionalIE  = 67 // Conditional IE missing
	causeIncorrectIE    = 69 // Mandatory IE incorrect
	causeBadFTEIDChoice = 71 // Invalid F-TEID allocation option
	causeNoAssociation  = 72 // No established PFCP Association
	causeRuleFailure    = 73 // Rule creation/modification Failure
	causeNotServed      = 76 // Service not supported
)

// failedPDR, failedFAR, failedQER, failedURR and failedBAR are the values
// of a Failed Rule ID (§8.2.80): the rule type, then the rule's ID as its
// own IE has it.
func failedPDR(id uint16) []byte { return append([]byte{0}, be16(id)...) }
func failedFAR(id uint32) []byte { return append([]byte{1}, be32(id)...) }
func failedQER(id uint32) []byte { return append([]byte{2}, be32(id)...) }
func failedURR(id uint32) []byte { return append([]byte{3}, be32(id)...) }
func failedBAR(id uint8) []byte  { return []byte{4, id} }

// offendingIE is the value of an Offending IE (§8.2.22): the IE type.
func offendingIE(t uint16) []byte { return be16(t) }

// Interface values (§8.2.2, §8.2.24).
const (
	ifAccess     = 0
	ifCore       = 1
	ifCPFunction = 3
	ifLIFunction = 4
)

// Apply Action flags, octet 5 (§8.2.26).
const (
	aaDROP = 0x01
	aaFORW = 0x02
	aaBUFF = 0x04
	aaNOCP = 0x08
	aaDUPL = 0x10
)

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
func v4(s string) []byte {
	a := netip.MustParseAddr(s).As4()
	return a[:]
}

// tlv is an IE (§8.1.1): 2-octet type, 2-octet length of the value, value.
// A grouped IE's value is its children's encodings.
func tlv(typ uint16, value ...[]byte) []byte {
	v := slices.Concat(value...)
	return slices.Concat(be16(typ), be16(uint16(len(v))), v)
}

// sessionMsg is a message with a SEID (§7.2.2.1): octet 1 version 1 (bits
// 8-6) and S=1, type, length of what follows octet 4, SEID, 3-octet
// sequence number, spare octet.
func sessionMsg(typ uint8, seid uint64, seq uint32, ies ...[]byte) []byte {
	body := slices.Concat(be64(seid), be32(seq<<8), slices.Concat(ies...))
	return slices.Concat([]byte{0x21, typ}, be16(uint16(len(body))), body)
}

// nodeMsg is a message without a SEID (S=0).
func nodeMsg(typ uint8, seq uint32, ies ...[]byte) []byte {
	body := slices.Concat(be32(seq<<8), slices.Concat(ies...))
	return slices.Concat([]byte{0x20, typ}, be16(uint16(len(body))), body)
}

func createPDR(c ...[]byte) []byte    { return tlv(tCreatePDR, c...) }             // §7.5.2.2
func pdi(c ...[]byte) []byte          { return tlv(tPDI, c...) }                   // §7.5.2.2-2
func createFAR(c ...[]byte) []byte    { return tlv(tCreateFAR, c...) }             // §7.5.2.3
func fwdParams(c ...[]byte) []byte    { return tlv(tForwardingParameters, c...) }  // §7.5.2.3-2
func updateFAR(c ...[]byte) []byte    { return tlv(tUpdateFAR, c...) }             // §7.5.4.3
func updFwdParams(c ...[]byte) []byte { return tlv(tUpdateForwardingParam, c...) } // §7.5.4.3-2
func removePDR(id uint16) []byte      { return tlv(tRemovePDR, pdrID(id)) }        // §7.5.4.6

// pdrID §8.2.36: 2 octets. farID §8.2.74: 4 octets.
func pdrID(id uint16) []byte { return tlv(tPDRID, be16(id)) }
func farID(id uint32) []byte { return tlv(tFARID, be32(id)) }

// precedence §8.2.11: 4 octets.
func precedence(v uint32) []byte { return tlv(tPrecedence, be32(v)) }

// sourceInterface §8.2.2, destinationInterface §8.2.24: value in bits 4-1.
func sourceInterface(v byte) []byte      { return tlv(tSourceInterface, []byte{v}) }
func destinationInterface(v byte) []byte { return tlv(tDestinationInterface, []byte{v}) }

// fteid §8.2.3: flags V4 (bit 1), TEID, IPv4 address.
func fteid(teid uint32, addr string) []byte { return tlv(tFTEID, []byte{0x01}, be32(teid), v4(addr)) }

// fteidChoose §8.2.3: flags V4 | CH (bit 3) | CHID (bit 4); no TEID or
// address, then the CHOOSE ID.
func fteidChoose(chooseID byte) []byte { return tlv(tFTEID, []byte{0x01 | 0x04 | 0x08, chooseID}) }

// fteidChooseAny is CH without a CHOOSE ID: a TEID of its own.
func fteidChooseAny() []byte { return tlv(tFTEID, []byte{0x01 | 0x04}) }

// networkInstance §8.2.4: the DNN encoding (length-prefixed labels).
func networkInstance(name string) []byte {
	var v []byte
	for _, l := range strings.Split(name, ".") {
		v = append(append(v, byte(len(l))), l...)
	}
	return tlv(tNetworkInstance, v)
}

// ueIPv4 §8.2.62: flags V4 (bit 2), S/D (bit 3, 1: destination), address.
func ueIPv4(addr string, sd bool) []byte {
	return tlv(tUEIPAddress, []byte{0x02 | sdBit(sd)}, v4(addr))
}

// ueChooseV4 §8.2.62: flags V4 | CHV4 (bit 5) and S/D, no address.
func ueChooseV4(sd bool) []byte { return tlv(tUEIPAddress, []byte{0x02 | 0x10 | sdBit(sd)}) }

func sdBit(sd bool) byte {
	if sd {
		return 0x04
	}
	return 0
}

// qfi §8.2.89: QFI in bits 6-1.
func qfi(v byte) []byte { return tlv(tQFI, []byte{v & 0x3f}) }

// outerHeaderRemoval §8.2.64: the description octet (0: GTP-U/UDP/IPv4).
func outerHeaderRemoval(v byte) []byte { return tlv(tOuterHeaderRemoval, []byte{v}) }

// applyAction §8.2.26: octet 5 (DROP FORW BUFF NOCP DUPL ...), octet 6.
func applyAction(flags byte) []byte { return tlv(tApplyAction, []byte{flags, 0}) }

// ohcGTPU §8.2.56: description 0x0100 (GTP-U/UDP/IPv4), TEID, IPv4.
func ohcGTPU(teid uint32, addr string) []byte {
	return ohc(0x0100, teid, addr)
}

func ohc(desc uint16, teid uint32, addr string) []byte {
	return tlv(tOuterHeaderCreation, be16(desc), be32(teid), v4(addr))
}

// nodeIDv4 §8.2.38: type 0 (IPv4) in bits 4-1, the address.
func nodeIDv4(addr string) []byte { return tlv(tNodeID, []byte{0}, v4(addr)) }

// cpFSEID §8.2.37: flags V4 (bit 2), SEID, IPv4 address.
func cpFSEID(seid uint64, addr string) []byte { return tlv(tFSEID, []byte{0x02}, be64(seid), v4(addr)) }

// createQER §7.5.2.5: QER ID (§8.2.75, 4 octets), Gate Status (§8.2.27:
// UL and DL gates open), then the IEs given.
func createQER(id uint32, c ...[]byte) []byte {
	return tlv(tCreateQER, append([][]byte{qerID(id), gateStatus(0, 0)}, c...)...)
}

func updateQER(id uint32, c ...[]byte) []byte {
	return tlv(tUpdateQER, append([][]byte{qerID(id)}, c...)...)
}                                  // §7.5.4.5
func removeQER(id uint32) []byte   { return tlv(tRemoveQER, qerID(id)) } // §7.5.4.9
func updatePDR(c ...[]byte) []byte { return tlv(tUpdatePDR, c...) }      // §7.5.4.2
func qerID(id uint32) []byte       { return tlv(tQERID, be32(id)) }

// gateStatus §8.2.27: UL gate in bits 4-3, DL gate in bits 2-1 (1: closed).
func gateStatus(ul, dl byte) []byte { return tlv(tGateStatus, []byte{ul<<2 | dl}) }

// bitRate §8.2.8/§8.2.9: UL then DL, 5 octets each, kilobits per second.
func bitRate(typ uint16, ulKbps, dlKbps uint64) []byte {
	return tlv(typ, be64(ulKbps)[3:], be64(dlKbps)[3:])
}

// rqi §8.2.88: RQI in bit 1.
func rqi() []byte { return tlv(tRQI, []byte{0x01}) }

// createURR §7.5.2.4: URR ID (§8.2.54, 4 octets), Measurement Method
// (§8.2.40: DURAT bit 1, VOLUM bit 2), Reporting Triggers (§8.2.19, 3
// octets), then the IEs given.
func createURR(id uint32, method byte, triggers uint32, c ...[]byte) []byte {
	return tlv(tCreateURR, append([][]byte{urrID(id), tlv(tMeasurementMethod, []byte{method}),
		tlv(tReportingTriggers, []byte{byte(triggers), byte(triggers >> 8), byte(triggers >> 16)})}, c...)...)
}

func urrID(id uint32) []byte { return tlv(tURRID, be32(id)) }

// Measurement methods and Reporting Triggers bits (octet 5 low byte).
const (
	mmDURAT  = 0x01
	mmVOLUM  = 0x02
	rtgPERIO = 0x0001
	rtgVOLTH = 0x0002
	rtgTIMTH = 0x0004
	rtgSTART = 0x0010
	rtgVOLQU = 0x0100
	rtgTIMQU = 0x0200
	rtgQUVTI = 0x8000 // octet 6 bit 8
)

// volumeThreshold §8.2.13 and volumeQuota §8.2.50: flags TOVOL (bit 1),
// then the total volume, 8 octets.
func volumeThreshold(total uint64) []byte { return tlv(tVolumeThreshold, []byte{0x01}, be64(total)) }
func volumeQuota(total uint64) []byte     { return tlv(tVolumeQuota, []byte{0x01}, be64(total)) }

// timeThreshold §8.2.14 and timeQuota §8.2.51: seconds, 4 octets.
func timeThreshold(s uint32) []byte { return tlv(tTimeThreshold, be32(s)) }
func timeQuota(s uint32) []byte     { return tlv(tTimeQuota, be32(s)) }

// dupParams §7.5.2.3-3 and updDupParams §7.5.4.3-3: where a FAR's
// copies go.
func dupParams(c ...[]byte) []byte    { return tlv(tDuplicatingParameters, c...) }
func updDupParams(c ...[]byte) []byte { return tlv(tUpdateDuplicatingParam, c...) }

// transportLevelMarking §8.2.12: the ToS octet and its mask.
func transportLevelMarking(tos byte) []byte { return tlv(tTransportLevelMarking, []byte{tos, 0xfc}) }

// forwardingPolicy §8.2.23: the identifier's length, then the identifier.
func forwardingPolicy(id string) []byte {
	return tlv(tForwardingPolicy, []byte{byte(len(id))}, []byte(id))
}

// quotaValidityTime §8.2.142: seconds, 4 octets.
func quotaValidityTime(s uint32) []byte { return tlv(tQuotaValidityTime, be32(s)) }

// measurementPeriod §8.2.42: seconds, 4 octets.
func measurementPeriod(s uint32) []byte { return tlv(tMeasurementPeriod, be32(s)) }

// measurementInformation §8.2.68: MNOP is bit 5.
func measurementInformation(flags byte) []byte { return tlv(tMeasurementInformation, []byte{flags}) }

func queryURR(id uint32) []byte  { return tlv(tQueryURR, urrID(id)) }  // §7.5.4.10
func removeURR(id uint32) []byte { return tlv(tRemoveURR, urrID(id)) } // §7.5.4.8

// recoveryTimeStamp §8.2.65: seconds since 1900, 4 octets.
func recoveryTimeStamp(s uint32) []byte { return tlv(96, be32(s)) }

// applyAction1 §8.2.26 as Release 15 SMFs (free5GC) send it: octet 5 only.
func applyAction1(flags byte) []byte { return tlv(tApplyAction, []byte{flags}) }

// volumeThresholdULDL §8.2.13: flags ULVOL and DLVOL (bits 2, 3), then the
// uplink and downlink volumes.
func volumeThresholdULDL(ul, dl uint64) []byte {
	return tlv(tVolumeThreshold, []byte{0x06}, be64(ul), be64(dl))
}

// withPriority §7.2.2.1: sets MP (octet 1 bit 2) and the message priority
// (octet 16 bits 8-5) of a message with a SEID.
func withPriority(msg []byte, prio byte) []byte { msg[0], msg[15] = msg[0]|0x02, prio<<4; return msg }

func removeFAR(id uint32) []byte       { return tlv(16, farID(id)) }                            // §7.5.4.7
func createBARID(id byte) []byte       { return tlv(tCreateBAR, barID(id)) }                    // §7.5.2.6, the BAR ID alone
func interfaceType(v byte) []byte      { return tlv(160, []byte{v & 0x3f}) }                    // 3GPP Interface Type §8.2.118
func causeIE(v byte) []byte            { return tlv(tCause, []byte{v}) }                        // §8.2.1
func fteidChooseV4V6(id byte) []byte   { return tlv(tFTEID, []byte{0x0f, id}) }                 // §8.2.3: V4, V6, CH, CHID
func fteidChooseAnyV4V6() []byte       { return tlv(tFTEID, []byte{0x07}) }                     // §8.2.3: V4, V6, CH
func userIDIMSI(tbcd ...byte) []byte   { return tlv(141, []byte{0x01, byte(len(tbcd))}, tbcd) } // §8.2.101: IMSIF
func cpFunctionFeatures(f byte) []byte { return tlv(89, []byte{f}) }                            // §8.2.58

// usage is a decoded Usage Report (§7.5.5.2, §7.5.7.2, §7.5.8.3).
type usage struct {
	urr, seqn             uint32
	trigger               uint32 // Usage Report Trigger octets 5-7, as rtg* bits
	tvol, uvol, dvol      uint64 // Volume Measurement (§8.2.44)
	tpkt, upkt, dpkt      uint64
	hasVolume, hasPackets bool
	duration              uint32 // Duration Measurement (§8.2.45), seconds
	hasDuration           bool
	firstPacket, end      uint32 // Time of First Packet (§8.2.46), End Time (§8.2.53): NTP seconds
}

func decodeUsage(t *testing.T, v []byte) usage {
	t.Helper()
	var u usage
	for _, c := range decodeIEs(t, v) {
		switch c.typ {
		case tURRID:
			u.urr = binary.BigEndian.Uint32(c.val)
		case tURSEQN:
			u.seqn = binary.BigEndian.Uint32(c.val)
		case tDurationMeasurement:
			u.duration, u.hasDuration = binary.BigEndian.Uint32(c.val), true
		case tTimeOfFirstPacket:
			u.firstPacket = binary.BigEndian.Uint32(c.val)
		case tEndTime:
			u.end = binary.BigEndian.Uint32(c.val)
		case tUsageReportTrigger:
			for i, b := range c.val {
				u.trigger |= uint32(b) << (8 * i)
			}
		case tVolumeMeasurement:
			flags, rest := c.val[0], c.val[1:]
			next := func(bit byte) (uint64, bool) {
				if flags&bit == 0 {
					return 0, false
				}
				v := binary.BigEndian.Uint64(rest)
				rest = rest[8:]
				return v, true
			}
			u.tvol, u.hasVolume = next(0x01)
			u.uvol, _ = next(0x02)
			u.dvol, _ = next(0x04)
			u.tpkt, u.hasPackets = next(0x08)
			u.upkt, _ = next(0x10)
			u.dpkt, _ = next(0x20)
		}
	}
	return u
}

// wireIE is a decoded IE; grouped ones are decoded again by the caller.
type wireIE struct {
	typ uint16
	val []byte
}

// decodeIEs splits a sequence of IEs (§8.1.1).
func decodeIEs(t testing.TB, b []byte) []wireIE {
	t.Helper()
	var out []wireIE
	for len(b) > 0 {
		if len(b) < 4 || len(b) < 4+int(binary.BigEndian.Uint16(b[2:])) {
			t.Fatalf("truncated IE: % x", b)
		}
		n := int(binary.BigEndian.Uint16(b[2:]))
		out = append(out, wireIE{typ: binary.BigEndian.Uint16(b), val: b[4 : 4+n]})
		b = b[4+n:]
	}
	return out
}

// decodeMsg checks a message header (§7.2.2) and returns its SEID (when
// S=1) and its IEs.
func decodeMsg(t testing.TB, b []byte) (msgType uint8, seid uint64, ies []wireIE) {
	t.Helper()
	if len(b) < 8 || b[0]>>5 != 1 || int(binary.BigEndian.Uint16(b[2:]))+4 != len(b) {
		t.Fatalf("bad PFCP header: % x", b)
	}
	rest := b[4:]
	if b[0]&1 != 0 {
		seid, rest = binary.BigEndian.Uint64(rest), rest[8:]
	}
	return b[1], seid, decodeIEs(t, rest[4:])
}

// all returns the values of the IEs of a type.
func all(ies []wireIE, typ uint16) [][]byte {
	var out [][]byte
	for _, i := range ies {
		if i.typ == typ {
			out = append(out, i.val)
		}
	}
	return out
}

// one returns the value of the only IE of a type, nil when there is none.
func one(t testing.TB, ies []wireIE, typ uint16) []byte {
	t.Helper()
	v := all(ies, typ)
	switch len(v) {
	case 0:
		return nil
	case 1:
		return v[0]
	}
	t.Fatalf("%d IEs of type %d", len(v), typ)
	return nil
}
