package n4

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/xdp5g/xdp5g/internal/upf/pfcp"
	"github.com/xdp5g/xdp5g/internal/upf/session"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// A deterministic mutation test of the N4 chain: valid requests of the
// shapes SMFs send are mutated IE by IE (the header is left alone, so
// that the mutants reach go-pfcp's decoding and the handler) and sent
// over UDP to the real server, handler, store and maps. Every mutant must
// be answered or counted as dropped, none may panic, a refused one may
// change nothing, and the store and the data path must stay consistent.

const (
	mutationSeed = 29244
	// The store keeps a freed rule slot out of use for a second
	// (slotpool.ReuseDelay), and the mutants free and take slots
	// faster than newChain's data path has them: they come in rounds,
	// each of which takes fewer than its 4352 PDR slots, with a pause
	// for the slots to come back between them.
	rounds          = 3
	mutantsPerRound = 1500
	slotsBack       = 1100 * time.Millisecond
	maxLiveSessions = 16 // well below newEnv's 64: establishments keep being accepted
	heartbeatStamp  = 3_900_000_000
)

// mutationShape is the kind of valid request a mutant starts from.
type mutationShape int

const (
	shapeOpen5GS      mutationShape = iota // handler_test.go's open5gs()
	shapeOpen5GS27                         // open5gs_life_test.go's, with BAR, URR, QER
	shapeFree5GC                           // chain_test.go's
	shapeModification                      // of a live session, by its shape
	shapeDeletion
	shapeAssociation
)

// shapeWeights draw the shapes: modifications most, so that live
// sessions are changed deeply; Association Setups least, since an
// accepted one drops the SMF's sessions.
var shapeWeights = []mutationShape{shapeOpen5GS, shapeOpen5GS, shapeOpen5GS27, shapeOpen5GS27, shapeFree5GC, shapeFree5GC,
	shapeModification, shapeModification, shapeModification, shapeModification, shapeModification, shapeDeletion, shapeAssociation}

// liveSession is an accepted establishment: n rekeys its addresses and
// TEIDs, as the modifications of its shape need them.
type liveSession struct {
	seid  uint64
	shape mutationShape
	n     int
}

// ieNode is an IE as the mutations see it: a grouped one has children.
type ieNode struct {
	typ     uint16
	val     []byte
	kids    []*ieNode
	grouped bool
}

// groupedTypes are the grouped IEs of the requests sent (§8.1.2).
var groupedTypes = map[uint16]bool{tCreatePDR: true, tPDI: true, tCreateFAR: true, tForwardingParameters: true,
	tCreateURR: true, tCreateQER: true, tUpdatePDR: true, tUpdateFAR: true, tUpdateForwardingParam: true,
	tUpdateURR: true, tUpdateQER: true, tRemovePDR: true, 16 /* Remove FAR */ : true, tRemoveURR: true,
	tRemoveQER: true, tQueryURR: true, tCreateBAR: true, tUpdateBAR: true, tRemoveBAR: true,
	tDuplicatingParameters: true, tUpdateDuplicatingParam: true}

// knownTypes are what a retyped IE becomes: types the UPF decodes.
var knownTypes = append(slices.Sorted(maps.Keys(groupedTypes)), tCause, tSourceInterface, tFTEID, tNetworkInstance,
	tSDFFilter, tGateStatus, tMBR, tGBR, tPrecedence, tVolumeThreshold, tTimeThreshold, tReportingTriggers,
	tDestinationInterface, tApplyAction, tPDRID, tFSEID, tNodeID, tMeasurementMethod, tMeasurementPeriod, tURRID,
	tOuterHeaderCreation, tBARID, tUEIPAddress, tOuterHeaderRemoval, tFARID, tQERID, tQFI, tRQI, tPFCPSMReqFlags,
	tPFCPSEReqFlags, tVolumeQuota, tTimeQuota, tMeasurementInformation, tForwardingPolicy, tFQCSID, tPDNType,
	tSuggestedPackets, tUPInactivityTimer, tTransportLevelMarking, 96 /* Recovery Time Stamp */, 160 /* 3GPP Interface Type */)

