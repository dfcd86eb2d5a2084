// Package e1 is the bearer context management of E1AP (TS 38.463 §8.3,
// §9.2.2) as plain data: what a CU-CP asks of the CU-UP and what the CU-UP
// answers. The REST API carries these documents as JSON; an E1AP front end
// would map its ASN.1 onto the same types, field for field.
//
// Names follow the information elements of TS 38.463 §9.3; only what the
// CU-UP's user plane acts on is modelled (no data forwarding, no PDCP
// duplication or cell-group splitting, no ROHC).
package e1

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// BearerContextSetupRequest is §9.2.2.1.
type BearerContextSetupRequest struct {
	CUCPUEID uint32              `json:"gnbCuCpUeE1apId"`
	Security SecurityInformation `json:"securityInformation" required:"true"`
	// UEDLAMBR is the UE DL Aggregate Maximum Bit Rate, bit/s.
	UEDLAMBR    uint64              `json:"ueDlAggregateMaximumBitRate"`
	PDUSessions []PDUSessionToSetup `json:"pduSessionResourceToSetupList" required:"true"`
}

// SecurityInformation is §9.3.1.34: the algorithms and the UP keys.
type SecurityInformation struct {
	Algorithm SecurityAlgorithm `json:"securityAlgorithm" required:"true"`
	Key       UPSecurityKey     `json:"upSecurityKey" required:"true"`
}

// SecurityAlgorithm is §9.3.1.35.
type SecurityAlgorithm struct {
	Ciphering Ciphering `json:"cipheringAlgorithm" required:"true"`
	// Integrity is absent when no PDU session uses integrity protection.
	Integrity *Integrity `json:"integrityProtectionAlgorithm,omitempty"`
}

// UPSecurityKey is §9.3.1.36: KUPenc and KUPint.
type UPSecurityKey struct {
	Encryption Key  `json:"encryptionKey" required:"true"`
	Integrity  *Key `json:"integrityProtectionKey,omitempty"`
}

// PDUSessionToSetup is an item of PDU Session Resource To Setup List.
type PDUSessionToSetup struct {
	ID                 uint8              `json:"pduSessionId" range:"1..255"`
	Type               PDUSessionType     `json:"pduSessionType" required:"true"`
	SNSSAI             SNSSAI             `json:"snssai" required:"true"`
	SecurityIndication SecurityIndication `json:"securityIndication" required:"true"`
	// ULTunnel is NG UL UP Transport Layer Information: where the UPF
	// takes the session's uplink.
	ULTunnel UPTunnel     `json:"ngUlUpTnlInformation" required:"true"`
	DRBs     []DRBToSetup `json:"drbToSetupList" required:"true"`
}

// SNSSAI is §9.3.1.9.
type SNSSAI struct {
	SST uint8   `json:"sst"`
	SD  *uint32 `json:"sd,omitempty" range:"0..16777215"` // 24 bits
}

// SecurityIndication is §9.3.1.23: whether the session's user plane is
// integrity protected and ciphered.
type SecurityIndication struct {
	Integrity       Indication `json:"integrityProtectionIndication" required:"true"`
	Confidentiality Indication `json:"confidentialityProtectionIndication" required:"true"`
}

// UPTunnel is a GTP tunnel endpoint of UP Transport Layer Information
// (§9.3.2.1).
type UPTunnel struct {
	Address netip.Addr `json:"transportLayerAddress" required:"true"`
	TEID    uint32     `json:"gtpTeid" required:"true"`
}

// DRBToSetup is an item of DRB To Setup List.
type DRBToSetup struct {
	ID       uint8             `json:"drbId" required:"true" range:"1..32"`
	SDAP     SDAPConfiguration `json:"sdapConfiguration" required:"true"`
	PDCP     PDCPConfiguration `json:"pdcpConfiguration" required:"true"`
	QoSFlows []QoSFlow         `json:"qosFlowInformationToBeSetup" required:"true"`
}

// SDAPConfiguration is §9.3.1.39.
type SDAPConfiguration struct {
	DefaultDRB bool `json:"defaultDrb"`
	HeaderUL   bool `json:"sdapHeaderUl"`
	HeaderDL   bool `json:"sdapHeaderDl"`
}

// PDCPConfiguration is §9.3.1.38, timers in milliseconds.
type PDCPConfiguration struct {
	SNSizeUL uint8   `json:"pdcpSnSizeUl" required:"true"` // 12 or 18
	SNSizeDL uint8   `json:"pdcpSnSizeDl" required:"true"`
	RLCMode  RLCMode `json:"rlcMode" required:"true"`
	// TReordering is t-Reordering of the uplink receiver (§9.3.1.40).
	TReordering *uint16 `json:"tReorderingTimerMs,omitempty"`
	// DiscardTimer bounds how long a downlink SDU waits to be sent
	// (§9.3.1.41); absent: infinity.
	DiscardTimer       *uint16 `json:"discardTimerMs,omitempty"`
	OutOfOrderDelivery bool    `json:"outOfOrderDelivery"`
}

