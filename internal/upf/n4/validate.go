package n4

import (
	"errors"
	"fmt"
	"strings"

	"github.com/wmnsk/go-pfcp/ie"

	"github.com/xdp5g/xdp5g/internal/fielderr"
	"github.com/xdp5g/xdp5g/internal/upf/session"
)

// validate checks a session as the store is to have it, the UPF's choices
// made: none of its keys (TEIDs, UE addresses) is another session's, and
// the session model's own rules hold (session.Validate). A failure names
// the rule. The store checks the model again as it installs it: it takes
// nothing invalid, whoever asks.
func (h *Handler) validate(seid uint64, sess session.Session) *refusal {
	for _, p := range sess.PDRs {
		if owner, ok := h.cfg.Store.KeyOwner(p); ok && owner != seid {
			return ruleFailure(rulePDR, uint32(p.ID), "PDR %d: its TEID or UE address belongs to another session", p.ID)
		}
	}
	return refusalOf(sess, session.Validate(&sess))
}

// refusalOf is the refusal for the store's error about sess (nil for
// none): a field error names the failed rule; anything else is short of
// resources.
func refusalOf(sess session.Session, err error) *refusal {
	if err == nil {
		return nil
	}
	if invalid := (*fielderr.Error)(nil); errors.As(err, &invalid) {
		return failedRule(sess, invalid)
	}
	return noResources(err)
}

// failedRule names the rule of a field error: its field starts with
// pdrs[i], fars[i], qers[i] or urrs[i], an index into sess that the
// message replaces by the rule's PFCP name and ID ("PDR 5: pdi.qfi: …").
func failedRule(sess session.Session, e *fielderr.Error) *refusal {
	list, field, _ := strings.Cut(e.Field, ".")
	var kind string
	var i int
	if _, err := fmt.Sscanf(list, "%4s[%d]", &kind, &i); err == nil && i >= 0 {
		var typ uint8
		var id uint32
		switch {
		case kind == "pdrs" && i < len(sess.PDRs):
			typ, id = rulePDR, uint32(sess.PDRs[i].ID)
		case kind == "fars" && i < len(sess.FARs):
			typ, id = ruleFAR, sess.FARs[i].ID
		case kind == "qers" && i < len(sess.QERs):
			typ, id = ruleQER, sess.QERs[i].ID
		case kind == "urrs" && i < len(sess.URRs):
			typ, id = ruleURR, sess.URRs[i].ID
		default:
			return &refusal{cause: ie.CauseRequestRejected, msg: e.Error()}
		}
		name := strings.ToUpper(kind[:3])
		return ruleFailure(typ, id, "%s %d: %v", name, id, &fielderr.Error{Field: field, Reason: e.Reason})
	}
	return &refusal{cause: ie.CauseRequestRejected, msg: e.Error()}
}