func parseIEs(t testing.TB, b []byte) []*ieNode {
	var out []*ieNode
	for _, w := range decodeIEs(t, b) {
		n := &ieNode{typ: w.typ, val: w.val, grouped: groupedTypes[w.typ]}
		if n.grouped {
			n.kids = parseIEs(t, w.val)
		}
		out = append(out, n)
	}
	return out
}

// encodeIEs writes a tree again: every enclosing length fits what it holds.
func encodeIEs(nodes []*ieNode) []byte {
	var b []byte
	for _, n := range nodes {
		if n.grouped {
			b = append(b, tlv(n.typ, encodeIEs(n.kids))...)
		} else {
			b = append(b, tlv(n.typ, n.val)...)
		}
	}
	return b
}

func (n *ieNode) clone() *ieNode {
	c := *n
	c.val = slices.Clone(n.val)
	c.kids = nil
	for _, k := range n.kids {
		c.kids = append(c.kids, k.clone())
	}
	return &c
}

// ieList is a list of IEs in the tree: the message's, or a grouped IE's.
type ieList = *[]*ieNode

func lists(top ieList) []ieList {
	out := []ieList{top}
	for _, n := range *top {
		if n.grouped {
			out = append(out, lists(&n.kids)...)
		}
	}
	return out
}

// pickIE returns a random IE of the tree that ok accepts, with its list
// and index; false when there is none.
func pickIE(r *rand.Rand, top ieList, ok func(*ieNode) bool) (ieList, int, bool) {
	type at struct {
		l ieList
		i int
	}
	var all []at
	for _, l := range lists(top) {
		for i, n := range *l {
			if ok(n) {
				all = append(all, at{l: l, i: i})
			}
		}
	}
	if len(all) == 0 {
		return nil, 0, false
	}
	a := all[r.IntN(len(all))]
	return a.l, a.i, true
}

func anyIE(*ieNode) bool    { return true }
func leafIE(n *ieNode) bool { return !n.grouped }
func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// mutations change a tree in place; false when the tree has nothing
// they apply to.
var mutations = []struct {
	name string
	do   func(r *rand.Rand, top ieList) bool
}{
	{name: "flip a byte", do: func(r *rand.Rand, top ieList) bool {
		l, i, ok := pickIE(r, top, func(n *ieNode) bool { return leafIE(n) && len(n.val) > 0 })
		if ok {
			n := (*l)[i]
			n.val = slices.Clone(n.val)
			n.val[r.IntN(len(n.val))] ^= byte(1 + r.IntN(255))
		}
		return ok
	}},
	{name: "retype", do: func(r *rand.Rand, top ieList) bool {
		l, i, ok := pickIE(r, top, anyIE)
		if ok {
			(*l)[i].typ = knownTypes[r.IntN(len(knownTypes))]
		}
		return ok
	}},
	// Resizing a value and encoding the tree again fixes the lengths of
	// the IEs around it, so the message still decodes: a grouped IE loses
	// its last children or gains a known IE of a few random octets, a
	// leaf loses octets or gains random ones.
	{name: "resize", do: func(r *rand.Rand, top ieList) bool {
		l, i, ok := pickIE(r, top, anyIE)
		if !ok {
			return false
		}
		n := (*l)[i]
		shrink := r.IntN(2) == 0
		switch {
		case n.grouped && shrink && len(n.kids) > 0:
			n.kids = n.kids[:r.IntN(len(n.kids))]
		case n.grouped:
			n.kids = append(n.kids, &ieNode{typ: knownTypes[r.IntN(len(knownTypes))], val: randomBytes(r, r.IntN(9))})
		case shrink && len(n.val) > 0:
			n.val = n.val[:r.IntN(len(n.val))]
		default:
			n.val = append(slices.Clone(n.val), randomBytes(r, 1+r.IntN(8))...)
		}
		return true
	}},
	{name: "duplicate", do: func(r *rand.Rand, top ieList) bool {
		l, i, ok := pickIE(r, top, anyIE)
		if ok {
			*l = slices.Insert(*l, i+1, (*l)[i].clone())
		}
		return ok
	}},
	{name: "drop", do: func(r *rand.Rand, top ieList) bool {
		l, i, ok := pickIE(r, top, anyIE)
		if ok {
			*l = slices.Delete(*l, i, i+1)
		}
		return ok
	}},
	{name: "swap", do: func(r *rand.Rand, top ieList) bool {
		var long []ieList
		for _, l := range lists(top) {
			if len(*l) >= 2 {
				long = append(long, l)
			}
		}
		if len(long) == 0 {
			return false
		}
		l := long[r.IntN(len(long))]
		i, j := r.IntN(len(*l)), r.IntN(len(*l))
		(*l)[i], (*l)[j] = (*l)[j], (*l)[i]
		return true
	}},
}

