package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdp5g/xdp5g/internal/ran/cuup"
	"github.com/xdp5g/xdp5g/internal/ran/e1"
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
	metrics := prometheus.NewRegistry()
	metrics.MustRegister(c.Metrics())
	return &env{url: serveAPI(t, Services{CUUP: c, Metrics: metrics})}
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
		{method: "POST", path: "/api/v1/cuup/bearer-contexts", body: strings.Replace(bearerContextSetup, `"NEA2"`, `"NEA5"`, 1),
			field: "securityInformation.securityAlgorithm.cipheringAlgorithm"},
		{method: "POST", path: "/api/v1/cuup/bearer-contexts", body: strings.Replace(bearerContextSetup, `"gtpTeid": 4096`, `"gtpTeid": 0`, 1),
			field: "pduSessionResourceToSetupList[0].ngUlUpTnlInformation"},
		{method: "POST", path: "/api/v1/cuup/bearer-contexts", body: strings.Replace(bearerContextSetup, `"10.1.0.1"`, `"10.1.0"`, 1),
			field: "pduSessionResourceToSetupList[0].ngUlUpTnlInformation.transportLayerAddress"},
		{method: "POST", path: "/api/v1/cuup/bearer-contexts", body: strings.Replace(bearerContextSetup, `"rlcMode"`, `"rlc"`, 1),
			field: "pduSessionResourceToSetupList[0].drbToSetupList[0].pdcpConfiguration.rlc"},
		{method: "PATCH", path: path, body: `{"pduSessionResourceToRemoveList": [2]}`, field: "pduSessionResourceToRemoveList[0]"},
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

	// Where DRB 1's crypto runs: inline, as this CU-UP has no pool.
	e.expect(t, http.StatusOK, "PUT", path+"/drbs/1/placement", `{"placement": "inline"}`)
	if got := e.expect(t, http.StatusOK, "GET", path, ""); !strings.Contains(string(got), `"placement":"inline"`) {
		t.Errorf("the context shows no placement: %s", got)
	}
	e.expect(t, http.StatusConflict, "PUT", path+"/drbs/1/placement", `{"placement": "pool"}`)
	e.expect(t, http.StatusConflict, "PUT", path+"/drbs/2/placement", `{"placement": "inline"}`)
	if _, body := e.request(t, "PUT", path+"/drbs/1/placement", `{"placement": "gpu"}`); !strings.Contains(string(body), `"field":"placement"`) {
		t.Errorf("a bad placement answered %s", body)
	}

	e.expect(t, http.StatusNoContent, "DELETE", path, "")
	e.expect(t, http.StatusNotFound, "DELETE", path, "")
	e.expect(t, http.StatusNotFound, "GET", path, "")
	e.expect(t, http.StatusBadRequest, "GET", "/api/v1/cuup/bearer-contexts/x", "")
}

// Without a CU-UP its resources do not exist.
func TestNoCUUP(t *testing.T) {
	e := &env{url: serveAPI(t, Services{})}
	for _, path := range []string{"/api/v1/cuup/bearer-contexts", "/api/v1/cuup/stats"} {
		var got Error
		if err := json.Unmarshal(e.expect(t, http.StatusNotFound, "GET", path, ""), &got); err != nil || !strings.Contains(got.Msg, "CU-UP") {
			t.Errorf("GET %s: %+v (%v), want an error about the CU-UP", path, got, err)
		}
	}
	e.expect(t, http.StatusNotFound, "GET", "/metrics", "")
}

// A CU-UP alone has no UPF resources, and its statistics without an XDP
// classifier (the socket path) are the workers' alone.
func TestCUUPWithoutUPF(t *testing.T) {
	e := cuupEnv(t)
	for _, req := range []struct{ method, path string }{
		{method: "GET", path: "/api/v1/sessions"}, {method: "POST", path: "/api/v1/sessions"}, {method: "GET", path: "/api/v1/sessions/1"},
		{method: "PUT", path: "/api/v1/sessions/1"}, {method: "DELETE", path: "/api/v1/sessions/1"}, {method: "GET", path: "/api/v1/stats"},
	} {
		var got Error
		if err := json.Unmarshal(e.expect(t, http.StatusNotFound, req.method, req.path, "{}"), &got); err != nil || !strings.Contains(got.Msg, "UPF") {
			t.Errorf("%s %s: %+v (%v), want an error about the UPF", req.method, req.path, got, err)
		}
	}
	sameJSON(t, e.expect(t, http.StatusOK, "GET", "/api/v1/cuup/stats", ""), `{"user": {"downlink": 0, "uplink": 0,
		"downlinkSent": 0, "uplinkSent": 0, "unknownTunnel": 0, "noDrb": 0, "refused": 0, "noRoom": 0, "held": 0, "workers": [],
		"sockets": {"echoes": 0, "notGpdu": 0, "malformed": 0, "sendErrors": 0},
		"xdp": {"throughKernel": 0, "sendErrors": 0, "txFull": 0, "badMeta": 0}}}`)
	if m := e.expect(t, http.StatusOK, "GET", "/metrics", ""); !strings.Contains(string(m), "\nxdp5g_cuup_bearer_contexts 0\n") {
		t.Errorf("/metrics of a CU-UP:\n%s", m)
	}
}

