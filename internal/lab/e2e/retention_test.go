package e2e

import (
	"bytes"
	"errors"
	"net/http"
	"net/netip"
	"slices"
	"testing"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/demo/demotest"
	"github.com/xdp5g/xdp5g/internal/lab/pfcptest"
)

// An SMF whose sessions were set up from two of its PFCP entities (two CP
// F-SEID addresses) sets its association up again, asking to retain the
// sessions of one of them (PFCP Session Retention Information, TS 29.244
// §6.2.6.2.2): those stay as they were, rules and forwarding, the response
// says so (PSREI), and the other entity's sessions go. A request whose
// retention information is malformed is refused, naming it, and changes
// nothing.
func TestAssociationSetupRetainsTheListedEntitiesSessions(t *testing.T) {
	tb := demotest.Testbed(t)
	cfg := pfcpConfig(t, tb, uePool)
	client, stop := startDaemon(t, cfg)
	smf := associatedSMF(t, cfg)
	kept, dropped := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("192.0.2.31")
	establish := func(cpSEID uint64, entity netip.Addr) pfcptest.Session {
		t.Helper()
		req := smf.PDUSessionRequest(cpSEID, netip.Addr{}, demo.GNBAddr, demo.DownlinkTEID, demo.QFI)
		req.CPFSEID = ie.NewFSEID(cpSEID, entity.AsSlice(), nil)
		sess, err := smf.Establish(req)
		if err != nil {
			t.Fatal(err)
		}
		return sess
	}
	a, b := establish(0xa, kept), establish(0xb, dropped)
	aUp, aDown := sessionFrames(tb, a.TEID, a.UE)
	bUp, bDown := sessionFrames(tb, b.TEID, b.UE)
	aDoc, bDoc := restSession(t, client, a.SEID), restSession(t, client, b.SEID)
	associated := associations(t, client)

	setup := func(what string, info *ie.IE) *message.AssociationSetupResponse {
		t.Helper()
		resp, err := smf.AssociationSetup(info)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return resp
	}
	malformed := ie.NewGroupedIE(ie.PFCPSessionRetentionInformation, ie.NewCPPFCPEntityIPAddress(kept.AsSlice(), nil),
		ie.New(ie.CPPFCPEntityIPAddress, []byte{0x02, 192, 0})) // V4, and half an address
	resp := setup("malformed", malformed)
	// The response has no Offending IE of its own: it comes among the
	// others.
	offending := slices.IndexFunc(resp.IEs, func(i *ie.IE) bool {
		v, err := i.OffendingIE()
		return err == nil && v == ie.PFCPSessionRetentionInformation
	})
	if cause, _ := resp.Cause.Cause(); cause != ie.CauseMandatoryIEIncorrect || offending < 0 {
		t.Errorf("a malformed PFCP Session Retention Information answered with cause %d and IEs %v; want %d and an Offending IE naming it",
			cause, resp.IEs, ie.CauseMandatoryIEIncorrect)
	}
	if got := associations(t, client); !bytes.Equal(got, associated) {
		t.Errorf("the refused request changed the association:\n%s\nwas\n%s", got, associated)
	}
	for _, s := range []struct {
		seid uint64
		doc  []byte
	}{{a.SEID, aDoc}, {b.SEID, bDoc}} {
		if got := restSession(t, client, s.seid); !bytes.Equal(got, s.doc) {
			t.Errorf("the refused request changed session %#x:\n%s\nwas\n%s", s.seid, got, s.doc)
		}
	}
	delivered(t, tb, "the first entity's session after the refusal", aUp, aDown)
	delivered(t, tb, "the second entity's session after the refusal", bUp, bDown)

	aDoc = restSession(t, client, a.SEID) // its counters moved
	resp = setup("retaining", ie.NewGroupedIE(ie.PFCPSessionRetentionInformation, ie.NewCPPFCPEntityIPAddress(kept.AsSlice(), nil)))
	if err := pfcptest.Accepted("association setup retaining", resp.Cause); err != nil {
		t.Fatal(err)
	}
	if resp.PFCPASRspFlags == nil || !resp.PFCPASRspFlags.HasPSREI() {
		t.Errorf("the response has PFCPASRsp-Flags %v, want PSREI", resp.PFCPASRspFlags)
	}
	if got := restSession(t, client, a.SEID); !bytes.Equal(got, aDoc) {
		t.Errorf("the retained session changed:\n%s\nwas\n%s", got, aDoc)
	}
	delivered(t, tb, "the retained session", aUp, aDown)
	var apiErr *api.Error
	if _, err := client.Session(t.Context(), b.SEID); !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
		t.Errorf("the REST API shows the other entity's session: %v; want 404", err)
	}
	notForwarded(t, tb, client, "once the other entity's session is gone", bUp, bDown)
	if err := smf.Delete(a.SEID); err != nil {
		t.Errorf("deleting the retained session: %v", err)
	}
	if err := stop(); err != nil {
		t.Error(err)
	}
}

// restSession is the REST API's document of a session, with its
// counters, which no traffic moves while the test compares them.
func restSession(t *testing.T, client *api.Client, seid uint64) []byte {
	t.Helper()
	doc, err := client.Session(t.Context(), seid)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// associations is the REST API's list of associations.
func associations(t *testing.T, client *api.Client) []byte {
	t.Helper()
	list, err := client.Associations(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, a := range list.Associations {
		b.WriteString(a.NodeID + " " + a.Addr.String() + " " + a.Since.String() + "\n")
	}
	return b.Bytes()
}
