package pfcp

import (
	"encoding/binary"
	"errors"
	"iter"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
)

// Message header layout (TS 29.244 §7.2.2).
const (
	version          = 1
	flagS            = 0x01 // SEID present: session related messages
	flagFO           = 0x04 // another message follows in the datagram
	nodeHeaderLen    = 8
	sessionHeaderLen = 16
	firstSessionType = 50 // message types 50 to 99 are session related (§7.3)
)

var (
	errTruncated  = errors.New("shorter than a PFCP header")
	errBadLength  = errors.New("length field does not match the datagram")
	errBadVersion = errors.New("not PFCP version 1")
	errIEPastEnd  = errors.New("an IE's length goes past what holds it")
)

// nextMessage takes the first PFCP message off a datagram. go-pfcp's own
// header parser accepts length fields that disagree with the datagram, so
// the framing is checked here. With the FO flag set, another message follows
// in the same datagram (§7.2.2.1).
func nextMessage(b []byte) (msg, rest []byte, err error) {
	if len(b) < nodeHeaderLen {
		return nil, nil, errTruncated
	}
	if b[0]>>5 != version {
		return nil, nil, errBadVersion
	}
	// The length field counts the octets after the first four.
	n := 4 + int(binary.BigEndian.Uint16(b[2:4]))
	switch {
	case n < headerLen(b), n > len(b):
		return nil, nil, errBadLength
	case n < len(b) && b[0]&flagFO == 0:
		return nil, nil, errBadLength
	}
	return b[:n], b[n:], nil
}

func headerLen(b []byte) int {
	if b[0]&flagS != 0 {
		return sessionHeaderLen
	}
	return nodeHeaderLen
}

// otherVersionRequest returns the sequence number of a request of another
// PFCP version, which is answered with a Version Not Supported Response
// (§7.4.4.7). Its header is taken to be laid out as version 1's, and only a
// datagram that holds exactly one such request is answered, so that
// garbage is not.
func otherVersionRequest(b []byte) (seq uint32, ok bool) {
	if len(b) < nodeHeaderLen || b[0]>>5 == version || kindOf(b[1]) != request ||
		4+int(binary.BigEndian.Uint16(b[2:4])) != len(b) || len(b) < headerLen(b) {
		return 0, false
	}
	at := headerLen(b) - 4
	return uint32(b[at])<<16 | uint32(b[at+1])<<8 | uint32(b[at+2]), true
}

// kind is what the server does with a message type.
type kind int

const (
	unserved kind = iota
	request
	response
)

func kindOf(msgType uint8) kind {
	switch msgType {
	case message.MsgTypeHeartbeatRequest,
		message.MsgTypeAssociationSetupRequest,
		message.MsgTypeAssociationUpdateRequest,
		message.MsgTypeAssociationReleaseRequest,
		message.MsgTypeSessionSetDeletionRequest,
		message.MsgTypePFDManagementRequest,
		message.MsgTypeSessionEstablishmentRequest,
		message.MsgTypeSessionModificationRequest,
		message.MsgTypeSessionDeletionRequest:
		return request
	case message.MsgTypeHeartbeatResponse,
		message.MsgTypeAssociationSetupResponse,
		message.MsgTypeAssociationUpdateResponse,
		message.MsgTypeVersionNotSupportedResponse,
		message.MsgTypeNodeReportResponse,
		message.MsgTypeSessionReportResponse:
		return response
	}
	return unserved
}

// missingTopLevel returns the first of the mandatory IE types that a
// message body go-pfcp has decoded lacks at its top level.
func missingTopLevel(body []byte, mandatory []uint16) (ieType uint16, missing bool) {
	for _, t := range mandatory {
		if !hasTopLevel(body, t) {
			return t, true
		}
	}
	return 0, false
}

func hasTopLevel(body []byte, t uint16) bool {
	for typ := range topLevelIEs(body) {
		if typ == t {
			return true
		}
	}
	return false
}

// topLevelIEs yields the type and value of each IE at the top level of a
// message body (or of a grouped IE's value); a value the body cuts short
// is yielded as far as it goes.
func topLevelIEs(body []byte) iter.Seq2[uint16, []byte] {
	return func(yield func(uint16, []byte) bool) {
		for len(body) >= 4 {
			end := min(len(body), 4+int(binary.BigEndian.Uint16(body[2:4])))
			if !yield(binary.BigEndian.Uint16(body), body[4:end]) {
				return
			}
			body = body[end:]
		}
	}
}

// framed says whether every IE of a message body, those in grouped IEs
// included, ends within what holds it: go-pfcp reads an IE header that ends
// the body as an IE without a value, whatever its length says.
func framed(body []byte) bool {
	for len(body) > 0 {
		if len(body) < 4 {
			return false
		}
		end := 4 + int(binary.BigEndian.Uint16(body[2:4]))
		if end > len(body) {
			return false
		}
		if (&ie.IE{Type: binary.BigEndian.Uint16(body)}).IsGrouped() && !framed(body[4:end]) {
			return false
		}
		body = body[end:]
	}
	return true
}

func encode(m message.Message) ([]byte, error) {
	b := make([]byte, m.MarshalLen())
	return b, m.MarshalTo(b)
}
