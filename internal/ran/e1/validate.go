package e1

import (
	"fmt"
	"slices"

	"github.com/xdp5g/xdp5g/internal/fielderr"
)

// Timer values RRC can configure (TS 38.331 PDCP-Config), in milliseconds.
var (
	tReorderingValues = []uint16{0, 1, 2, 4, 5, 8, 10, 15, 20, 30, 40, 50, 60, 80, 100, 120, 140, 160, 180, 200,
		220, 240, 260, 280, 300, 500, 750, 1000, 1250, 1500, 1750, 2000, 2250, 2500, 2750, 3000}
	discardTimerValues = []uint16{1, 2, 4, 6, 8, 10, 20, 30, 40, 50, 60, 75, 100, 150, 200, 250, 300, 500, 750, 1500}
)

// Validate checks a setup request on its own: every field in range, IDs
// unique, and the security a session requires available.
func (r *BearerContextSetupRequest) Validate() error {
	if err := r.Security.validate("securityInformation"); err != nil {
		return err
	}
	if len(r.PDUSessions) == 0 {
		return fielderr.New("pduSessionResourceToSetupList", "needs at least one PDU session")
	}
	return ValidateSessions("pduSessionResourceToSetupList", r.PDUSessions, r.Security, nil)
}

func (s SecurityInformation) validate(path string) error {
	if (s.Algorithm.Integrity == nil) != (s.Key.Integrity == nil) {
		return fielderr.New(path, "an integrity protection algorithm and an integrity protection key come together")
	}
	if err := checkKey(path+".upSecurityKey.encryptionKey", s.Key.Encryption); err != nil {
		return err
	}
	if s.Key.Integrity != nil {
		return checkKey(path+".upSecurityKey.integrityProtectionKey", *s.Key.Integrity)
	}
	return nil
}

// checkKey refuses a key the algorithms cannot take (Key.Algorithm128).
func checkKey(path string, k Key) error {
	if len(k) != 16 && len(k) != 32 {
		return fielderr.New(path, "a key is 128 or 256 bits, not %d octets", len(k))
	}
	return nil
}

// IntegrityPerformed tells whether a session with this indication gets
// integrity protection under security, and refuses one that requires it
// when security has no integrity algorithm (TS 38.463 §8.3.1.2: the CU-UP
// rejects what it cannot perform).
func IntegrityPerformed(ind SecurityIndication, security SecurityInformation) (bool, error) {
	available := security.Algorithm.Integrity != nil
	if ind.Integrity == Required && !available {
		return false, fmt.Errorf("integrity protection is required but securityInformation has no integrity algorithm")
	}
	return available && ind.Integrity != NotNeeded, nil
}

// ValidateSessions checks PDU sessions to set up under security; existing
// lists the DRB IDs the UE already has, which the new ones must not reuse.
func ValidateSessions(path string, sessions []PDUSessionToSetup, security SecurityInformation, existing []uint8) error {
	drbs := slices.Clone(existing)
	var ids []uint8
	for i, s := range sessions {
		p := fmt.Sprintf("%s[%d]", path, i)
		if s.ID == 0 {
			return fielderr.New(p+".pduSessionId", "0 is no PDU session (TS 24.007 11.2.3.1b)")
		}
		if slices.Contains(ids, s.ID) {
			return fielderr.New(p+".pduSessionId", "PDU session %d is listed twice", s.ID)
		}
		ids = append(ids, s.ID)
		if err := checkEnum(s.Type, IPv4, IPv6, IPv4v6, Ethernet, Unstructured); err != nil {
			return fielderr.New(p+".pduSessionType", "%v", err)
		}
		if s.SNSSAI.SD != nil && *s.SNSSAI.SD > 0xffffff {
			return fielderr.New(p+".snssai.sd", "is 24 bits")
		}
		if err := checkEnum(s.SecurityIndication.Integrity, Required, Preferred, NotNeeded); err != nil {
			return fielderr.New(p+".securityIndication.integrityProtectionIndication", "%v", err)
		}
		if err := checkEnum(s.SecurityIndication.Confidentiality, Required, Preferred, NotNeeded); err != nil {
			return fielderr.New(p+".securityIndication.confidentialityProtectionIndication", "%v", err)
		}
		if _, err := IntegrityPerformed(s.SecurityIndication, security); err != nil {
			return fielderr.New(p+".securityIndication.integrityProtectionIndication", "%v", err)
		}
		if err := s.ULTunnel.Validate(); err != nil {
			return fielderr.New(p+".ngUlUpTnlInformation", "%v", err)
		}
		if len(s.DRBs) == 0 {
			return fielderr.New(p+".drbToSetupList", "needs at least one DRB")
		}
		var err error
		if drbs, err = ValidateDRBs(p+".drbToSetupList", s.DRBs, drbs, nil); err != nil {
			return err
		}
	}
	return nil
}

