package n4

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xdp5g/xdp5g/internal/testsupport"
	"github.com/xdp5g/xdp5g/internal/upf/buffer"
	"github.com/xdp5g/xdp5g/internal/upf/ippool"
	"github.com/xdp5g/xdp5g/internal/upf/pfcp"
	"github.com/xdp5g/xdp5g/internal/upf/sdf"
	"github.com/xdp5g/xdp5g/internal/upf/session"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// atN3 is a local F-TEID at the UPF's N3 address.
func atN3(teid uint32) upfxdp.FTEID { return upfxdp.FTEID{Addr: n3, TEID: teid} }

var (
	n3     = netip.MustParseAddr("192.0.2.10") // the UPF's N3 address
	n9     = netip.MustParseAddr("192.0.2.11") // and its N9 address
	uePool = netip.MustParsePrefix("10.45.0.0/28")
)

const gnb = "192.0.2.50"

// fakeNexthops counts the references the store takes on gNB addresses,
// from several goroutines at once as a restart's checks do.
type fakeNexthops struct {
	mu   sync.Mutex
	refs map[netip.Addr]int
}

func (f *fakeNexthops) Acquire(dst netip.Addr) (uint32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refs[dst]++
	return 1, nil
}
func (f *fakeNexthops) Release(dst netip.Addr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refs[dst]--; f.refs[dst] <= 0 {
		delete(f.refs, dst)
	}
}
func (f *fakeNexthops) Adopt(dst netip.Addr, _ uint32) (uint32, error) { return f.Acquire(dst) }
func (f *fakeNexthops) ReleasePrevious()                               {}
func (f *fakeNexthops) SetStatic(netip.Addr, net.HardwareAddr)         {}
func (f *fakeNexthops) ClearStatic(netip.Addr)                         {}

// env is a handler over a store over real data-path maps.
type env struct {
	requests
	dp      *upfxdp.Datapath
	store   *session.Store
	nh      *fakeNexthops
	pool    *ippool.Pool
	buffers *buffer.Manager
}

func newEnv(t testing.TB) *env { return newSizedEnv(t, 64) }

// newSizedEnv is newEnv with a data path for maxSessions.
func newSizedEnv(t testing.TB, maxSessions uint32) *env {
	t.Helper()
	return newEnvOn(t, maxSessions, n3)
}

// newEnvOn is newSizedEnv with the N3 addresses n3s.
func newEnvOn(t testing.TB, maxSessions uint32, n3s ...netip.Addr) *env {
	t.Helper()
	return newEnvOnSides(t, maxSessions, n3s, []netip.Addr{n9})
}

// newEnvOnSides is newEnvOn with the N9 addresses n9s.
func newEnvOnSides(t testing.TB, maxSessions uint32, n3s, n9s []netip.Addr) *env {
	t.Helper()
	testsupport.NeedRoot(t, "BPF")
	dp, err := upfxdp.Open(upfxdp.Options{PinPath: testsupport.PinDir(t), MaxSessions: maxSessions, N3Addresses: n3s,
		N9Addresses: n9s})
	testsupport.CheckLoad(t, err)
	t.Cleanup(func() { dp.Close() })
	pool, err := ippool.New(uePool)
	if err != nil {
		t.Fatal(err)
	}
	buffers, err := buffer.New(dp, buffer.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { buffers.Close() })
	e := &env{requests: requests{t: t}, dp: dp, nh: &fakeNexthops{refs: map[netip.Addr]int{}}, pool: pool, buffers: buffers}
	e.store = session.NewStore(dp, e.nh, nil)
	e.store.SetBuffers(buffers)
	e.h = New(Config{Store: e.store, N3: n3s, N9: n9s, UEPool: pool, Buffers: buffers})
	return e
}

// parse turns hand-encoded bytes into go-pfcp's typed request.
func parse[M message.Message](t testing.TB, b []byte) M {
	t.Helper()
	m, err := message.Parse(b)
	if err != nil {
		t.Fatalf("go-pfcp cannot parse % x: %v", b, err)
	}
	r, ok := m.(M)
	if !ok {
		t.Fatalf("parsed as %T", m)
	}
	return r
}

// reply is a response decoded by hand.
type reply struct {
	seid uint64 // header SEID
	ies  []wireIE
}

func decodeReply(t testing.TB, m interface{ Marshal() ([]byte, error) }, wantType uint8) reply {
	t.Helper()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	typ, seid, ies := decodeMsg(t, b)
	if typ != wantType {
		t.Fatalf("response type %d, want %d", typ, wantType)
	}
	return reply{seid: seid, ies: ies}
}

// requests hands session requests from a peer straight to a handler, as
// the PFCP server does, numbering them, and decodes the responses.
type requests struct {
	t   testing.TB
	h   *Handler
	seq uint32
}

func (r *requests) establish(peer string, ies ...[]byte) reply {
	r.t.Helper()
	r.seq++
	req := parse[*message.SessionEstablishmentRequest](r.t, sessionMsg(mSessionEstablishmentRequest, 0, r.seq, ies...))
	return decodeReply(r.t, r.h.Establish(pfcp.Peer{NodeID: peer}, req), mSessionEstablishmentRequest+1)
}

func (r *requests) modify(peer string, seid uint64, ies ...[]byte) reply {
	r.t.Helper()
	r.seq++
	req := parse[*message.SessionModificationRequest](r.t, sessionMsg(mSessionModificationRequest, seid, r.seq, ies...))
	return decodeReply(r.t, r.h.Modify(pfcp.Peer{NodeID: peer}, req), mSessionModificationRequest+1)
}

func (r *requests) delete(peer string, seid uint64) reply {
	r.t.Helper()
	r.seq++
	req := parse[*message.SessionDeletionRequest](r.t, sessionMsg(mSessionDeletionRequest, seid, r.seq))
	return decodeReply(r.t, r.h.Delete(pfcp.Peer{NodeID: peer}, req), mSessionDeletionRequest+1)
}

