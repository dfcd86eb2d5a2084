package api

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
)

// SDF filters go in as flow descriptions and come back as the parser
// reads them; what comes back, sent again, changes nothing.
func TestSDFFiltersRoundTrip(t *testing.T) {
	e := newEnv(t)
	doc := variant(t, second, map[string]any{
		"pdrs.0.pdi.sdfFilters": []any{"permit out udp from 198.51.100.0/24 5060 to assigned", "permit out ip from any to assigned"},
		"pdrs.1.pdi.sdfFilters": []any{"permit  out 6 from 2001:db8::1/64 80,443 to any"},
	})
	e.expect(t, http.StatusCreated, "POST", "/api/v1/sessions", doc)
	installed := e.expect(t, http.StatusOK, "GET", "/api/v1/sessions/2", "")
	var got struct {
		PDRs []struct {
			PDI struct {
				SDFFilters []string `json:"sdfFilters"`
			} `json:"pdi"`
		} `json:"pdrs"`
	}
	must(t, json.Unmarshal(installed, &got))
	want := [][]string{
		{"permit out 17 from 198.51.100.0/24 5060 to assigned", "permit out ip from any to assigned"},
		{"permit out 6 from 2001:db8::/64 80,443 to any"},
	}
	for i, p := range got.PDRs {
		if !reflect.DeepEqual(p.PDI.SDFFilters, want[i]) {
			t.Errorf("PDR %d: SDF filters %q, want %q", i, p.PDI.SDFFilters, want[i])
		}
	}
	before, _ := e.store.Get(2)
	e.expect(t, http.StatusOK, "PUT", "/api/v1/sessions/2", string(installed))
	if after, _ := e.store.Get(2); !reflect.DeepEqual(before, after) {
		t.Errorf("PUT of the GET document changed the session:\n%+v\n%+v", before, after)
	}
}
