package pfcptest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
)

// Reading and writing encoded messages in place, for a pipelined SMF:
// go-pfcp's encoding and decoding of a session's messages would cost it
// about half the CPU time the UPF spends serving them, on the same cores.

// sessionHeaderLen is the length of the header of session messages, which
// has a SEID (TS 29.244 §7.2.2).
const sessionHeaderLen = 16

// sequenceAt is where an encoded message's sequence number starts.
func sequenceAt(b []byte) int {
	if b[0]&0x01 != 0 { // S: a SEID comes first
		return 12
	}
	return 4
}

func setSequence(b []byte, seq uint32) {
	at := sequenceAt(b)
	b[at], b[at+1], b[at+2] = byte(seq>>16), byte(seq>>8), byte(seq)
}

// sequence reads the sequence number of an encoded message; false when b
// is too short for a header.
func sequence(b []byte) (uint32, bool) {
	if len(b) < 8 || len(b) < sequenceAt(b)+3 {
		return 0, false
	}
	at := sequenceAt(b)
	return uint32(b[at])<<16 | uint32(b[at+1])<<8 | uint32(b[at+2]), true
}

// walkIEs calls f with the type and the payload's offset and length of
// each IE in b[at:], descending into grouped IEs; false when an IE
// overruns b.
func walkIEs(b []byte, at int, f func(typ uint16, at, n int)) bool {
	for at+4 <= len(b) {
		typ, n := binary.BigEndian.Uint16(b[at:]), int(binary.BigEndian.Uint16(b[at+2:]))
		at += 4
		if at+n > len(b) {
			return false
		}
		if (&ie.IE{Type: typ}).IsGrouped() {
			if !walkIEs(b[:at+n], at, f) {
				return false
			}
		} else {
			f(typ, at, n)
		}
		at += n
	}
	return at == len(b)
}

// ParseEstablished checks an encoded response to the establishment of a
// session with cpSEID, by a request of PDUSessionRequest with the UE
// address given, as EstablishPDUSession checks its own, and reads the UP
// SEID and the uplink F-TEID from PDR 1's Created PDR.
func ParseEstablished(cpSEID uint64, b []byte) (Session, error) {
	var sess Session
	if len(b) < sessionHeaderLen || b[0]&0x01 == 0 || b[1] != message.MsgTypeSessionEstablishmentResponse {
		return sess, errors.New("not a session establishment response")
	}
	// Each Created PDR holds its PDR ID, then its F-TEID.
	var cause, fseid, fteid []byte
	var pdrID uint16
	ok := walkIEs(b, sessionHeaderLen, func(typ uint16, at, n int) {
		switch {
		case typ == ie.Cause:
			cause = b[at : at+n]
		case typ == ie.FSEID:
			fseid = b[at : at+n]
		case typ == ie.PDRID && n == 2:
			pdrID = binary.BigEndian.Uint16(b[at:])
		case typ == ie.FTEID && pdrID == 1:
			fteid = b[at : at+n]
		}
	})
	switch {
	case !ok:
		return sess, errors.New("session establishment response: an IE overruns the message")
	case len(cause) != 1:
		return sess, errors.New("session establishment: no cause in the response")
	case cause[0] != ie.CauseRequestAccepted:
		return sess, fmt.Errorf("session establishment refused with cause %d", cause[0])
	}
	if seid := binary.BigEndian.Uint64(b[4:]); seid != cpSEID {
		return sess, fmt.Errorf("the response's header SEID is %#x, not the CP SEID %#x", seid, cpSEID)
	}
	// After the flags: the F-SEID's SEID, the F-TEID's TEID and IPv4
	// address (§8.2.37, §8.2.3).
	if len(fseid) < 9 {
		return sess, errors.New("no UP F-SEID")
	}
	if len(fteid) < 9 || fteid[0]&0x01 == 0 {
		return sess, errors.New("want a Created PDR for PDR 1 with an IPv4 F-TEID")
	}
	sess.SEID = binary.BigEndian.Uint64(fseid[1:])
	sess.TEID = binary.BigEndian.Uint32(fteid[1:])
	sess.N3 = netip.AddrFrom4([4]byte(fteid[5:9]))
	return sess, nil
}
