package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netns"

	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/testsupport"
	"github.com/xdp5g/xdp5g/internal/upf/buffer"
	"github.com/xdp5g/xdp5g/internal/upf/nexthop"
	"github.com/xdp5g/xdp5g/internal/upf/session"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// fig10 is the session document of Fig. 10 of the paper, verbatim.
const fig10 = `{"seid": 1,
 "pdrs": [{"pdrId": 20, "farId": 200, "outerHeaderRemoval": "OUTER_HEADER_REMOVAL_UDP_IPV4",
           "pdi": {"teid": 100, "sourceInterface": "INTERFACE_VALUE_CORE", "ueIPAddress": "10.1.3.27"}},
          {"pdrId": 10, "farId": 100, "outerHeaderRemoval": "OUTER_HEADER_REMOVAL_GTPU_UDP_IPV4",
           "pdi": {"teid": 100, "sourceInterface": "INTERFACE_VALUE_ACCESS", "ueIPAddress": "10.1.3.27"}}],
 "fars": [{"farId": 200, "forwardingParameters": {"outerHeaderCreation": {"outerHeaderCreationDescription": "OUTER_HEADER_CREATION_GTPU_UDP_IPV4", "ipv4Address": "10.1.3.27", "portNumber": 1234}}, "destinationInterface": "INTERFACE_VALUE_ACCESS"},
          {"farId": 100, "forwardingParameters": {"outerHeaderCreation": {"outerHeaderCreationDescription": "OUTER_HEADER_CREATION_UDP_IPV4", "ipv4Address": "10.1.3.27", "portNumber": 1234}}, "destinationInterface": "INTERFACE_VALUE_CORE"}],
 "arpTable": [{"ip": "10.1.2.27", "mac": "90:e2:ba:27:fd:3c"}, {"ip": "10.1.3.27", "mac": "90:e2:ba:27:fd:3d"}]}`

// fig10Installed is what GET returns for it: the TEID the tunnel took
// from the access PDR made explicit, the ignored port and UDP/IPv4 header
// creation left out, and the PDRs' counters.
const fig10Installed = `{"seid": 1,
 "pdrs": [{"pdrId": 20, "farId": 200, "outerHeaderRemoval": "OUTER_HEADER_REMOVAL_UDP_IPV4",
           "pdi": {"teid": 100, "sourceInterface": "INTERFACE_VALUE_CORE", "ueIPAddress": "10.1.3.27"},
           "counters": {"packets": 0, "bytes": 0}},
          {"pdrId": 10, "farId": 100, "outerHeaderRemoval": "OUTER_HEADER_REMOVAL_GTPU_UDP_IPV4",
           "pdi": {"teid": 100, "sourceInterface": "INTERFACE_VALUE_ACCESS", "ueIPAddress": "10.1.3.27"},
           "counters": {"packets": 0, "bytes": 0}}],
 "fars": [{"farId": 200, "forwardingParameters": {"outerHeaderCreation": {"outerHeaderCreationDescription": "OUTER_HEADER_CREATION_GTPU_UDP_IPV4", "ipv4Address": "10.1.3.27", "teid": 100}}, "destinationInterface": "INTERFACE_VALUE_ACCESS"},
          {"farId": 100, "destinationInterface": "INTERFACE_VALUE_CORE"}],
 "arpTable": [{"ip": "10.1.2.27", "mac": "90:e2:ba:27:fd:3c"}, {"ip": "10.1.3.27", "mac": "90:e2:ba:27:fd:3d"}]}`

// second is a valid session that shares nothing with fig10; the bad
// documents are this with one thing wrong.
const second = `{"seid": 2,
 "pdrs": [{"pdrId": 1, "farId": 1, "outerHeaderRemoval": 0, "precedence": 10,
           "pdi": {"teid": 200, "sourceInterface": "INTERFACE_VALUE_ACCESS", "ueIPAddress": "10.1.3.28", "qfi": 9}},
          {"pdrId": 2, "farId": 2, "pdi": {"sourceInterface": 1, "ueIPAddress": "10.1.3.28", "qfi": 9}}],
 "fars": [{"farId": 1, "destinationInterface": "INTERFACE_VALUE_CORE"},
          {"farId": 2, "forwardingParameters": {"destinationInterface": "INTERFACE_VALUE_ACCESS",
           "outerHeaderCreation": {"outerHeaderCreationDescription": "OUTER_HEADER_CREATION_GTPU_UDP_IPV4", "ipv4Address": "10.1.3.2", "teid": 300}}}],
 "arpTable": [{"ip": "10.1.3.2", "mac": "02:00:00:00:00:02"}]}`

const upfIface = "n3n6"

var (
	n3       = netip.MustParseAddr("10.1.2.1")
	n3v6     = netip.MustParseAddr("2001:db8:1:2::1")
	fig10UE  = netip.MustParseAddr("10.1.3.27")
	secondUE = netip.MustParseAddr("10.1.3.28")
)