// rekey gives a shape's fixed UE address and TEID n-th values of their
// own, so that sessions of one shape do not all collide.
func rekey(ies [][]byte, n int, ue string, teid uint32) [][]byte {
	newUE := v4(fmt.Sprintf("10.%d.%d.%d", 61+n>>16, byte(n>>8), byte(n)))
	out := make([][]byte, len(ies))
	for i, b := range ies {
		b = bytes.ReplaceAll(b, v4(ue), newUE)
		if teid != 0 {
			b = bytes.ReplaceAll(b, slices.Concat(be32(teid), n3.AsSlice()), slices.Concat(be32(0x5b000000+uint32(n)), n3.AsSlice()))
		}
		out[i] = b
	}
	return out
}

// open5gsModification changes an open5gs() session: FAR 2 to another
// gNB with an End Marker, PDR 1 onto a TEID of a new CHOOSE ID, a new PDR
// on that TEID with its FAR, QER and URR, PDR 3 removed.
func open5gsModification() [][]byte {
	return [][]byte{removePDR(3),
		updateFAR(farID(2), applyAction(aaFORW), updFwdParams(destinationInterface(ifAccess), networkInstance("internet"),
			ohcGTPU(0x0c0d0e0f, gnb2), tlv(tPFCPSMReqFlags, []byte{0x02}))), // SNDEM, where Open5GS puts it
		updatePDR(pdrID(1), precedence(200), pdi(sourceInterface(ifAccess), fteidChoose(7), networkInstance("internet"), qfi(9)),
			outerHeaderRemoval(0), farID(1)),
		createPDR(pdrID(20), precedence(300), pdi(sourceInterface(ifAccess), fteidChoose(7), qfi(5)), outerHeaderRemoval(0),
			farID(20), qerID(3), urrID(4)),
		createFAR(farID(20), applyAction(aaDROP)),
		createQER(3, bitRate(tMBR, 1000, 1000)),
		createURR(4, mmVOLUM, rtgVOLTH, volumeThreshold(1<<20)),
	}
}

