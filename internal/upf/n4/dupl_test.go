package n4

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
	"github.com/xdp5g/xdp5g/internal/testsupport"
	"github.com/xdp5g/xdp5g/internal/upf/session"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// collector is the LI collector's address in the tests of duplication.
var collector = demo.CollectorAddr

// duplicating checks that the session's FARs duplicate as want says (by
// FAR ID; absent: not at all), and that the data path holds, for every
// PDR slot of a duplicating FAR and no other, the parameters that
// dataPath gives that FAR's: with the duplicating flag in the PDR's FAR.
func (e *env) duplicating(seid uint64, want map[uint32]*session.Forwarding, dataPath map[uint32]upfxdp.Dupl) {
	e.t.Helper()
	s, _ := e.store.Get(seid)
	for _, f := range s.FARs {
		if !reflect.DeepEqual(f.Duplicating, want[f.ID]) {
			e.t.Errorf("FAR %d duplicates %+v, want %+v", f.ID, f.Duplicating, want[f.ID])
		}
	}
	slots, _ := e.store.Slots(seid)
	wantDP := map[uint32]upfxdp.Dupl{}
	for _, p := range s.PDRs {
		for _, r := range slots.PDR {
			if r.ID != uint32(p.ID) {
				continue
			}
			entry, err := e.dp.PDR(r.Slot)
			if err != nil {
				e.t.Fatal(err)
			}
			d, duplicates := dataPath[p.FARID]
			if duplicates {
				wantDP[r.Slot] = d
			}
			if got := entry.Far.Flags&upfxdp.FARDuplicate != 0; got != duplicates {
				e.t.Errorf("PDR %d's FAR %d: duplicating flag %v, want %v", p.ID, p.FARID, got, duplicates)
			}
		}
	}
	got, err := e.dp.Dupls()
	if err != nil {
		e.t.Fatal(err)
	}
	if !reflect.DeepEqual(got, wantDP) {
		e.t.Errorf("duplicating parameters in the data path %+v, want %+v", got, wantDP)
	}
}

