package nru

import "fmt"

// DLUserData is a DL USER DATA frame (38.425 5.5.2.1), which the CU-UP
// sends with each NR PDCP PDU, or alone to poll or discard.
type DLUserData struct {
	SN uint32 // NR-U sequence number, one per frame

	ReportPolling         bool // asks for a DL DATA DELIVERY STATUS
	RequestOutOfSeqReport bool // asks it to report PDCP SNs delivered out of sequence
	UserDataExistence     bool // the CU-UP has user data for the DRB
	AssistanceInfoPolling bool // asks for an ASSISTANCE INFORMATION frame
	Retransmission        bool // the PDCP PDU is a retransmission

	// Flush (DL Flush) discards all NR PDCP PDUs up to and including
	// DiscardSN.
	Flush     bool
	DiscardSN uint32
	// DiscardBlocks (DL Discard Blocks when not empty) discards blocks of
	// NR PDCP PDUs; at most 255.
	DiscardBlocks []DiscardBlock
	// ReportDelivered asks for a DL DATA DELIVERY STATUS once the NR PDCP
	// PDU with SN ReportSN has been delivered.
	ReportDelivered bool
	ReportSN        uint32
}

// DiscardBlock is Size NR PDCP PDUs from SN Start on.
type DiscardBlock struct {
	Start uint32
	Size  uint8
}

// Flag bits of the first and second octets (38.425 figure 5.5.2.1-1).
const (
	udDiscardBlocks = 0x04
	udFlush         = 0x02
	udReportPolling = 0x01

	udRequestOutOfSeq   = 0x10
	udReportDelivered   = 0x08
	udUserDataExistence = 0x04
	udAssistancePolling = 0x02
	udRetransmission    = 0x01
)

// Len is the length of the frame, padding included.
func (d *DLUserData) Len() int {
	n := 2 + 3 // flags, NR-U SN
	n += octets(d.Flush, 3) + octets(len(d.DiscardBlocks) > 0, 1+4*len(d.DiscardBlocks)) + octets(d.ReportDelivered, 3)
	return padded(n)
}

// Put writes the frame into b and returns its length, Len.
func (d *DLUserData) Put(b []byte) (int, error) {
	if len(d.DiscardBlocks) > 255 {
		return 0, fmt.Errorf("%v: %d discard blocks, over 255", TypeDLUserData, len(d.DiscardBlocks))
	}
	n := d.Len()
	if err := checkRoom(TypeDLUserData, n, len(b)); err != nil {
		return 0, err
	}
	if err := checkSNs(TypeDLUserData, d.SN, d.DiscardSN, d.ReportSN); err != nil {
		return 0, err
	}
	for _, blk := range d.DiscardBlocks {
		if err := checkSNs(TypeDLUserData, blk.Start); err != nil {
			return 0, err
		}
	}
	w := writer{b: b}
	w.u8(uint8(TypeDLUserData)<<4 | flag(len(d.DiscardBlocks) > 0, udDiscardBlocks) |
		flag(d.Flush, udFlush) | flag(d.ReportPolling, udReportPolling))
	w.u8(flag(d.RequestOutOfSeqReport, udRequestOutOfSeq) | flag(d.ReportDelivered, udReportDelivered) |
		flag(d.UserDataExistence, udUserDataExistence) | flag(d.AssistanceInfoPolling, udAssistancePolling) |
		flag(d.Retransmission, udRetransmission))
	w.u24(d.SN)
	if d.Flush {
		w.u24(d.DiscardSN)
	}
	if len(d.DiscardBlocks) > 0 {
		w.u8(uint8(len(d.DiscardBlocks)))
		for _, blk := range d.DiscardBlocks {
			w.u24(blk.Start)
			w.u8(blk.Size)
		}
	}
	if d.ReportDelivered {
		w.u24(d.ReportSN)
	}
	return w.pad(n), nil
}

// Decode reads a DL USER DATA frame into d, reusing the array of
// d.DiscardBlocks. Spare bits, padding and anything after the flagged
// fields are ignored. On error d keeps its fields, though the elements of
// its DiscardBlocks may have been overwritten.
func (d *DLUserData) Decode(frame []byte) error {
	r := reader{typ: TypeDLUserData, b: frame}
	f1, f2, err := r.flags()
	if err != nil {
		return err
	}
	v := DLUserData{
		SN:                    r.u24("the NR-U SN"),
		ReportPolling:         f1&udReportPolling != 0,
		RequestOutOfSeqReport: f2&udRequestOutOfSeq != 0,
		UserDataExistence:     f2&udUserDataExistence != 0,
		AssistanceInfoPolling: f2&udAssistancePolling != 0,
		Retransmission:        f2&udRetransmission != 0,
		Flush:                 f1&udFlush != 0,
		ReportDelivered:       f2&udReportDelivered != 0,
		DiscardBlocks:         d.DiscardBlocks[:0],
	}
	if v.Flush {
		v.DiscardSN = r.u24("the DL discard NR PDCP PDU SN")
	}
	if f1&udDiscardBlocks != 0 {
		n := int(r.u8("the DL discard number of blocks"))
		if r.err == nil && n == 0 {
			r.err = fmt.Errorf("%v: DL discard blocks flagged but none given", TypeDLUserData)
		}
		for range n {
			blk := DiscardBlock{Start: r.u24("a DL discard NR PDCP PDU SN start"), Size: r.u8("a discarded block size")}
			if r.err != nil {
				break
			}
			v.DiscardBlocks = append(v.DiscardBlocks, blk)
		}
	}
	if v.ReportDelivered {
		v.ReportSN = r.u24("the DL report NR PDCP PDU SN")
	}
	if r.err != nil {
		return r.err
	}
	*d = v
	return nil
}
