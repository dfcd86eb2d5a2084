package pfcptest

import (
	"net"
	"testing"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
)

// TestParseEstablishedAsGoPFCP decodes responses shaped as the UPF's
// both ways.
func TestParseEstablishedAsGoPFCP(t *testing.T) {
	const cpSEID = 0x5eed
	n3 := net.ParseIP("10.100.3.2")
	createdPDR := func(id uint16) *ie.IE {
		return ie.NewCreatedPDR(ie.NewPDRID(id), ie.NewFTEID(0x01, 0xa0b0c0d0, n3, nil, 0))
	}
	for _, tc := range []struct {
		name  string
		seid  uint64
		ies   []*ie.IE
		valid bool
	}{
		{name: "accepted", seid: cpSEID, ies: []*ie.IE{ie.NewCause(ie.CauseRequestAccepted), ie.NewFSEID(0x0102030405060708, n3, nil), createdPDR(1)}, valid: true},
		{name: "refused", seid: cpSEID, ies: []*ie.IE{ie.NewCause(ie.CauseRuleCreationModificationFailure)}, valid: false},
		{name: "another CP SEID", seid: cpSEID + 1, ies: []*ie.IE{ie.NewCause(ie.CauseRequestAccepted), ie.NewFSEID(1, n3, nil), createdPDR(1)}, valid: false},
		{name: "no UP F-SEID", seid: cpSEID, ies: []*ie.IE{ie.NewCause(ie.CauseRequestAccepted), createdPDR(1)}, valid: false},
		{name: "another PDR", seid: cpSEID, ies: []*ie.IE{ie.NewCause(ie.CauseRequestAccepted), ie.NewFSEID(1, n3, nil), createdPDR(2)}, valid: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ies := append([]*ie.IE{ie.NewNodeID("", "", "upf.xdp5g.test")}, tc.ies...)
			b, err := AppendMessage(nil, message.NewSessionEstablishmentResponse(0, 0, tc.seid, 7, 0, ies...))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseEstablished(cpSEID, b)
			if (err == nil) != tc.valid {
				t.Fatalf("ParseEstablished: %v; want an error: %v", err, !tc.valid)
			}
			resp, err := message.ParseSessionEstablishmentResponse(b)
			if err != nil {
				t.Fatal(err)
			}
			want, err := established(cpSEID, resp)
			if (err == nil) != tc.valid {
				t.Fatalf("established: %v; want an error: %v", err, !tc.valid)
			}
			if tc.valid && got != want {
				t.Errorf("ParseEstablished: %+v, established: %+v", got, want)
			}
			if seq, ok := sequence(b); !ok || seq != 7 {
				t.Errorf("sequence number %d (%v), want 7", seq, ok)
			}
		})
	}
}