// A FAR with DUPL sends copies where its Duplicating Parameters say, with
// FORW or DROP for the packets themselves; an update changes where, and
// one without DUPL stops the copies, giving back the collector's next hop.
func TestDuplicatingParameters(t *testing.T) {
	e := newEnv(t)
	e.h.cfg.ForwardingPolicies = map[string]netip.Addr{"to-li": collector}
	ies := open5gs(0x1001, fixedUE("10.60.0.1"), 0x0a0b0c0d)
	ies[atCoreFAR] = createFAR(farID(1), applyAction(aaFORW|aaDUPL), fwdParams(destinationInterface(ifCore), networkInstance("internet")),
		dupParams(destinationInterface(ifLIFunction), ohcGTPU(0x99, collector.String()), transportLevelMarking(46<<2)))
	seid := e.establish("smf1", ies...).upSEID(t)

	tunnel := func(teid uint32) upfxdp.Dupl {
		return upfxdp.Dupl{Flags: upfxdp.FARGTPUv4, Tos: 46 << 2, Teid: upfxdp.NetworkOrder32(teid),
			Peer: upfxdp.AddrKey(collector), Local: upfxdp.AddrKey(n3), Nexthop: 1}
	}
	tunnelled := func(teid uint32) *session.Forwarding {
		return &session.Forwarding{DestinationInterface: session.InterfaceLIFunction, DSCP: 46,
			OuterHeaderCreation: &session.OuterHeaderCreation{TEID: teid, Peer: collector}}
	}
	e.duplicating(seid, map[uint32]*session.Forwarding{1: tunnelled(0x99)}, map[uint32]upfxdp.Dupl{1: tunnel(0x99)})
	if e.nh.refs[collector] != 1 {
		t.Errorf("the collector's next hop has %d references, want 1", e.nh.refs[collector])
	}

	// The downlink is dropped, its copies go plain to the policy's next hop.
	e.modify("smf1", seid, updateFAR(farID(2), applyAction(aaDROP|aaDUPL),
		updDupParams(destinationInterface(ifLIFunction), forwardingPolicy("to-li")))).expect(t, causeAccepted, nil, nil)
	plain := &session.Forwarding{DestinationInterface: session.InterfaceLIFunction, NextHop: collector}
	e.duplicating(seid, map[uint32]*session.Forwarding{1: tunnelled(0x99), 2: plain},
		map[uint32]upfxdp.Dupl{1: tunnel(0x99), 2: {Nexthop: 1}})
	if s, _ := e.store.Get(seid); s.FARs[1].Action != session.ActionDrop {
		t.Errorf("FAR 2's action %d, want drop", s.FARs[1].Action)
	}

	// Update Duplicating Parameters alone: the FAR keeps DUPL.
	e.modify("smf1", seid, updateFAR(farID(1), updDupParams(ohcGTPU(0x98, collector.String())))).expect(t, causeAccepted, nil, nil)
	e.duplicating(seid, map[uint32]*session.Forwarding{1: tunnelled(0x98), 2: plain},
		map[uint32]upfxdp.Dupl{1: tunnel(0x98), 2: {Nexthop: 1}})

	e.modify("smf1", seid, updateFAR(farID(1), applyAction(aaFORW))).expect(t, causeAccepted, nil, nil)
	e.duplicating(seid, map[uint32]*session.Forwarding{2: plain}, map[uint32]upfxdp.Dupl{2: {Nexthop: 1}})
	if e.nh.refs[collector] != 1 {
		t.Errorf("the collector's next hop has %d references, want 1", e.nh.refs[collector])
	}

	before := e.state()
	far7 := func(aa byte, c ...[]byte) []byte {
		return createFAR(append([][]byte{farID(7), applyAction(aa), fwdParams(destinationInterface(ifCore))}, c...)...)
	}
	li := destinationInterface(ifLIFunction)
	for _, c := range []struct {
		name                  string
		ie                    []byte
		cause                 byte
		failedRule, offending []byte
	}{
		{name: "DUPL without duplicating parameters", ie: far7(aaFORW | aaDUPL), cause: causeConditionalIE, offending: offendingIE(tDuplicatingParameters)},
		{name: "duplicating parameters without DUPL", ie: updateFAR(farID(1), updDupParams(li, ohcGTPU(1, collector.String()))),
			cause: causeRuleFailure, failedRule: failedFAR(1)},
		{name: "two destinations", ie: far7(aaFORW|aaDUPL, dupParams(li, ohcGTPU(1, collector.String())), dupParams(li, ohcGTPU(2, collector.String()))),
			cause: causeRuleFailure, failedRule: failedFAR(7)},
		{name: "no destination interface", ie: far7(aaFORW|aaDUPL, dupParams(ohcGTPU(1, collector.String()))),
			cause: causeMissingIE, offending: offendingIE(tDestinationInterface)},
		{name: "UDP/IPv4 outer header", ie: far7(aaFORW|aaDUPL, dupParams(li, ohc(0x0400, 1, collector.String()))),
			cause: causeRuleFailure, failedRule: failedFAR(7)},
		{name: "unknown forwarding policy", ie: far7(aaFORW|aaDUPL, dupParams(li, forwardingPolicy("to-nowhere"))),
			cause: causeRuleFailure, failedRule: failedFAR(7)},
		{name: "network instance", ie: far7(aaFORW|aaDUPL, dupParams(li, networkInstance("internet"), ohcGTPU(1, collector.String()))),
			cause: causeRuleFailure, failedRule: failedFAR(7)},
		{name: "a tunnel and a next hop", ie: far7(aaFORW|aaDUPL, dupParams(li, ohcGTPU(1, collector.String()), forwardingPolicy("to-li"))),
			cause: causeRuleFailure, failedRule: failedFAR(7)},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.modify("smf1", seid, c.ie).expect(t, c.cause, c.failedRule, c.offending)
			e.unchanged(before)
		})
	}
}

// ueIPv6 §8.2.62: flags V6 (bit 1) and S/D, the address.
func ueIPv6(addr netip.Addr, sd bool) []byte {
	return tlv(tUEIPAddress, []byte{0x01 | sdBit(sd)}, addr.AsSlice())
}

// newCollector is the testbed's LI collector, the UPF attached to its
// link, removed when the test ends.
func newCollector(t *testing.T, e *trafficEnv) *demo.Collector {
	t.Helper()
	c, err := e.tb.NewCollector()
	fatalIf(t, err)
	testsupport.Cleanup(t, c.Close)
	fatalIf(t, e.upf.AttachCollector())
	return c
}

// copies counts what reaches the collector until the test ends.
func copies(t *testing.T, c *demo.Collector) demo.Direction {
	t.Helper()
	d, err := c.Copies()
	fatalIf(t, err)
	testsupport.Cleanup(t, d.Sink.Close)
	return d
}

// arrive sends count frames one way and checks that they all arrive at
// each of the sinks to, the first one a sink ever got as want says (nil:
// not checked).
func arrive(t *testing.T, gen *trafficgen.Generator, from demo.Direction, frame []byte, count uint64, to []demo.Direction, want [][]byte) {
	t.Helper()
	before := make([]uint64, len(to))
	for i, d := range to {
		c, err := d.Sink.Counts()
		fatalIf(t, err)
		before[i] = c.MatchPackets
	}
	sent, _, err := from.Send(gen, frame, count, trafficgen.Options{Rate: 50_000})
	fatalIf(t, err)
	for i, d := range to {
		got, err := d.Delivered(before[i] + sent)
		fatalIf(t, err)
		if sent != count || got-before[i] != count {
			t.Errorf("%s: sent %d, %d arrived at %s; want %d", from.Name, sent, got-before[i], d.To, count)
		}
		if want[i] == nil {
			continue
		}
		sample, err := d.Sink.Sample()
		fatalIf(t, err)
		if diff := testsupport.FrameDiff(sample, want[i]); diff != "" {
			t.Errorf("%s: at %s: %s", from.Name, d.To, diff)
		}
	}
}