// QoSFlow is an item of QoS Flow QoS Parameters List (§9.3.1.25).
type QoSFlow struct {
	QFI    uint8 `json:"qosFlowIdentifier" range:"0..63"`
	FiveQI uint8 `json:"fiveQi"`
	// ReflectiveMapping has the UE map the flow to its DRB reflectively:
	// the flow's downlink SDAP headers carry RDI (TS 37.324 5.3.2). The
	// DRB needs an SDAP DL header.
	ReflectiveMapping bool `json:"reflectiveMapping"`
	// GBR, when present, makes the flow a GBR flow (bit/s).
	GBR *GBRFlowInformation `json:"gbrQosFlowInformation,omitempty"`
}

// GBRFlowInformation is §9.3.1.21 (the bit rates only).
type GBRFlowInformation struct {
	MaxDL uint64 `json:"maxFlowBitRateDownlink"`
	MaxUL uint64 `json:"maxFlowBitRateUplink"`
	GuaDL uint64 `json:"guaranteedFlowBitRateDownlink"`
	GuaUL uint64 `json:"guaranteedFlowBitRateUplink"`
}

// BearerContextSetupResponse is §9.2.2.2.
type BearerContextSetupResponse struct {
	CUCPUEID    uint32            `json:"gnbCuCpUeE1apId"`
	CUUPUEID    uint32            `json:"gnbCuUpUeE1apId"`
	PDUSessions []PDUSessionSetup `json:"pduSessionResourceSetupList"`
}

// PDUSessionSetup is an item of PDU Session Resource Setup List.
type PDUSessionSetup struct {
	ID             uint8          `json:"pduSessionId"`
	SecurityResult SecurityResult `json:"securityResult"`
	// DLTunnel is NG DL UP Transport Layer Information: where the UPF
	// sends the session's downlink.
	DLTunnel UPTunnel   `json:"ngDlUpTnlInformation"`
	DRBs     []DRBSetup `json:"drbSetupList"`
}

// SecurityResult is §9.3.1.24.
type SecurityResult struct {
	Integrity       Result `json:"integrityProtectionResult"`
	Confidentiality Result `json:"confidentialityProtectionResult"`
}

// DRBSetup is an item of DRB Setup List.
type DRBSetup struct {
	ID uint8 `json:"drbId"`
	// ULTunnel is UL UP Transport Parameters: where the DU sends the
	// DRB's uplink.
	ULTunnel UPTunnel `json:"ulUpTransportParameters"`
	Flows    IDs      `json:"flowSetupList"`
}

// BearerContextModificationRequest is §9.2.2.4.
type BearerContextModificationRequest struct {
	Security *SecurityInformation `json:"securityInformation,omitempty"`
	Setup    []PDUSessionToSetup  `json:"pduSessionResourceToSetupList,omitempty"`
	Modify   []PDUSessionToModify `json:"pduSessionResourceToModifyList,omitempty"`
	Remove   IDs                  `json:"pduSessionResourceToRemoveList,omitempty" range:"1..255"`
}

// PDUSessionToModify is an item of PDU Session Resource To Modify List.
type PDUSessionToModify struct {
	ID uint8 `json:"pduSessionId" range:"1..255"`
	// ULTunnel, when present, moves the session's uplink to another UPF
	// endpoint.
	ULTunnel   *UPTunnel     `json:"ngUlUpTnlInformation,omitempty"`
	SetupDRBs  []DRBToSetup  `json:"drbToSetupList,omitempty"`
	ModifyDRBs []DRBToModify `json:"drbToModifyList,omitempty"`
	RemoveDRBs IDs           `json:"drbToRemoveList,omitempty" range:"1..32"`
}

// DRBToModify is an item of DRB To Modify List.
type DRBToModify struct {
	ID uint8 `json:"drbId" required:"true" range:"1..32"`
	// DLTunnel is DL UP Parameters: where the DU takes the DRB's downlink.
	DLTunnel *UPTunnel `json:"dlUpParameters,omitempty"`
}

// BearerContextModificationResponse is §9.2.2.5.
type BearerContextModificationResponse struct {
	CUCPUEID uint32            `json:"gnbCuCpUeE1apId"`
	CUUPUEID uint32            `json:"gnbCuUpUeE1apId"`
	Setup    []PDUSessionSetup `json:"pduSessionResourceSetupList,omitempty"`
	Modified []PDUSessionSetup `json:"pduSessionResourceModifiedList,omitempty"`
}

