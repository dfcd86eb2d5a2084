package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
)

// A dual-stack UE's session: its PDRs have an IPv6 prefix beside the IPv4
// address. GET gives the document back as sent, the downlink PDR is found
// by both addresses, and a session taking either address is refused
// (409), as is a prefix that is not one (400), each changing nothing. A
// PUT moving the prefix moves its key; DELETE frees both.
func TestDualStackUEDocuments(t *testing.T) {
	e := newEnv(t)
	ue6, moved := netip.MustParseAddr("2001:db8:45:1::"), netip.MustParseAddr("2001:db8:45:2::")
	// second as GET writes it, with the prefix.
	dualStack := func(prefix string) string {
		return variant(t, `{"seid": 2,
 "pdrs": [{"pdrId": 1, "farId": 1, "outerHeaderRemoval": "OUTER_HEADER_REMOVAL_GTPU_UDP_IPV4", "precedence": 10,
           "pdi": {"teid": 200, "sourceInterface": "INTERFACE_VALUE_ACCESS", "ueIPAddress": "10.1.3.28", "qfi": 9}},
          {"pdrId": 2, "farId": 2, "pdi": {"sourceInterface": "INTERFACE_VALUE_CORE", "ueIPAddress": "10.1.3.28", "qfi": 9}}],
 "fars": [{"farId": 1, "destinationInterface": "INTERFACE_VALUE_CORE"},
          {"farId": 2, "destinationInterface": "INTERFACE_VALUE_ACCESS",
           "forwardingParameters": {"outerHeaderCreation": {"outerHeaderCreationDescription": "OUTER_HEADER_CREATION_GTPU_UDP_IPV4", "ipv4Address": "10.1.3.2", "teid": 300}}}],
 "arpTable": [{"ip": "10.1.3.2", "mac": "02:00:00:00:00:02"}]}`, map[string]any{"pdrs.0.pdi.ueIPv6Prefix": prefix, "pdrs.1.pdi.ueIPv6Prefix": prefix})
	}
	doc := dualStack("2001:db8:45:1::/64")
	e.expect(t, http.StatusCreated, "POST", "/api/v1/sessions", doc)
	zero := map[string]any{"packets": 0, "bytes": 0}
	sameJSON(t, e.expect(t, http.StatusOK, "GET", "/api/v1/sessions/2", ""),
		variant(t, doc, map[string]any{"pdrs.0.counters": zero, "pdrs.1.counters": zero}))
	// downlink is the PDR slots a UE address finds; nil for none.
	downlink := func(ue netip.Addr) []uint32 {
		t.Helper()
		set, err := e.dp.Downlink(ue)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		must(t, err)
		return set.Pdr[:set.Count]
	}
	slots := downlink(secondUE)
	if len(slots) != 1 || !slices.Equal(downlink(ue6), slots) || downlink(moved) != nil {
		t.Fatalf("downlink keys %v, %v, %v; want %v and %v both to the downlink PDR", slots, downlink(ue6), downlink(moved), secondUE, ue6)
	}

	before := e.store.List()
	other := func(edits map[string]any) string {
		edits["seid"], edits["pdrs.0.pdi.teid"] = 3, 300
		return variant(t, second, edits)
	}
	for _, c := range []struct {
		name, doc, field string
		status           int
	}{
		{name: "the IPv6 prefix taken", status: http.StatusConflict, doc: other(map[string]any{
			"pdrs.0.pdi.ueIPAddress": "10.1.3.29", "pdrs.1.pdi.ueIPAddress": "10.1.3.29", "pdrs.1.pdi.ueIPv6Prefix": "2001:db8:45:1::/64"})},
		{name: "the IPv6 prefix taken by an IPv6 UE", status: http.StatusConflict, doc: other(map[string]any{
			"pdrs.0.pdi.ueIPAddress": "2001:db8:45:1::7", "pdrs.1.pdi.ueIPAddress": "2001:db8:45:1::/64"})},
		{name: "the IPv4 address taken", status: http.StatusConflict, doc: other(map[string]any{"pdrs.1.pdi.ueIPv6Prefix": "2001:db8:45:3::/64"})},
		{name: "an IPv4 address as the prefix", status: http.StatusBadRequest, field: "pdrs[1].pdi.ueIPv6Prefix",
			doc: other(map[string]any{"pdrs.1.pdi.ueIPAddress": "10.1.3.29", "pdrs.1.pdi.ueIPv6Prefix": "10.1.3.30"})},
		{name: "a prefix shorter than /64", status: http.StatusBadRequest, field: "pdrs[1].pdi.ueIPv6Prefix",
			doc: other(map[string]any{"pdrs.1.pdi.ueIPAddress": "10.1.3.29", "pdrs.1.pdi.ueIPv6Prefix": "2001:db8:46::/48"})},
		{name: "two IPv6 addresses", status: http.StatusBadRequest, field: "pdrs[1].pdi.ueIPv6Prefix",
			doc: other(map[string]any{"pdrs.1.pdi.ueIPAddress": "2001:db8:46:1::/64", "pdrs.1.pdi.ueIPv6Prefix": "2001:db8:46:2::/64"})},
		{name: "no IPv4 address beside it", status: http.StatusBadRequest, field: "pdrs[1].pdi.ueIPv6Prefix",
			doc: other(map[string]any{"pdrs.1.pdi.ueIPAddress": remove, "pdrs.1.pdi.ueIPv6Prefix": "2001:db8:46:1::/64"})},
		{name: "not an address", status: http.StatusBadRequest, field: "pdrs[1].pdi.ueIPv6Prefix",
			doc: other(map[string]any{"pdrs.1.pdi.ueIPAddress": "10.1.3.29", "pdrs.1.pdi.ueIPv6Prefix": "2001:db8::zz"})},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := e.request(t, "POST", "/api/v1/sessions", c.doc)
			var got Error
			if err := json.Unmarshal(body, &got); err != nil || status != c.status || got.Field != c.field || got.Msg == "" {
				t.Errorf("status %d, body %s; want %d naming %q", status, body, c.status, c.field)
			}
			if after := e.store.List(); !reflect.DeepEqual(after, before) || !slices.Equal(downlink(secondUE), slots) ||
				!slices.Equal(downlink(ue6), slots) {
				t.Errorf("the refused session changed the store or the keys:\n%+v\n%+v", before, after)
			}
		})
	}

	e.expect(t, http.StatusOK, "PUT", "/api/v1/sessions/2", dualStack("2001:db8:45:2::/64"))
	if slots := downlink(secondUE); len(slots) != 1 || !slices.Equal(downlink(moved), slots) || downlink(ue6) != nil {
		t.Errorf("downlink keys after moving the prefix: %v, %v, %v; want %v and %v", slots, downlink(moved), downlink(ue6), secondUE, moved)
	}
	e.expect(t, http.StatusNoContent, "DELETE", "/api/v1/sessions/2", "")
	for _, ue := range []netip.Addr{secondUE, ue6, moved} {
		if slots := downlink(ue); slots != nil {
			t.Errorf("%v still a key after DELETE: %v", ue, slots)
		}
	}
}