func (r *requests) setDelete(peer string, fqCSIDs ...[]byte) reply {
	r.t.Helper()
	r.seq++
	req := parse[*message.SessionSetDeletionRequest](r.t, nodeMsg(mSessionSetDeletionRequest, r.seq,
		append([][]byte{nodeIDv4("127.0.0.4")}, fqCSIDs...)...))
	return decodeReply(r.t, r.h.SetDelete(pfcp.Peer{NodeID: peer}, req), mSessionSetDeletionRequest+1)
}

// expect checks a response's Cause value (§8.2.1) and the values of its
// Failed Rule ID (§8.2.80) and Offending IE (§8.2.22); nil expects none.
func (r reply) expect(t testing.TB, cause byte, failedRule, offending []byte) {
	t.Helper()
	if got := one(t, r.ies, tCause); !bytes.Equal(got, []byte{cause}) {
		t.Errorf("cause % x, want %d", got, cause)
	}
	if got := one(t, r.ies, tFailedRuleID); !bytes.Equal(got, failedRule) {
		t.Errorf("failed rule ID % x, want % x", got, failedRule)
	}
	if got := one(t, r.ies, tOffendingIE); !bytes.Equal(got, offending) {
		t.Errorf("offending IE % x, want % x", got, offending)
	}
}

// upSEID is the SEID of an accepted establishment's UP F-SEID (§8.2.37).
func (r reply) upSEID(t testing.TB) uint64 {
	t.Helper()
	r.expect(t, causeAccepted, nil, nil)
	f := one(t, r.ies, tFSEID)
	if len(f) != 13 || f[0] != 0x02 {
		t.Fatalf("UP F-SEID % x, want flags V4, SEID, IPv4", f)
	}
	seid := binaryUint64(f[1:9])
	if seid == 0 {
		t.Fatal("UP SEID 0")
	}
	return seid
}

// created returns the children of the Created PDR IEs (§7.5.3.2) by PDR ID.
func (r reply) created(t *testing.T) map[uint16][]wireIE { return r.pdrsIn(t, tCreatedPDR) }

// updated returns the children of the Updated PDR IEs (§7.5.5.1) by PDR ID.
func (r reply) updated(t *testing.T) map[uint16][]wireIE { return r.pdrsIn(t, tUpdatedPDR) }

func (r reply) pdrsIn(t *testing.T, typ uint16) map[uint16][]wireIE {
	t.Helper()
	out := map[uint16][]wireIE{}
	for _, v := range all(r.ies, typ) {
		c := decodeIEs(t, v)
		id := one(t, c, tPDRID)
		if len(id) != 2 {
			t.Fatalf("IE %d without PDR ID: % x", typ, v)
		}
		out[uint16(id[0])<<8|uint16(id[1])] = c
	}
	return out
}

// chosenTEID checks a Created PDR's F-TEID: V4, a TEID, the N3 address.
func chosenTEID(t *testing.T, c []wireIE) uint32 {
	t.Helper()
	f := one(t, c, tFTEID)
	if len(f) != 9 || f[0] != 0x01 || !bytes.Equal(f[5:], n3.AsSlice()) || binaryUint32(f[1:5]) == 0 {
		t.Fatalf("Created PDR F-TEID % x, want V4, a TEID, %s", f, n3)
	}
	return binaryUint32(f[1:5])
}

func binaryUint32(b []byte) uint32 { return uint32(binaryUint64(b)) }
func binaryUint64(b []byte) (v uint64) {
	for _, x := range b {
		v = v<<8 | uint64(x)
	}
	return v
}

// The rules of an Open5GS PDU session: uplink PDR 1 on an F-TEID the UPF
// chooses, downlink PDR 2 on the UE address, PDR 3 from the CP function
// sharing PDR 1's F-TEID (same CHOOSE ID), FAR 1 to the core, FAR 2 to the
// gNB. ue gives the UE IP Address IE, with the S/D flag it is asked for.
func uplinkPDR(ue func(sd bool) []byte) []byte {
	return createPDR(pdrID(1), precedence(255),
		pdi(sourceInterface(ifAccess), fteidChoose(5), networkInstance("internet"), ue(false), qfi(9)),
		outerHeaderRemoval(0), farID(1))
}

func downlinkPDR(ue func(sd bool) []byte, far uint32) []byte {
	return createPDR(pdrID(2), precedence(255),
		pdi(sourceInterface(ifCore), networkInstance("internet"), ue(true)), farID(far))
}

// cpPDR and up2cpPDR with up2cpFAR are what Open5GS adds to every
// session for the packets between the SMF and the UE (IPv6 router
// solicitations and advertisements): from the CP function to the UE through
// the downlink FAR, and router solicitations from the UE to the SMF's
// GTP-U endpoint.
func cpPDR(fteid []byte) []byte {
	return createPDR(pdrID(3), precedence(1000), pdi(sourceInterface(ifCPFunction), fteid), outerHeaderRemoval(0), farID(2))
}

func up2cpPDR() []byte {
	return createPDR(pdrID(10), precedence(254), pdi(sourceInterface(ifAccess), fteidChoose(5),
		sdfFilterFD("permit out 58 from ff02::2/128 to assigned")), outerHeaderRemoval(0), farID(10))
}

func up2cpFAR() []byte {
	return createFAR(farID(10), applyAction(aaFORW), fwdParams(destinationInterface(ifCPFunction), ohcGTPU(0x5f01, smfGTPU)))
}

// smfGTPU is the SMF's GTP-U address.
const smfGTPU = "127.0.0.4"

func coreFAR() []byte {
	return createFAR(farID(1), applyAction(aaFORW), fwdParams(destinationInterface(ifCore), networkInstance("internet")))
}

func accessFAR(teid uint32, addr string) []byte {
	return createFAR(farID(2), applyAction(aaFORW), fwdParams(destinationInterface(ifAccess), ohcGTPU(teid, addr)))
}

// open5gs is an Open5GS session's establishment, its IEs at the places
// named below.
func open5gs(cpSEID uint64, ue func(sd bool) []byte, gnbTEID uint32) [][]byte {
	return [][]byte{nodeIDv4("127.0.0.4"), cpFSEID(cpSEID, "127.0.0.4"),
		uplinkPDR(ue), downlinkPDR(ue, 2), cpPDR(fteidChooseAny()), coreFAR(), accessFAR(gnbTEID, gnb), up2cpPDR(), up2cpFAR()}
}