// env is a UPF namespace wired to a peer namespace, a data path attached
// to the UPF's interface, a store over it and the API on a test server.
type env struct {
	upf, peer  *namespace.Netns
	dp         *upfxdp.Datapath
	store      *session.Store
	classifier *Classifier // nil: no classification
	url        string
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func newEnv(t *testing.T) *env {
	t.Helper()
	testsupport.NeedRoot(t, "network namespaces and XDP")
	e := &env{upf: testsupport.Netns(t, "api-upf-"), peer: testsupport.Netns(t, "api-peer-")}
	must(t, namespace.Veth(e.upf, upfIface, e.peer, "gnb"))
	must(t, e.upf.AddAddr(upfIface, "10.1.3.1/24"))
	must(t, e.peer.AddAddr("gnb", "10.1.3.2/24"))

	dp, err := upfxdp.Open(upfxdp.Options{PinPath: testsupport.PinDir(t), MaxSessions: 1024, N3Addresses: []netip.Addr{n3, n3v6}})
	testsupport.CheckLoad(t, err)
	t.Cleanup(func() { dp.Close() })
	must(t, e.upf.Do(func() error { return dp.Attach(upfIface, upfxdp.RoleAccess|upfxdp.RoleCore, xdplink.ModeNative) }))
	t.Cleanup(func() { must(t, dp.Detach(upfIface)) })

	ns, err := netns.GetFromName(e.upf.Name)
	must(t, err)
	nh, err := nexthop.New(dp, ns, []string{upfIface})
	ns.Close()
	must(t, err)
	t.Cleanup(func() { nh.Close() })

	e.dp = dp
	e.store = session.NewStore(dp, nh, nil)
	e.serve(t, nil)
	return e
}

// serve serves the API on a test server from now on, with a PFCP interface
// or none, and the env's classifier, if it has one.
func (e *env) serve(t *testing.T, n4Interface *PFCP) {
	t.Helper()
	e.url = serveAPI(t, Services{Store: e.store, Datapath: e.dp, PFCP: n4Interface, Classifier: e.classifier})
}

// serveAPI serves the API of services on a test server, logging nothing,
// and returns its URL.
func serveAPI(t *testing.T, services Services) string {
	t.Helper()
	services.Log = slog.New(slog.DiscardHandler)
	srv := httptest.NewServer(NewHandler(services))
	t.Cleanup(srv.Close)
	return srv.URL
}

func (e *env) request(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	must(t, err)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp.StatusCode, data
}

// expect sends a request and fails the test unless it gets the status.
func (e *env) expect(t *testing.T, status int, method, path, body string) []byte {
	t.Helper()
	got, data := e.request(t, method, path, body)
	if got != status {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, got, status, data)
	}
	return data
}