// reasons are the packets each interface of the UPF counted for reason.
func reasons(t *testing.T, dp *upfxdp.Datapath, reason string) map[string]uint64 {
	t.Helper()
	all, err := dp.Counters()
	fatalIf(t, err)
	out := map[string]uint64{}
	for _, c := range all {
		if n := c.Reasons[reason].Packets; n > 0 {
			out[c.Name] = n
		}
	}
	return out
}

// A session whose FARs duplicate (DUPL) sends the LI collector a copy of
// every packet, byte for byte the packet its PDR matched, inside the
// tunnel its Duplicating Parameters ask for, or plain without one; the
// packets themselves go on untouched, or nowhere when the FAR drops them.
// The data path counts each copy where its packet came in.
func TestDuplicatesReachTheCollector(t *testing.T) {
	e := newTrafficEnv(t)
	e.h.cfg.ForwardingPolicies = map[string]netip.Addr{"to-li": collector}
	li := newCollector(t, e)
	gen, err := trafficgen.NewGenerator()
	testsupport.CheckLoad(t, err)
	t.Cleanup(func() { gen.Close() })
	const packets = 1000
	const ulTEID, dlTEID = 0x1111, 0x2222
	toLI := destinationInterface(ifLIFunction)
	seid := e.establish("smf", nodeIDv4("127.0.0.4"), cpFSEID(0x79, "127.0.0.4"),
		createPDR(pdrID(1), precedence(255), pdi(sourceInterface(ifAccess), fteid(demo.UplinkTEID, demo.N3Addr.String()),
			ueIPv4(demo.UEAddr.String(), false)), outerHeaderRemoval(0), farID(1)),
		createPDR(pdrID(2), precedence(255), pdi(sourceInterface(ifCore), ueIPv4(demo.UEAddr.String(), true)), farID(2)),
		createPDR(pdrID(3), precedence(255), pdi(sourceInterface(ifCore), ueIPv6(demo.UE6Addr, true)), farID(2)),
		createFAR(farID(1), applyAction(aaFORW|aaDUPL), fwdParams(destinationInterface(ifCore)),
			dupParams(toLI, ohcGTPU(ulTEID, collector.String()))),
		createFAR(farID(2), applyAction(aaFORW|aaDUPL), fwdParams(destinationInterface(ifAccess), ohcGTPU(demo.DownlinkTEID, demo.GNBAddr.String())),
			dupParams(toLI, ohcGTPU(dlTEID, collector.String())))).upSEID(t)

	ul := demo.UEPacket(demo.UEAddr, demo.DNAddr, true, demo.UETTL)
	dl := demo.UEPacket(demo.UEAddr, demo.DNAddr, false, demo.UETTL)
	ulFrame := e.tb.UplinkFrame(demo.UplinkTEID, demo.QFI, ul)
	t.Run("uplink", func(t *testing.T) {
		forwarded := demo.Ethernet(e.tb.DNMAC, e.tb.N6MAC, demo.UEPacket(demo.UEAddr, demo.DNAddr, true, demo.UETTL-1))
		arrive(t, gen, e.tb.Uplink(), ulFrame, packets, []demo.Direction{e.tb.Uplink(), copies(t, li)},
			[][]byte{forwarded, li.Tunnelled(ulTEID, ul)})
	})
	t.Run("downlink", func(t *testing.T) {
		forwarded := demo.GTPUFrame(e.tb.GNBMAC, e.tb.N3MAC, demo.N3Addr, demo.GNBAddr, demo.DownlinkTEID, nil, demo.UEPacket(demo.UEAddr, demo.DNAddr, false, demo.UETTL-1))
		arrive(t, gen, e.tb.Downlink(), e.tb.DownlinkFrame(dl), packets, []demo.Direction{e.tb.Downlink(), copies(t, li)},
			[][]byte{forwarded, li.Tunnelled(dlTEID, dl)})
	})
	t.Run("downlink IPv6", func(t *testing.T) {
		dl6 := demo.UEPacket(demo.UE6Addr, demo.DN6Addr, false, demo.UETTL)
		// The gNB's sample is the first downlink packet's.
		arrive(t, gen, e.tb.Downlink(), e.tb.DownlinkFrame(dl6), packets, []demo.Direction{e.tb.Downlink(), copies(t, li)},
			[][]byte{nil, li.Tunnelled(dlTEID, dl6)})
	})
	if got, want := reasons(t, e.upf.Datapath, "duplicate"), map[string]uint64{demo.N3: packets, demo.N6: 2 * packets}; !reflect.DeepEqual(got, want) {
		t.Errorf("copies counted %v, want %v", got, want)
	}

	// The downlink buffered, copied as it comes; released, it is not
	// copied again.
	const held = 50
	e.modify("smf", seid, updateFAR(farID(2), applyAction(aaBUFF|aaDUPL))).expect(t, causeAccepted, nil, nil)
	t.Run("buffered downlink", func(t *testing.T) {
		got := copies(t, li)
		before, err := e.tb.GNBSink.Counts()
		fatalIf(t, err)
		arrive(t, gen, e.tb.Downlink(), e.tb.DownlinkFrame(dl), held, []demo.Direction{got}, [][]byte{li.Tunnelled(dlTEID, dl)})
		if during, err := e.tb.GNBSink.Counts(); err != nil || during.MatchPackets != before.MatchPackets {
			t.Errorf("the gNB got %d packets the FAR buffers (%v)", during.MatchPackets-before.MatchPackets, err)
		}
		e.modify("smf", seid, updateFAR(farID(2), applyAction(aaFORW|aaDUPL))).expect(t, causeAccepted, nil, nil)
		if got, err := e.tb.Downlink().Delivered(before.MatchPackets + held); err != nil || got != before.MatchPackets+held {
			t.Errorf("the gNB got %d of the %d packets released (%v)", got-before.MatchPackets, held, err)
		}
		if c, err := got.Sink.Counts(); err != nil || c.MatchPackets != held {
			t.Errorf("the collector got %d copies of %d packets buffered then released, want %d (%v)", c.MatchPackets, held, held, err)
		}
	})

	// The uplink dropped, its copies plain to the policy's next hop.
	e.modify("smf", seid, createFAR(farID(3), applyAction(aaDROP|aaDUPL), dupParams(toLI, forwardingPolicy("to-li"))),
		updatePDR(pdrID(1), farID(3))).expect(t, causeAccepted, nil, nil)
	t.Run("dropped uplink", func(t *testing.T) {
		before, err := e.tb.DNSink.Counts()
		fatalIf(t, err)
		arrive(t, gen, e.tb.Uplink(), ulFrame, packets, []demo.Direction{copies(t, li)}, [][]byte{li.Plain(ul)})
		if after, err := e.tb.DNSink.Counts(); err != nil || after.MatchPackets != before.MatchPackets {
			t.Errorf("the DN got %d packets the FAR drops (%v)", after.MatchPackets-before.MatchPackets, err)
		}
	})
	if got, want := reasons(t, e.upf.Datapath, "drop_far"), map[string]uint64{demo.N3: packets}; !reflect.DeepEqual(got, want) {
		t.Errorf("drops counted %v, want %v", got, want)
	}
	if got, want := reasons(t, e.upf.Datapath, "duplicate"), map[string]uint64{demo.N3: 2 * packets, demo.N6: 2*packets + held}; !reflect.DeepEqual(got, want) {
		t.Errorf("copies counted %v, want %v", got, want)
	}
	if got := reasons(t, e.upf.Datapath, "drop_duplicate"); len(got) != 0 {
		t.Errorf("copies lost %v, want none", got)
	}

	// The downlink into a tunnel over IPv6: copied as into one over IPv4.
	fatalIf(t, e.tb.EnableIPv6())
	e.modify("smf", seid, updateFAR(farID(2), updFwdParams(ohcOf(0x0200, demo.DownlinkTEID, netip.Addr{}, demo.GNB6Addr)))).
		expect(t, causeAccepted, nil, nil)
	t.Run("downlink into an IPv6 tunnel", func(t *testing.T) {
		// The gNB's sample is the first downlink packet's, over IPv4.
		arrive(t, gen, e.tb.Downlink(), e.tb.DownlinkFrame(dl), packets, []demo.Direction{e.tb.Downlink(), copies(t, li)},
			[][]byte{nil, li.Tunnelled(dlTEID, dl)})
	})
	if got, want := reasons(t, e.upf.Datapath, "duplicate"), map[string]uint64{demo.N3: 2 * packets, demo.N6: 3*packets + held}; !reflect.DeepEqual(got, want) {
		t.Errorf("copies counted %v, want %v", got, want)
	}
	if in, ok := e.upf.Store.Get(seid); !ok || !in.FARs[1].OuterHeaderCreation.Peer.Is6() {
		t.Errorf("FAR 2 of session %d: %+v, want a tunnel to %v", seid, in.FARs, demo.GNB6Addr)
	}
}
