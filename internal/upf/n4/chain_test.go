package n4

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/testsupport"
	"github.com/xdp5g/xdp5g/internal/upf/gtpu"
	"github.com/xdp5g/xdp5g/internal/upf/pfcp"
	"github.com/xdp5g/xdp5g/internal/upf/session"
)

// The N4 chain end to end: datagrams built by wire_test.go's encoder (not
// go-pfcp's) go over UDP to the real pfcp.Server, which serves them through
// the real Handler into the store and the data path's maps; responses are
// decoded by hand. Unlike the handler tests, the server's header and
// association checks, its response cache and go-pfcp's decoding all stand
// in the way.

// Message types (§7.3) and values sent only here.
const (
	mHeartbeatRequest        = 1
	mAssociationSetupRequest = 5
	measureMBQE              = 0x01 // Measurement Information (§8.2.68): measure before QoS enforcement
	measureMNOP              = 0x10 // and count packets
	gtpuEndMarker            = 254  // TS 29.281 §6.1
)

const (
	smfNode = smfGTPU // the SMF's Node ID and PFCP address
	gnb2    = "192.0.2.51"
)

// chain is a pfcp.Server over an env's handler, in a namespace of its own
// whose lo holds the UPF's N3 address and the gNBs': End Markers stay in it.
type chain struct {
	*env
	ns       *namespace.Netns
	srv      *pfcp.Server
	smf      *net.UDPConn // associated with the UPF
	stranger *net.UDPConn // at 127.0.0.5, never associated
	gnbGTPU  *net.UDPConn // gNB gnb's GTP-U port, where its End Markers arrive
	seq      uint32
}

func newChain(t *testing.T) *chain {
	t.Helper()
	c := &chain{env: newEnv(t), ns: testsupport.Netns(t, "n4chain")}
	for _, a := range []string{n3.String(), gnb, gnb2} {
		fatalIf(t, c.ns.AddAddr("lo", a+"/32"))
	}
	listen := func(addr string) *net.UDPConn {
		conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)))
		fatalIf(t, err)
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	fatalIf(t, c.ns.Do(func() error {
		tunnels, err := gtpu.Open(gtpu.Config{Local: []netip.Addr{n3}})
		if err != nil {
			return err
		}
		t.Cleanup(func() { tunnels.Close() }) // after the server's: cleanups run last first
		c.h.cfg.Tunnels = tunnels
		if c.srv, err = pfcp.New(pfcp.Config{Listen: "127.0.0.1:0", NodeID: n3.String(), Handler: c.h}); err != nil {
			return err
		}
		t.Cleanup(func() { c.srv.Close() })
		c.smf, c.stranger, c.gnbGTPU = listen(smfNode+":0"), listen("127.0.0.5:0"), listen(gnb+":2152")
		return nil
	}))
	c.exchange(t, c.smf, nodeMsg(mAssociationSetupRequest, c.next(), nodeIDv4(smfNode), recoveryTimeStamp(3_900_000_000))).
		expect(t, causeAccepted, nil, nil)
	return c
}

func (c *chain) next() uint32 { c.seq++; return c.seq }

// locked runs f under the handler's lock: the server's goroutines change
// what f reads, and a response over UDP is no synchronization the race
// detector knows of.
func (c *chain) locked(f func()) {
	c.h.mu.Lock()
	defer c.h.mu.Unlock()
	f()
}

// exchange sends a request from conn and decodes its response, checking
// that it answers the request: its type plus one, its sequence number.
func (c *chain) exchange(t *testing.T, conn *net.UDPConn, req []byte) reply {
	t.Helper()
	_, seid, ies := decodeMsg(t, c.roundTrip(t, conn, req))
	return reply{seid: seid, ies: ies}
}

func (c *chain) roundTrip(t *testing.T, conn *net.UDPConn, req []byte) []byte {
	t.Helper()
	_, err := conn.WriteToUDPAddrPort(req, c.srv.Addr())
	fatalIf(t, err)
	resp := receive(t, conn)
	if resp[1] != req[1]+1 || sequence(resp) != sequence(req) {
		t.Fatalf("response % x to a request of type %d, sequence %d", resp, req[1], sequence(req))
	}
	return resp
}

func receive(t *testing.T, conn *net.UDPConn) []byte {
	t.Helper()
	buf := make([]byte, 64<<10)
	fatalIf(t, conn.SetReadDeadline(time.Now().Add(2*time.Second)))
	n, err := conn.Read(buf)
	fatalIf(t, err)
	return buf[:n]
}

// sequence is a message's sequence number (§7.2.2): after the SEID if S=1.
func sequence(b []byte) uint32 {
	at := 4
	if b[0]&1 != 0 {
		at = 12
	}
	return binary.BigEndian.Uint32(b[at:]) >> 8
}