// sameJSON fails unless two documents are equal as JSON values.
func sameJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	must(t, json.Unmarshal(got, &g))
	must(t, json.Unmarshal([]byte(want), &w))
	if !reflect.DeepEqual(g, w) {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

// snapshot is what a rejected request must leave alone: the store and the
// data-path keys of both test sessions.
type snapshot struct {
	sessions []session.Session
	keys     map[string]string
}

func (e *env) snapshot(t *testing.T) snapshot {
	t.Helper()
	s := snapshot{sessions: e.store.List(), keys: map[string]string{}}
	lookups := map[string]func() (upfxdp.PDRSet, error){
		"uplink 100": func() (upfxdp.PDRSet, error) { return e.dp.Uplink(upfxdp.FTEID{Addr: n3, TEID: 100}) },
		"uplink 200": func() (upfxdp.PDRSet, error) { return e.dp.Uplink(upfxdp.FTEID{Addr: n3, TEID: 200}) },
		"downlink 1": func() (upfxdp.PDRSet, error) { return e.dp.Downlink(fig10UE) },
		"downlink 2": func() (upfxdp.PDRSet, error) { return e.dp.Downlink(secondUE) },
	}
	for name, lookup := range lookups {
		set, err := lookup()
		switch {
		case errors.Is(err, ebpf.ErrKeyNotExist):
			s.keys[name] = "absent"
		case err != nil:
			t.Fatal(err)
		default:
			s.keys[name] = fmt.Sprint("PDR slots ", set.Pdr[:set.Count])
		}
	}
	return s
}

// A FAR that drops, sent without a destination, comes back without one,
// not as one to Access (the zero interface), and goes back unchanged.
func TestDropFARWithoutDestination(t *testing.T) {
	e := newEnv(t)
	drop := map[string]any{"fars.1.applyAction": "DROP", "fars.1.destinationInterface": nil, "fars.1.forwardingParameters": nil}
	e.expect(t, http.StatusCreated, "POST", "/api/v1/sessions", variant(t, fig10, drop))
	want := variant(t, fig10Installed, drop)
	got := e.expect(t, http.StatusOK, "GET", "/api/v1/sessions/1", "")
	sameJSON(t, got, want)
	sameJSON(t, e.expect(t, http.StatusOK, "PUT", "/api/v1/sessions/1", string(got)), want)
}

// An I-UPF's session: the uplink over N9 to the PSA's F-TEID, the
// downlink from the PSA at an F-TEID of its own; the document comes back
// as it was sent.
func TestN9RoundTrip(t *testing.T) {
	e := newEnv(t)
	const iupf = `{"seid": 9,
 "pdrs": [{"pdrId": 1, "farId": 1, "outerHeaderRemoval": "OUTER_HEADER_REMOVAL_GTPU_UDP_IPV4",
           "pdi": {"teid": 100, "localAddress": "10.1.2.1", "sourceInterface": "INTERFACE_VALUE_ACCESS", "ueIPAddress": "10.1.3.27"}},
          {"pdrId": 2, "farId": 2, "outerHeaderRemoval": "OUTER_HEADER_REMOVAL_GTPU_UDP_IPV4",
           "pdi": {"teid": 100, "localAddress": "10.1.2.1", "sourceInterface": "INTERFACE_VALUE_ACCESS", "ueIPAddress": "10.1.3.27", "sdfFilters": ["permit out ip from 198.51.100.0/24 to assigned"]},
           "precedence": 30},
          {"pdrId": 3, "farId": 3, "outerHeaderRemoval": "OUTER_HEADER_REMOVAL_GTPU_UDP_IPV4",
           "pdi": {"teid": 101, "localAddress": "10.1.2.1", "sourceInterface": "INTERFACE_VALUE_CORE", "ueIPAddress": "10.1.3.27"}}],
 "fars": [{"farId": 1, "destinationInterface": "INTERFACE_VALUE_CORE",
           "forwardingParameters": {"outerHeaderCreation": {"outerHeaderCreationDescription": "OUTER_HEADER_CREATION_GTPU_UDP_IPV4", "ipv4Address": "10.1.3.2", "teid": 500}}},
          {"farId": 2, "destinationInterface": "INTERFACE_VALUE_CORE"},
          {"farId": 3, "destinationInterface": "INTERFACE_VALUE_ACCESS",
           "forwardingParameters": {"outerHeaderCreation": {"outerHeaderCreationDescription": "OUTER_HEADER_CREATION_GTPU_UDP_IPV4", "ipv4Address": "10.1.3.2", "teid": 300}}}]}`
	e.expect(t, http.StatusCreated, "POST", "/api/v1/sessions", iupf)
	zero := map[string]any{"packets": 0, "bytes": 0}
	sameJSON(t, e.expect(t, http.StatusOK, "GET", "/api/v1/sessions/9", ""),
		variant(t, iupf, map[string]any{"pdrs.0.counters": zero, "pdrs.1.counters": zero, "pdrs.2.counters": zero}))
	for teid, want := range map[uint32]uint16{100: 2, 101: 1} {
		if set, err := e.dp.Uplink(upfxdp.FTEID{Addr: n3, TEID: teid}); err != nil || set.Count != want {
			t.Errorf("TEID %d: %+v, %v; want %d PDRs", teid, set, err, want)
		}
	}
	if _, err := e.dp.Downlink(fig10UE); !errors.Is(err, ebpf.ErrKeyNotExist) {
		t.Errorf("the UE address of a PDR from N9 is a key: %v", err)
	}
}

// A session whose F-TEID is at an IPv6 N3 address, as GET reports it,
// goes back with PUT unchanged.
func TestIPv6FTEIDRoundTrip(t *testing.T) {
	e := newEnv(t)
	at6 := variant(t, fig10, map[string]any{"pdrs.1.pdi.localAddress": n3v6.String(), "pdrs.1.outerHeaderRemoval": "OUTER_HEADER_REMOVAL_GTPU_UDP_IPV6"})
	e.expect(t, http.StatusCreated, "POST", "/api/v1/sessions", at6)
	if set, err := e.dp.Uplink(upfxdp.FTEID{Addr: n3v6, TEID: 100}); err != nil || set.Count != 1 {
		t.Errorf("TEID 100 at %v: %+v, %v; want one PDR", n3v6, set, err)
	}
	got := e.expect(t, http.StatusOK, "GET", "/api/v1/sessions/1", "")
	before, _ := e.store.Get(1)
	sameJSON(t, e.expect(t, http.StatusOK, "PUT", "/api/v1/sessions/1", string(got)), string(got))
	if after, _ := e.store.Get(1); !reflect.DeepEqual(before, after) {
		t.Errorf("PUT of the GET document changed the session:\n%+v\n%+v", before, after)
	}
}

func TestFig10RoundTrip(t *testing.T) {
	e := newEnv(t)
	if got := e.expect(t, http.StatusCreated, "POST", "/api/v1/sessions", fig10); len(got) == 0 {
		t.Error("POST returned no document")
	}
	got := e.expect(t, http.StatusOK, "GET", "/api/v1/sessions/1", "")
	sameJSON(t, got, fig10Installed)
	for name, lookup := range map[string]func() (upfxdp.PDRSet, error){
		"TEID 100":     func() (upfxdp.PDRSet, error) { return e.dp.Uplink(upfxdp.FTEID{Addr: n3, TEID: 100}) },
		"UE 10.1.3.27": func() (upfxdp.PDRSet, error) { return e.dp.Downlink(fig10UE) },
	} {
		if set, err := lookup(); err != nil || set.Count != 1 {
			t.Errorf("%s: %+v, %v; want one PDR", name, set, err)
		}
	}

	// What GET returned, sent back, changes nothing.
	before, _ := e.store.Get(1)
	sameJSON(t, e.expect(t, http.StatusOK, "PUT", "/api/v1/sessions/1", string(got)), fig10Installed)
	after, _ := e.store.Get(1)
	if !reflect.DeepEqual(before, after) {
		t.Errorf("PUT of the GET document changed the session:\n%+v\n%+v", before, after)
	}
	sameJSON(t, e.expect(t, http.StatusOK, "GET", "/api/v1/sessions", ""), `{"sessions": [`+fig10Installed+`]}`)

	// So do a tunnel to an IPv6 peer and the removal of GTP-U/UDP/IPv6.
	tunnel6 := variant(t, second, map[string]any{"seid": 3, "pdrs.0.pdi.teid": 203, "pdrs.0.pdi.ueIPAddress": "10.1.3.29",
		"pdrs.1.pdi.ueIPAddress": "10.1.3.29", "pdrs.0.outerHeaderRemoval": "OUTER_HEADER_REMOVAL_GTPU_UDP_IPV6",
		"fars.1.forwardingParameters.outerHeaderCreation": map[string]any{"outerHeaderCreationDescription": "OUTER_HEADER_CREATION_GTPU_UDP_IPV6",
			"ipv6Address": "2001:db8:1:3::2", "teid": 303}})
	e.expect(t, http.StatusCreated, "POST", "/api/v1/sessions", tunnel6)
	var doc6 struct {
		PDRs []struct {
			OuterHeaderRemoval string `json:"outerHeaderRemoval"`
		} `json:"pdrs"`
		FARs []struct {
			ForwardingParameters struct {
				OuterHeaderCreation outerHeaderCreation `json:"outerHeaderCreation"`
			} `json:"forwardingParameters"`
		} `json:"fars"`
	}
	must(t, json.Unmarshal(e.expect(t, http.StatusOK, "GET", "/api/v1/sessions/3", ""), &doc6))
	if o := doc6.FARs[1].ForwardingParameters.OuterHeaderCreation; len(doc6.FARs) != 2 || o.Description != createGTPU6 ||
		o.IPv4Address != nil || o.IPv6Address == nil || *o.IPv6Address != "2001:db8:1:3::2" || doc6.PDRs[0].OuterHeaderRemoval != "OUTER_HEADER_REMOVAL_GTPU_UDP_IPV6" {
		t.Errorf("the IPv6 tunnel's session: %+v", doc6)
	}

	// A steering next hop goes in and comes back.
	steered := variant(t, second, map[string]any{"fars.0.forwardingParameters": map[string]any{"nextHop": "10.1.3.9"}})
	e.expect(t, http.StatusCreated, "POST", "/api/v1/sessions", steered)
	var doc struct {
		FARs []struct {
			ForwardingParameters struct{ NextHop string } `json:"forwardingParameters"`
		} `json:"fars"`
	}
	must(t, json.Unmarshal(e.expect(t, http.StatusOK, "GET", "/api/v1/sessions/2", ""), &doc))
	if len(doc.FARs) != 2 || doc.FARs[0].ForwardingParameters.NextHop != "10.1.3.9" {
		t.Errorf("the steered session's FARs: %+v", doc.FARs)
	}
}

// A FAR's duplicating parameters go in and come back, and the session
// duplicates as they say.
func TestDuplicatingParametersRoundTrip(t *testing.T) {
	e := newEnv(t)
	dup := map[string]any{"destinationInterface": "INTERFACE_VALUE_LI_FUNCTION", "dscp": 46,
		"outerHeaderCreation": map[string]any{"outerHeaderCreationDescription": "OUTER_HEADER_CREATION_GTPU_UDP_IPV4", "ipv4Address": "10.1.3.9", "teid": 77}}
	e.expect(t, http.StatusCreated, "POST", "/api/v1/sessions", variant(t, second, map[string]any{"fars.0.duplicatingParameters": dup}))
	var doc struct {
		FARs []struct {
			DuplicatingParameters json.RawMessage `json:"duplicatingParameters"`
		} `json:"fars"`
	}
	must(t, json.Unmarshal(e.expect(t, http.StatusOK, "GET", "/api/v1/sessions/2", ""), &doc))
	want, err := json.Marshal(dup)
	must(t, err)
	if len(doc.FARs) != 2 || doc.FARs[1].DuplicatingParameters != nil {
		t.Fatalf("FARs %+v: want FAR 1 alone to duplicate", doc.FARs)
	}
	sameJSON(t, doc.FARs[0].DuplicatingParameters, string(want))
	s, _ := e.store.Get(2)
	if d := s.FARs[0].Duplicating; d == nil || *d.OuterHeaderCreation != (session.OuterHeaderCreation{TEID: 77, Peer: netip.MustParseAddr("10.1.3.9")}) ||
		d.DestinationInterface != session.InterfaceLIFunction || d.DSCP != 46 {
		t.Errorf("FAR 1 duplicates %+v", d)
	}
}

// A packet to the UE arriving on the core side is counted by the
// downlink PDR, and GET shows it.
func TestCountersAreLive(t *testing.T) {
	e := newEnv(t)
	e.expect(t, http.StatusCreated, "POST", "/api/v1/sessions", fig10)
	_, upfMAC, err := e.upf.Link(upfIface)
	must(t, err)
	must(t, e.peer.SetNeigh("gnb", fig10UE.String(), upfMAC))
	var conn net.PacketConn
	must(t, e.peer.Do(func() (err error) {
		conn, err = net.ListenPacket("udp4", ":0")
		return err
	}))
	defer conn.Close()
	_, err = conn.WriteTo([]byte("hello"), &net.UDPAddr{IP: fig10UE.AsSlice(), Port: 9})
	must(t, err)

	var doc struct {
		PDRs []struct {
			ID       uint16  `json:"pdrId"`
			Counters Counter `json:"counters"`
		} `json:"pdrs"`
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		must(t, json.Unmarshal(e.expect(t, http.StatusOK, "GET", "/api/v1/sessions/1", ""), &doc))
		if doc.PDRs[0].Counters.Packets > 0 || time.Now().After(deadline) {
			break
		}
	}
	// IPv4 20 + UDP 8 + 5 bytes of payload.
	if c := doc.PDRs[0].Counters; doc.PDRs[0].ID != 20 || c != (Counter{Packets: 1, Bytes: 33}) {
		t.Errorf("downlink PDR %d counted %+v, want 1 packet of 33 bytes", doc.PDRs[0].ID, c)
	}
	if c := doc.PDRs[1].Counters; c != (Counter{}) {
		t.Errorf("uplink PDR counted %+v without uplink traffic", c)
	}

	var st Stats
	must(t, json.Unmarshal(e.expect(t, http.StatusOK, "GET", "/api/v1/stats", ""), &st))
	if st.Sessions != 1 || len(st.Interfaces) != 1 || st.Interfaces[0].Name != upfIface ||
		st.Interfaces[0].Reasons["downlink_forward"].Packets != 1 {
		t.Errorf("stats: %+v", st)
	}
}

// edit changes a decoded document at a dotted path ("pdrs.0.pdi.teid");
// a nil value removes the field.
func edit(doc any, path string, value any) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		if i, err := strconv.Atoi(p); err == nil {
			doc = doc.([]any)[i]
		} else {
			doc = doc.(map[string]any)[p]
		}
	}
	last := parts[len(parts)-1]
	if value == nil {
		delete(doc.(map[string]any), last)
	} else {
		doc.(map[string]any)[last] = value
	}
}

