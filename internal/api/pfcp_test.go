package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/wmnsk/go-pfcp/ie"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/lab/pfcptest"
	"github.com/xdp5g/xdp5g/internal/upf/ippool"
	"github.com/xdp5g/xdp5g/internal/upf/n4"
	"github.com/xdp5g/xdp5g/internal/upf/pfcp"
	"github.com/xdp5g/xdp5g/internal/upf/session"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

const (
	smfNodeID = "smf.xdp5g.test"
	gnbTEID   = 900
	qfi       = 9
)

var gnb = netip.MustParseAddr("10.1.3.2") // the peer namespace's end of the veth

// servePFCP serves PFCP on a loopback port over the env's store, as the
// daemon does, and the API with it; it returns an SMF associated with it.
func (e *env) servePFCP(t *testing.T) (*pfcp.Server, *pfcptest.SMF) {
	t.Helper()
	// No heartbeats during the test: they would go to port 8805.
	srv, smf := e.startPFCP(t, pfcp.Config{HeartbeatInterval: time.Hour})
	_, err := smf.Associate()
	must(t, err)
	return srv, smf
}

// startPFCP serves PFCP as servePFCP does, with cfg's timers and peers,
// and returns an SMF that has not associated.
func (e *env) startPFCP(t *testing.T, cfg pfcp.Config) (*pfcp.Server, *pfcptest.SMF) {
	t.Helper()
	pool, err := ippool.New(netip.MustParsePrefix("10.60.0.0/24"))
	must(t, err)
	handler := n4.New(n4.Config{Store: e.store, N3: []netip.Addr{n3}, UEPool: pool})
	cfg.Listen, cfg.NodeID, cfg.Handler = "127.0.0.1:0", "upf.xdp5g.test", handler
	srv, err := pfcp.New(cfg)
	must(t, err)
	t.Cleanup(func() { srv.Close() })
	e.serve(t, &PFCP{Server: srv, Sessions: handler})
	smf, err := pfcptest.NewSMF(smfNodeID, srv.Addr())
	must(t, err)
	t.Cleanup(func() { smf.Close() })
	return srv, smf
}

// installed is the document GET returns for the session the SMF
// established, with its CP function's PDR on cpTEID.
func installed(s pfcptest.Session, cpTEID uint32) string {
	return fmt.Sprintf(`{"seid": %d,
 "pdrs": [{"pdrId": 1, "farId": 1, "precedence": 65535, "outerHeaderRemoval": "OUTER_HEADER_REMOVAL_GTPU_UDP_IPV4",
           "pdi": {"teid": %d, "localAddress": %[9]q, "sourceInterface": "INTERFACE_VALUE_ACCESS", "ueIPAddress": %[3]q, "qfi": %[4]d},
           "counters": {"packets": 0, "bytes": 0}},
          {"pdrId": 2, "farId": 2, "precedence": 65535, "pdi": {"sourceInterface": "INTERFACE_VALUE_CORE", "ueIPAddress": %[3]q, "qfi": %[4]d},
           "counters": {"packets": 0, "bytes": 0}},
          {"pdrId": 5, "farId": 2, "outerHeaderRemoval": "OUTER_HEADER_REMOVAL_GTPU_UDP_IPV4",
           "pdi": {"teid": %[7]d, "localAddress": %[9]q, "sourceInterface": "INTERFACE_VALUE_CP_FUNCTION"}, "counters": {"packets": 0, "bytes": 0}},
          {"pdrId": 6, "farId": 3, "outerHeaderRemoval": "OUTER_HEADER_REMOVAL_GTPU_UDP_IPV4",
           "pdi": {"teid": %[2]d, "localAddress": %[9]q, "sourceInterface": "INTERFACE_VALUE_ACCESS", "sdfFilters": ["permit out 58 from ff02::2 to assigned"]},
           "counters": {"packets": 0, "bytes": 0}}],
 "fars": [{"farId": 1, "destinationInterface": "INTERFACE_VALUE_CORE"},
          {"farId": 2, "forwardingParameters": {"outerHeaderCreation": {"outerHeaderCreationDescription": "OUTER_HEADER_CREATION_GTPU_UDP_IPV4", "ipv4Address": %[5]q, "teid": %[6]d}},
           "destinationInterface": "INTERFACE_VALUE_ACCESS"},
          {"farId": 3, "forwardingParameters": {"outerHeaderCreation": {"outerHeaderCreationDescription": "OUTER_HEADER_CREATION_GTPU_UDP_IPV4", "ipv4Address": "127.0.0.1", "teid": %[8]d}},
           "destinationInterface": "INTERFACE_VALUE_CP_FUNCTION"}]}`, s.SEID, s.TEID, s.UE, qfi, gnb, gnbTEID, cpTEID, smfCPSEID&0xffffffff, n3)
}