// session sends a session request from the SMF.
func (c *chain) session(t *testing.T, typ uint8, seid uint64, ies ...[]byte) reply {
	t.Helper()
	return c.exchange(t, c.smf, sessionMsg(typ, seid, c.next(), ies...))
}

// endMarker waits for the End Marker at gNB gnb and returns its TEID,
// passing over the Echo Requests of path supervision.
func (c *chain) endMarker(t *testing.T) uint32 {
	t.Helper()
	for {
		b := receive(t, c.gnbGTPU)
		if len(b) >= 8 && b[1] == gtpuEndMarker {
			return binary.BigEndian.Uint32(b[4:])
		}
	}
}

// The rules of a free5GC SMF (v3.x: its context/datapath.go and
// pfcp/message builders): the SMF gives the uplink F-TEID; the PDIs name
// the Network Instance and the UE address, no QFI; the downlink FAR is
// created forwarding to access with no tunnel, which comes with the N2
// PDU Session Resource Setup Response; both PDRs share two URRs (with
// urrPeriod and urrThreshold configured; the second measures before QoS
// enforcement), the flow's QER 2 and the session AMBR's QER 1, which
// carries QFI 0 (free5GC writes a QFI into every QER); Apply Action has
// one octet; PDN Type comes last.
const (
	free5gcTEID   = 0x5a01
	free5gcUE     = "10.60.0.7"
	free5gcCPSEID = 0x77
)

func free5gcDownlinkPDR() [][]byte {
	return [][]byte{pdrID(2), precedence(255), pdi(sourceInterface(ifCore), networkInstance("internet"), ueIPv4(free5gcUE, true)),
		farID(2), urrID(1), urrID(2), qerID(2), qerID(1)}
}

// free5gcURR measures volume with free5GC's default triggers (urrPeriod,
// urrThreshold); measurement is the Measurement Information's flags.
func free5gcURR(id uint32, measurement byte) []byte {
	return createURR(id, mmVOLUM, rtgPERIO|rtgVOLTH, measurementPeriod(10), volumeThresholdULDL(1000, 1000),
		measurementInformation(measurement))
}

func free5gcEstablishment() [][]byte {
	return [][]byte{nodeIDv4(smfNode), cpFSEID(free5gcCPSEID, smfNode),
		createPDR(pdrID(1), precedence(255), pdi(sourceInterface(ifAccess), fteid(free5gcTEID, n3.String()),
			networkInstance("internet"), ueIPv4(free5gcUE, false)), outerHeaderRemoval(0), farID(1), urrID(1), urrID(2), qerID(2), qerID(1)),
		createPDR(free5gcDownlinkPDR()...),
		createFAR(farID(1), applyAction1(aaFORW), fwdParams(destinationInterface(ifCore), networkInstance("internet"))),
		createFAR(farID(2), applyAction1(aaFORW), fwdParams(destinationInterface(ifAccess))),
		free5gcURR(1, measureMNOP), free5gcURR(2, measureMBQE|measureMNOP),
		createQER(1, bitRate(tMBR, 200_000, 100_000), qfi(0)),
		createQER(2, bitRate(tMBR, 20_000, 10_000), bitRate(tGBR, 2_000, 1_000), qfi(9)),
		tlv(tPDNType, []byte{1})}
}

// free5gcModification is free5GC's Session Modification Request: message
// priority 12, the CP F-SEID again, the downlink PDR whole and FAR 2 with
// the apply action given and its forwarding parameters to a gNB tunnel.
func free5gcModification(seid uint64, seq uint32, action byte, teid uint32, gnbAddr string, flags ...[]byte) []byte {
	return withPriority(sessionMsg(mSessionModificationRequest, seid, seq, cpFSEID(free5gcCPSEID, smfNode),
		updatePDR(free5gcDownlinkPDR()...),
		updateFAR(farID(2), applyAction1(action), updFwdParams(append([][]byte{destinationInterface(ifAccess),
			networkInstance("internet"), ohcGTPU(teid, gnbAddr)}, flags...)...))), 12)
}