// Where open5gs puts each IE, for the tests that change one.
const (
	atNodeID = iota
	atCPFSEID
	atUplinkPDR
	atDownlinkPDR
	atCPPDR
	atCoreFAR
	atAccessFAR
	atUp2cpPDR
	atUp2cpFAR
)

func fixedUE(addr string) func(bool) []byte {
	return func(sd bool) []byte { return ueIPv4(addr, sd) }
}

// state is everything a request may change.
type state struct {
	Sessions []session.Session
	Uplink   map[upfxdp.FTEID]upfxdp.PDRSet
	Downlink map[netip.Addr]upfxdp.PDRSet
	Chosen   []uint32
	Pool     int
	Nexthops map[netip.Addr]int
	Dupls    map[uint32]upfxdp.Dupl
}

func (e *env) state() state {
	e.t.Helper()
	s := state{Sessions: e.store.List(), Uplink: map[upfxdp.FTEID]upfxdp.PDRSet{}, Downlink: map[netip.Addr]upfxdp.PDRSet{},
		Chosen: slices.Sorted(maps.Keys(e.h.chosen)), Pool: e.pool.Allocated(), Nexthops: maps.Clone(e.nh.refs)}
	var err error
	if s.Dupls, err = e.dp.Dupls(); err != nil {
		e.t.Fatal(err)
	}
	for _, f := range e.dp.UplinkFTEIDs() {
		set, err := e.dp.Uplink(f)
		if err != nil {
			e.t.Fatal(err)
		}
		s.Uplink[f] = set
	}
	for _, ue := range e.dp.DownlinkUEs() {
		set, err := e.dp.Downlink(ue)
		if err != nil {
			e.t.Fatal(err)
		}
		s.Downlink[ue] = set
	}
	return s
}

func (e *env) unchanged(before state) {
	e.t.Helper()
	if after := e.state(); !reflect.DeepEqual(before, after) {
		e.t.Errorf("a refused request changed state:\n%+v\n%+v", before, after)
	}
}

// gone checks that the data path has no key for a TEID and a UE address.
func (e *env) gone(teid uint32, ue netip.Addr) {
	e.t.Helper()
	if _, err := e.dp.Uplink(atN3(teid)); !errors.Is(err, ebpf.ErrKeyNotExist) {
		e.t.Errorf("TEID %#x: %v, want no key", teid, err)
	}
	if _, err := e.dp.Downlink(ue); !errors.Is(err, ebpf.ErrKeyNotExist) {
		e.t.Errorf("UE %s: %v, want no key", ue, err)
	}
}

// installed checks that the uplink TEID of an Open5GS-shaped session
// leads to its two PDRs (the uplink's, and the router solicitations' to the
// SMF), and its UE address to one.
func (e *env) installed(teid uint32, ue netip.Addr) {
	e.t.Helper()
	ul, err := e.dp.Uplink(atN3(teid))
	if err != nil || ul.Count != 2 {
		e.t.Errorf("TEID %#x: %+v, %v; want two PDRs", teid, ul, err)
	}
	dl, err := e.dp.Downlink(ue)
	if err != nil || dl.Count != 1 {
		e.t.Errorf("UE %s: %+v, %v; want one PDR", ue, dl, err)
	}
}

func ptr[T any](v T) *T { return &v }

// The UP F-SEID carries the UPF's PFCP address, where the SMF sends the
// session's later requests, not a GTP-U one; without one, the first N3
// address.
func TestUPFSEIDAddress(t *testing.T) {
	e := newEnv(t)
	pfcpAddr := netip.MustParseAddr("198.51.100.4")
	for _, seidAddress := range []netip.Addr{pfcpAddr, {}} {
		e.h = New(Config{Store: e.store, N3: []netip.Addr{n3}, N9: []netip.Addr{n9}, UEPool: e.pool, Buffers: e.buffers, SEIDAddress: seidAddress})
		ue := "10.60.0.1"
		if seidAddress.IsValid() {
			ue = "10.60.0.2"
		}
		r := e.establish("smf1", open5gs(0x1001, fixedUE(ue), 0x0a0b0c0d)...)
		r.upSEID(t)
		want := seidAddress
		if !want.IsValid() {
			want = n3
		}
		if got, _ := netip.AddrFromSlice(one(t, r.ies, tFSEID)[9:13]); got != want {
			t.Errorf("SEIDAddress %v: UP F-SEID at %v, want %v", seidAddress, got, want)
		}
	}
}