// smfCPSEID is the CP SEID of the SMF's session; its low half is the TEID
// of the SMF's own tunnel end.
const smfCPSEID = 0x5eed

// Sessions an SMF created over PFCP are listed with the REST API's, which
// cannot change or delete them; the REST API's own stay its to change.
func TestPFCPSessionsAreListedButNotChanged(t *testing.T) {
	e := newEnv(t)
	srv, smf := e.servePFCP(t)
	e.expect(t, http.StatusCreated, "POST", "/api/v1/sessions", fig10)
	sess, err := smf.EstablishPDUSession(smfCPSEID, gnb, gnbTEID, qfi)
	must(t, err)
	stored, _ := e.store.Get(sess.SEID)
	cp := slices.IndexFunc(stored.PDRs, func(p session.PDR) bool { return p.PDI.SourceInterface == session.InterfaceCPFunction })
	if cp < 0 {
		t.Fatalf("no PDR of the CP function in %+v", stored.PDRs)
	}
	if sess.N3 != n3 || !netip.MustParsePrefix("10.60.0.0/24").Contains(sess.UE) {
		t.Errorf("the UPF chose F-TEID %d at %v and UE %v; want its N3 address and one of the pool", sess.TEID, sess.N3, sess.UE)
	}
	path := fmt.Sprintf("/api/v1/sessions/%d", sess.SEID)
	doc := e.expect(t, http.StatusOK, "GET", path, "")
	sameJSON(t, doc, installed(sess, stored.PDRs[cp].PDI.TEID))

	// What xdp5g sessions list prints.
	list, err := (&Client{URL: e.url}).Sessions(context.Background())
	must(t, err)
	var listed struct{ Sessions []struct{ SEID uint64 } }
	must(t, json.Unmarshal(list, &listed))
	var seids []uint64
	for _, s := range listed.Sessions {
		seids = append(seids, s.SEID)
	}
	if slices.Sort(seids); !reflect.DeepEqual(seids, []uint64{1, sess.SEID}) {
		t.Errorf("listed sessions %v, want 1 and %d", seids, sess.SEID)
	}

	before, _ := e.store.Get(sess.SEID)
	for _, method := range []string{"PUT", "DELETE"} {
		status, body := e.request(t, method, path, string(doc))
		var got Error
		if err := json.Unmarshal(body, &got); err != nil || status != http.StatusConflict || !strings.Contains(got.Msg, "PFCP") {
			t.Errorf("%s of the SMF's session: status %d, body %s; want 409 naming PFCP", method, status, body)
		}
	}
	if after, _ := e.store.Get(sess.SEID); !reflect.DeepEqual(before, after) {
		t.Errorf("the refused requests changed the session:\n%+v\n%+v", before, after)
	}
	if set, err := e.dp.Uplink(upfxdp.FTEID{Addr: n3, TEID: sess.TEID}); err != nil || set.Count != 2 { // the uplink's PDR, and router solicitations'
		t.Errorf("TEID %d after the refused requests: %+v, %v", sess.TEID, set, err)
	}
	e.expect(t, http.StatusNoContent, "DELETE", "/api/v1/sessions/1", "")

	if st := srv.Stats(); st.Received < 2 {
		t.Errorf("PFCP stats %+v, want the association and the establishment received", st)
	}
	var st PFCPStats
	must(t, json.Unmarshal(e.expect(t, http.StatusOK, "GET", "/api/v1/pfcp/stats", ""), &st))
	if want := PFCPStats(srv.Stats()); st != want {
		t.Errorf("GET /api/v1/pfcp/stats = %+v, want %+v", st, want)
	}

	// Once the SMF deletes it, the session is gone for the REST API too.
	must(t, smf.Delete(sess.SEID))
	e.expect(t, http.StatusNotFound, "GET", path, "")
	e.expect(t, http.StatusNotFound, "DELETE", path, "")
}