// base is the valid request a mutant starts from: its type, header SEID
// and IEs. A modification or deletion names live session s.
func base(shape mutationShape, n int, s liveSession) (uint8, uint64, [][]byte) {
	switch shape {
	case shapeOpen5GS:
		ue := fixedUE(fmt.Sprintf("10.%d.%d.%d", 61+n>>16, byte(n>>8), byte(n)))
		if n%3 == 1 {
			ue = ueChooseV4 // from the UE pool, which runs dry: refusals too
		}
		return mSessionEstablishmentRequest, 0, open5gs(0x10000+uint64(n), ue, uint32(n+1))
	case shapeOpen5GS27:
		return mSessionEstablishmentRequest, 0, rekey(o5gsEstablishment(), n, o5gsUE, 0)
	case shapeFree5GC:
		return mSessionEstablishmentRequest, 0, rekey(free5gcEstablishment(), n, free5gcUE, free5gcTEID)
	case shapeDeletion:
		// The Node ID and CP F-SEID a deletion may carry, for the
		// mutations to work on.
		return mSessionDeletionRequest, s.seid, [][]byte{nodeIDv4(smfNode), cpFSEID(free5gcCPSEID, smfNode)}
	case shapeAssociation:
		return mAssociationSetupRequest, 0, [][]byte{nodeIDv4(smfNode), recoveryTimeStamp(heartbeatStamp)}
	}
	switch s.shape {
	case shapeFree5GC:
		return mSessionModificationRequest, s.seid, rekey([][]byte{cpFSEID(free5gcCPSEID, smfNode),
			updatePDR(free5gcDownlinkPDR()...),
			updateFAR(farID(2), applyAction1(aaFORW), updFwdParams(destinationInterface(ifAccess), networkInstance("internet"),
				ohcGTPU(0x100, gnb)))}, s.n, free5gcUE, free5gcTEID)
	case shapeOpen5GS27:
		return mSessionModificationRequest, s.seid, [][]byte{o5gsActivate(0x200, gnb, tlv(tPFCPSMReqFlags, []byte{0x02})),
			createQER(2, bitRate(tMBR, 500, 500), qfi(o5gsQFI)), updateQER(1, bitRate(tMBR, 2_000, 2_000))}
	}
	return mSessionModificationRequest, s.seid, open5gsModification()
}

func request(typ uint8, seid uint64, seq uint32, body []byte) []byte {
	if typ < 50 {
		return nodeMsg(typ, seq, body)
	}
	return sessionMsg(typ, seid, seq, body)
}

// dropped sums the server's counters of requests dropped unanswered.
func dropped(s pfcp.Stats) uint64 {
	return s.Truncated + s.BadLength + s.BadVersion + s.BadHeader + s.UnknownType + s.Undecodable + s.Retransmissions +
		s.Overload
}

// sendMutant sends a request followed by a heartbeat, and returns the request's
// response, nil for none: the server serves a peer's datagrams in order,
// so the request's response comes before the heartbeat's or not at all.
func (c *chain) sendMutant(t *testing.T, req []byte) []byte {
	t.Helper()
	hb := nodeMsg(mHeartbeatRequest, c.next(), recoveryTimeStamp(heartbeatStamp))
	for _, b := range [][]byte{req, hb} {
		_, err := c.smf.WriteToUDPAddrPort(b, c.srv.Addr())
		fatalIf(t, err)
	}
	var resp []byte
	for {
		b := receive(t, c.smf)
		switch {
		case b[1] == mHeartbeatRequest+1 && sequence(b) == sequence(hb):
			return resp
		case b[1] == req[1]+1 && sequence(b) == sequence(req) && resp == nil:
			resp = b
		default:
			t.Fatalf("unexpected datagram % x", b)
		}
	}
}

