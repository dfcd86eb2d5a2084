package e1

import (
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/xdp5g/xdp5g/internal/fielderr"
)

func ptr[T any](v T) *T { return &v }

// request is a valid setup: one session of two DRBs, integrity required.
func request() BearerContextSetupRequest {
	nia2 := Integrity(2)
	return BearerContextSetupRequest{
		CUCPUEID: 7,
		Security: SecurityInformation{
			Algorithm: SecurityAlgorithm{Ciphering: 2, Integrity: &nia2},
			Key:       UPSecurityKey{Encryption: make(Key, 16), Integrity: ptr(make(Key, 32))},
		},
		PDUSessions: []PDUSessionToSetup{{
			ID: 1, Type: IPv4, SNSSAI: SNSSAI{SST: 1},
			SecurityIndication: SecurityIndication{Integrity: Required, Confidentiality: Preferred},
			ULTunnel:           UPTunnel{Address: netip.MustParseAddr("10.0.0.1"), TEID: 0x100},
			DRBs: []DRBToSetup{
				{ID: 1, SDAP: SDAPConfiguration{DefaultDRB: true, HeaderUL: true, HeaderDL: true},
					PDCP:     PDCPConfiguration{SNSizeUL: 18, SNSizeDL: 18, RLCMode: RLCAM, TReordering: ptr[uint16](100)},
					QoSFlows: []QoSFlow{{QFI: 9, FiveQI: 9}, {QFI: 5, FiveQI: 5}}},
				{ID: 2, PDCP: PDCPConfiguration{SNSizeUL: 12, SNSizeDL: 12, RLCMode: RLCUMBidirection, DiscardTimer: ptr[uint16](50)},
					QoSFlows: []QoSFlow{{QFI: 1, FiveQI: 1}}},
			},
		}},
	}
}

func TestValidRequest(t *testing.T) {
	r := request()
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
}

// Each bad request is refused naming the field at fault.
func TestBadRequests(t *testing.T) {
	for _, c := range []struct {
		field string
		spoil func(r *BearerContextSetupRequest)
	}{
		{field: "securityInformation", spoil: func(r *BearerContextSetupRequest) { r.Security.Key.Integrity = nil }},
		{field: "securityInformation.upSecurityKey.encryptionKey", spoil: func(r *BearerContextSetupRequest) { r.Security.Key.Encryption = make(Key, 8) }},
		{field: "securityInformation.upSecurityKey.integrityProtectionKey", spoil: func(r *BearerContextSetupRequest) {
			r.Security.Key.Integrity = ptr(make(Key, 0))
		}},
		{field: "pduSessionResourceToSetupList", spoil: func(r *BearerContextSetupRequest) { r.PDUSessions = nil }},
		{field: "pduSessionResourceToSetupList[1].pduSessionId", spoil: func(r *BearerContextSetupRequest) {
			r.PDUSessions = append(r.PDUSessions, r.PDUSessions[0])
		}},
		{field: "pduSessionResourceToSetupList[0].pduSessionId", spoil: func(r *BearerContextSetupRequest) { r.PDUSessions[0].ID = 0 }},
		{field: "pduSessionResourceToSetupList[0].pduSessionType", spoil: func(r *BearerContextSetupRequest) { r.PDUSessions[0].Type = "ip" }},
		{field: "pduSessionResourceToSetupList[0].snssai.sd", spoil: func(r *BearerContextSetupRequest) { r.PDUSessions[0].SNSSAI.SD = ptr[uint32](1 << 24) }},
		{field: "pduSessionResourceToSetupList[0].securityIndication.integrityProtectionIndication", spoil: func(r *BearerContextSetupRequest) {
			r.Security.Algorithm.Integrity, r.Security.Key.Integrity = nil, nil
		}},
		{field: "pduSessionResourceToSetupList[0].securityIndication.confidentialityProtectionIndication", spoil: func(r *BearerContextSetupRequest) {
			r.PDUSessions[0].SecurityIndication.Confidentiality = "maybe"
		}},
		{field: "pduSessionResourceToSetupList[0].ngUlUpTnlInformation", spoil: func(r *BearerContextSetupRequest) { r.PDUSessions[0].ULTunnel.TEID = 0 }},
		{field: "pduSessionResourceToSetupList[0].ngUlUpTnlInformation", spoil: func(r *BearerContextSetupRequest) {
			r.PDUSessions[0].ULTunnel.Address = netip.Addr{}
		}},
		{field: "pduSessionResourceToSetupList[0].drbToSetupList", spoil: func(r *BearerContextSetupRequest) { r.PDUSessions[0].DRBs = nil }},
		{field: "pduSessionResourceToSetupList[0].drbToSetupList[1].drbId", spoil: func(r *BearerContextSetupRequest) { r.PDUSessions[0].DRBs[1].ID = 1 }},
		{field: "pduSessionResourceToSetupList[0].drbToSetupList[1].drbId", spoil: func(r *BearerContextSetupRequest) { r.PDUSessions[0].DRBs[1].ID = 33 }},
		{field: "pduSessionResourceToSetupList[0].drbToSetupList[1].sdapConfiguration.defaultDrb", spoil: func(r *BearerContextSetupRequest) {
			r.PDUSessions[0].DRBs[1].SDAP.DefaultDRB = true
		}},
		{field: "pduSessionResourceToSetupList[0].drbToSetupList[0].sdapConfiguration.sdapHeaderUl", spoil: func(r *BearerContextSetupRequest) {
			r.PDUSessions[0].DRBs[0].QoSFlows = r.PDUSessions[0].DRBs[0].QoSFlows[:1]
			r.PDUSessions[0].DRBs[0].SDAP.HeaderUL = false
		}},
		{field: "pduSessionResourceToSetupList[0].drbToSetupList[0].pdcpConfiguration.pdcpSnSizeDl", spoil: func(r *BearerContextSetupRequest) {
			r.PDUSessions[0].DRBs[0].PDCP.SNSizeDL = 7
		}},
		{field: "pduSessionResourceToSetupList[0].drbToSetupList[0].pdcpConfiguration.rlcMode", spoil: func(r *BearerContextSetupRequest) {
			r.PDUSessions[0].DRBs[0].PDCP.RLCMode = RLCTM
		}},
		{field: "pduSessionResourceToSetupList[0].drbToSetupList[0].pdcpConfiguration.tReorderingTimerMs", spoil: func(r *BearerContextSetupRequest) {
			r.PDUSessions[0].DRBs[0].PDCP.TReordering = ptr[uint16](3)
		}},
		{field: "pduSessionResourceToSetupList[0].drbToSetupList[1].pdcpConfiguration.discardTimerMs", spoil: func(r *BearerContextSetupRequest) {
			r.PDUSessions[0].DRBs[1].PDCP.DiscardTimer = ptr[uint16](0)
		}},
		{field: "pduSessionResourceToSetupList[0].drbToSetupList[1].qosFlowInformationToBeSetup", spoil: func(r *BearerContextSetupRequest) {
			r.PDUSessions[0].DRBs[1].QoSFlows = nil
		}},
		{field: "pduSessionResourceToSetupList[0].drbToSetupList[0].sdapConfiguration.sdapHeaderUl", spoil: func(r *BearerContextSetupRequest) {
			r.PDUSessions[0].DRBs[0].SDAP.HeaderUL = false
		}},
		{field: "pduSessionResourceToSetupList[0].drbToSetupList[1].qosFlowInformationToBeSetup[0].qosFlowIdentifier", spoil: func(r *BearerContextSetupRequest) {
			r.PDUSessions[0].DRBs[1].QoSFlows[0].QFI = 9
		}},
		{field: "pduSessionResourceToSetupList[0].drbToSetupList[1].qosFlowInformationToBeSetup[0].qosFlowIdentifier", spoil: func(r *BearerContextSetupRequest) {
			r.PDUSessions[0].DRBs[1].QoSFlows[0].QFI = 64
		}},
	} {
		r := request()
		c.spoil(&r)
		var fe *fielderr.Error
		if err := r.Validate(); !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("refused for %v, want for %s", err, c.field)
		}
	}
}