// IDs are a list of PDU session, DRB or QoS flow identifiers: a list of
// numbers in JSON, where []uint8 would be base64.
type IDs []uint8

// MarshalJSON writes the numbers.
func (ids IDs) MarshalJSON() ([]byte, error) {
	n := make([]uint16, len(ids))
	for i, id := range ids {
		n[i] = uint16(id)
	}
	return json.Marshal(n)
}

// UnmarshalJSON reads a list of numbers from 0 to 255.
func (ids *IDs) UnmarshalJSON(b []byte) error {
	var n []uint16
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	*ids = make(IDs, len(n))
	for i, v := range n {
		if v > 255 {
			return fmt.Errorf("identifier %d is over 255", v)
		}
		(*ids)[i] = uint8(v)
	}
	return nil
}

// Ciphering is Ciphering Algorithm (§9.3.1.32): NEA0 to NEA3.
type Ciphering uint8

// Integrity is Integrity Protection Algorithm (§9.3.1.33): NIA0 to NIA3.
type Integrity uint8

func (c Ciphering) String() string { return fmt.Sprintf("NEA%d", uint8(c)) }
func (i Integrity) String() string { return fmt.Sprintf("NIA%d", uint8(i)) }

// MarshalText writes the algorithm's name.
func (c Ciphering) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// MarshalText writes the algorithm's name.
func (i Integrity) MarshalText() ([]byte, error) { return []byte(i.String()), nil }

// UnmarshalText takes NEA0, NEA1, NEA2 or NEA3.
func (c *Ciphering) UnmarshalText(b []byte) error {
	n, err := algorithm("NEA", string(b))
	*c = Ciphering(n)
	return err
}

// UnmarshalText takes NIA0, NIA1, NIA2 or NIA3.
func (i *Integrity) UnmarshalText(b []byte) error {
	n, err := algorithm("NIA", string(b))
	*i = Integrity(n)
	return err
}

func algorithm(prefix, s string) (uint8, error) {
	if len(s) == 4 && strings.HasPrefix(s, prefix) && s[3] >= '0' && s[3] <= '3' {
		return s[3] - '0', nil
	}
	return 0, fmt.Errorf("%q is not one of %[2]s0, %[2]s1, %[2]s2, %[2]s3", s, prefix)
}

// Key is a UP security key, in hex: 128 bits, or the 256 bits of the key
// derivation, of which the 128-bit algorithms take the least significant
// half (TS 33.501 A.8).
type Key []byte

// MarshalText writes the key in hex.
func (k Key) MarshalText() ([]byte, error) { return []byte(hex.EncodeToString(k)), nil }

// UnmarshalText takes 32 or 64 hex digits. A refusal says what is wrong
// without the digits: a key is never shown.
func (k *Key) UnmarshalText(b []byte) error {
	v, err := hex.DecodeString(string(b))
	if err != nil {
		return errors.New("a key is 32 or 64 hex digits, and this one has other characters")
	}
	if len(v) != 16 && len(v) != 32 {
		return fmt.Errorf("a key is 32 or 64 hex digits, not %d", len(b))
	}
	*k = v
	return nil
}

// Algorithm128 is the key the 128-bit algorithms take.
func (k Key) Algorithm128() []byte { return k[len(k)-16:] }

// enumerations of strings with a fixed set of values
type enum interface {
	~string
}

func checkEnum[E enum](v E, allowed ...E) error {
	if slices.Contains(allowed, v) {
		return nil
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	return fmt.Errorf("%q is not one of %s", v, strings.Join(names, ", "))
}

// PDUSessionType is §9.3.1.10.
type PDUSessionType string

// The PDU session types.
const (
	IPv4         PDUSessionType = "ipv4"
	IPv6         PDUSessionType = "ipv6"
	IPv4v6       PDUSessionType = "ipv4v6"
	Ethernet     PDUSessionType = "ethernet"
	Unstructured PDUSessionType = "unstructured"
)

// Indication is a Security Indication value.
type Indication string

// The indications.
const (
	Required  Indication = "required"
	Preferred Indication = "preferred"
	NotNeeded Indication = "not-needed"
)

// Result is a Security Result value.
type Result string

// The results.
const (
	Performed    Result = "performed"
	NotPerformed Result = "not-performed"
)

// RLCMode is §9.3.1.27.
type RLCMode string

// The RLC modes.
const (
	RLCTM            RLCMode = "tm"
	RLCAM            RLCMode = "am"
	RLCUMBidirection RLCMode = "um-bidirectional"
	RLCUMUplink      RLCMode = "um-unidirectional-ul"
	RLCUMDownlink    RLCMode = "um-unidirectional-dl"
)
