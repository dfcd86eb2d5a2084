package n4

import (
	"errors"
	"fmt"

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
// pdrs[i], fars[i], qers[i] or urrs[i], indexes into sess.
func failedRule(sess session.Session, e *fielderr.Error) *refusal {
	var i int
	if _, err := fmt.Sscanf(e.Field, "pdrs[%d]", &i); err == nil && i < len(sess.PDRs) {
		return ruleFailure(rulePDR, uint32(sess.PDRs[i].ID), "%v", e)
	}
	if _, err := fmt.Sscanf(e.Field, "fars[%d]", &i); err == nil && i < len(sess.FARs) {
		return ruleFailure(ruleFAR, sess.FARs[i].ID, "%v", e)
	}
	if _, err := fmt.Sscanf(e.Field, "qers[%d]", &i); err == nil && i < len(sess.QERs) {
		return ruleFailure(ruleQER, sess.QERs[i].ID, "%v", e)
	}
	if _, err := fmt.Sscanf(e.Field, "urrs[%d]", &i); err == nil && i < len(sess.URRs) {
		return ruleFailure(ruleURR, sess.URRs[i].ID, "%v", e)
	}
	return &refusal{cause: ie.CauseRequestRejected, msg: e.Error()}
}