// An Open5GS session, retransmitted; then a free5GC session through its
// life: N2 setup, the UE going idle (BUFF) and coming back (FORW), an Xn
// handover with an End Marker on the old path, deletion with its usage
// report.
func TestChainSessions(t *testing.T) {
	c := newChain(t)

	est := sessionMsg(mSessionEstablishmentRequest, 0, c.next(), open5gs(0x1001, fixedUE("10.60.0.1"), 0x0a0b0c0d)...)
	first := c.roundTrip(t, c.smf, est)
	_, hdrSEID, ies := decodeMsg(t, first)
	r := reply{seid: hdrSEID, ies: ies}
	seid := r.upSEID(t)
	created := r.created(t)
	if len(created) != 3 || hdrSEID != 0x1001 {
		t.Fatalf("Open5GS establishment: header SEID %#x, Created PDRs %d; want the CP SEID, 3", hdrSEID, len(created))
	}
	c.installed(chosenTEID(t, created[1]), netip.MustParseAddr("10.60.0.1"))
	// The same datagram again: the cached response, and no second session.
	var before state
	c.locked(func() { before = c.state() })
	if again := c.roundTrip(t, c.smf, est); !bytes.Equal(again, first) {
		t.Errorf("retransmission answered\n% x\nnot\n% x", again, first)
	}
	c.locked(func() { c.unchanged(before) })
	c.session(t, mSessionDeletionRequest, seid).expect(t, causeAccepted, nil, nil)
	c.gone(chosenTEID(t, created[1]), netip.MustParseAddr("10.60.0.1"))

	r = c.session(t, mSessionEstablishmentRequest, 0, free5gcEstablishment()...)
	seid = r.upSEID(t)
	if len(all(r.ies, tCreatedPDR)) != 0 {
		t.Errorf("Created PDRs for a session whose SMF chose everything: %+v", r.ies)
	}
	ue := netip.MustParseAddr(free5gcUE)
	if ul, err := c.dp.Uplink(atN3(free5gcTEID)); err != nil || ul.Count != 1 {
		t.Errorf("uplink TEID: %+v, %v; want one PDR", ul, err)
	}
	if dl, err := c.dp.Downlink(ue); err != nil || dl.Count != 1 {
		t.Errorf("UE address: %+v, %v; want one PDR", dl, err)
	}
	downlinkFAR := func() session.FAR {
		s, _ := c.store.Get(seid)
		return s.FARs[slices.IndexFunc(s.FARs, func(f session.FAR) bool { return f.ID == 2 })]
	}
	c.locked(func() {
		if f := downlinkFAR(); f.Action != session.ActionDrop || len(c.nh.refs) != 0 {
			t.Errorf("downlink FAR without a tunnel: %+v, next hops %v; want it to drop, and no next hop", f, c.nh.refs)
		}
	})

	tunnel := func(teid uint32, to string) *session.OuterHeaderCreation {
		return &session.OuterHeaderCreation{TEID: teid, Peer: netip.MustParseAddr(to)}
	}
	sndem := tlv(tPFCPSMReqFlags, []byte{0x02})
	for _, step := range []struct {
		name      string
		action    byte
		tunnel    *session.OuterHeaderCreation
		flags     [][]byte
		want      session.Action
		endMarker uint32 // the TEID of the End Marker the old gNB gets; 0: none looked for
	}{
		{name: "N2 setup", action: aaFORW, tunnel: tunnel(0x100, gnb), want: session.ActionForward},
		{name: "AN release", action: aaBUFF | aaNOCP, tunnel: tunnel(0x100, gnb), want: session.ActionBuffer},
		// free5GC asks for an End Marker whenever the FAR had a tunnel.
		{name: "service request", action: aaFORW, tunnel: tunnel(0x200, gnb), flags: [][]byte{sndem}, want: session.ActionForward, endMarker: 0x100},
		{name: "Xn handover", action: aaFORW, tunnel: tunnel(0x300, gnb2), flags: [][]byte{sndem}, want: session.ActionForward, endMarker: 0x200},
	} {
		req := free5gcModification(seid, c.next(), step.action, step.tunnel.TEID, step.tunnel.Peer.String(), step.flags...)
		r := c.exchange(t, c.smf, req)
		r.expect(t, causeAccepted, nil, nil)
		if r.seid != free5gcCPSEID {
			t.Errorf("%s: response SEID %#x, want the CP SEID", step.name, r.seid)
		}
		if f := downlinkFAR(); f.Action != step.want || f.OuterHeaderCreation == nil || *f.OuterHeaderCreation != *step.tunnel {
			t.Errorf("%s: downlink FAR %+v, want action %d to %+v", step.name, f, step.want, *step.tunnel)
		}
		if slot, ok := c.store.BufferSlot(seid, 2); step.want == session.ActionBuffer && (!ok || !c.buffers.Pending(slot)) {
			t.Errorf("%s: the buffering FAR has no armed buffer", step.name)
		}
		if step.endMarker != 0 {
			if teid := c.endMarker(t); teid != step.endMarker {
				t.Errorf("%s: End Marker for TEID %#x, want %#x", step.name, teid, step.endMarker)
			}
		}
	}

	r = c.session(t, mSessionDeletionRequest, seid)
	r.expect(t, causeAccepted, nil, nil)
	reports := all(r.ies, tUsageReportDelResp)
	if r.seid != free5gcCPSEID || len(reports) != 2 {
		t.Fatalf("deletion response: header SEID %#x, %d usage reports; want the CP SEID, 2", r.seid, len(reports))
	}
	// No traffic: the final reports (TERMR) count nothing, packets included (MNOP).
	for i, report := range reports {
		if u := decodeUsage(t, report); u.urr != uint32(i+1) || u.trigger != 1<<11 || !u.hasVolume || u.tvol != 0 || !u.hasPackets || u.tpkt != 0 {
			t.Errorf("usage report %+v", u)
		}
	}
	c.gone(free5gcTEID, ue)
}

