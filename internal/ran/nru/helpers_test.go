package nru

import "fmt"

// The DU's side of a DL DATA DELIVERY STATUS, which the CU-UP only
// decodes: the tests write the frames it decodes.

// Len is the length of the frame, padding included.
func (s *DeliveryStatus) Len() int {
	n := 2 + 4 // flags, desired buffer size
	n += octets(s.HasDesiredDataRate, 4) + octets(len(s.LostRanges) > 0, 1+6*len(s.LostRanges)) +
		octets(s.HasHighestDelivered, 3) + octets(s.HasHighestTransmitted, 3) + octets(s.HasCause, 1) +
		octets(s.HasHighestDeliveredRetransmitted, 3) + octets(s.HasHighestRetransmitted, 3) +
		octets(len(s.DeliveredRanges) > 0, 1+6*len(s.DeliveredRanges))
	return padded(n)
}

// Put writes the frame into b and returns its length, Len.
func (s *DeliveryStatus) Put(b []byte) (int, error) {
	if len(s.LostRanges) > 255 || len(s.DeliveredRanges) > 255 {
		return 0, fmt.Errorf("%v: %d lost and %d delivered ranges, over 255", TypeDLDataDeliveryStatus, len(s.LostRanges), len(s.DeliveredRanges))
	}
	n := s.Len()
	if err := checkRoom(TypeDLDataDeliveryStatus, n, len(b)); err != nil {
		return 0, err
	}
	if err := checkSNs(TypeDLDataDeliveryStatus, s.HighestDeliveredSN, s.HighestTransmittedSN,
		s.HighestDeliveredRetransmittedSN, s.HighestRetransmittedSN); err != nil {
		return 0, err
	}
	for _, list := range [...][]SNRange{s.LostRanges, s.DeliveredRanges} {
		for _, r := range list {
			if err := checkSNs(TypeDLDataDeliveryStatus, r.Start, r.End); err != nil {
				return 0, err
			}
		}
	}
	w := writer{b: b}
	w.u8(uint8(TypeDLDataDeliveryStatus)<<4 | flag(s.HasHighestTransmitted, dsHighestTransmitted) |
		flag(s.HasHighestDelivered, dsHighestDelivered) | flag(s.FinalFrame, dsFinalFrame) |
		flag(len(s.LostRanges) > 0, dsLostPacketReport))
	w.u8(flag(len(s.DeliveredRanges) > 0, dsDeliveredRanges) | flag(s.HasDesiredDataRate, dsDataRate) |
		flag(s.HasHighestRetransmitted, dsHighestRetransmitted) |
		flag(s.HasHighestDeliveredRetransmitted, dsHighestDeliveredRetransmitted) | flag(s.HasCause, dsCauseReport))
	w.u32(s.DesiredBufferSize)
	if s.HasDesiredDataRate {
		w.u32(s.DesiredDataRate)
	}
	w.ranges(s.LostRanges)
	if s.HasHighestDelivered {
		w.u24(s.HighestDeliveredSN)
	}
	if s.HasHighestTransmitted {
		w.u24(s.HighestTransmittedSN)
	}
	if s.HasCause {
		w.u8(uint8(s.Cause))
	}
	if s.HasHighestDeliveredRetransmitted {
		w.u24(s.HighestDeliveredRetransmittedSN)
	}
	if s.HasHighestRetransmitted {
		w.u24(s.HighestRetransmittedSN)
	}
	w.ranges(s.DeliveredRanges)
	return w.pad(n), nil
}

func (w *writer) u32(v uint32) {
	w.u8(byte(v >> 24))
	w.u24(v)
}

// ranges writes a count octet and the ranges, if there are any.
func (w *writer) ranges(list []SNRange) {
	if len(list) == 0 {
		return
	}
	w.u8(uint8(len(list)))
	for _, r := range list {
		w.u24(r.Start)
		w.u24(r.End)
	}
}
