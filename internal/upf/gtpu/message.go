package gtpu

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// Port is the GTP-U port (TS 29.281 4.4.2).
const Port = 2152

// GTP-U message types (TS 29.281 6.1), the keys of Stats.Received.
const (
	MsgEchoRequest                           = 1
	MsgEchoResponse                          = 2
	MsgErrorIndication                       = 26
	MsgSupportedExtensionHeadersNotification = 31
	MsgEndMarker                             = 254
	MsgGPDU                                  = 255
)

const (
	headerLen   = 8 // flags, type, length, TEID
	optionalLen = 4 // sequence number, N-PDU number, next extension header type

	// The first octet of every GTP-U header: version 1 and protocol type 1
	// (GTP, not GTP') in the high nibble, then a spare bit and the E, S and
	// PN flags.
	versionPT = 0x30
	flagE     = 0x04
	flagS     = 0x02
	flagPN    = 0x01

	// Information element types (TS 29.281 8.1). Types below 128 are TV,
	// with a length fixed by the type; the others are TLV.
	ieRecovery        = 14
	ieTEIDDataI       = 16
	ieGTPUPeerAddress = 133
	firstTLV          = 128
)

// message is what this package reads from a GTP-U message: the header and
// the IEs it acts on.
type message struct {
	Type   uint8
	TEID   uint32
	Seq    uint16
	HasSeq bool

	TEIDDataI    uint32
	HasTEIDDataI bool
	PeerAddr     netip.Addr // the GTP-U Peer Address IE; invalid if absent
}

// decode parses a GTP-U message (TS 29.281 5 and 8) and checks that echoes
// carry a sequence number and that an Error Indication carries its
// mandatory IEs. Octets after the length the header states are ignored, as
// the data path does.
func decode(b []byte) (message, error) {
	h, err := ParseHeader(b)
	m := message{Type: h.Type, TEID: h.TEID, Seq: h.Seq, HasSeq: h.HasSeq}
	if err != nil {
		return m, err
	}
	body := b[h.Len:h.End]
	if m.Type == MsgGPDU {
		return m, nil // the rest is a T-PDU, not IEs
	}
	if err := m.decodeIEs(body); err != nil {
		return m, err
	}
	switch {
	case (m.Type == MsgEchoRequest || m.Type == MsgEchoResponse) && !m.HasSeq:
		return m, errors.New("echo without a sequence number")
	case m.Type == MsgErrorIndication && (!m.HasTEIDDataI || !m.PeerAddr.IsValid()):
		return m, errors.New("Error Indication without TEID Data I or GTP-U Peer Address")
	}
	return m, nil
}

func (m *message) decodeIEs(b []byte) error {
	for len(b) > 0 {
		ieType := b[0]
		var value []byte
		if ieType >= firstTLV {
			if len(b) < 3 {
				return errors.New("IE header truncated")
			}
			n := 3 + int(binary.BigEndian.Uint16(b[1:3]))
			if n > len(b) {
				return errors.New("IE truncated")
			}
			value, b = b[3:n], b[n:]
		} else {
			n := tvLen(ieType)
			if n == 0 {
				// Its length is unknown, and so where the next IE starts.
				return errors.New("unknown TV IE")
			}
			if 1+n > len(b) {
				return errors.New("IE truncated")
			}
			value, b = b[1:1+n], b[1+n:]
		}
		switch ieType {
		case ieTEIDDataI:
			m.TEIDDataI, m.HasTEIDDataI = binary.BigEndian.Uint32(value), true
		case ieGTPUPeerAddress:
			addr, ok := netip.AddrFromSlice(value) // 4 or 16 octets (TS 29.281 8.4)
			if !ok {
				return errors.New("bad GTP-U Peer Address length")
			}
			m.PeerAddr = addr
		}
	}
	return nil
}

// tvLen is the value length of the TV IEs of GTP-U, 0 for other types.
func tvLen(ieType uint8) int {
	switch ieType {
	case ieRecovery:
		return 1
	case ieTEIDDataI:
		return 4
	}
	return 0
}

// extension is one extension header: its type and content.
type extension struct {
	typ     uint8
	content []byte
}

// encode builds a message whose body holds its IEs, with optional fields
// when withSeq or ext has a type, and then ext's extension header.
func encode(msgType uint8, teid uint32, withSeq bool, seq uint16, ext extension, body []byte) []byte {
	flags, length := byte(versionPT), len(body)
	if withSeq {
		flags |= flagS
	}
	if ext.typ != 0 {
		flags |= flagE
		length += extLen(len(ext.content))
	}
	if flags != versionPT {
		length += optionalLen
	}
	b := make([]byte, headerLen, headerLen+length)
	b[0], b[1] = flags, msgType
	binary.BigEndian.PutUint16(b[2:4], uint16(length))
	binary.BigEndian.PutUint32(b[4:8], teid)
	if flags != versionPT {
		b = binary.BigEndian.AppendUint16(b, seq)
		b = append(b, 0, ext.typ) // N-PDU number, next extension header type
	}
	if ext.typ != 0 {
		n := extLen(len(ext.content))
		b = append(b, byte(n/4))
		b = append(b, ext.content...)
		b = append(b, make([]byte, n-2-len(ext.content))...) // padding
		b = append(b, 0)                                     // no next extension header
	}
	return append(b, body...)
}

// Echo messages have TEID 0 and a sequence number (TS 29.281 5.1, 7.2).
func echoRequest(seq uint16) []byte { return encode(MsgEchoRequest, 0, true, seq, extension{}, nil) }

// EchoResponse answers an Echo Request of sequence number seq; it carries
// the mandatory Recovery IE, whose restart counter a GTP-U sender sets to 0
// (TS 29.281 8.2).
func EchoResponse(seq uint16) []byte {
	return encode(MsgEchoResponse, 0, true, seq, extension{}, []byte{ieRecovery, 0})
}

// endMarker is sent on the tunnel it ends, with no payload (TS 29.281 7.3.2).
func endMarker(teid uint32) []byte { return encode(MsgEndMarker, teid, false, 0, extension{}, nil) }

// errorIndicationOf answers a G-PDU to teid at local, which no context has,
// that came from UDP port from (TS 29.281 7.3.1): TEID 0 and a sequence
// number in the header (5.1), TEID Data I and the GTP-U Peer Address, and
// from, when not the GTP-U port, in a UDP Port extension header (5.2.2.1).
func errorIndicationOf(teid uint32, local netip.Addr, from uint16) []byte {
	body := binary.BigEndian.AppendUint32([]byte{ieTEIDDataI}, teid)
	body = append(body, ieGTPUPeerAddress)
	body = binary.BigEndian.AppendUint16(body, uint16(local.BitLen()/8))
	body = append(body, local.AsSlice()...)
	var ext extension
	if from != Port {
		ext = extension{typ: extUDPPort, content: binary.BigEndian.AppendUint16(nil, from)}
	}
	return encode(MsgErrorIndication, 0, true, 0, ext, body)
}