// consistent checks the store and the data path against each other: the
// sessions valid, the map keys exactly the sessions', the handler's
// sessions the store's, every TEID the UPF chose used by a session, every
// UE address taken from the pool a session's.
func (c *chain) consistent() error {
	var errs []error
	c.locked(func() {
		want := map[upfxdp.FTEID]bool{}
		wantUE := map[netip.Addr]bool{}
		used := map[uint32]bool{}
		sessions := c.store.List()
		for i := range sessions {
			s := &sessions[i]
			if err := session.Validate(s); err != nil {
				errs = append(errs, fmt.Errorf("session %#x: %w", s.SEID, err))
			}
			if _, ok := c.h.sessions[s.SEID]; !ok {
				errs = append(errs, fmt.Errorf("session %#x is not the handler's", s.SEID))
			}
			for _, p := range s.PDRs {
				switch {
				case p.PDI.TEID != 0:
					want[upfxdp.FTEID{Addr: p.PDI.LocalAddress, TEID: p.PDI.TEID}], used[p.PDI.TEID] = true, true
				default:
					a := p.PDI.UEAddress.Addr()
					if a.Is6() {
						a = netip.PrefixFrom(a, 64).Masked().Addr()
					}
					wantUE[a] = true
				}
			}
		}
		if len(c.h.sessions) != len(sessions) {
			errs = append(errs, fmt.Errorf("the handler has %d sessions, the store %d", len(c.h.sessions), len(sessions)))
		}
		if got := c.dp.UplinkFTEIDs(); !sameSet(got, want) {
			errs = append(errs, fmt.Errorf("uplink F-TEIDs %v, the sessions' %v", got, slices.Collect(maps.Keys(want))))
		}
		if got := c.dp.DownlinkUEs(); !sameSet(got, wantUE) {
			errs = append(errs, fmt.Errorf("downlink UEs %v, the sessions' %v", got, slices.Collect(maps.Keys(wantUE))))
		}
		fromPool := 0
		for _, s := range c.h.sessions {
			if s.ue4.IsValid() {
				fromPool++
			}
		}
		if n := c.pool.Allocated(); n != fromPool {
			errs = append(errs, fmt.Errorf("%d UE addresses allocated, %d sessions have one", n, fromPool))
		}
		for teid := range c.h.chosen {
			if !used[teid] {
				errs = append(errs, fmt.Errorf("chosen TEID %#x used by no session", teid))
			}
		}
	})
	return errors.Join(errs...)
}

func sameSet[K comparable](got []K, want map[K]bool) bool {
	set := map[K]bool{}
	for _, k := range got {
		set[k] = true
	}
	return maps.Equal(set, want)
}

// cause is a response's Cause value, 0 for none.
func cause(t testing.TB, resp []byte) byte {
	_, _, ies := decodeMsg(t, resp)
	if v := one(t, ies, tCause); len(v) == 1 {
		return v[0]
	}
	return 0
}

