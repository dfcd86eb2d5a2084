package nru

// Cause is the Cause Value of a DL DATA DELIVERY STATUS (38.425 5.5.3).
type Cause uint8

// The cause values defined; the others are reserved.
const (
	CauseUnknown           Cause = 0
	CauseRadioLinkOutage   Cause = 1
	CauseRadioLinkResume   Cause = 2
	CauseULRadioLinkOutage Cause = 3
	CauseDLRadioLinkOutage Cause = 4
	CauseULRadioLinkResume Cause = 5
	CauseDLRadioLinkResume Cause = 6
)

const (
	lostRangesCountField      = "the number of lost NR-U SN ranges"
	lostRangesField           = "a lost NR-U SN range"
	deliveredRangesCountField = "the number of delivered out-of-sequence NR PDCP SN ranges"
	deliveredRangesField      = "a delivered out-of-sequence NR PDCP SN range"
)

// DeliveryStatus is a DL DATA DELIVERY STATUS frame (38.425 5.5.2.2), the
// DU's flow control feedback for a DRB. The optional fields are present
// when their Has flag is set, the range lists when not empty (at most 255
// ranges each).
type DeliveryStatus struct {
	// DesiredBufferSize is how many more octets the DU wants for the DRB.
	DesiredBufferSize uint32
	// FinalFrame marks the last status of the DRB (Final Frame Indication).
	FinalFrame bool

	HasDesiredDataRate bool
	DesiredDataRate    uint32 // octets per second

	// LostRanges are the NR-U SNs the DU found missing (Lost Packet Report).
	LostRanges []SNRange

	HasHighestDelivered   bool
	HighestDeliveredSN    uint32 // highest NR PDCP SN delivered in sequence
	HasHighestTransmitted bool
	HighestTransmittedSN  uint32 // highest NR PDCP SN sent to lower layers

	HasCause bool
	Cause    Cause

	HasHighestDeliveredRetransmitted bool
	HighestDeliveredRetransmittedSN  uint32
	HasHighestRetransmitted          bool
	HighestRetransmittedSN           uint32

	// DeliveredRanges are NR PDCP SNs delivered out of sequence (Delivered
	// NR PDCP SN Range Ind).
	DeliveredRanges []SNRange
}

// Flag bits of the first and second octets (38.425 figure 5.5.2.2-1).
const (
	dsHighestTransmitted = 0x08
	dsHighestDelivered   = 0x04
	dsFinalFrame         = 0x02
	dsLostPacketReport   = 0x01

	dsDeliveredRanges               = 0x10
	dsDataRate                      = 0x08
	dsHighestRetransmitted          = 0x04
	dsHighestDeliveredRetransmitted = 0x02
	dsCauseReport                   = 0x01
)

// Decode reads a DL DATA DELIVERY STATUS frame into s, every field its
// flags announce in the order of 38.425 figure 5.5.2.2-1, reusing the
// arrays of the range lists. Spare bits, padding and anything after the
// flagged fields are ignored. On error s keeps its fields, though the
// elements of its range lists may have been overwritten.
func (s *DeliveryStatus) Decode(frame []byte) error {
	r := reader{typ: TypeDLDataDeliveryStatus, b: frame}
	f1, f2, err := r.flags()
	if err != nil {
		return err
	}
	v := DeliveryStatus{
		DesiredBufferSize:                r.u32("the desired buffer size"),
		FinalFrame:                       f1&dsFinalFrame != 0,
		HasDesiredDataRate:               f2&dsDataRate != 0,
		HasHighestDelivered:              f1&dsHighestDelivered != 0,
		HasHighestTransmitted:            f1&dsHighestTransmitted != 0,
		HasCause:                         f2&dsCauseReport != 0,
		HasHighestDeliveredRetransmitted: f2&dsHighestDeliveredRetransmitted != 0,
		HasHighestRetransmitted:          f2&dsHighestRetransmitted != 0,
		LostRanges:                       s.LostRanges[:0],
		DeliveredRanges:                  s.DeliveredRanges[:0],
	}
	if v.HasDesiredDataRate {
		v.DesiredDataRate = r.u32("the desired data rate")
	}
	if f1&dsLostPacketReport != 0 {
		v.LostRanges = r.ranges(v.LostRanges, lostRangesCountField, lostRangesField)
	}
	if v.HasHighestDelivered {
		v.HighestDeliveredSN = r.u24("the highest delivered NR PDCP SN")
	}
	if v.HasHighestTransmitted {
		v.HighestTransmittedSN = r.u24("the highest transmitted NR PDCP SN")
	}
	if v.HasCause {
		v.Cause = Cause(r.u8("the cause value"))
	}
	if v.HasHighestDeliveredRetransmitted {
		v.HighestDeliveredRetransmittedSN = r.u24("the highest delivered retransmitted NR PDCP SN")
	}
	if v.HasHighestRetransmitted {
		v.HighestRetransmittedSN = r.u24("the highest retransmitted NR PDCP SN")
	}
	if f2&dsDeliveredRanges != 0 {
		v.DeliveredRanges = r.ranges(v.DeliveredRanges, deliveredRangesCountField, deliveredRangesField)
	}
	if r.err != nil {
		return r.err
	}
	*s = v
	return nil
}
