package pfcp

import (
	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
)

// reject builds the response refusing req with cause; offending is the
// type of the IE at fault, 0 for none. Where the response message has no
// Offending IE of its own, it goes at the end, among the IEs a receiver
// ignores if it does not expect them.
func (s *Server) reject(req message.Message, cause uint8, offending uint16) message.Message {
	causeIE := ie.NewCause(cause)
	ies := []*ie.IE{causeIE}
	var offendingIE *ie.IE
	if offending != 0 {
		offendingIE = ie.NewOffendingIE(offending)
		ies = append(ies, offendingIE)
	}
	switch m := req.(type) {
	case *message.AssociationSetupRequest:
		return message.NewAssociationSetupResponse(0, s.ownIEs(append(ies, s.recovery)...)...)
	case *message.AssociationUpdateRequest:
		return message.NewAssociationUpdateResponse(0, s.ownIEs(ies...)...)
	case *message.AssociationReleaseRequest:
		return message.NewAssociationReleaseResponse(0, s.nodeID, causeIE, ies[1:]...)
	case *message.SessionSetDeletionRequest:
		return message.NewSessionSetDeletionResponse(0, s.nodeID, causeIE, offendingIE)
	case *message.SessionEstablishmentRequest:
		// The header carries the CP's SEID when the request has it
		// (§7.2.2.4.2), and no UP F-SEID goes with a rejection.
		return message.NewSessionEstablishmentResponse(0, 0, cpSEID(m), 0, 0, append(ies, s.nodeID)...)
	case *message.SessionModificationRequest:
		// Without looking the session up, the header SEID is 0 (§7.2.2.4.2).
		return message.NewSessionModificationResponse(0, 0, 0, 0, 0, ies...)
	case *message.SessionDeletionRequest:
		return message.NewSessionDeletionResponse(0, 0, 0, 0, 0, ies...)
	}
	return nil
}
