package n4

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/xdp5g/xdp5g/internal/upf/gtpu"
)

// fakeTunnels records what the handler asks of the N3 endpoint.
type fakeTunnels struct{ calls []string }

func (f *fakeTunnels) Watch(p gtpu.Path) error {
	f.calls = append(f.calls, fmt.Sprintf("watch %s>%s", p.Local, p.Peer))
	return nil
}

func (f *fakeTunnels) Unwatch(p gtpu.Path) {
	f.calls = append(f.calls, fmt.Sprintf("unwatch %s>%s", p.Local, p.Peer))
}

func (f *fakeTunnels) SendEndMarker(local, peer netip.Addr, teid uint32) error {
	f.calls = append(f.calls, fmt.Sprintf("end marker %s>%s %#x", local, peer, teid))
	return nil
}

func (f *fakeTunnels) take() []string {
	c := f.calls
	f.calls = nil
	return c
}

// The paths to the gNBs in use are supervised; a handover with SNDEM ends
// the old tunnel with an End Marker; an Error Indication for a session's
// tunnel is reported to its SMF.
func TestTunnels(t *testing.T) {
	e := newEnv(t)
	tunnels := &fakeTunnels{}
	e.h.cfg.Tunnels = tunnels
	seid := e.establish("smf1", open5gs(0x1001, fixedUE("10.60.0.1"), 0x0a0b0c0d)...).upSEID(t)
	// The paths to the gNB and to the SMF's GTP-U endpoint (smfGTPU, N4-u).
	if got := tunnels.take(); !reflect.DeepEqual(slices.Sorted(slices.Values(got)), []string{"watch 192.0.2.10>127.0.0.4", "watch 192.0.2.10>192.0.2.50"}) {
		t.Errorf("after the establishment: %q", got)
	}

	// PFCPSMReq-Flags (§8.2.58): SNDEM is bit 2.
	sndem := tlv(tPFCPSMReqFlags, []byte{0x02})
	e.modify("smf1", seid, updateFAR(farID(2), updFwdParams(ohcGTPU(0x2222, "192.0.2.51"), sndem))).expect(t, causeAccepted, nil, nil)
	want := []string{"watch 192.0.2.10>192.0.2.51", "unwatch 192.0.2.10>192.0.2.50", "end marker 192.0.2.10>192.0.2.50 0xa0b0c0d"}
	if got := tunnels.take(); !reflect.DeepEqual(got, want) {
		t.Errorf("after the handover: %q, want %q", got, want)
	}
	// Without SNDEM, no End Marker.
	e.modify("smf1", seid, updateFAR(farID(2), updFwdParams(ohcGTPU(0x3333, "192.0.2.51")))).expect(t, causeAccepted, nil, nil)
	if got := tunnels.take(); len(got) != 0 {
		t.Errorf("a TEID change without SNDEM: %q", got)
	}

	e.h.ErrorIndication(gtpu.ErrorIndication{From: netip.MustParseAddr("192.0.2.51"), TEID: 0x3333, PeerAddr: netip.MustParseAddr("192.0.2.51")})
	e.h.ErrorIndication(gtpu.ErrorIndication{From: netip.MustParseAddr("192.0.2.51"), TEID: 0x4444, PeerAddr: netip.MustParseAddr("192.0.2.51")})
	reports := e.h.out.drain()
	if len(reports) != 1 {
		t.Fatalf("%d reports for one known tunnel", len(reports))
	}
	b, err := reports[0].req.Marshal()
	fatalIf(t, err)
	_, hdrSEID, ies := decodeMsg(t, b)
	// Report Type ERIR (bit 3); Error Indication Report holding the
	// remote F-TEID: V4, TEID, address.
	wantFTEID := tlv(tFTEID, []byte{0x01}, be32(0x3333), v4("192.0.2.51"))
	if hdrSEID != 0x1001 || string(one(t, ies, tReportType)) != "\x04" || string(one(t, ies, tErrorIndicationReport)) != string(wantFTEID) {
		t.Errorf("report for SEID %#x: %+v", hdrSEID, ies)
	}

	e.delete("smf1", seid).expect(t, causeAccepted, nil, nil)
	if got := tunnels.take(); !reflect.DeepEqual(slices.Sorted(slices.Values(got)), []string{"unwatch 192.0.2.10>127.0.0.4", "unwatch 192.0.2.10>192.0.2.51"}) {
		t.Errorf("after the deletion: %q", got)
	}
}