func TestEstablishOpen5GSSession(t *testing.T) {
	e := newEnv(t)
	rsFilter, err := sdf.Parse("permit out 58 from ff02::2/128 to assigned")
	fatalIf(t, err)
	r := e.establish("smf1", open5gs(0x1001, fixedUE("10.60.0.1"), 0x0a0b0c0d)...)
	seid := r.upSEID(t)
	created := r.created(t)
	if len(created) != 3 || created[1] == nil || created[3] == nil || created[10] == nil {
		t.Fatalf("Created PDRs for %v, want 1, 3 and 10", slices.Sorted(maps.Keys(created)))
	}
	teid, cpTEID := chosenTEID(t, created[1]), chosenTEID(t, created[3])
	if other := chosenTEID(t, created[10]); other != teid || cpTEID == teid {
		t.Errorf("PDRs of one CHOOSE ID got TEIDs %#x and %#x, the CP function's %#x", teid, other, cpTEID)
	}
	if ue := one(t, created[1], tUEIPAddress); ue != nil {
		t.Errorf("a UE address the SMF chose is reported: % x", ue)
	}

	ue := netip.MustParseAddr("10.60.0.1")
	want := session.Session{SEID: seid, Origin: session.OriginPFCP,
		PDRs: []session.PDR{
			{ID: 1, Precedence: 255, FARID: 1, OuterHeaderRemoval: ptr(uint8(0)), PDI: session.PDI{
				SourceInterface: session.InterfaceAccess, TEID: teid, LocalAddress: n3, UEAddress: netip.PrefixFrom(ue, 32), QFI: 9}},
			{ID: 2, Precedence: 255, FARID: 2, PDI: session.PDI{SourceInterface: session.InterfaceCore, UEAddress: netip.PrefixFrom(ue, 32)}},
			{ID: 3, Precedence: 1000, FARID: 2, OuterHeaderRemoval: ptr(uint8(0)), PDI: session.PDI{
				SourceInterface: session.InterfaceCPFunction, TEID: cpTEID, LocalAddress: n3}},
			{ID: 10, Precedence: 254, FARID: 10, OuterHeaderRemoval: ptr(uint8(0)), PDI: session.PDI{
				SourceInterface: session.InterfaceAccess, TEID: teid, LocalAddress: n3,
				SDFFilters: []session.SDFFilter{{Filter: rsFilter}}}},
		},
		FARs: []session.FAR{
			{ID: 1, Action: session.ActionForward, Forwarding: session.Forwarding{DestinationInterface: session.InterfaceCore}},
			{ID: 2, Action: session.ActionForward, Forwarding: session.Forwarding{DestinationInterface: session.InterfaceAccess,
				OuterHeaderCreation: &session.OuterHeaderCreation{TEID: 0x0a0b0c0d, Peer: netip.MustParseAddr(gnb)}}},
			{ID: 10, Action: session.ActionForward, Forwarding: session.Forwarding{DestinationInterface: session.InterfaceCPFunction,
				OuterHeaderCreation: &session.OuterHeaderCreation{TEID: 0x5f01, Peer: netip.MustParseAddr(smfGTPU)}}},
		}}
	if got, ok := e.store.Get(seid); !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("stored session\n%+v\nwant\n%+v", got, want)
	}
	e.installed(teid, ue)
	if cp, err := e.dp.Uplink(atN3(cpTEID)); err != nil || cp.Count != 1 {
		t.Errorf("the CP function's TEID %#x: %+v, %v; want one PDR", cpTEID, cp, err)
	}
	if got := e.nh.refs; !reflect.DeepEqual(got, map[netip.Addr]int{netip.MustParseAddr(gnb): 1, netip.MustParseAddr(smfGTPU): 1}) {
		t.Errorf("next-hop references %v", got)
	}
}

// CHV4: the UPF picks the UE address from its pool and gives it back, with
// the chosen TEID, when the session ends.
func TestChosenUEAddress(t *testing.T) {
	e := newEnv(t)
	r := e.establish("smf1", open5gs(0x1001, ueChooseV4, 0x0a0b0c0d)...)
	seid := r.upSEID(t)
	created := r.created(t)
	if len(created) != 4 {
		t.Fatalf("Created PDRs for %v, want 1, 2, 3 and 10", slices.Sorted(maps.Keys(created)))
	}
	teid := chosenTEID(t, created[1])
	// §8.2.62: V4 and the address; S/D set for the downlink PDR.
	ul, dl := one(t, created[1], tUEIPAddress), one(t, created[2], tUEIPAddress)
	if len(ul) != 5 || ul[0] != 0x02 || len(dl) != 5 || dl[0] != 0x06 || !bytes.Equal(ul[1:], dl[1:]) {
		t.Fatalf("Created PDR UE IP addresses % x and % x", ul, dl)
	}
	ue := netip.AddrFrom4([4]byte(ul[1:]))
	if !uePool.Contains(ue) || e.pool.Allocated() != 1 {
		t.Fatalf("UE address %s, %d allocated from %s", ue, e.pool.Allocated(), uePool)
	}
	e.installed(teid, ue)

	e.delete("smf1", seid).expect(t, causeAccepted, nil, nil)
	if n := e.pool.Allocated(); n != 0 {
		t.Errorf("%d UE addresses still allocated", n)
	}
	if len(e.h.chosen) != 0 {
		t.Errorf("chosen TEIDs outlive their session: %v", e.h.chosen)
	}
	e.gone(teid, ue)

	r = e.establish("smf1", open5gs(0x1002, ueChooseV4, 0x0a0b0c0e)...)
	r.upSEID(t)
	next := r.created(t)
	if chosenTEID(t, next[1]) == teid || bytes.Equal(one(t, next[1], tUEIPAddress), ul) {
		t.Errorf("the next session got the old TEID or UE address")
	}
	e.gone(teid, ue)
}

// CHV4 passes over a pool address another session holds (an SMF or a REST
// session gave it itself) rather than refusing the establishment.
func TestChosenUEAddressPassesOverOnesInUse(t *testing.T) {
	e := newEnv(t)
	first := uePool.Addr().Next()
	e.establish("smf1", open5gs(0x1001, fixedUE(first.String()), 0x0a0b0c0d)...).upSEID(t)
	r := e.establish("smf1", open5gs(0x1002, ueChooseV4, 0x0a0b0c0e)...)
	r.upSEID(t)
	ul := one(t, r.created(t)[1], tUEIPAddress)
	if ue := netip.AddrFrom4([4]byte(ul[1:])); ue == first || !uePool.Contains(ue) {
		t.Errorf("chosen UE address %v; %v is in use", ue, first)
	}
	if n := e.pool.Allocated(); n != 1 {
		t.Errorf("%d UE addresses allocated, want the chosen one", n)
	}
}

// The SEIDs the UPF chooses are integers that every JSON reader takes
// exactly (RFC 8259 §6: at most 2^53 - 1), as the REST API and its client
// print them: jq and JavaScript round larger ones to another SEID.
func TestChosenSEIDsFitJSON(t *testing.T) {
	e := newEnv(t)
	for i := range 32 {
		ies := open5gs(uint64(0x1001+i), fixedUE(fmt.Sprintf("10.60.0.%d", i+1)), 0x0a0b0c0d)
		if seid := e.establish("smf1", ies...).upSEID(t); seid > 1<<53-1 {
			t.Fatalf("UP SEID %d, beyond 2^53 - 1", seid)
		}
	}
}