// Every refusal cause over the wire, each changing nothing; then datagrams
// that are no messages, which are dropped without harm.
func TestChainCauses(t *testing.T) {
	c := newChain(t)
	seid := c.session(t, mSessionEstablishmentRequest, 0, open5gs(0x1001, fixedUE("10.60.0.1"), 0x0a0b0c0d)...).upSEID(t)
	withoutFSEID := open5gs(0x1002, fixedUE("10.60.0.2"), 1)
	withoutFSEID = slices.Delete(withoutFSEID, atCPFSEID, atCPFSEID+1)
	withoutPDI := open5gs(0x1002, fixedUE("10.60.0.2"), 1)
	withoutPDI[atDownlinkPDR] = createPDR(pdrID(2), precedence(255), farID(2))
	toNoFAR := open5gs(0x1002, fixedUE("10.60.0.2"), 1)
	toNoFAR[atDownlinkPDR] = downlinkPDR(fixedUE("10.60.0.2"), 7)
	stranger := open5gs(0x5001, fixedUE("10.60.0.5"), 1)
	stranger[atNodeID] = nodeIDv4("127.0.0.5")
	var before state
	c.locked(func() { before = c.state() })
	for _, cc := range []struct {
		name                  string
		from                  *net.UDPConn
		typ                   uint8
		seid                  uint64 // of the request
		ies                   [][]byte
		cause                 byte
		failedRule, offending []byte
		hdrSEID               uint64 // of the response
	}{
		{name: "establishment without CP F-SEID", from: c.smf, typ: mSessionEstablishmentRequest, ies: withoutFSEID, cause: causeMissingIE, offending: offendingIE(tFSEID)},
		{name: "Create PDR without PDI", from: c.smf, typ: mSessionEstablishmentRequest, ies: withoutPDI, cause: causeMissingIE, offending: offendingIE(tPDI), hdrSEID: 0x1002},
		{name: "modification of no session", from: c.smf, typ: mSessionModificationRequest, seid: seid + 1, ies: [][]byte{removePDR(3)}, cause: causeNoSession},
		{name: "deletion of no session", from: c.smf, typ: mSessionDeletionRequest, seid: seid + 1, cause: causeNoSession},
		{name: "PDR naming no FAR", from: c.smf, typ: mSessionEstablishmentRequest, ies: toNoFAR, cause: causeRuleFailure, failedRule: failedPDR(2), hdrSEID: 0x1002},
		{name: "establishment by an unassociated node", from: c.stranger, typ: mSessionEstablishmentRequest, ies: stranger, cause: causeNoAssociation, hdrSEID: 0x5001},
		{name: "deletion by an unassociated node", from: c.stranger, typ: mSessionDeletionRequest, seid: seid, cause: causeNoAssociation},
	} {
		r := c.exchange(t, cc.from, sessionMsg(cc.typ, cc.seid, c.next(), cc.ies...))
		t.Run(cc.name, func(t *testing.T) {
			r.expect(t, cc.cause, cc.failedRule, cc.offending)
			if r.seid != cc.hdrSEID {
				t.Errorf("response SEID %#x, want %#x", r.seid, cc.hdrSEID)
			}
		})
		c.locked(func() { c.unchanged(before) })
	}

	// A datagram shorter than a header; one whose length field runs past
	// its end; an establishment whose Create PDR claims an octet more than
	// it holds.
	est := sessionMsg(mSessionEstablishmentRequest, 0, c.next(), open5gs(0x1003, fixedUE("10.60.0.3"), 1)...)
	overlong := slices.Clone(est)
	pdrAt := 16 + len(nodeIDv4(smfNode)) + len(cpFSEID(0, smfNode))
	binary.BigEndian.PutUint16(overlong[pdrAt+2:], binary.BigEndian.Uint16(overlong[pdrAt+2:])+1)
	for _, g := range [][]byte{{0x21, 50}, est[:len(est)-1], overlong} {
		_, err := c.smf.WriteToUDPAddrPort(g, c.srv.Addr())
		fatalIf(t, err)
	}
	c.exchange(t, c.smf, nodeMsg(mHeartbeatRequest, c.next(), recoveryTimeStamp(3_900_000_000)))
	stats := c.srv.Stats()
	if stats.Truncated != 1 || stats.BadLength != 1 || stats.Undecodable != 1 || stats.Panics != 0 {
		t.Errorf("after the garbage: %+v", stats)
	}
	c.locked(func() { c.unchanged(before) })
}
