package api

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/xdp5g/xdp5g/internal/cuup"
	"github.com/xdp5g/xdp5g/internal/e1"
)

const bearerContextSetup = `{
  "gnbCuCpUeE1apId": 5,
  "securityInformation": {
    "securityAlgorithm": {"cipheringAlgorithm": "NEA2", "integrityProtectionAlgorithm": "NIA2"},
    "upSecurityKey": {"encryptionKey": "000102030405060708090a0b0c0d0e0f", "integrityProtectionKey": "101112131415161718191a1b1c1d1e1f"}
  },
  "pduSessionResourceToSetupList": [{
    "pduSessionId": 1, "pduSessionType": "ipv4", "snssai": {"sst": 1},
    "securityIndication": {"integrityProtectionIndication": "required", "confidentialityProtectionIndication": "required"},
    "ngUlUpTnlInformation": {"transportLayerAddress": "10.1.0.1", "gtpTeid": 4096},
    "drbToSetupList": [{
      "drbId": 1,
      "sdapConfiguration": {"defaultDrb": true, "sdapHeaderUl": true, "sdapHeaderDl": false},
      "pdcpConfiguration": {"pdcpSnSizeUl": 18, "pdcpSnSizeDl": 12, "rlcMode": "am", "tReorderingTimerMs": 100},
      "qosFlowInformationToBeSetup": [{"qosFlowIdentifier": 9, "fiveQi": 9}]
    }]
  }]
}`

// cuupEnv serves the API of a CU-UP alone.
func cuupEnv(t *testing.T) *env {
	t.Helper()
	c, err := cuup.New(cuup.Config{N3: netip.MustParseAddr("10.1.0.2"), F1U: netip.MustParseAddr("10.2.0.2")})
	must(t, err)
	srv := httptest.NewServer(NewHandler(Services{CUUP: c, Log: slog.New(slog.DiscardHandler)}))
	t.Cleanup(srv.Close)
	return &env{url: srv.URL}
}

func TestBearerContexts(t *testing.T) {
	e := cuupEnv(t)
	var setup e1.BearerContextSetupResponse
	must(t, json.Unmarshal(e.expect(t, http.StatusCreated, "POST", "/api/v1/cuup/bearer-contexts", bearerContextSetup), &setup))
	if setup.CUCPUEID != 5 || len(setup.PDUSessions) != 1 || len(setup.PDUSessions[0].DRBs) != 1 {
		t.Fatalf("setup response %+v", setup)
	}
	s := setup.PDUSessions[0]
	if s.SecurityResult != (e1.SecurityResult{Integrity: e1.Performed, Confidentiality: e1.Performed}) ||
		s.DLTunnel.Address.String() != "10.1.0.2" || s.DRBs[0].ULTunnel.Address.String() != "10.2.0.2" {
		t.Errorf("setup response %+v", s)
	}
	path := fmt.Sprintf("/api/v1/cuup/bearer-contexts/%d", setup.CUUPUEID)
	e.expect(t, http.StatusOK, "PATCH", path, `{"pduSessionResourceToModifyList": [{"pduSessionId": 1,
		"drbToModifyList": [{"drbId": 1, "dlUpParameters": {"transportLayerAddress": "10.2.0.1", "gtpTeid": 208}}]}]}`)
	var c cuup.Context
	must(t, json.Unmarshal(e.expect(t, http.StatusOK, "GET", path, ""), &c))
	d := c.PDUSessions[0].DRBs[0]
	if d.DLTunnel == nil || d.DLTunnel.TEID != 208 || d.PDCP.SNSizeDL != 12 || *d.PDCP.TReordering != 100 {
		t.Errorf("context %+v", c)
	}
	list := e.expect(t, http.StatusOK, "GET", "/api/v1/cuup/bearer-contexts", "")
	if strings.Contains(string(list), "0102030405") {
		t.Errorf("the list shows the keys: %s", list)
	}

	// Bad requests name the field and change nothing.
	for _, bad := range []struct{ method, path, body, field string }{
		{"POST", "/api/v1/cuup/bearer-contexts", strings.Replace(bearerContextSetup, `"NEA2"`, `"NEA5"`, 1),
			"securityInformation.securityAlgorithm.cipheringAlgorithm"},
		{"POST", "/api/v1/cuup/bearer-contexts", strings.Replace(bearerContextSetup, `"gtpTeid": 4096`, `"gtpTeid": 0`, 1),
			"pduSessionResourceToSetupList[0].ngUlUpTnlInformation"},
		{"POST", "/api/v1/cuup/bearer-contexts", strings.Replace(bearerContextSetup, `"10.1.0.1"`, `"10.1.0"`, 1),
			"pduSessionResourceToSetupList[0].ngUlUpTnlInformation.transportLayerAddress"},
		{"POST", "/api/v1/cuup/bearer-contexts", strings.Replace(bearerContextSetup, `"rlcMode"`, `"rlc"`, 1),
			"pduSessionResourceToSetupList[0].drbToSetupList[0].pdcpConfiguration.rlc"},
		{"PATCH", path, `{"pduSessionResourceToRemoveList": [2]}`, "pduSessionResourceToRemoveList[0]"},
	} {
		status, body := e.request(t, bad.method, bad.path, bad.body)
		var got Error
		if err := json.Unmarshal(body, &got); status != http.StatusBadRequest || err != nil || got.Field != bad.field {
			t.Errorf("%s %s: %d %s, want 400 for %s", bad.method, bad.path, status, body, bad.field)
		}
	}
	if after := e.expect(t, http.StatusOK, "GET", "/api/v1/cuup/bearer-contexts", ""); string(after) != string(list) {
		t.Errorf("bad requests changed %s into %s", list, after)
	}

	e.expect(t, http.StatusNoContent, "DELETE", path, "")
	e.expect(t, http.StatusNotFound, "DELETE", path, "")
	e.expect(t, http.StatusNotFound, "GET", path, "")
	e.expect(t, http.StatusBadRequest, "GET", "/api/v1/cuup/bearer-contexts/x", "")
}

// Without a CU-UP its resources do not exist.
func TestNoCUUP(t *testing.T) {
	srv := httptest.NewServer(NewHandler(Services{Log: slog.New(slog.DiscardHandler)}))
	t.Cleanup(srv.Close)
	(&env{url: srv.URL}).expect(t, http.StatusNotFound, "GET", "/api/v1/cuup/bearer-contexts", "")
}