func variant(t *testing.T, base string, edits map[string]any) string {
	t.Helper()
	var doc any
	must(t, json.Unmarshal([]byte(base), &doc))
	for path, v := range edits {
		edit(doc, path, v)
	}
	out, err := json.Marshal(doc)
	must(t, err)
	return string(out)
}

// remove is an edit value that deletes the field.
var remove any

func TestBadDocumentsChangeNothing(t *testing.T) {
	e := newEnv(t)
	e.expect(t, http.StatusCreated, "POST", "/api/v1/sessions", fig10)
	before := e.snapshot(t)

	const ohc, ohcField = "fars.1.forwardingParameters.outerHeaderCreation", "fars[1].forwardingParameters.outerHeaderCreation"
	edited := []struct {
		name  string
		edits map[string]any
		field string
	}{
		{name: "unknown field", edits: map[string]any{"extra": 1}, field: "extra"},
		{name: "unknown nested field", edits: map[string]any{"pdrs.0.pdi.tied": 1}, field: "pdrs[0].pdi.tied"},
		{name: "field name in the wrong case", edits: map[string]any{"pdrs.1.PDRID": 2}, field: "pdrs[1].PDRID"},
		{name: "TEID as a string", edits: map[string]any{"pdrs.0.pdi.teid": "200"}, field: "pdrs[0].pdi.teid"},
		{name: "PDR ID too big", edits: map[string]any{"pdrs.1.pdrId": 70000}, field: "pdrs[1].pdrId"},
		{name: "negative FAR ID", edits: map[string]any{"fars.0.farId": -1}, field: "fars[0].farId"},
		{name: "fractional SEID", edits: map[string]any{"seid": 2.5}, field: "seid"},
		{name: "no SEID", edits: map[string]any{"seid": remove}, field: "seid"},
		{name: "SEID 0", edits: map[string]any{"seid": 0}, field: "seid"},
		{name: "PDRs not a list", edits: map[string]any{"pdrs": map[string]any{}}, field: "pdrs"},
		{name: "no PDRs", edits: map[string]any{"pdrs": []any{}}, field: "pdrs"},
		{name: "PDRs absent", edits: map[string]any{"pdrs": remove}, field: "pdrs"},
		{name: "no source interface", edits: map[string]any{"pdrs.1.pdi.sourceInterface": remove}, field: "pdrs[1].pdi.sourceInterface"},
		{name: "unknown interface", edits: map[string]any{"pdrs.0.pdi.sourceInterface": "INTERFACE_VALUE_N9"}, field: "pdrs[0].pdi.sourceInterface"},
		{name: "interface number out of range", edits: map[string]any{"pdrs.1.pdi.sourceInterface": 4}, field: "pdrs[1].pdi.sourceInterface"},
		{name: "unknown header removal", edits: map[string]any{"pdrs.0.outerHeaderRemoval": "OUTER_HEADER_REMOVAL_UDP_IPV6"}, field: "pdrs[0].outerHeaderRemoval"},
		{name: "bad UE address", edits: map[string]any{"pdrs.1.pdi.ueIPAddress": "10.1.3"}, field: "pdrs[1].pdi.ueIPAddress"},
		{name: "access PDR without TEID", edits: map[string]any{"pdrs.0.pdi.teid": remove}, field: "pdrs[0].pdi.teid"},
		{name: "unknown FAR", edits: map[string]any{"pdrs.0.farId": 9}, field: "pdrs[0].farId"},
		{name: "QFI too big", edits: map[string]any{"pdrs.1.pdi.qfi": 64}, field: "pdrs[1].pdi.qfi"},
		{name: "malformed flow description", edits: map[string]any{"pdrs.1.pdi.sdfFilters": []any{"permit out ip from any to assigned", "permit in ip from any to assigned"}},
			field: "pdrs[1].pdi.sdfFilters[1]"},
		{name: "flow description not a list", edits: map[string]any{"pdrs.1.pdi.sdfFilters": "permit out ip from any to assigned"}, field: "pdrs[1].pdi.sdfFilters"},
		{name: "too many SDF filters", edits: map[string]any{"pdrs.0.pdi.sdfFilters": []any{"permit out 6 from any 1,2,3 to assigned 4,5"}}, field: "pdrs[0].pdi.sdfFilters"},
		{name: "unsupported action", edits: map[string]any{"fars.0.applyAction": "DUPL"}, field: "fars[0].applyAction"},
		{name: "uplink buffering", edits: map[string]any{"fars.0.applyAction": "BUFF"}, field: "pdrs[0].farId"},
		{name: "FAR without action or destination", edits: map[string]any{"fars.0.destinationInterface": remove}, field: "fars[0].applyAction"},
		{name: "contradicting destinations", edits: map[string]any{"fars.1.destinationInterface": "INTERFACE_VALUE_CORE"}, field: "fars[1].forwardingParameters.destinationInterface"},
		{name: "downlink tunnelled towards the core", edits: map[string]any{"fars.1.forwardingParameters.destinationInterface": "INTERFACE_VALUE_CORE"}, field: "pdrs[1].farId"},
		{name: "GTP-U towards SGi-LAN", edits: map[string]any{"fars.1.forwardingParameters.destinationInterface": "INTERFACE_VALUE_SGI_LAN"}, field: ohcField},
		{name: "tunnel towards the core without a TEID", edits: map[string]any{"fars.0.forwardingParameters": map[string]any{"outerHeaderCreation": map[string]any{
			"outerHeaderCreationDescription": "OUTER_HEADER_CREATION_GTPU_UDP_IPV4", "ipv4Address": "10.1.3.9"}}},
			field: "fars[0].forwardingParameters.outerHeaderCreation.teid"},
		{name: "F-TEID at an address not the UPF's", edits: map[string]any{"pdrs.0.pdi.localAddress": "10.1.2.9"}, field: "pdrs[0].pdi.localAddress"},
		{name: "F-TEID at an IPv6 address", edits: map[string]any{"pdrs.0.pdi.localAddress": "2001:db8::1"}, field: "pdrs[0].pdi.localAddress"},
		{name: "DSCP beyond 63", edits: map[string]any{"fars.1.forwardingParameters.dscp": 64}, field: "fars[1].forwardingParameters.dscp"},
		{name: "next hop not an address", edits: map[string]any{"fars.0.forwardingParameters": map[string]any{"nextHop": "gw"}}, field: "fars[0].forwardingParameters.nextHop"},
		{name: "multicast next hop", edits: map[string]any{"fars.0.forwardingParameters": map[string]any{"nextHop": "224.0.0.1"}}, field: "fars[0].forwardingParameters.nextHop"},
		{name: "next hop towards access", edits: map[string]any{"fars.1.forwardingParameters.nextHop": "10.0.0.9"}, field: "fars[1].forwardingParameters.nextHop"},
		{name: "unknown header creation", edits: map[string]any{ohc + ".outerHeaderCreationDescription": "OUTER_HEADER_CREATION_UDP_IPV6"}, field: ohcField + ".outerHeaderCreationDescription"},
		{name: "IPv6 tunnel peer as IPv4 address", edits: map[string]any{ohc + ".ipv4Address": "2001:db8::1"}, field: ohcField + ".ipv4Address"},
		{name: "IPv6 tunnel without its peer", edits: map[string]any{ohc + ".outerHeaderCreationDescription": "OUTER_HEADER_CREATION_GTPU_UDP_IPV6"}, field: ohcField + ".ipv6Address"},
		{name: "IPv4 peer of an IPv6 tunnel", edits: map[string]any{ohc + ".outerHeaderCreationDescription": "OUTER_HEADER_CREATION_GTPU_UDP_IPV6", ohc + ".ipv6Address": "10.1.3.2"},
			field: ohcField + ".ipv6Address"},
		{name: "no TEID to default to", edits: map[string]any{ohc + ".teid": remove, "pdrs.0.pdi.sourceInterface": "INTERFACE_VALUE_CP_FUNCTION"}, field: ohcField + ".teid"},
		{name: "copies nowhere", edits: map[string]any{"fars.0.duplicatingParameters": map[string]any{"nextHop": "10.1.3.9"}},
			field: "fars[0].duplicatingParameters.destinationInterface"},
		{name: "copies in a UDP header", edits: map[string]any{"fars.0.duplicatingParameters": map[string]any{"destinationInterface": "INTERFACE_VALUE_LI_FUNCTION",
			"outerHeaderCreation": map[string]any{"outerHeaderCreationDescription": "OUTER_HEADER_CREATION_UDP_IPV4", "ipv4Address": "10.1.3.9"}}},
			field: "fars[0].duplicatingParameters.outerHeaderCreation.outerHeaderCreationDescription"},
		{name: "copies' tunnel without TEID", edits: map[string]any{"fars.0.duplicatingParameters": map[string]any{"destinationInterface": "INTERFACE_VALUE_LI_FUNCTION",
			"outerHeaderCreation": map[string]any{"outerHeaderCreationDescription": "OUTER_HEADER_CREATION_GTPU_UDP_IPV4", "ipv4Address": "10.1.3.9"}}},
			field: "fars[0].duplicatingParameters.outerHeaderCreation.teid"},
		{name: "copies' tunnel to an IPv6 address", edits: map[string]any{"fars.0.duplicatingParameters": map[string]any{"destinationInterface": "INTERFACE_VALUE_LI_FUNCTION",
			"outerHeaderCreation": map[string]any{"outerHeaderCreationDescription": "OUTER_HEADER_CREATION_GTPU_UDP_IPV4", "ipv4Address": "2001:db8::9", "teid": 7}}},
			field: "fars[0].duplicatingParameters.outerHeaderCreation.ipv4Address"},
		{name: "copies' tunnel and next hop", edits: map[string]any{"fars.0.duplicatingParameters": map[string]any{"destinationInterface": "INTERFACE_VALUE_LI_FUNCTION", "nextHop": "10.1.3.8",
			"outerHeaderCreation": map[string]any{"outerHeaderCreationDescription": "OUTER_HEADER_CREATION_GTPU_UDP_IPV4", "ipv4Address": "10.1.3.9", "teid": 7}}},
			field: "fars[0].duplicatingParameters.nextHop"},
		{name: "short MAC address", edits: map[string]any{"arpTable.0.mac": "02:00:00:00:00"}, field: "arpTable[0].mac"},
		{name: "ARP entry without IP", edits: map[string]any{"arpTable.0.ip": remove}, field: "arpTable[0].ip"},
		{name: "QER named by no rule", edits: map[string]any{"pdrs.0.qerIds": []any{5}}, field: "pdrs[0].qerIds"},
		{name: "QER named twice", edits: map[string]any{"pdrs.0.qerIds": []any{1, 1}, "qers": []any{map[string]any{"qerId": 1}}}, field: "pdrs[0].qerIds"},
		{name: "URR named by no rule", edits: map[string]any{"pdrs.1.urrIds": []any{5}}, field: "pdrs[1].urrIds"},
		{name: "unknown gate status", edits: map[string]any{"qers": []any{map[string]any{"qerId": 1, "gateStatus": map[string]any{"ul": "AJAR", "dl": "OPEN"}}}}, field: "qers[0].gateStatus.ul"},
		{name: "RQI as a number", edits: map[string]any{"qers": []any{map[string]any{"qerId": 1, "rqi": 1}}}, field: "qers[0].rqi"},
		{name: "QER ID twice", edits: map[string]any{"qers": []any{map[string]any{"qerId": 1}, map[string]any{"qerId": 1}}}, field: "qers[1].qerId"},
		{name: "URR quota, which only an SMF sets", edits: map[string]any{"pdrs.1.urrIds": []any{7}, "urrs": []any{map[string]any{"urrId": 7, "volumeQuota": map[string]any{"total": 1000}}}}, field: "urrs[0]"},
	}
	type badCase struct {
		name, method, path, body, field string
		status                          int
	}
	var cases []badCase
	for _, c := range edited {
		cases = append(cases, badCase{name: c.name, method: "POST", path: "/api/v1/sessions", body: variant(t, second, c.edits),
			field: c.field, status: http.StatusBadRequest})
	}
	const sessions, fig10Path = "/api/v1/sessions", "/api/v1/sessions/1"
	cases = append(cases, []badCase{
		{name: "malformed JSON", method: "POST", path: sessions, body: `{"seid": 2,`, status: http.StatusBadRequest},
		{name: "two documents", method: "POST", path: sessions, body: second + second, status: http.StatusBadRequest},
		{name: "empty body", method: "POST", path: sessions, status: http.StatusBadRequest},
		{name: "a list", method: "POST", path: sessions, body: "[" + second + "]", status: http.StatusBadRequest},
		{name: "larger than 1 MiB", method: "POST", path: sessions,
			body:   variant(t, second, map[string]any{"pdrs.0.pdi.ueIPAddress": strings.Repeat("1", 1<<20)}),
			status: http.StatusRequestEntityTooLarge},
		{name: "PUT of another SEID", method: "PUT", path: fig10Path, body: second, field: "seid", status: http.StatusBadRequest},
		{name: "PUT with a bad QFI", method: "PUT", path: fig10Path, body: variant(t, fig10, map[string]any{"pdrs.1.pdi.qfi": 99}),
			field: "pdrs[1].pdi.qfi", status: http.StatusBadRequest},
		{name: "PUT with an unknown field", method: "PUT", path: fig10Path, body: variant(t, fig10, map[string]any{"fars.0.forwardingParameters.mtu": 1500}),
			field: "fars[0].forwardingParameters.mtu", status: http.StatusBadRequest},
		{name: "PUT without PDRs", method: "PUT", path: fig10Path, body: variant(t, fig10, map[string]any{"pdrs": []any{}}),
			field: "pdrs", status: http.StatusBadRequest},
		{name: "SEID that is not a number", method: "GET", path: "/api/v1/sessions/one", status: http.StatusBadRequest},
		{name: "SEID twice", method: "POST", path: sessions, body: strings.Replace(second, `{"seid": 2,`, `{"seid": 3, "seid": 2,`, 1),
			field: "seid", status: http.StatusBadRequest},
		{name: "QFI twice", method: "POST", path: sessions, body: strings.Replace(second, `"qfi": 9}`, `"qfi": 9, "qfi": 9}`, 1),
			field: "pdrs[0].pdi.qfi", status: http.StatusBadRequest},
		{name: "PUT with a TEID twice", method: "PUT", path: fig10Path, body: strings.Replace(fig10, `"teid": 100,`, `"teid": 100, "teid": 101,`, 1),
			field: "pdrs[0].pdi.teid", status: http.StatusBadRequest},
	}...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := e.request(t, c.method, c.path, c.body)
			var got Error
			if err := json.Unmarshal(body, &got); err != nil || status != c.status || got.Field != c.field || got.Msg == "" {
				t.Errorf("status %d, body %s; want %d naming %q", status, body, c.status, c.field)
			}
			if after := e.snapshot(t); !reflect.DeepEqual(after, before) {
				t.Errorf("the request changed the store or the maps:\n%+v\n%+v", before, after)
			}
		})
	}
	// The documents were rejected for their one defect.
	e.expect(t, http.StatusCreated, "POST", "/api/v1/sessions", second)
}