func TestModify(t *testing.T) {
	e := newEnv(t)
	const cpSEID = 0x1001
	r := e.establish("smf1", open5gs(cpSEID, fixedUE("10.60.0.1"), 0x0a0b0c0d)...)
	seid := r.upSEID(t)
	created := r.created(t)
	teid := chosenTEID(t, created[1])
	ue := netip.MustParseAddr("10.60.0.1")

	// Handover: the gNB's tunnel end moves.
	r = e.modify("smf1", seid, updateFAR(farID(2), updFwdParams(ohcGTPU(0x2222, "192.0.2.51"))))
	r.expect(t, causeAccepted, nil, nil)
	if r.seid != cpSEID {
		t.Errorf("response SEID %#x, want the CP SEID", r.seid)
	}
	got, _ := e.store.Get(seid)
	if o := got.FARs[1].OuterHeaderCreation; o == nil || *o != (session.OuterHeaderCreation{TEID: 0x2222, Peer: netip.MustParseAddr("192.0.2.51")}) {
		t.Errorf("FAR 2 after the handover: %+v", got.FARs[1])
	}
	if !reflect.DeepEqual(e.nh.refs, map[netip.Addr]int{netip.MustParseAddr("192.0.2.51"): 1, netip.MustParseAddr(smfGTPU): 1}) {
		t.Errorf("next-hop references %v", e.nh.refs)
	}
	e.installed(teid, ue)

	// A new PDR on a new chosen F-TEID, then removed again.
	r = e.modify("smf1", seid, createPDR(pdrID(4), precedence(10),
		pdi(sourceInterface(ifAccess), fteidChoose(6), qfi(5)), outerHeaderRemoval(0), farID(1)))
	r.expect(t, causeAccepted, nil, nil)
	teid4 := chosenTEID(t, r.created(t)[4])
	if teid4 == teid {
		t.Fatal("a new CHOOSE ID got the TEID of another one")
	}
	if _, err := e.dp.Uplink(atN3(teid4)); err != nil {
		t.Errorf("TEID of PDR 4: %v", err)
	}
	e.modify("smf1", seid, removePDR(4)).expect(t, causeAccepted, nil, nil)
	if _, err := e.dp.Uplink(atN3(teid4)); !errors.Is(err, ebpf.ErrKeyNotExist) {
		t.Errorf("TEID of the removed PDR 4: %v", err)
	}
	if cpTEID := chosenTEID(t, created[3]); !reflect.DeepEqual(e.h.chosen, map[uint32]bool{teid: true, cpTEID: true}) {
		t.Errorf("chosen TEIDs %v, want only %#x and %#x", e.h.chosen, teid, cpTEID)
	}

	before := e.state()
	for _, c := range []struct {
		name       string
		ies        [][]byte
		failedRule []byte
	}{
		{name: "duplication alone", ies: [][]byte{updateFAR(farID(2), applyAction(aaDUPL))}, failedRule: failedFAR(2)},
		{name: "removing a missing PDR", ies: [][]byte{removePDR(9)}, failedRule: failedPDR(9)},
		{name: "a chosen TEID, then a missing FAR", ies: [][]byte{createPDR(pdrID(4), precedence(10),
			pdi(sourceInterface(ifAccess), fteidChoose(7)), outerHeaderRemoval(0), farID(9))}, failedRule: failedPDR(4)},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.modify("smf1", seid, c.ies...)
			r.expect(t, causeRuleFailure, c.failedRule, nil)
			if r.seid != cpSEID {
				t.Errorf("response SEID %#x, want the CP SEID", r.seid)
			}
			e.unchanged(before)
		})
	}
}

// refusalCase is an establishment refused with a cause, the Failed Rule ID
// and the Offending IE it names (nil: none).
type refusalCase struct {
	name                  string
	ies                   [][]byte
	cause                 byte
	failedRule, offending []byte
}

// refusesEstablishments checks that each case is refused as it says and
// changes nothing.
func (e *env) refusesEstablishments(t *testing.T, cases []refusalCase) {
	t.Helper()
	before := e.state()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.establish("smf1", c.ies...).expect(t, c.cause, c.failedRule, c.offending)
			e.unchanged(before)
		})
	}
}