// ValidateDRBs checks DRBs to add to a session: their IDs must not be in
// ueDRBs (every DRB of the UE), their QFIs not in flows (the session's
// other DRBs'), and the session has one default DRB at most. It returns
// ueDRBs with the new IDs.
func ValidateDRBs(path string, add []DRBToSetup, ueDRBs, flows []uint8) ([]uint8, error) {
	defaults := 0
	for i, d := range add {
		p := fmt.Sprintf("%s[%d]", path, i)
		if d.ID < 1 || d.ID > 32 {
			return nil, fielderr.New(p+".drbId", "%d is not a DRB ID (1 to 32)", d.ID)
		}
		if slices.Contains(ueDRBs, d.ID) {
			return nil, fielderr.New(p+".drbId", "the UE already has DRB %d", d.ID)
		}
		ueDRBs = append(ueDRBs, d.ID)
		if d.SDAP.DefaultDRB {
			if defaults++; defaults > 1 {
				return nil, fielderr.New(p+".sdapConfiguration.defaultDrb", "a PDU session has one default DRB")
			}
			if !d.SDAP.HeaderUL {
				return nil, fielderr.New(p+".sdapConfiguration.sdapHeaderUl", "must be true for the default DRB (TS 38.331 SDAP-Config)")
			}
		}
		if err := d.PDCP.validate(p + ".pdcpConfiguration"); err != nil {
			return nil, err
		}
		if len(d.QoSFlows) == 0 {
			return nil, fielderr.New(p+".qosFlowInformationToBeSetup", "needs at least one QoS flow")
		}
		if len(d.QoSFlows) > 1 && !d.SDAP.HeaderUL {
			return nil, fielderr.New(p+".sdapConfiguration.sdapHeaderUl",
				"must be true for a DRB of several QoS flows: uplink packets carry their QFI only there")
		}
		for j, f := range d.QoSFlows {
			fp := fmt.Sprintf("%s.qosFlowInformationToBeSetup[%d].qosFlowIdentifier", p, j)
			if f.QFI > 63 {
				return nil, fielderr.New(fp, "%d is not a QFI (0 to 63)", f.QFI)
			}
			if f.ReflectiveMapping && !d.SDAP.HeaderDL {
				return nil, fielderr.New(fmt.Sprintf("%s.qosFlowInformationToBeSetup[%d].reflectiveMapping", p, j),
					"needs sdapHeaderDl: RDI travels in the downlink SDAP header")
			}
			if slices.Contains(flows, f.QFI) {
				return nil, fielderr.New(fp, "QoS flow %d is mapped to another DRB of the session", f.QFI)
			}
			flows = append(flows, f.QFI)
		}
	}
	return ueDRBs, nil
}

func (c PDCPConfiguration) validate(path string) error {
	for _, sn := range []struct {
		name string
		size uint8
	}{{"pdcpSnSizeUl", c.SNSizeUL}, {"pdcpSnSizeDl", c.SNSizeDL}} {
		if sn.size != 12 && sn.size != 18 {
			return fielderr.New(path+"."+sn.name, "a DRB's SN is 12 or 18 bits, not %d", sn.size)
		}
	}
	if err := checkEnum(c.RLCMode, RLCAM, RLCUMBidirection, RLCUMUplink, RLCUMDownlink); err != nil {
		return fielderr.New(path+".rlcMode", "%v (a DRB does not use TM)", err)
	}
	if c.TReordering != nil && !slices.Contains(tReorderingValues, *c.TReordering) {
		return fielderr.New(path+".tReorderingTimerMs", "%d ms is not a t-Reordering of TS 38.331 (%v)", *c.TReordering, tReorderingValues)
	}
	if c.DiscardTimer != nil && !slices.Contains(discardTimerValues, *c.DiscardTimer) {
		return fielderr.New(path+".discardTimerMs", "%d ms is not a discardTimer of TS 38.331 (%v; absent: infinity)", *c.DiscardTimer, discardTimerValues)
	}
	return nil
}

// Validate checks a tunnel endpoint: an address and a TEID other than 0.
func (t UPTunnel) Validate() error {
	switch {
	case !t.Address.IsValid() || t.Address.IsUnspecified() || t.Address.IsMulticast():
		return fmt.Errorf("transportLayerAddress %v is not a unicast address", t.Address)
	case t.TEID == 0:
		return fmt.Errorf("gtpTeid 0 is reserved (TS 29.281 5.1)")
	}
	return nil
}