func TestMutatedRequests(t *testing.T) {
	c := newChain(t)
	r := rand.New(rand.NewPCG(mutationSeed, 0))
	var live []liveSession
	keepLive := func() { // forget the sessions that are gone
		live = slices.DeleteFunc(live, func(s liveSession) bool { _, ok := c.store.Get(s.seid); return !ok })
	}
	establishValid := func(n int) {
		// Open5GS's at n%3 == 0 has a UE address of its own: the pool
		// may be dry.
		shape := []mutationShape{shapeOpen5GS, shapeOpen5GS27, shapeFree5GC}[n%3]
		typ, _, ies := base(shape, n, liveSession{})
		resp := c.exchange(t, c.smf, sessionMsg(typ, 0, c.next(), ies...))
		live = append(live, liveSession{seid: resp.upSEID(t), shape: shape, n: n})
	}
	counts := map[string]int{}
	for i := range rounds * mutantsPerRound {
		if i > 0 && i%mutantsPerRound == 0 {
			time.Sleep(slotsBack)
		}
		keepLive()
		shape := shapeWeights[r.IntN(len(shapeWeights))]
		if len(live) >= maxLiveSessions && shape < shapeModification {
			shape = shapeDeletion
		}
		var target liveSession
		if shape == shapeModification || shape == shapeDeletion {
			if len(live) == 0 {
				establishValid(i)
			}
			target = live[r.IntN(len(live))]
		}
		typ, seid, ies := base(shape, i, target)
		tree := parseIEs(t, slices.Concat(ies...))
		var applied []string
		for range r.IntN(4) { // none at times: the bases must pass
			m := mutations[r.IntN(len(mutations))]
			if m.do(r, &tree) {
				applied = append(applied, m.name)
			}
		}
		req := request(typ, seid, c.next(), encodeIEs(tree))
		describe := func() string {
			return fmt.Sprintf("mutant %d (shape %d, %v, target %#x):\n% x", i, shape, applied, target.seid, req)
		}

		var before state
		c.locked(func() { before = c.state() })
		stats := c.srv.Stats()
		resp := c.sendMutant(t, req)
		after := c.srv.Stats()
		switch d := dropped(after) - dropped(stats); {
		case after.Panics != 0:
			t.Fatalf("panic serving %s", describe())
		case resp == nil && d != 1:
			t.Fatalf("no response and %d drops counted for %s", d, describe())
		case resp != nil && d != 0:
			t.Fatalf("a response and %d drops counted for %s", d, describe())
		case resp == nil:
			counts["dropped"]++
			continue
		}
		switch v := cause(t, resp); {
		case v == 1 && typ == mSessionEstablishmentRequest:
			counts["established"]++
			_, _, ies := decodeMsg(t, resp)
			if f := one(t, ies, tFSEID); len(f) == 13 {
				live = append(live, liveSession{seid: binaryUint64(f[1:9]), shape: shape, n: i})
			}
		case v == 1:
			counts[fmt.Sprintf("accepted %d", typ)]++
			if typ == mAssociationSetupRequest {
				// Its Recovery Time Stamp may have changed, which the
				// next heartbeat would take for a restart of the SMF.
				c.exchange(t, c.smf, nodeMsg(mAssociationSetupRequest, c.next(), nodeIDv4(smfNode),
					recoveryTimeStamp(heartbeatStamp))).expect(t, causeAccepted, nil, nil)
			}
		default:
			counts[fmt.Sprintf("refused %d cause %d", typ, v)]++
			var now state
			c.locked(func() { now = c.state() })
			if !reflect.DeepEqual(before, now) {
				t.Fatalf("refused (cause %d) but changed state:\n%+v\n%+v\n%s", v, before, now, describe())
			}
		}
		if err := c.consistent(); err != nil {
			t.Fatalf("after %s: %v", describe(), err)
		}
	}
	t.Logf("%d mutants: %v; %d sessions live", rounds*mutantsPerRound, counts, c.store.Len())

	c.exchange(t, c.smf, nodeMsg(mHeartbeatRequest, c.next(), recoveryTimeStamp(heartbeatStamp)))
	if err := c.consistent(); err != nil {
		t.Fatal(err)
	}
	// Every session is of an association at the SMF's address (the others
	// went with theirs), and is the SMF's to delete.
	for _, s := range c.store.List() {
		c.session(t, mSessionDeletionRequest, s.SEID).expect(t, causeAccepted, nil, nil)
	}
	c.locked(func() {
		if c.store.Len() != 0 || len(c.dp.UplinkFTEIDs()) != 0 || len(c.dp.DownlinkUEs()) != 0 || len(c.h.chosen) != 0 ||
			len(c.nh.refs) != 0 || c.pool.Allocated() != 0 || len(c.h.sessions) != 0 {
			t.Errorf("after deleting every session: %d sessions, uplink %x, downlink %v, chosen %v, next hops %v, %d UE addresses",
				c.store.Len(), c.dp.UplinkFTEIDs(), c.dp.DownlinkUEs(), c.h.chosen, c.nh.refs, c.pool.Allocated())
		}
	})
	if p := c.srv.Stats().Panics; p != 0 {
		t.Errorf("%d panics", p)
	}
}

// A mutant TestMutatedRequests sent: an Association Setup from the SMF's
// address with a flipped Node ID octet (216.0.0.4) and Recovery Time
// Stamp, accepted as a second association at that address. The server
// took requests that name no node (deletions, modifications without a
// Node ID) for either association's at random, and answered the SMF's
// own sessions with "Session context not found".
var secondAssociationMutant = []byte{0x20, 0x05, 0x00, 0x15, 0x00, 0x00, 0xb9, 0x00,
	0x00, 0x3c, 0x00, 0x05, 0x00, 0xd8, 0x00, 0x00, 0x04, 0x00, 0x60, 0x00, 0x04, 0xe8, 0xe8, 0x47, 0x00}