func TestConflictsAndDeletion(t *testing.T) {
	e := newEnv(t)
	e.expect(t, http.StatusCreated, "POST", "/api/v1/sessions", fig10)
	e.expect(t, http.StatusConflict, "POST", "/api/v1/sessions", fig10)
	sameTEID := variant(t, second, map[string]any{"pdrs.0.pdi.teid": 100})
	e.expect(t, http.StatusConflict, "POST", "/api/v1/sessions", sameTEID)
	sameUE := variant(t, second, map[string]any{"pdrs.1.pdi.ueIPAddress": "10.1.3.27"})
	e.expect(t, http.StatusConflict, "POST", "/api/v1/sessions", sameUE)
	e.expect(t, http.StatusNotFound, "PUT", "/api/v1/sessions/2", second)
	if n := e.store.Len(); n != 1 {
		t.Fatalf("%d sessions after conflicts, want 1", n)
	}

	e.expect(t, http.StatusNoContent, "DELETE", "/api/v1/sessions/1", "")
	e.expect(t, http.StatusNotFound, "GET", "/api/v1/sessions/1", "")
	e.expect(t, http.StatusNotFound, "DELETE", "/api/v1/sessions/1", "")
	if _, err := e.dp.Uplink(upfxdp.FTEID{Addr: n3, TEID: 100}); !errors.Is(err, ebpf.ErrKeyNotExist) {
		t.Errorf("TEID 100 still installed after DELETE: %v", err)
	}
	// Now the TEID is free.
	e.expect(t, http.StatusCreated, "POST", "/api/v1/sessions", sameTEID)

	e.expect(t, http.StatusMethodNotAllowed, "PATCH", "/api/v1/sessions/2", "{}")
	e.expect(t, http.StatusNotFound, "GET", "/api/v1/session", "")
}

