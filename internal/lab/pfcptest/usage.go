package pfcptest

import (
	"fmt"
	"slices"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
)

// Reporting Triggers (§8.2.19) and Usage Report Trigger (§8.2.41) flags,
// octet 5 in bits 0-7, octet 6 in bits 8-15: the triggers sit at the same
// place in both IEs.
const (
	TriggerPERIO = 1 << 0
	TriggerVOLTH = 1 << 1
	TriggerSTART = 1 << 4
	TriggerSTOPT = 1 << 5
	TriggerTERMR = 1 << 11 // Usage Report Trigger only
)

// VolumeURR is a Create URR that measures volume, with packet counts
// (MNOP), and reports on triggers (Reporting Triggers flags): with PERIO
// every period, with VOLTH when the total volume reaches threshold.
func VolumeURR(id uint32, triggers uint32, period time.Duration, threshold uint64) *ie.IE {
	const (
		volum = 1
		mnop  = 0x10 // Measurement Information: report packet counts
		tovol = 0x01
	)
	ies := []*ie.IE{ie.NewURRID(id), ie.NewMeasurementMethod(0, volum, 0),
		ie.NewReportingTriggers(uint8(triggers), uint8(triggers>>8), uint8(triggers>>16)),
		ie.NewMeasurementInformation(mnop)}
	if triggers&TriggerPERIO != 0 {
		ies = append(ies, ie.NewMeasurementPeriod(period))
	}
	if triggers&TriggerVOLTH != 0 {
		ies = append(ies, ie.NewVolumeThreshold(tovol, threshold, 0, 0))
	}
	return ie.NewCreateURR(ies...)
}

// AddURR adds a Create URR to req and has the Create PDRs with the IDs
// given use it.
func AddURR(req *message.SessionEstablishmentRequest, urr *ie.IE, pdrs ...uint16) error {
	id, err := urr.URRID()
	if err != nil {
		return fmt.Errorf("Create URR: %w", err)
	}
	req.CreateURR = append(req.CreateURR, urr)
	for i, p := range req.CreatePDR {
		if pdr, err := p.PDRID(); err == nil && slices.Contains(pdrs, pdr) {
			// A new group: the old one's length does not follow its children.
			req.CreatePDR[i] = ie.NewCreatePDR(append(slices.Clip(p.ChildIEs), ie.NewURRID(id))...)
		}
	}
	return nil
}

// UsageReport is what a Usage Report IE says, whichever message carried it.
type UsageReport struct {
	URRID, SEQN uint32
	Trigger     uint32 // Usage Report Trigger flags
	Volume      ie.VolumeMeasurementFields
}

// ParseUsageReport reads a Usage Report IE of any message: a Session
// Report Request, or a Session Modification or Deletion Response.
func ParseUsageReport(report *ie.IE) (UsageReport, error) {
	var u UsageReport
	children, err := report.UsageReport()
	if err != nil {
		return u, err
	}
	for _, c := range children {
		switch c.Type {
		case ie.URRID:
			u.URRID, err = c.URRID()
		case ie.URSEQN:
			u.SEQN, err = c.URSEQN()
		case ie.UsageReportTrigger:
			var b []byte
			if b, err = c.UsageReportTrigger(); err == nil {
				for i, o := range b[:min(len(b), 3)] {
					u.Trigger |= uint32(o) << (8 * i)
				}
			}
		case ie.VolumeMeasurement:
			var v *ie.VolumeMeasurementFields
			if v, err = c.VolumeMeasurement(); err == nil {
				u.Volume = *v
			}
		}
		if err != nil {
			return u, fmt.Errorf("usage report: IE type %d: %w", c.Type, err)
		}
	}
	return u, nil
}