// attachedProgram is the XDP program attached to the UPF's interface, to
// run frames through with BPF_PROG_TEST_RUN: what they do to the maps is
// what the same frames from the wire would do.
func (e *env) attachedProgram(t *testing.T) *ebpf.Program {
	t.Helper()
	// Attach pins the link in the data path's links directory.
	l, err := link.LoadPinnedLink(filepath.Join(e.dp.PinPath(), "links", upfIface), nil)
	must(t, err)
	defer l.Close()
	info, err := l.Info()
	must(t, err)
	prog, err := ebpf.NewProgramFromID(info.Program)
	must(t, err)
	t.Cleanup(func() { prog.Close() })
	return prog
}

// udpPacket is an IPv4/UDP packet with payload octets of payload.
func udpPacket(src, dst netip.Addr, payload int) []byte {
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
	udp := &layers.UDP{SrcPort: 40000, DstPort: 9}
	_ = udp.SetNetworkLayerForChecksum(ip) // fails only for a layer that is not IP
	return demo.Serialize(true, ip, udp, gopacket.Payload(make([]byte, payload)))
}

var (
	gnbMAC = net.HardwareAddr{2, 0, 0, 0, 0, 2}
	upfMAC = net.HardwareAddr{2, 0, 0, 0, 0, 1}
)

// uplinkFrame is inner as the gNB sends it: in a G-PDU to the UPF's N3
// address on teid, with an UL PDU Session Container carrying qfi.
func uplinkFrame(teid uint32, qfi uint8, inner []byte) []byte {
	return demo.GTPUFrame(upfMAC, gnbMAC, gnb, n3, teid, []byte{demo.ULPDUSession, qfi}, inner)
}

// downlinkFrame is inner as it comes from the data network (the same peer
// namespace here).
func downlinkFrame(inner []byte) []byte { return demo.Ethernet(upfMAC, gnbMAC, inner) }

// run runs frames through prog.
func run(t *testing.T, prog *ebpf.Program, frames ...[]byte) {
	t.Helper()
	for _, f := range frames {
		_, err := prog.Run(&ebpf.RunOptions{Data: f, DataOut: make([]byte, len(f)+256)})
		must(t, err)
	}
}

