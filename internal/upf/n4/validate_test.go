package n4

import (
	"testing"

	"github.com/wmnsk/go-pfcp/ie"

	"github.com/xdp5g/xdp5g/internal/fielderr"
	"github.com/xdp5g/xdp5g/internal/upf/session"
)

// A refusal names the rule by its PFCP name and ID, not by the REST
// document's list index.
func TestFailedRuleNamesPFCPRule(t *testing.T) {
	sess := session.Session{PDRs: []session.PDR{{ID: 3}, {ID: 7}}, FARs: []session.FAR{{ID: 9}}, URRs: []session.URR{{ID: 4}}}
	for _, c := range []struct {
		field string
		typ   uint8
		id    uint32
		msg   string
	}{
		{"pdrs[1].pdi.qfi", rulePDR, 7, "PDR 7: pdi.qfi: bad"},
		{"fars[0].forwarding.outer_header_creation", ruleFAR, 9, "FAR 9: forwarding.outer_header_creation: bad"},
		{"urrs[0]", ruleURR, 4, "URR 4: bad"},
	} {
		r := failedRule(sess, fielderr.New(c.field, "bad"))
		if !r.hasRule || r.ruleType != c.typ || r.ruleID != c.id || r.msg != c.msg || r.cause != ie.CauseRuleCreationModificationFailure {
			t.Errorf("%s: %+v", c.field, *r)
		}
	}
	for _, field := range []string{"pdrs[2].pdi", "qers[0]", "seid", ""} {
		if r := failedRule(sess, fielderr.New(field, "bad")); r.hasRule || r.cause != ie.CauseRequestRejected {
			t.Errorf("%q: %+v", field, *r)
		}
	}
}