func TestClient(t *testing.T) {
	e := newEnv(t)
	c := &Client{URL: e.url + "/"}
	ctx := context.Background()
	if _, err := c.Create(ctx, []byte(fig10)); err != nil {
		t.Fatal(err)
	}
	var apiErr *Error
	if _, err := c.Create(ctx, []byte(fig10)); !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict {
		t.Errorf("second Create: %v", err)
	}
	bad := variant(t, fig10, map[string]any{"pdrs.1.pdi.qfi": 99})
	if _, err := c.Replace(ctx, []byte(bad)); err == nil || !strings.HasPrefix(err.Error(), "pdrs[1].pdi.qfi: ") {
		t.Errorf("Replace of a bad document: %v", err)
	}
	if _, err := c.Replace(ctx, []byte(`{"pdrs": []}`)); err == nil || !strings.Contains(err.Error(), "no seid") {
		t.Errorf("Replace without a SEID: %v", err)
	}
	for _, empty := range []string{"", " \n"} {
		if _, err := c.Replace(ctx, []byte(empty)); err == nil || !strings.HasPrefix(err.Error(), "the document is empty") {
			t.Errorf("Replace of empty input %q: %v", empty, err)
		}
	}
	if _, err := c.Replace(ctx, []byte("seid: 1")); err == nil || !strings.HasPrefix(err.Error(), "the document is not a session in JSON") {
		t.Errorf("Replace of YAML: %v", err)
	}
	doc, err := c.Session(ctx, 1)
	must(t, err)
	sameJSON(t, doc, fig10Installed)
	list, err := c.Sessions(ctx)
	must(t, err)
	sameJSON(t, list, `{"sessions": [`+fig10Installed+`]}`)

	st, err := c.Stats(ctx)
	must(t, err)
	if st.Sessions != 1 || len(st.Interfaces) != 1 || st.Interfaces[0].Name != upfIface || len(st.Interfaces[0].Reasons) != len(upfxdp.ReasonNames) {
		t.Errorf("stats: %+v", st)
	}
	// The table, of counts that do not depend on stray kernel traffic.
	st.Interfaces = []InterfaceStats{
		{Name: "n3", Reasons: map[string]Counter{"drop_no_pdr": {Packets: 3, Bytes: 300}, "pass_not_ip": {}, "uplink_forward": {Packets: 5, Bytes: 500}}},
		{Name: "idle", Reasons: map[string]Counter{"drop_no_pdr": {}}},
	}
	var table bytes.Buffer
	must(t, st.WriteTable(&table))
	want := "INTERFACE  REASON          PACKETS  BYTES\n" +
		"n3         uplink_forward  5        500\n" +
		"n3         drop_no_pdr     3        300\n" +
		"idle       -               0        0\n" +
		"sessions: 1\n"
	if table.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", table.String(), want)
	}

	must(t, c.Delete(ctx, 1))
	if err := c.Delete(ctx, 1); !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound || err.Error() != "session 1 not found" {
		t.Errorf("second Delete: %v", err)
	}
}