// Algorithms and keys read and write as TS 33.501 names them, in hex.
func TestJSON(t *testing.T) {
	var a SecurityInformation
	in := `{"securityAlgorithm":{"cipheringAlgorithm":"NEA3","integrityProtectionAlgorithm":"NIA1"},` +
		`"upSecurityKey":{"encryptionKey":"000102030405060708090a0b0c0d0e0f","integrityProtectionKey":"` + strings.Repeat("ab", 32) + `"}}`
	if err := json.Unmarshal([]byte(in), &a); err != nil {
		t.Fatal(err)
	}
	if a.Algorithm.Ciphering != 3 || *a.Algorithm.Integrity != 1 || len(a.Key.Integrity.Algorithm128()) != 16 {
		t.Errorf("decoded %+v", a)
	}
	out, err := json.Marshal(a)
	if err != nil || string(out) != in {
		t.Errorf("encoded %s, %v; want %s", out, err, in)
	}
	for _, bad := range []string{`{"cipheringAlgorithm":"NEA4"}`, `{"cipheringAlgorithm":"nea1"}`, `{"cipheringAlgorithm":"NIA1"}`} {
		if err := json.Unmarshal([]byte(bad), &a.Algorithm); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	var k Key
	for _, bad := range []string{"00", strings.Repeat("0", 48), strings.Repeat("g", 32), "0123456789abcdef0123456789abcdeg"} {
		if err := k.UnmarshalText([]byte(bad)); err == nil || strings.Contains(err.Error(), bad) {
			t.Errorf("key %s: %v, want a refusal that does not show it", bad, err)
		}
	}
}

// Identifier lists are lists of numbers in JSON.
func TestIDs(t *testing.T) {
	out, err := json.Marshal(DRBSetup{ID: 1, Flows: IDs{9, 5}})
	if err != nil || !strings.Contains(string(out), `"flowSetupList":[9,5]`) {
		t.Errorf("encoded %s, %v", out, err)
	}
	var back DRBSetup
	if err := json.Unmarshal(out, &back); err != nil || len(back.Flows) != 2 || back.Flows[1] != 5 {
		t.Errorf("decoded %+v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"flowSetupList":[256]}`), &back); err == nil {
		t.Error("256 accepted as an identifier")
	}
}
