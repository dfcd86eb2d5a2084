package gtpu

import (
	"encoding/binary"
	"errors"
)

// Extension header types (TS 29.281 5.2.1) a CU-UP reads and writes, and
// the UDP Port of Error Indications.
const (
	extUDPPort             = 0x40
	ExtNRRANContainer      = 0x84 // TS 38.425, on F1-U
	ExtPDUSessionContainer = 0x85 // TS 38.415, on N3
)

// Header is a GTP-U header as the receiver of a G-PDU needs it.
type Header struct {
	Type   uint8
	TEID   uint32
	Seq    uint16
	HasSeq bool
	// PDUSession and NRRAN are the contents of those extension headers
	// (between the length octet and the next type), nil when absent.
	PDUSession, NRRAN []byte
	// Len is where the T-PDU (or the IEs) starts, End where the message
	// ends by its length field.
	Len, End int
}

// ParseHeader reads the header of a GTP-U message and its extension
// headers, checking every length against b.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < headerLen {
		return Header{}, errors.New("shorter than a GTP-U header")
	}
	if b[0]&0xf0 != versionPT {
		return Header{}, errors.New("not GTPv1-U")
	}
	h := Header{Type: b[1], TEID: binary.BigEndian.Uint32(b[4:8]), Len: headerLen,
		End: headerLen + int(binary.BigEndian.Uint16(b[2:4]))}
	if h.End > len(b) {
		return h, errors.New("length beyond the datagram")
	}
	flags := b[0]
	if flags&(flagE|flagS|flagPN) == 0 {
		return h, nil
	}
	// Any of the flags brings all the optional fields.
	if h.End < headerLen+optionalLen {
		return h, errors.New("optional fields truncated")
	}
	h.Seq, h.HasSeq = binary.BigEndian.Uint16(b[8:]), flags&flagS != 0
	next := b[11]
	if flags&flagE == 0 {
		next = 0 // present but not to be interpreted
	}
	h.Len += optionalLen
	// Each extension header: its length in 4-octet units (counting the
	// length and next type octets), content, the next type.
	for next != 0 {
		rest := b[h.Len:h.End]
		if len(rest) == 0 || rest[0] == 0 || 4*int(rest[0]) > len(rest) {
			return h, errors.New("bad extension header length")
		}
		n := 4 * int(rest[0])
		switch next {
		case ExtNRRANContainer:
			h.NRRAN = rest[1 : n-1]
		case ExtPDUSessionContainer:
			h.PDUSession = rest[1 : n-1]
		}
		next = rest[n-1]
		h.Len += n
	}
	return h, nil
}

// GPDUHeaderLen is the length of a G-PDU header with one extension header
// of content octets (none: no extension header, no optional fields).
func GPDUHeaderLen(content int) int {
	if content == 0 {
		return headerLen
	}
	return headerLen + optionalLen + extLen(content)
}

// extLen is an extension header's length: content, length and next type
// octets, padded to four.
func extLen(content int) int { return (content + 2 + 3) &^ 3 }

// PutGPDUHeader writes, at the start of b, the header of a G-PDU to teid
// carrying payload octets, with one extension header of type ext and its
// content (padded with zeros), or none if content is empty. b must hold
// GPDUHeaderLen(len(content)) octets and content at most 1018, what an
// extension header's length octet counts; it returns that length.
func PutGPDUHeader(b []byte, teid uint32, payload int, ext uint8, content []byte) int {
	n := GPDUHeaderLen(len(content))
	b[0], b[1] = versionPT, MsgGPDU
	binary.BigEndian.PutUint16(b[2:4], uint16(n-headerLen+payload))
	binary.BigEndian.PutUint32(b[4:8], teid)
	if len(content) == 0 {
		return n
	}
	b[0] |= flagE
	clear(b[8:n])
	b[11] = ext
	b[12] = byte(extLen(len(content)) / 4)
	copy(b[13:], content)
	// The next type, 0 (no more), is the last octet: cleared above.
	return n
}

// PDU types of the PDU Session Container (TS 38.415 5.5.3.1), the high
// nibble of its first octet; its second holds PPP, RQI and the QFI.
const (
	PDUSessionDL = 0 // DL PDU SESSION INFORMATION
	PDUSessionUL = 1 // UL PDU SESSION INFORMATION
)

// PDUSession reads a PDU Session Container's content: its PDU type, QFI
// and RQI; false when it is too short to hold them.
func PDUSession(content []byte) (pduType, qfi uint8, rqi, ok bool) {
	if len(content) < 2 {
		return 0, 0, false, false
	}
	return content[0] >> 4, content[1] & 0x3f, content[1]&0x40 != 0, true
}

// PDUSessionContent is the content of a PDU Session Container of a PDU
// type for a QoS flow, with no optional field.
func PDUSessionContent(pduType, qfi uint8) [2]byte { return [2]byte{pduType << 4, qfi & 0x3f} }