// QERs and URRs round-trip through the document, and GET shows what each
// URR measured.
func TestQoSAndUsageDocuments(t *testing.T) {
	e := newEnv(t)
	doc := variant(t, second, map[string]any{
		"pdrs.0.qerIds": []any{1, 2}, "pdrs.0.urrIds": []any{7}, "pdrs.1.qerIds": []any{1}, "pdrs.1.urrIds": []any{7},
		"qers": []any{
			map[string]any{"qerId": 1, "mbr": map[string]any{"ul": 20_000_000, "dl": 100_000_000}},
			map[string]any{"qerId": 2, "gateStatus": map[string]any{"ul": "OPEN", "dl": "CLOSED"}, "gbr": map[string]any{"ul": 1000, "dl": 2000}, "qfi": 5, "rqi": true},
		},
		"urrs": []any{map[string]any{"urrId": 7, "measureBeforeQoS": true}},
	})
	e.expect(t, http.StatusCreated, "POST", "/api/v1/sessions", doc)
	got, _ := e.store.Get(2)
	want := []session.QER{{ID: 1, MBRUL: 20_000_000, MBRDL: 100_000_000}, {ID: 2, GateDLClosed: true, GBRUL: 1000, GBRDL: 2000, QFI: 5, RQI: true}}
	if !reflect.DeepEqual(got.QERs, want) || !reflect.DeepEqual(got.URRs, []session.URR{{ID: 7, BeforeQoS: true}}) ||
		!reflect.DeepEqual(got.PDRs[0].QERIDs, []uint32{1, 2}) {
		t.Fatalf("stored %+v", got)
	}
	var body struct {
		QERs []map[string]any `json:"qers"`
		URRs []struct {
			ID               uint32 `json:"urrId"`
			MeasureBeforeQoS bool   `json:"measureBeforeQoS"`
			Usage            *Usage `json:"usage"`
		} `json:"urrs"`
	}
	must(t, json.Unmarshal(e.expect(t, http.StatusOK, "GET", "/api/v1/sessions/2", ""), &body))
	if len(body.QERs) != 2 || body.QERs[1]["gateStatus"].(map[string]any)["dl"] != "CLOSED" ||
		len(body.URRs) != 1 || !body.URRs[0].MeasureBeforeQoS || body.URRs[0].Usage == nil || body.URRs[0].Usage.Uplink.Bytes != 0 {
		t.Fatalf("GET %+v", body)
	}
}