// Refused establishments leave nothing behind: no session, no key, no
// chosen TEID or UE address, no next-hop reference.
func TestEstablishmentRefusals(t *testing.T) {
	e := newEnv(t)
	// A bystander session, whose state must survive every refusal.
	e.establish("smf2", open5gs(0x2001, fixedUE("10.60.0.1"), 0x0a0b0c0d)...).upSEID(t)
	replace := func(i int, with []byte) [][]byte {
		ies := open5gs(0x1001, ueChooseV4, 0x0a0b0c0e)
		ies[i] = with
		return ies
	}
	e.refusesEstablishments(t, []refusalCase{
		{name: "downlink UE address as source", ies: replace(atDownlinkPDR, downlinkPDR(func(bool) []byte { return ueChooseV4(false) }, 2)),
			cause: causeRuleFailure, failedRule: failedPDR(2)},
		{name: "FAR ID of no FAR", ies: replace(atDownlinkPDR, downlinkPDR(ueChooseV4, 7)), cause: causeRuleFailure, failedRule: failedPDR(2)},
		{name: "F-TEID not on N3", ies: replace(atCPPDR, cpPDR(fteid(0x77, "198.51.100.1"))), cause: causeRuleFailure, failedRule: failedPDR(3)},
		{name: "UE address of another session", ies: open5gs(0x1001, fixedUE("10.60.0.1"), 0x0a0b0c0e), cause: causeRuleFailure, failedRule: failedPDR(2)},
		{name: "buffering FAR naming no BAR", ies: replace(atAccessFAR, createFAR(farID(2), applyAction(aaBUFF), barID(9))), cause: causeRuleFailure, failedRule: failedFAR(2)},
		{name: "BAR with MT-EDT", ies: append(open5gs(0x1001, ueChooseV4, 0x0a0b0c0e), createBAR(5, 10, tlv(tMTEDTControlInfo, []byte{1}))),
			cause: causeRuleFailure, failedRule: failedBAR(5)},
		// go-pfcp keeps the last of two: the first must not vanish unseen.
		{name: "two BARs", ies: append(open5gs(0x1001, ueChooseV4, 0x0a0b0c0e), createBAR(5, 10), createBAR(6, 10)),
			cause: causeRuleFailure, failedRule: failedBAR(6)},
		{name: "periodic URR without a period", ies: append(open5gs(0x1001, ueChooseV4, 0x0a0b0c0e), createURR(3, mmVOLUM, rtgPERIO)), cause: causeRuleFailure, failedRule: failedURR(3)},
		{name: "Create PDR without PDI", ies: replace(atDownlinkPDR, createPDR(pdrID(2), precedence(255), farID(2))), cause: causeMissingIE, offending: offendingIE(tPDI)},
		{name: "Create PDR without PDR ID", ies: replace(atDownlinkPDR, createPDR(precedence(255), pdi(sourceInterface(ifCore), ueChooseV4(true)), farID(2))),
			cause: causeMissingIE, offending: offendingIE(tPDRID)},
		{name: "PDI without Source Interface", ies: replace(atDownlinkPDR, createPDR(pdrID(2), precedence(255), pdi(ueChooseV4(true)), farID(2))),
			cause: causeMissingIE, offending: offendingIE(tSourceInterface)},
		{name: "Create FAR without Apply Action", ies: replace(atAccessFAR, createFAR(farID(2), fwdParams(destinationInterface(ifAccess), ohcGTPU(1, gnb)))),
			cause: causeMissingIE, offending: offendingIE(tApplyAction)},
		// Services the UPF does not give: Service not supported.
		{name: "user plane inactivity timer", ies: append(open5gs(0x1001, ueChooseV4, 0x0a0b0c0e), tlv(tUPInactivityTimer, be32(30))),
			cause: causeNotServed, offending: offendingIE(tUPInactivityTimer)},
		{name: "traffic endpoint", ies: append(open5gs(0x1001, ueChooseV4, 0x0a0b0c0e),
			tlv(tCreateTrafficEndpoint, tlv(tTrafficEndpointID, []byte{1}), fteid(0x77, n3.String()))), cause: causeNotServed, offending: offendingIE(tCreateTrafficEndpoint)},
		{name: "multi-access rule (ATSSS)", ies: append(open5gs(0x1001, ueChooseV4, 0x0a0b0c0e), tlv(tCreateMAR, tlv(tMARID, be16(1)))),
			cause: causeNotServed, offending: offendingIE(tCreateMAR)},
		{name: "establishment flag other than RESTI", ies: append(open5gs(0x1001, ueChooseV4, 0x0a0b0c0e), tlv(tPFCPSEReqFlags, []byte{0x02})),
			cause: causeNotServed, offending: offendingIE(tPFCPSEReqFlags)},
	})

	// A good session afterwards is the only new thing.
	r := e.establish("smf1", open5gs(0x1001, ueChooseV4, 0x0a0b0c0e)...)
	r.upSEID(t)
	after := e.state()
	// Each has its uplink TEID and its CP function's.
	if len(after.Sessions) != 2 || len(after.Uplink) != 4 || len(after.Downlink) != 2 || len(after.Chosen) != 4 || after.Pool != 1 {
		t.Errorf("after one more session: %+v", after)
	}
}

// IEs that only describe the session, the RESTI flag and IEs of types the
// UPF does not know are no reason to refuse it.
func TestDescriptiveAndUnknownIEsAreAccepted(t *testing.T) {
	e := newEnv(t)
	e.establish("smf1", append(open5gs(0x1001, fixedUE("10.60.0.1"), 0x0a0b0c0d),
		tlv(tPDNType, []byte{1}),                                             // IPv4
		tlv(tAPNDNN, []byte("\x08internet")),                                 // DNN "internet", one label
		tlv(tSNSSAI, []byte{1, 0, 0, 1}),                                     // SST 1, SD 1
		tlv(tPFCPSEReqFlags, []byte{0x01}),                                   // RESTI
		tlv(2000, []byte{0xde, 0xad}))...).expect(t, causeAccepted, nil, nil) // an unassigned type
}

// Requests for sessions the peer does not have are refused with "Session
// context not found" and change nothing.
func TestUnknownSession(t *testing.T) {
	e := newEnv(t)
	seid := e.establish("smf1", open5gs(0x1001, fixedUE("10.60.0.1"), 0x0a0b0c0d)...).upSEID(t)
	before := e.state()
	update := updateFAR(farID(2), updFwdParams(ohcGTPU(0x2222, "192.0.2.51")))
	for _, c := range []struct {
		name string
		call func() reply
	}{
		{name: "modify unknown SEID", call: func() reply { return e.modify("smf1", seid+1, update) }},
		{name: "modify by another peer", call: func() reply { return e.modify("smf2", seid, update) }},
		{name: "delete unknown SEID", call: func() reply { return e.delete("smf1", seid+1) }},
		{name: "delete by another peer", call: func() reply { return e.delete("smf2", seid) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.call()
			r.expect(t, causeNoSession, nil, nil)
			if r.seid != 0 {
				t.Errorf("response SEID %#x, want 0", r.seid)
			}
			e.unchanged(before)
		})
	}
}