// An SMF's session shows, in the management view, its QER and its URR as
// the SMF set them and live counters that are the packets it carried: the
// uplink through the open gate counted to the octet, the downlink stopped
// by the closed one counted nowhere.
func TestPFCPSessionShowsRulesAndUsage(t *testing.T) {
	e := newEnv(t)
	_, smf := e.servePFCP(t)
	req := smf.PDUSessionRequest(smfCPSEID, netip.Addr{}, gnb, gnbTEID, qfi)
	const (
		ulKbps, dlKbps = 20_000, 100_000
		volumesFlags   = 0x07 // TOVOL, ULVOL, DLVOL
		volum          = 1    // Measurement Method: volume
	)
	req.CreateQER = append(req.CreateQER, ie.NewCreateQER(ie.NewQERID(1),
		ie.NewGateStatus(ie.GateStatusOpen, ie.GateStatusClosed), ie.NewMBR(ulKbps, dlKbps)))
	for i, p := range req.CreatePDR {
		if id, _ := p.PDRID(); id == 1 || id == 2 {
			req.CreatePDR[i] = ie.NewCreatePDR(append(slices.Clip(p.ChildIEs), ie.NewQERID(1))...)
		}
	}
	// Limits beyond the traffic: no report or quota gets in the way.
	must(t, pfcptest.AddURR(req, ie.NewCreateURR(ie.NewURRID(3), ie.NewMeasurementMethod(0, volum, 0),
		ie.NewReportingTriggers(pfcptest.TriggerVOLTH, 0, 0),
		ie.NewVolumeThreshold(volumesFlags, 100_000, 60_000, 40_000),
		ie.NewVolumeQuota(volumesFlags, 0, 0, 5_000_000)), 1, 2))
	sess, err := smf.Establish(req)
	must(t, err)

	ue := sess.UE
	dn := netip.MustParseAddr("192.0.2.9")
	var up, down [][]byte
	var upBytes uint64
	for _, payload := range []int{10, 100, 1000} {
		inner := udpPacket(ue, dn, payload)
		up = append(up, uplinkFrame(sess.TEID, qfi, inner))
		upBytes += uint64(len(inner))
	}
	var downFrames, downBytes uint64
	for _, payload := range []int{50, 500} {
		f := downlinkFrame(udpPacket(dn, ue, payload))
		down = append(down, f)
		downFrames, downBytes = downFrames+1, downBytes+uint64(len(f))
	}
	prog := e.attachedProgram(t)
	run(t, prog, append(up, down...)...)

	// The session as GET /api/v1/sessions lists it.
	var list struct{ Sessions []json.RawMessage }
	must(t, json.Unmarshal(e.expect(t, http.StatusOK, "GET", "/api/v1/sessions", ""), &list))
	if len(list.Sessions) != 1 {
		t.Fatalf("%d sessions listed, want the SMF's", len(list.Sessions))
	}
	var doc struct {
		SEID uint64 `json:"seid"`
		PDRs []struct {
			ID       uint16   `json:"pdrId"`
			QERIDs   []uint32 `json:"qerIds"`
			URRIDs   []uint32 `json:"urrIds"`
			Counters Counter  `json:"counters"`
		} `json:"pdrs"`
		QERs json.RawMessage  `json:"qers"`
		URRs []map[string]any `json:"urrs"`
	}
	must(t, json.Unmarshal(list.Sessions[0], &doc))
	if doc.SEID != sess.SEID {
		t.Fatalf("listed SEID %d, want %d", doc.SEID, sess.SEID)
	}
	sameJSON(t, doc.QERs, fmt.Sprintf(`[{"qerId": 1, "gateStatus": {"ul": "OPEN", "dl": "CLOSED"}, "mbr": {"ul": %d, "dl": %d}}]`,
		ulKbps*1000, dlKbps*1000))
	for _, p := range doc.PDRs {
		want := Counter{}
		if p.ID == 1 {
			want = Counter{Packets: uint64(len(up)), Bytes: upBytes}
		}
		if p.Counters != want {
			t.Errorf("PDR %d counted %+v, want %+v", p.ID, p.Counters, want)
		}
		ruled := p.ID == 1 || p.ID == 2
		if got := len(p.QERIDs) == 1 && p.QERIDs[0] == 1 && len(p.URRIDs) == 1 && p.URRIDs[0] == 3; got != ruled {
			t.Errorf("PDR %d names QERs %v and URRs %v", p.ID, p.QERIDs, p.URRIDs)
		}
	}
	if len(doc.URRs) != 1 {
		t.Fatalf("URRs %v, want URR 3", doc.URRs)
	}
	// The packet times are the data path's clock: present, not compared.
	usage := doc.URRs[0]["usage"].(map[string]any)
	for _, at := range []string{"firstPacket", "lastPacket"} {
		if _, ok := usage[at].(string); !ok {
			t.Errorf("usage without its %s: %v", at, usage)
		}
		delete(usage, at)
	}
	urr, err := json.Marshal(doc.URRs[0])
	must(t, err)
	sameJSON(t, urr, fmt.Sprintf(`{"urrId": 3,
		"volumeThreshold": {"total": 100000, "uplink": 60000, "downlink": 40000}, "volumeQuota": {"downlink": 5000000},
		"usage": {"uplink": {"packets": %d, "bytes": %d}, "downlink": {"packets": 0, "bytes": 0}}}`, len(up), upBytes))

	// The downlink frames reached the gate and stopped there.
	var st Stats
	must(t, json.Unmarshal(e.expect(t, http.StatusOK, "GET", "/api/v1/stats", ""), &st))
	if got := st.Interfaces[0].Reasons["drop_qer_gate"]; got != (Counter{Packets: downFrames, Bytes: downBytes}) {
		t.Errorf("the closed gate dropped %+v, want the %d downlink frames of %d octets", got, downFrames, downBytes)
	}
}

