package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/lab/pfcptest"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

const smfNodeID = "smf.xdp5g.test"

// pfcpStats reads the daemon's PFCP counters.
func pfcpStats(t *testing.T, client *api.Client) api.PFCPStats {
	t.Helper()
	resp, err := http.Get(client.URL + "/api/v1/pfcp/stats")
	must(t, err)
	defer resp.Body.Close()
	var st api.PFCPStats
	must(t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

// PFCP messages from outside pfcp.allowed_peers get no answer, are counted
// and change nothing: an Association Setup that takes the Node ID of an
// associated SMF leaves that SMF's association and session as they were.
func TestOnlyAllowedPeersReachPFCP(t *testing.T) {
	e := newEnv(t)
	listen := testsupport.FreeAddr(t, "udp")
	e.pfcp = fmt.Sprintf("{listen: %q, node_id: upf.xdp5g.test, heartbeat_interval: 1h, ue_pool: 10.60.0.0/24, allowed_peers: [127.0.0.1]}", listen)
	client, stop := runDaemon(t, e.config(t))
	defer func() { must(t, stop()) }()
	ctx := context.Background()

	stranger, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.2:0")))
	must(t, err)
	defer stranger.Close()
	seq := uint32(0)
	unanswered := func(req message.Message) {
		t.Helper()
		seq++
		req.SetSequenceNumber(seq)
		b := make([]byte, req.MarshalLen())
		must(t, req.MarshalTo(b))
		_, err := stranger.WriteToUDPAddrPort(b, netip.MustParseAddrPort(listen))
		must(t, err)
		stranger.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if n, _, err := stranger.ReadFromUDPAddrPort(make([]byte, 1500)); err == nil {
			t.Errorf("%s from 127.0.0.2 answered with %d bytes", req.MessageTypeName(), n)
		}
	}
	setup := message.NewAssociationSetupRequest(0, ie.NewNodeID("", "", smfNodeID), ie.NewRecoveryTimeStamp(time.Now()))
	unanswered(message.NewHeartbeatRequest(0, ie.NewRecoveryTimeStamp(time.Now()), nil))
	unanswered(setup)
	assocs, err := client.Associations(ctx)
	must(t, err)
	if len(assocs.Associations) != 0 {
		t.Fatalf("associations after the stranger's setup: %+v", assocs)
	}

	smf, err := pfcptest.NewSMF(smfNodeID, netip.MustParseAddrPort(listen))
	must(t, err)
	defer smf.Close()
	_, err = smf.Associate()
	must(t, err)
	_, err = smf.EstablishPDUSession(0x5eed, netip.MustParseAddr("10.1.3.2"), 700, 9)
	must(t, err)
	unanswered(setup) // the SMF's Node ID from elsewhere
	assocs, err = client.Associations(ctx)
	must(t, err)
	if a := assocs.Associations; len(a) != 1 || a[0].Addr != netip.MustParseAddrPort("127.0.0.1:8805") {
		t.Errorf("associations after the hijacking setup: %+v; want the SMF's at 127.0.0.1", a)
	}
	sessions, err := client.Sessions(ctx)
	must(t, err)
	var l struct{ Sessions []json.RawMessage }
	must(t, json.Unmarshal(sessions, &l))
	if len(l.Sessions) != 1 {
		t.Errorf("sessions after the hijacking setup: %s; want the SMF's", sessions)
	}
	if st := pfcpStats(t, client); st.NotAllowed != 3 {
		t.Errorf("%d datagrams counted as not allowed, want 3", st.NotAllowed)
	}
	if _, err := smf.Heartbeat(); err != nil {
		t.Errorf("the SMF's heartbeat after the hijacking setup: %v", err)
	}
}