// An Error Indication names a tunnel by TEID and gNB address: two sessions
// whose gNBs gave them the same TEID are told apart, and a tunnel a session
// no longer uses reports nothing.
func TestErrorIndicationFindsTheTunnelsSession(t *testing.T) {
	e := newEnv(t)
	const teid = 0x0a0b0c0d
	gnbA, gnbB := netip.MustParseAddr(gnb), netip.MustParseAddr("192.0.2.51")
	seidA := e.establish("smf1", open5gs(0x1001, fixedUE("10.60.0.1"), teid)...).upSEID(t)
	atB := open5gs(0x1002, fixedUE("10.60.0.2"), teid)
	atB[atAccessFAR] = accessFAR(teid, gnbB.String())
	seidB := e.establish("smf1", atB...).upSEID(t)
	// reported are the CP SEIDs of the reports on an Error Indication.
	reported := func(teid uint32, from netip.Addr) []uint64 {
		t.Helper()
		e.h.ErrorIndication(gtpu.ErrorIndication{From: from, TEID: teid, PeerAddr: from})
		var seids []uint64
		for _, r := range e.h.out.drain() {
			b, err := r.req.Marshal()
			fatalIf(t, err)
			_, seid, ies := decodeMsg(t, b)
			if want := tlv(tFTEID, []byte{0x01}, be32(teid), v4(from.String())); string(one(t, ies, tErrorIndicationReport)) != string(want) {
				t.Errorf("report for SEID %#x names % x, want % x", seid, one(t, ies, tErrorIndicationReport), want)
			}
			seids = append(seids, seid)
		}
		return seids
	}
	for from, want := range map[netip.Addr][]uint64{gnbA: {0x1001}, gnbB: {0x1002}} {
		if got := reported(teid, from); !reflect.DeepEqual(got, want) {
			t.Errorf("Error Indication from %v: reports to %#x, want %#x", from, got, want)
		}
	}

	e.modify("smf1", seidB, updateFAR(farID(2), updFwdParams(ohcGTPU(0x3333, gnbB.String())))).expect(t, causeAccepted, nil, nil)
	e.delete("smf1", seidA).expect(t, causeAccepted, nil, nil)
	for _, c := range []struct {
		teid uint32
		from netip.Addr
		want []uint64
	}{
		{teid: teid, from: gnbA, want: nil},
		{teid: teid, from: gnbB, want: nil},
		{teid: 0x3333, from: gnbB, want: []uint64{0x1002}},
	} {
		if got := reported(c.teid, c.from); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Error Indication for %#x from %v after the handover and deletion: reports to %#x, want %#x", c.teid, c.from, got, c.want)
		}
	}
	e.delete("smf1", seidB).expect(t, causeAccepted, nil, nil)
	if len(e.h.byTunnel.first) != 0 || len(e.h.byTunnel.more) != 0 {
		t.Errorf("tunnels indexed after every session went: %v", e.h.byTunnel)
	}
}

// Sessions sharing a tunnel (here every session's to the SMF, as open5gs()
// gives them one TEID) are all reported on its Error Indication, whichever
// of them goes first.
func TestErrorIndicationOfASharedTunnel(t *testing.T) {
	e := newEnv(t)
	smf := netip.MustParseAddr(smfGTPU)
	var seids []uint64
	for i := range 3 {
		seids = append(seids, e.establish("smf1", open5gs(uint64(0x1001+i), fixedUE(fmt.Sprintf("10.60.0.%d", i+1)), 0x0a0b0c0d)...).upSEID(t))
	}
	reported := func() []uint64 {
		t.Helper()
		e.h.ErrorIndication(gtpu.ErrorIndication{From: smf, TEID: 0x5f01, PeerAddr: smf})
		var cpSEIDs []uint64
		for _, r := range e.h.out.drain() {
			cpSEIDs = append(cpSEIDs, r.req.SEID())
		}
		slices.Sort(cpSEIDs)
		return cpSEIDs
	}
	for i, want := range [][]uint64{{0x1001, 0x1002, 0x1003}, {0x1002, 0x1003}, {0x1003}, nil} {
		if got := reported(); !reflect.DeepEqual(got, want) {
			t.Fatalf("with %d sessions deleted: reports to %#x, want %#x", i, got, want)
		}
		if i < len(seids) {
			e.delete("smf1", seids[i]).expect(t, causeAccepted, nil, nil)
		}
	}
	if len(e.h.byTunnel.first) != 0 || len(e.h.byTunnel.more) != 0 {
		t.Errorf("tunnels indexed after every session went: %v", e.h.byTunnel)
	}
}