// A CP F-SEID names one session (TS 29.244 §5.6.2): an establishment with
// that of an existing session, the same request or another, is refused
// with Mandatory IE incorrect, the F-SEID offending, and changes nothing;
// so is a modification that would move a session onto it. The same SEID
// at another address, or once the session is deleted, is another session.
func TestCPFSEIDNamesOneSession(t *testing.T) {
	e := newEnv(t)
	first := e.establish("smf1", open5gs(0x1001, fixedUE("10.60.0.1"), 0x0a0b0c0d)...).upSEID(t)
	elsewhere := open5gs(0x1001, fixedUE("10.60.0.2"), 0x0a0b0c0e)
	elsewhere[atCPFSEID] = cpFSEID(0x1001, "127.0.0.5")
	second := e.establish("smf1", elsewhere...).upSEID(t)
	before, sessions := e.state(), maps.Clone(e.h.sessions)
	for name, ies := range map[string][][]byte{
		"the same request again": open5gs(0x1001, fixedUE("10.60.0.1"), 0x0a0b0c0d),
		"another session":        open5gs(0x1001, fixedUE("10.60.0.3"), 0x0a0b0c0f),
	} {
		t.Run(name, func(t *testing.T) {
			e.establish("smf1", ies...).expect(t, causeIncorrectIE, nil, offendingIE(tFSEID))
			e.unchanged(before)
			if !maps.Equal(e.h.sessions, sessions) {
				t.Errorf("the handler's sessions %v, want %v", slices.Collect(maps.Keys(e.h.sessions)), slices.Collect(maps.Keys(sessions)))
			}
		})
	}
	t.Run("a modification onto it", func(t *testing.T) {
		e.modify("smf1", second, cpFSEID(0x1001, "127.0.0.4")).expect(t, causeIncorrectIE, nil, offendingIE(tFSEID))
		e.unchanged(before)
		if got := e.h.sessions[second].cpAddrs[0]; got != netip.MustParseAddr("127.0.0.5") {
			t.Errorf("the refused modification moved the session to %s", got)
		}
	})
	e.delete("smf1", first).expect(t, causeAccepted, nil, nil)
	e.establish("smf1", open5gs(0x1001, fixedUE("10.60.0.1"), 0x0a0b0c0d)...).upSEID(t)
	// Its own CP F-SEID again, as an SMF may send it, is no move.
	e.modify("smf1", second, cpFSEID(0x1001, "127.0.0.5")).expect(t, causeAccepted, nil, nil)
}

func TestDeletion(t *testing.T) {
	e := newEnv(t)
	type sess struct {
		seid, cpSEID uint64
		teid         uint32
		ue           netip.Addr
	}
	establish := func(peer string, cpSEID uint64, ue string) sess {
		t.Helper()
		r := e.establish(peer, open5gs(cpSEID, fixedUE(ue), uint32(cpSEID))...)
		s := sess{seid: r.upSEID(t), cpSEID: cpSEID, teid: chosenTEID(t, r.created(t)[1]), ue: netip.MustParseAddr(ue)}
		e.installed(s.teid, s.ue)
		return s
	}
	exists := func(s sess) bool {
		_, ok := e.store.Get(s.seid)
		return ok
	}
	a, b, c := establish("smf1", 0x1001, "10.60.0.1"), establish("smf1", 0x1002, "10.60.0.2"), establish("smf2", 0x2001, "10.60.0.3")

	r := e.delete("smf1", a.seid)
	r.expect(t, causeAccepted, nil, nil)
	if r.seid != a.cpSEID {
		t.Errorf("response SEID %#x, want the CP SEID", r.seid)
	}
	if exists(a) || !exists(b) || !exists(c) {
		t.Error("deletion removed the wrong sessions")
	}
	e.gone(a.teid, a.ue)

	e.setDelete("smf1").expect(t, causeAccepted, nil, nil)
	if exists(b) || !exists(c) {
		t.Error("session set deletion removed the wrong sessions")
	}
	e.gone(b.teid, b.ue)
	e.installed(c.teid, c.ue)

	d := establish("smf1", 0x1003, "10.60.0.4")
	e.h.DropPeer("smf2")
	if exists(c) || !exists(d) {
		t.Error("dropping smf2 removed the wrong sessions")
	}
	e.gone(c.teid, c.ue)
	e.installed(d.teid, d.ue)

	e.h.DropPeer("smf1")
	if s := e.state(); !reflect.DeepEqual(s, state{Uplink: map[upfxdp.FTEID]upfxdp.PDRSet{}, Downlink: map[netip.Addr]upfxdp.PDRSet{},
		Sessions: []session.Session{}, Nexthops: map[netip.Addr]int{}, Dupls: map[uint32]upfxdp.Dupl{}}) {
		t.Errorf("after every peer is gone: %+v", s)
	}
	if len(e.h.sessions) != 0 {
		t.Errorf("the handler still has %d sessions", len(e.h.sessions))
	}
}

// A CHOOSE ID names a TEID within one request (§8.2.3): once a
// modification has released the TEID of CHOOSE ID 6, a later request's
// CHOOSE ID 6 gets a TEID the handler records as chosen.
func TestChooseIDAfterRelease(t *testing.T) {
	e := newEnv(t)
	seid := e.establish("smf1", open5gs(0x1001, fixedUE("10.60.0.1"), 0x0a0b0c0d)...).upSEID(t)
	pdr := func(id uint16) []byte {
		return createPDR(pdrID(id), precedence(10), pdi(sourceInterface(ifAccess), fteidChoose(6), qfi(5)), outerHeaderRemoval(0), farID(1))
	}
	r := e.modify("smf1", seid, pdr(4))
	r.expect(t, causeAccepted, nil, nil)
	released := chosenTEID(t, r.created(t)[4])
	e.modify("smf1", seid, removePDR(4)).expect(t, causeAccepted, nil, nil)

	r = e.modify("smf1", seid, pdr(5))
	r.expect(t, causeAccepted, nil, nil)
	teid := chosenTEID(t, r.created(t)[5])
	if !e.h.chosen[teid] {
		t.Errorf("PDR 5 got TEID %#x (the released one: %t), which the handler does not hold as chosen", teid, teid == released)
	}
}