// testStats are a CU-UP's counters with two workers and two CPUs.
var testStats = CUUPStats{
	User: cuup.Stats{WorkerStats: cuup.WorkerStats{Downlink: 3, DownlinkSent: 2, NoDRB: 1},
		Workers: []cuup.WorkerStats{{Downlink: 1, DownlinkSent: 1}, {Worker: "queue 1", Downlink: 2, DownlinkSent: 1, NoDRB: 1}}},
	Kernel: map[string]CUUPClassifierStats{
		"n3": {Total: map[string]Counter{"redirect": {Packets: 3, Bytes: 300}, "pass_not_gtpu": {}},
			PerCPU: []map[string]Counter{{"redirect": {Packets: 1, Bytes: 100}}, {"redirect": {Packets: 2, Bytes: 200}}}},
		"f1u": {Total: map[string]Counter{"drop_bad_ethernet": {Packets: 1, Bytes: 10}}, PerCPU: []map[string]Counter{{"drop_bad_ethernet": {Packets: 1, Bytes: 10}}, {}}},
	},
}

func TestCUUPStatsTable(t *testing.T) {
	var out strings.Builder
	must(t, testStats.WriteTable(&out))
	want := `WORKER   DOWNLINK  DL SENT  UPLINK  UL SENT  UNKNOWN TUNNEL  NO DRB  REFUSED  NO ROOM  HELD
all      3         2        0       0        0               1       0        0        0
0        1         1        0       0        0               0       0        0        0
queue 1  2         1        0       0        0               1       0        0        0

ROLE  CPU  REASON             PACKETS  BYTES
n3    all  redirect           3        300
n3    0    redirect           1        100
n3    1    redirect           2        200
f1u   all  drop_bad_ethernet  1        10
f1u   0    drop_bad_ethernet  1        10
`
	if out.String() != want {
		t.Errorf("table:\n%s\nwant\n%s", out.String(), want)
	}
}

// The socket path's and the AF_XDP path's own counters that are not zero
// follow the workers'.
func TestCUUPStatsTablePaths(t *testing.T) {
	st := CUUPStats{User: cuup.Stats{Workers: []cuup.WorkerStats{{Worker: "queue 0"}},
		Sockets: cuup.SocketStats{Echoes: 2}, XDP: cuup.XDPStats{ThroughKernel: 1, TxFull: 5}}}
	var out strings.Builder
	must(t, st.WriteTable(&out))
	want := `WORKER   DOWNLINK  DL SENT  UPLINK  UL SENT  UNKNOWN TUNNEL  NO DRB  REFUSED  NO ROOM  HELD
all      0         0        0       0        0               0       0        0        0
queue 0  0         0        0       0        0               0       0        0        0

PATH     COUNTER        PACKETS
sockets  echoes         2
xdp      throughKernel  1
xdp      txFull         5
`
	if out.String() != want {
		t.Errorf("table:\n%s\nwant\n%s", out.String(), want)
	}
}

// Empty lists are [] in every document, never null: no bearer context
// yet, and a context whose last PDU session was removed.
func TestBearerContextListsAreArrays(t *testing.T) {
	e := cuupEnv(t)
	sameJSON(t, e.expect(t, http.StatusOK, "GET", "/api/v1/cuup/bearer-contexts", ""), `{"bearerContexts": []}`)
	var setup e1.BearerContextSetupResponse
	must(t, json.Unmarshal(e.expect(t, http.StatusCreated, "POST", "/api/v1/cuup/bearer-contexts", bearerContextSetup), &setup))
	path := fmt.Sprintf("/api/v1/cuup/bearer-contexts/%d", setup.CUUPUEID)
	e.expect(t, http.StatusOK, "PATCH", path, `{"pduSessionResourceToRemoveList": [1]}`)
	var c map[string]any
	must(t, json.Unmarshal(e.expect(t, http.StatusOK, "GET", path, ""), &c))
	if sessions, ok := c["pduSessions"].([]any); !ok || len(sessions) != 0 {
		t.Errorf("a context without PDU sessions shows pduSessions %#v, want []", c["pduSessions"])
	}
}