// A buffering FAR shows what its buffer holds and what it dropped for want
// of room.
func TestBufferingFARShowsItsBuffer(t *testing.T) {
	e := newEnv(t)
	var buffers *buffer.Manager
	// Its packet socket lives in the UPF's namespace; one packet fits.
	must(t, e.upf.Do(func() (err error) {
		buffers, err = buffer.New(e.dp, buffer.Config{SessionPackets: 1})
		return err
	}))
	testsupport.Cleanup(t, buffers.Close)
	testsupport.Go(t, buffers.Run)
	e.store.SetBuffers(buffers)
	e.expect(t, http.StatusCreated, "POST", "/api/v1/sessions", variant(t, second, map[string]any{"fars.1.applyAction": "BUFF"}))

	const sent = 3
	frame := downlinkFrame(udpPacket(netip.MustParseAddr("192.0.2.9"), secondUE, 20))
	prog := e.attachedProgram(t)
	for range sent {
		run(t, prog, frame)
	}
	want := buffer.Stats{Held: 1, Dropped: sent - 1}
	var doc struct {
		FARs []struct {
			ID     uint32        `json:"farId"`
			Buffer *buffer.Stats `json:"buffer"`
		} `json:"fars"`
	}
	// The manager takes the packets from the data path's ring on its own
	// time.
	var body []byte
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		body, doc.FARs = e.expect(t, http.StatusOK, "GET", "/api/v1/sessions/2", ""), nil
		must(t, json.Unmarshal(body, &doc))
		if len(doc.FARs) != 2 {
			t.Fatalf("FARs %+v", doc.FARs)
		}
		if b := doc.FARs[1].Buffer; b != nil && *b == want || time.Now().After(deadline) {
			break
		}
	}
	if doc.FARs[0].Buffer != nil || doc.FARs[1].Buffer == nil || *doc.FARs[1].Buffer != want {
		t.Errorf("GET %s\nwant FAR 2's buffer %+v and none for FAR 1", body, want)
	}
	// The document sent back, its buffer's figures with it, changes nothing.
	before, _ := e.store.Get(2)
	e.expect(t, http.StatusOK, "PUT", "/api/v1/sessions/2", string(body))
	if after, _ := e.store.Get(2); !reflect.DeepEqual(before, after) {
		t.Errorf("PUT of the GET document changed the session:\n%+v\n%+v", before, after)
	}
}

// A path no resource has, or a method a resource does not take, is
// refused in the API's JSON like every other error.
func TestUnknownResourceAnswersJSON(t *testing.T) {
	e := &env{url: serveAPI(t, Services{})}
	for _, tt := range []struct {
		method, path string
		status       int
		msg          string
	}{
		{method: "GET", path: "/api/v1/nothing", status: http.StatusNotFound, msg: "no resource /api/v1/nothing"},
		{method: "PATCH", path: "/api/v1/rules", status: http.StatusMethodNotAllowed, msg: "/api/v1/rules takes DELETE, GET, HEAD, POST, not PATCH"},
	} {
		var got Error
		if err := json.Unmarshal(e.expect(t, tt.status, tt.method, tt.path, ""), &got); err != nil || got.Msg != tt.msg {
			t.Errorf("%s %s: %+v (%v), want the error %q", tt.method, tt.path, got, err, tt.msg)
		}
	}
}
