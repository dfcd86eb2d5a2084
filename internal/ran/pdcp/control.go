package pdcp

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Control PDU types (38.323 6.3.8), from the PDU Type field.
const (
	ControlStatusReport = 0 // PDCP status report
	ControlROHCFeedback = 1 // interspersed ROHC feedback
	ControlEHCFeedback  = 2 // EHC feedback
)

const (
	controlTypeShift = 4    // the PDU Type follows the D/C bit
	controlTypeBits  = 0x07 // and has 3 bits
	statusHeaderLen  = 5    // D/C, PDU Type, R; FMC
)

// ControlType is the PDU Type of a control PDU (D/C = 0).
func ControlType(pdu []byte) (uint8, error) {
	if len(pdu) == 0 {
		return 0, errors.New("empty PDU")
	}
	if pdu[0]&dataBit != 0 {
		return 0, errors.New("a data PDU, not a control PDU")
	}
	return pdu[0] >> controlTypeShift & controlTypeBits, nil
}

// StatusReport is a PDCP status report (38.323 6.2.3.1): every COUNT below
// FMC was received, FMC was not, and bit i of Bitmap (the most significant
// bit of the first octet being bit 0) is 1 when FMC+1+i was.
type StatusReport struct {
	FMC    uint32
	Bitmap []byte
}

// ParseStatusReport reads a status report control PDU; Bitmap is within pdu.
func ParseStatusReport(pdu []byte) (StatusReport, error) {
	t, err := ControlType(pdu)
	if err != nil {
		return StatusReport{}, err
	}
	if t != ControlStatusReport {
		return StatusReport{}, fmt.Errorf("control PDU type %d is no status report", t)
	}
	if len(pdu) < statusHeaderLen {
		return StatusReport{}, fmt.Errorf("status report of %d octets, shorter than its %d-octet header", len(pdu), statusHeaderLen)
	}
	return StatusReport{FMC: binary.BigEndian.Uint32(pdu[1:statusHeaderLen]), Bitmap: pdu[statusHeaderLen:]}, nil
}

// Received tells whether the report says count was received.
func (s StatusReport) Received(count uint32) bool {
	if count < s.FMC {
		return true
	}
	i := uint64(count) - uint64(s.FMC) - 1
	if count == s.FMC || i >= 8*uint64(len(s.Bitmap)) {
		return false
	}
	return s.Bitmap[i/8]&(0x80>>(i%8)) != 0
}

// Append appends the report as a control PDU.
func (s StatusReport) Append(dst []byte) []byte {
	return append(appendStatusHeader(dst, s.FMC), s.Bitmap...)
}

func appendStatusHeader(dst []byte, fmc uint32) []byte {
	dst = append(dst, ControlStatusReport<<controlTypeShift)
	return binary.BigEndian.AppendUint32(dst, fmc)
}