func TestAssociations(t *testing.T) {
	e := newEnv(t)
	began := time.Now().Truncate(time.Second)
	_, _ = e.servePFCP(t)
	got, err := (&Client{URL: e.url}).Associations(context.Background())
	must(t, err)
	if len(got.Associations) != 1 {
		t.Fatalf("associations %+v, want the SMF's", got)
	}
	a := got.Associations[0]
	// Requests go to the PFCP port whatever port the SMF sent from.
	if a.NodeID != smfNodeID || a.Addr != netip.MustParseAddrPort("127.0.0.1:8805") || a.Lost ||
		a.Since.Before(began) || a.RecoveryTime.Before(began) || !a.LastHeartbeat.IsZero() {
		t.Errorf("association %+v", a)
	}
	// Absent rather than the zero time before the first heartbeat.
	if body := e.expect(t, http.StatusOK, "GET", "/api/v1/pfcp/associations", ""); bytes.Contains(body, []byte("lastHeartbeat")) {
		t.Errorf("body %s gives a last heartbeat", body)
	}
}

func TestPFCPResourcesWithoutPFCP(t *testing.T) {
	e := newEnv(t)
	for _, path := range []string{"/api/v1/pfcp/associations", "/api/v1/pfcp/stats"} {
		status, body := e.request(t, "GET", path, "")
		var got Error
		if err := json.Unmarshal(body, &got); err != nil || status != http.StatusNotFound || !strings.Contains(got.Msg, "pfcp section") {
			t.Errorf("GET %s: status %d, body %s; want 404 naming the pfcp section", path, status, body)
		}
	}
	_, err := (&Client{URL: e.url}).Associations(context.Background())
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
		t.Errorf("Associations: %v", err)
	}
}

func TestAssociationsTable(t *testing.T) {
	at := func(s string) time.Time {
		ts, err := time.Parse(time.RFC3339, s)
		must(t, err)
		return ts
	}
	a := &Associations{Associations: []Association{
		{NodeID: "smf1.example", Addr: netip.MustParseAddrPort("192.0.2.20:8805"), RecoveryTime: at("2025-01-02T03:00:00Z"),
			Since: at("2025-01-02T03:04:05Z"), LastHeartbeat: at("2025-01-02T03:05:05Z")},
		{NodeID: "192.0.2.21", Addr: netip.MustParseAddrPort("192.0.2.21:8805"), RecoveryTime: at("2025-01-02T03:00:00Z"),
			Since: at("2025-01-02T03:04:05Z"), Lost: true},
	}}
	var table bytes.Buffer
	must(t, a.WriteTable(&table))
	want := "NODE ID       ADDRESS          STATE  SINCE                 LAST HEARTBEAT        SMF STARTED\n" +
		"smf1.example  192.0.2.20:8805  up     2025-01-02T03:04:05Z  2025-01-02T03:05:05Z  2025-01-02T03:00:00Z\n" +
		"192.0.2.21    192.0.2.21:8805  lost   2025-01-02T03:04:05Z  -                     2025-01-02T03:00:00Z\n"
	if table.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", table.String(), want)
	}
}

// The operator asks an SMF to release its association: 202 once the SMF
// agreed to, and the UPF does not set it up again once released; 404 for a
// node without one.
func TestReleaseAssociation(t *testing.T) {
	e := newEnv(t)
	// The UPF associates with the SMF where it listens: a port reserved,
	// then freed for it.
	reserved, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	must(t, err)
	smfAt := reserved.LocalAddr().(*net.UDPAddr).AddrPort()
	reserved.Close()
	const heartbeats = 50 * time.Millisecond
	// T1 short: the first setup request goes out before the SMF listens.
	_, smf := e.startPFCP(t, pfcp.Config{HeartbeatInterval: heartbeats, T1: heartbeats, Peers: []string{smfAt.String()}})
	_, err = smf.Listen(smfAt)
	must(t, err)
	associated := func() int {
		list, err := (&Client{URL: e.url}).Associations(t.Context())
		must(t, err)
		return len(list.Associations)
	}
	for deadline := time.Now().Add(10 * time.Second); associated() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the UPF set up no association")
		}
	}

	sameJSON(t, e.expect(t, http.StatusNotFound, "POST", "/api/v1/pfcp/associations/smf.elsewhere/release", ""),
		`{"error": "no PFCP association with smf.elsewhere"}`)
	if smf.ReleaseAsked() {
		t.Fatal("another node's release reached the SMF")
	}
	must(t, (&Client{URL: e.url}).Release(t.Context(), smfNodeID))
	if !smf.ReleaseAsked() {
		t.Fatal("the SMF was not asked to release the association")
	}
	must(t, smf.Release())
	time.Sleep(10 * heartbeats)
	if n := associated(); n != 0 {
		t.Errorf("%d associations after the release", n)
	}
}