func TestMutatedNodeIDAtTheSMFsAddress(t *testing.T) {
	c := newChain(t)
	c.seq = sequence(secondAssociationMutant)
	c.exchange(t, c.smf, secondAssociationMutant).expect(t, causeAccepted, nil, nil)
	// Each request would find the SMF's session with even odds.
	for i := range 8 {
		ue := fmt.Sprintf("10.60.1.%d", i)
		seid := c.session(t, mSessionEstablishmentRequest, 0, open5gs(uint64(0x100+i), fixedUE(ue), 1)...).upSEID(t)
		c.session(t, mSessionModificationRequest, seid, updateFAR(farID(2), applyAction(aaFORW),
			updFwdParams(destinationInterface(ifAccess), ohcGTPU(2, gnb)))).expect(t, causeAccepted, nil, nil)
		c.session(t, mSessionDeletionRequest, seid).expect(t, causeAccepted, nil, nil)
	}
	if n := c.store.Len(); n != 0 {
		t.Errorf("%d sessions left", n)
	}
}

// A mutant TestMutatedRequests sent (with seed 3): an Open5GS establishment
// whose PDR 3 has its PDI twice, each with an F-TEID to choose (CH). The
// TEID chosen for the first PDI stayed chosen, though no PDR used it,
// until the session's deletion.
var twoPDIsMutant = []byte{0x21, 0x32, 0x01, 0xbd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x49, 0x00,
	0x00, 0x3c, 0x00, 0x05, 0x00, 0x7f, 0x00, 0x00, 0x04, 0x00, 0x39, 0x00, 0x0d, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
	0x03, 0x83, 0x7f, 0x00, 0x00, 0x04, 0x00, 0x01, 0x00, 0x45, 0x00, 0x38, 0x00, 0x02, 0x00, 0x01, 0x00, 0x1d, 0x00, 0x04,
	0x00, 0x00, 0x00, 0xff, 0x00, 0x02, 0x00, 0x26, 0x00, 0x14, 0x00, 0x01, 0x00, 0x00, 0x15, 0x00, 0x02, 0x0d, 0x05, 0x00,
	0x16, 0x00, 0x09, 0x08, 0x69, 0x6e, 0x74, 0x65, 0x72, 0x6e, 0x65, 0x74, 0x00, 0x5d, 0x00, 0x05, 0x02, 0x0a, 0x3d, 0x03,
	0x83, 0x00, 0x7c, 0x00, 0x01, 0x09, 0x00, 0x5f, 0x00, 0x01, 0x00, 0x00, 0x6c, 0x00, 0x04, 0x00, 0x00, 0x00, 0x01, 0x00,
	0x01, 0x00, 0x35, 0x00, 0x38, 0x00, 0x02, 0x00, 0x02, 0x00, 0x1d, 0x00, 0x04, 0x00, 0x00, 0x00, 0xff, 0x00, 0x02, 0x00,
	0x1b, 0x00, 0x14, 0x00, 0x01, 0x01, 0x00, 0x16, 0x00, 0x09, 0x08, 0x69, 0x6e, 0x74, 0x65, 0x72, 0x6e, 0x65, 0x74, 0x00,
	0x5d, 0x00, 0x05, 0x06, 0x0a, 0x3d, 0x03, 0x83, 0x00, 0x6c, 0x00, 0x04, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01, 0x00, 0x37,
	0x00, 0x38, 0x00, 0x02, 0x00, 0x03, 0x00, 0x1d, 0x00, 0x04, 0x00, 0x00, 0x03, 0xe8, 0x00, 0x02, 0x00, 0x0a, 0x00, 0x14,
	0x00, 0x01, 0x03, 0x00, 0x15, 0x00, 0x01, 0x05, 0x00, 0x02, 0x00, 0x0a, 0x00, 0x14, 0x00, 0x01, 0x03, 0x00, 0x15, 0x00,
	0x01, 0x05, 0x00, 0x5f, 0x00, 0x01, 0x00, 0x00, 0x6c, 0x00, 0x04, 0x00, 0x00, 0x00, 0x02, 0x00, 0x03, 0x00, 0x24, 0x00,
	0x6c, 0x00, 0x04, 0x00, 0x00, 0x00, 0x01, 0x00, 0x2c, 0x00, 0x02, 0x02, 0x00, 0x00, 0x04, 0x00, 0x12, 0x00, 0x2a, 0x00,
	0x01, 0x01, 0x00, 0x16, 0x00, 0x09, 0x08, 0x69, 0x6e, 0x74, 0x65, 0x72, 0x6e, 0x65, 0x74, 0x00, 0x03, 0x00, 0x25, 0x00,
	0x6c, 0x00, 0x04, 0x00, 0x00, 0x00, 0x02, 0x00, 0x2c, 0x00, 0x02, 0x02, 0x00, 0x00, 0x04, 0x00, 0x13, 0x00, 0x2a, 0x00,
	0x01, 0x00, 0x00, 0x54, 0x00, 0x0a, 0x01, 0x00, 0x00, 0x00, 0x03, 0x84, 0xc0, 0x00, 0x02, 0x32, 0x00, 0x01, 0x00, 0x5c,
	0x00, 0x38, 0x00, 0x02, 0x00, 0x0a, 0x00, 0x1d, 0x00, 0x04, 0x00, 0x00, 0x00, 0xfe, 0x00, 0x02, 0x00, 0x3d, 0x00, 0x14,
	0x00, 0x01, 0x00, 0x00, 0x15, 0x00, 0x02, 0x0d, 0x05, 0x00, 0x17, 0x00, 0x2e, 0x01, 0x00, 0x00, 0x2a, 0x70, 0x65, 0x72,
	0x6d, 0x69, 0x74, 0x20, 0x6f, 0x75, 0x74, 0x20, 0x35, 0x38, 0x20, 0x66, 0x72, 0x6f, 0x6d, 0x20, 0x66, 0x66, 0x30, 0x32,
	0x3a, 0x3a, 0x32, 0x2f, 0x31, 0x32, 0x38, 0x20, 0x74, 0x6f, 0x20, 0x61, 0x73, 0x73, 0x69, 0x67, 0x6e, 0x65, 0x64, 0x00,
	0x5f, 0x00, 0x01, 0x00, 0x00, 0x6c, 0x00, 0x04, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x03, 0x00, 0x25, 0x00, 0x6c, 0x00, 0x04,
	0x00, 0x00, 0x00, 0x0a, 0x00, 0x2c, 0x00, 0x02, 0x02, 0x00, 0x00, 0x04, 0x00, 0x13, 0x00, 0x2a, 0x00, 0x01, 0x03, 0x00,
	0x54, 0x00, 0x0a, 0x01, 0x00, 0x00, 0x00, 0x5f, 0x01, 0x7f, 0x00, 0x00, 0x04}

func TestMutatedPDRWithTwoPDIs(t *testing.T) {
	c := newChain(t)
	c.seq = sequence(twoPDIsMutant)
	r := c.exchange(t, c.smf, twoPDIsMutant)
	seid := r.upSEID(t)
	if err := c.consistent(); err != nil {
		t.Error(err)
	}
	c.session(t, mSessionDeletionRequest, seid).expect(t, causeAccepted, nil, nil)
	c.locked(func() {
		if len(c.h.chosen) != 0 {
			t.Errorf("chosen TEIDs outlive their session: %v", c.h.chosen)
		}
	})
}