// An Update PDR whose new PDI has the UPF choose the F-TEID (CH) moves
// the PDR to a new TEID, which the response gives in an Updated PDR
// (§7.5.5.1): the SMF has no other way to learn where the gNB must send.
// An Update PDR that chooses nothing gets none.
func TestUpdatedPDRCarriesTheChosenFTEID(t *testing.T) {
	e := newEnv(t)
	r := e.establish("smf1", open5gs(0x1001, fixedUE("10.60.0.1"), 0x0a0b0c0d)...)
	seid, old := r.upSEID(t), chosenTEID(t, r.created(t)[1])
	r = e.modify("smf1", seid, updatePDR(pdrID(1), pdi(sourceInterface(ifAccess), fteidChoose(3), ueIPv4("10.60.0.1", false), qfi(9))),
		updatePDR(pdrID(2), precedence(100)))
	r.expect(t, causeAccepted, nil, nil)
	updated := r.updated(t)
	if len(updated) != 1 || len(r.created(t)) != 0 {
		t.Fatalf("Updated PDRs %v, Created PDRs %v; want an Updated PDR 1 alone", updated, r.created(t))
	}
	teid := chosenTEID(t, updated[1])
	sess, _ := e.store.Get(seid)
	i := slices.IndexFunc(sess.PDRs, func(p session.PDR) bool { return p.ID == 1 })
	if teid == old || sess.PDRs[i].PDI.TEID != teid {
		t.Errorf("Updated PDR 1 at TEID %#x (before: %#x), the session's PDR 1 at %#x", teid, old, sess.PDRs[i].PDI.TEID)
	}
}

// Transport Level Marking (§8.2.12) is the DSCP of the downlink tunnel:
// what the mask keeps of the ToS octet.
func TestTransportLevelMarking(t *testing.T) {
	e := newEnv(t)
	const tTransportLevelMarking = 30
	ies := open5gs(0x1001, fixedUE("10.60.0.7"), 0x0a0b0c0d)
	ies[atAccessFAR] = createFAR(farID(2), applyAction(aaFORW), fwdParams(destinationInterface(ifAccess), ohcGTPU(0x0a0b0c0d, gnb),
		tlv(tTransportLevelMarking, []byte{0xb9, 0xfc})))
	seid := e.establish("smf1", ies...).upSEID(t)
	sess, _ := e.store.Get(seid)
	if i := slices.IndexFunc(sess.FARs, func(f session.FAR) bool { return f.ID == 2 }); i < 0 || sess.FARs[i].DSCP != 46 {
		t.Errorf("FARs %+v, want FAR 2 with DSCP 46", sess.FARs)
	}
}

// fqCSID is an FQ-CSID (§8.2.46) of an IPv4 node.
func fqCSID(node string, csids ...uint16) []byte {
	v := slices.Concat([]byte{byte(len(csids))}, v4(node)) // Node-ID type 0 (IPv4), number of CSIDs
	for _, id := range csids {
		v = append(v, be16(id)...)
	}
	return tlv(tFQCSID, v)
}

// A Session Set Deletion naming FQ-CSIDs removes the sessions of those
// connection sets only, of the requesting SMF only; sessions may name
// several sets, and a modification may move them.
func TestSessionSetDeletionByFQCSID(t *testing.T) {
	e := newEnv(t)
	establish := func(peer string, cpSEID uint64, ue string, csids ...[]byte) uint64 {
		t.Helper()
		return e.establish(peer, append(open5gs(cpSEID, fixedUE(ue), uint32(cpSEID)), csids...)...).upSEID(t)
	}
	const smfAddr, sgwAddr = "192.0.2.80", "192.0.2.81"
	a := establish("smf1", 0x1001, "10.60.0.1", fqCSID(smfAddr, 7))
	b := establish("smf1", 0x1002, "10.60.0.2", fqCSID(sgwAddr, 3), fqCSID(smfAddr, 8, 9))
	c := establish("smf1", 0x1003, "10.60.0.3")
	d := establish("smf2", 0x2001, "10.60.0.4", fqCSID(smfAddr, 7))
	f := establish("smf1", 0x1004, "10.60.0.5", fqCSID(smfAddr, 5))
	e.modify("smf1", f, fqCSID(smfAddr, 9)).expect(t, causeAccepted, nil, nil)
	exist := func(want map[uint64]bool) {
		t.Helper()
		for seid, w := range want {
			if _, ok := e.store.Get(seid); ok != w {
				t.Errorf("session %d exists: %t, want %t", seid, ok, w)
			}
		}
	}

	e.setDelete("smf1", fqCSID(smfAddr, 7)).expect(t, causeAccepted, nil, nil)
	exist(map[uint64]bool{a: false, b: true, c: true, d: true, f: true})
	e.setDelete("smf1", fqCSID(sgwAddr, 9)).expect(t, causeAccepted, nil, nil) // CSID 9 of another node
	exist(map[uint64]bool{b: true, c: true, d: true, f: true})
	e.setDelete("smf1", fqCSID(sgwAddr, 1, 2), fqCSID(smfAddr, 9)).expect(t, causeAccepted, nil, nil)
	exist(map[uint64]bool{b: false, c: true, d: true, f: false})
	e.setDelete("smf1", tlv(tFQCSID, []byte{0x51})).expect(t, causeIncorrectIE, nil, offendingIE(tFQCSID)) // Node-ID type 5
	exist(map[uint64]bool{c: true, d: true})
	e.setDelete("smf1").expect(t, causeAccepted, nil, nil) // no FQ-CSID: all of them
	exist(map[uint64]bool{c: false, d: true})
}

// A data path full of Open5GS sessions still modifies them, and takes new
// ones as fast as old ones go: new rules are written before the old ones
// are freed, and a freed slot waits a second before it is used again.
func TestFullDataPathStillChanges(t *testing.T) {
	const sessions = 64 // what newEnv's data path holds
	e := newEnv(t)
	ue := func(i int) func(bool) []byte { return fixedUE(fmt.Sprintf("10.60.1.%d", i)) }
	seids := make([]uint64, sessions)
	for i := range seids {
		seids[i] = e.establish("smf1", open5gs(uint64(i+1), ue(i), uint32(i+1))...).upSEID(t)
	}
	for i, seid := range seids {
		e.modify("smf1", seid, updateFAR(farID(2), updFwdParams(ohcGTPU(uint32(i)|1<<31, gnb)))).expect(t, causeAccepted, nil, nil)
	}
	for i, seid := range seids {
		e.delete("smf1", seid).expect(t, causeAccepted, nil, nil)
		e.establish("smf1", open5gs(uint64(sessions+i+1), ue(i), uint32(i+1))...).upSEID(t)
	}
}
