package session

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netns"

	"github.com/xdp5g/xdp5g/internal/fielderr"
	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/platform/slotpool"
	"github.com/xdp5g/xdp5g/internal/testsupport"
	"github.com/xdp5g/xdp5g/internal/upf/nexthop"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// atN3 is a local F-TEID at the UPF's N3 address.
func atN3(teid uint32) upfxdp.FTEID { return upfxdp.FTEID{Addr: n3, TEID: teid} }

// The UPF's N3 address, and figure10's, both its UE's and its gNB's: the
// addresses of the UPF and the peer namespace of newStoreEnv.
var (
	n3           = netip.MustParseAddr("10.1.3.1")
	figure10Addr = netip.MustParseAddr("10.1.3.27")
)

type storeEnv struct {
	dp    *upfxdp.Datapath
	nh    *nexthop.Resolver
	ns    string // the UPF's namespace
	store *Store
}

// newStoreEnv gives a store over a real data path and a real resolver in a
// throw-away namespace where figure10's gNB is reachable.
func newStoreEnv(t *testing.T) *storeEnv { return newStoreEnvWith(t) }

// newStoreEnvWith is newStoreEnv whose data path has the N3 addresses
// more after n3.
func newStoreEnvWith(t *testing.T, more ...netip.Addr) *storeEnv {
	t.Helper()
	return newStoreEnvSized(t, 1024, more...)
}

// newStoreEnvSized is newStoreEnvWith whose data path is sized for
// maxSessions.
func newStoreEnvSized(t *testing.T, maxSessions uint32, more ...netip.Addr) *storeEnv {
	t.Helper()
	testsupport.NeedRoot(t, "network namespaces and BPF")
	upf, gnb := testsupport.Netns(t, "sess"), testsupport.Netns(t, "sess")
	check(t, namespace.Veth(upf, "n3", gnb, "gnb"))
	check(t, upf.AddAddr("n3", netip.PrefixFrom(n3, 24).String()))
	check(t, gnb.AddAddr("gnb", netip.PrefixFrom(figure10Addr, 24).String()))

	dp, err := upfxdp.Open(upfxdp.Options{PinPath: testsupport.PinDir(t), MaxSessions: maxSessions, N3Addresses: append([]netip.Addr{n3}, more...)})
	testsupport.CheckLoad(t, err)
	t.Cleanup(func() { dp.Close() })
	ns, err := netns.GetFromName(upf.Name)
	check(t, err)
	defer ns.Close()
	nh, err := nexthop.New(dp, ns, nil)
	check(t, err)
	t.Cleanup(func() { nh.Close() })
	e := &storeEnv{dp: dp, nh: nh, ns: upf.Name}
	e.store = e.newStore()
	return e
}

// newStore is a new store over the data path, as a restarted daemon has.
func (e *storeEnv) newStore() *Store { return NewStore(e.dp, e.nh, nil) }

// restart is a restarted daemon's store: a new store that restored what
// e.store saved, every session of it.
func (e *storeEnv) restart(t *testing.T) *Store {
	t.Helper()
	saved, err := e.store.MarshalState()
	check(t, err)
	restored := e.newStore()
	res, err := restored.Restore(saved, nil)
	check(t, err)
	if res.Dropped != 0 || res.Sessions != e.store.Len() {
		t.Fatalf("restored %+v of %d sessions", res, e.store.Len())
	}
	return restored
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// snapshot is what the data path holds for the keys of figure10.
func (e *storeEnv) snapshot(t *testing.T) string {
	t.Helper()
	ul, ulErr := e.dp.Uplink(atN3(100))
	dl, dlErr := e.dp.Downlink(figure10Addr)
	return fmt.Sprintf("%v %v %v %v %v", ul, ulErr, dl, dlErr, e.store.List())
}

func TestStoreLifecycle(t *testing.T) {
	e := newStoreEnv(t)
	check(t, e.store.Create(figure10()))
	ul, err := e.dp.Uplink(atN3(100))
	check(t, err)
	if ul.Count != 1 {
		t.Fatalf("uplink set %+v", ul)
	}
	before := e.snapshot(t)

	// Rejected changes leave everything as it was.
	other := figure10()
	other.SEID = 2
	var conflict *ConflictError
	if err := e.store.Create(other); !errors.As(err, &conflict) {
		t.Fatalf("a second session on the same TEID: %v", err)
	}
	if err := e.store.Create(figure10()); !errors.As(err, &conflict) {
		t.Fatalf("the same SEID twice: %v", err)
	}
	bad := figure10()
	bad.PDRs[1].PDI.TEID = 0
	if err := e.store.Replace(bad); err == nil {
		t.Fatal("an invalid replacement was accepted")
	}
	if after := e.snapshot(t); after != before {
		t.Fatalf("a rejected call changed state:\n%s\n%s", before, after)
	}

	// A replacement moves the keys to fresh slots.
	next := figure10()
	next.FARs[0].OuterHeaderCreation.TEID = 200
	check(t, e.store.Replace(next))
	dl, err := e.dp.Downlink(figure10Addr)
	check(t, err)
	if after := e.snapshot(t); after == before || dl.Count != 1 {
		t.Fatalf("replace changed nothing: %s", after)
	}
	got, _ := e.store.Get(1)
	if !reflect.DeepEqual(got, next) {
		t.Fatalf("Get after Replace: %+v", got)
	}

	check(t, e.store.Delete(1))
	if _, err := e.dp.Uplink(atN3(100)); err == nil {
		t.Fatal("the TEID outlived its session")
	}
	if err := e.store.Delete(1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleting twice: %v", err)
	}
	// The freed keys can be taken by another session.
	check(t, e.store.Create(other))
}

// The F-TEID only the CP function sends to (the SMF's packets to the UE,
// as in Open5GS's sessions) takes no record: the records' places are for
// the keys of subscribers' traffic. A restarted store puts it so again.
func TestStoreLeavesTheCPFunctionsFTEIDUnrecorded(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the data path has records on x86-64 only")
	}
	e := newStoreEnv(t)
	s := figure10()
	s.PDRs = append(s.PDRs, PDR{ID: 30, FARID: 200, OuterHeaderRemoval: ptr(RemoveGTPUUDPIPv4),
		PDI: PDI{SourceInterface: InterfaceCPFunction, TEID: 300}})
	check(t, e.store.Create(s))
	records := func(when string) {
		t.Helper()
		if recorded, unrecorded := e.dp.Records(), e.dp.UnrecordedKeys(); recorded != 2 || unrecorded != 1 {
			t.Errorf("%s: %d keys with a record and %d put without, want the uplink F-TEID's and the UE's, and the CP function's",
				when, recorded, unrecorded)
		}
	}
	records("created")
	e.store = e.restart(t)
	records("restarted")
	check(t, e.store.Delete(s.SEID))
	if recorded, unrecorded := e.dp.Records(), e.dp.UnrecordedKeys(); recorded != 0 || unrecorded != 0 {
		t.Errorf("deleted: %d keys with a record, %d put without", recorded, unrecorded)
	}
}

// QERs go into slots of their own (never slot 0, which means none), the
// PDRs point at them, and a downlink PDR marks its QERs' QFI and RQI.
func TestStoreQERs(t *testing.T) {
	e := newStoreEnv(t)
	sess := figure10()
	sess.QERs = []QER{{ID: 1, GateULClosed: true, MBRDL: 8_000_000, GBRDL: 1_000_000, QFI: 5, RQI: true}}
	for i := range sess.PDRs {
		sess.PDRs[i].QERIDs = []uint32{1}
	}
	bad := figure10()
	bad.PDRs[0].QERIDs = []uint32{9}
	var invalid *fielderr.Error
	if err := e.store.Create(bad); !errors.As(err, &invalid) || invalid.Field != "pdrs[0].qerIds" {
		t.Fatalf("a PDR naming a missing QER: %v", err)
	}
	check(t, e.store.Create(sess))
	ul, dl := e.uplinkPDR(t), e.downlinkPDR(t)
	if ul.Qer[0] == 0 || ul.Qer != dl.Qer || dl.Qfi != 5 || dl.Flags != upfxdp.MarkQFI|upfxdp.MarkRQI || ul.Flags&upfxdp.MarkRQI != 0 {
		t.Fatalf("uplink PDR %+v, downlink PDR %+v", ul, dl)
	}
	q, err := e.dp.QER(ul.Qer[0])
	check(t, err)
	const rate = 8_000_000 / 8
	if q.GateClosed != 1 || q.Bucket[1].Rate != rate || q.Bucket[1].Burst != rate*uint64(qerBurst) ||
		q.Bucket[1].Tokens != q.Bucket[1].Burst || q.Bucket[0].Rate != 0 {
		t.Fatalf("QER %+v", q)
	}
	restored := e.restart(t)
	if got, _ := restored.Get(1); !reflect.DeepEqual(got, sess) {
		t.Fatalf("restored %+v", got)
	}
	if moved := e.uplinkPDR(t); moved.Qer[0] == 0 || moved.Qer[0] == ul.Qer[0] {
		t.Fatalf("restored PDR %+v: the QER is not in a fresh slot", moved)
	}
}

func TestStoreRestore(t *testing.T) {
	e := newStoreEnv(t)
	check(t, e.store.Create(figure10()))
	check(t, e.dp.PutUplink(atN3(999), upfxdp.PDRSet{})) // a key no session owns

	restored := e.restart(t)
	if got := restored.List(); len(got) != 1 || !reflect.DeepEqual(got[0], figure10()) {
		t.Fatalf("restored %+v", got)
	}
	if _, err := e.dp.Uplink(atN3(100)); err != nil {
		t.Fatalf("the session's TEID is gone after restore: %v", err)
	}
	if _, err := e.dp.Uplink(atN3(999)); err == nil {
		t.Fatal("a stray key survived the restore")
	}
}

// A static neighbour has one MAC address: a session that lists it with
// another one while a second session still uses it is refused, and a
// refused install leaves the entry as it was.
func TestStaticNeighbourConflicts(t *testing.T) {
	e := newStoreEnv(t)
	gw := netip.MustParseAddr("10.1.3.99")
	macA, macB := net.HardwareAddr{2, 0, 0, 0, 0, 0xa}, net.HardwareAddr{2, 0, 0, 0, 0, 0xb}
	withNeighbour := func(seid uint64, teid uint32, ue string, mac net.HardwareAddr) Session {
		s := figure10()
		s.SEID = seid
		for i := range s.PDRs {
			s.PDRs[i].PDI.TEID = teid
			s.PDRs[i].PDI.UEAddress = netip.MustParsePrefix(ue + "/32")
		}
		s.Neighbours = []Neighbour{{IP: gw, MAC: mac}}
		return s
	}
	macOf := func() net.HardwareAddr { return e.store.staticMAC(gw) }
	var conflict *ConflictError

	check(t, e.store.Create(withNeighbour(1, 100, "10.1.3.27", macA)))
	if err := e.store.Create(withNeighbour(2, 101, "10.1.3.28", macB)); !errors.As(err, &conflict) {
		t.Fatalf("a second MAC for %s: %v", gw, err)
	}
	if got := macOf(); !bytes.Equal(got, macA) {
		t.Fatalf("after the refused create the neighbour has %s, want %s", got, macA)
	}
	check(t, e.store.Create(withNeighbour(2, 101, "10.1.3.28", macA)))
	if err := e.store.Replace(withNeighbour(1, 100, "10.1.3.27", macB)); !errors.As(err, &conflict) {
		t.Fatalf("changing the MAC of a shared neighbour: %v", err)
	}
	check(t, e.store.Delete(2))
	// Alone with it, a session may change the MAC.
	check(t, e.store.Replace(withNeighbour(1, 100, "10.1.3.27", macB)))
	if got := macOf(); !bytes.Equal(got, macB) {
		t.Fatalf("after the replace the neighbour has %s, want %s", got, macB)
	}
	check(t, e.store.Delete(1))
	if got := macOf(); got != nil {
		t.Fatalf("the neighbour outlived its sessions with %s", got)
	}
}

// rawURR is a slot of the urrs map (struct urr, bpf/upf/structs.h), read and written here
// the way the data path does.
type rawURR struct {
	Bytes, Packets, Threshold, Quota [3]uint64
	FirstPacket, LastPacket, Flags   uint64
}

func (e *storeEnv) urrMap(t *testing.T) *ebpf.Map {
	t.Helper()
	m, err := ebpf.LoadPinnedMap(filepath.Join(e.dp.PinPath(), "urrs"), nil)
	check(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

func (e *storeEnv) urr(t *testing.T, slot uint32) rawURR {
	t.Helper()
	var u rawURR
	check(t, e.urrMap(t).Lookup(slot, &u))
	return u
}

// uplinkPDR and downlinkPDR are the highest-precedence PDRs of figure10's
// uplink and downlink keys.
func (e *storeEnv) uplinkPDR(t *testing.T) upfxdp.PDR {
	t.Helper()
	set, err := e.dp.Uplink(atN3(100))
	check(t, err)
	return e.firstPDR(t, set)
}

func (e *storeEnv) downlinkPDR(t *testing.T) upfxdp.PDR {
	t.Helper()
	set, err := e.dp.Downlink(figure10Addr)
	check(t, err)
	return e.firstPDR(t, set)
}

func (e *storeEnv) firstPDR(t *testing.T, set upfxdp.PDRSet) upfxdp.PDR {
	t.Helper()
	p, err := e.dp.PDR(set.Pdr[0])
	check(t, err)
	return p
}

// withURRs is figure10 with URRs, the uplink PDR naming the given ones and
// the downlink PDR the first.
func withURRs(urrs []URR, uplink ...uint32) Session {
	s := figure10()
	s.URRs = urrs
	s.PDRs[0].URRIDs = []uint32{urrs[0].ID}
	s.PDRs[1].URRIDs = uplink
	return s
}

// A URR keeps its slot and counts across a Replace and a restart, and
// takes the new limits; new URRs start from zero in fresh slots, and
// dropped ones are given back.
func TestStoreURRs(t *testing.T) {
	e := newStoreEnv(t)
	quota := func(n uint64) upfxdp.URRLimits { return upfxdp.URRLimits{Quota: [3]uint64{n}} }
	sess := withURRs([]URR{{ID: 1, Limits: quota(1000)}, {ID: 2}}, 1, 2)
	check(t, e.store.Create(sess))
	ul := e.uplinkPDR(t)
	dl := e.downlinkPDR(t)
	kept, dropped := ul.Urr[0], ul.Urr[1]
	if kept == 0 || dropped == 0 || kept == dropped || dl.Urr != [upfxdp.URRsPerPDR]uint32{kept} {
		t.Fatalf("uplink PDR URRs %v, downlink %v", ul.Urr, dl.Urr)
	}
	for slot, id := range map[uint32]uint32{kept: 1, dropped: 2} {
		if seid, urrID, ok := e.store.URRBySlot(slot); !ok || seid != 1 || urrID != id {
			t.Fatalf("URRBySlot(%d): %d, %d, %v", slot, seid, urrID, ok)
		}
	}
	if u := e.urr(t, kept); u.Quota[0] != 1000 {
		t.Fatalf("URR 1 in the map: %+v", u)
	}
	counted := e.urr(t, kept) // as if the data path had counted
	counted.Bytes, counted.Packets = [3]uint64{12345, 12345}, [3]uint64{10, 10}
	check(t, e.urrMap(t).Put(kept, counted))

	next := withURRs([]URR{{ID: 1, Limits: quota(2000)}, {ID: 3, Limits: upfxdp.URRLimits{NotifyStart: true}, BeforeQoS: true}}, 1, 3)
	check(t, e.store.Replace(next))
	ul = e.uplinkPDR(t)
	fresh := ul.Urr[1]
	if ul.Urr[0] != kept || fresh == 0 || fresh == dropped {
		t.Fatalf("after Replace the uplink PDR has URRs %v; URR 1 was in %d, URR 2 in %d", ul.Urr, kept, dropped)
	}
	// URR 3, the PDR's second, measures before QoS enforcement; URR 1 not.
	if before := ul.Flags & (upfxdp.URRBeforeQoS | upfxdp.URRBeforeQoS<<1); before != upfxdp.URRBeforeQoS<<1 {
		t.Fatalf("uplink PDR flags %#x: URR 3 alone measures before QoS enforcement", ul.Flags)
	}
	if u := e.urr(t, kept); u.Bytes != counted.Bytes || u.Packets != counted.Packets || u.Quota[0] != 2000 {
		t.Fatalf("kept URR after Replace: %+v", u)
	}
	if u := e.urr(t, fresh); u.Bytes != [3]uint64{} || u.Flags != 1 {
		t.Fatalf("new URR after Replace: %+v", u)
	}
	if usage, err := e.store.URRUsage(1, 1); err != nil || usage.Bytes != counted.Bytes {
		t.Fatalf("URRUsage(1, 1): %+v, %v", usage, err)
	}
	if _, _, ok := e.store.URRBySlot(dropped); ok {
		t.Fatal("the dropped URR's slot is still named")
	}
	if _, err := e.store.URRUsage(1, 2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("usage of a dropped URR: %v", err)
	}

	// A failed Replace leaves the kept URR as it was and gives the new
	// URR's slot back.
	before, used := e.urr(t, kept), e.store.urrSlots.InUse()
	bad := withURRs([]URR{{ID: 1, Limits: quota(3000)}, {ID: 4}}, 1, 4)
	bad.FARs[0].OuterHeaderCreation.Peer = netip.MustParseAddr("224.0.0.1") // no next hop
	if err := e.store.Replace(bad); err == nil {
		t.Fatal("a replacement without a next hop was accepted")
	}
	if u := e.urr(t, kept); u != before || e.store.urrSlots.InUse() != used {
		t.Fatalf("after a failed Replace: URR %+v, was %+v; %d URR slots in use, was %d", u, before, e.store.urrSlots.InUse(), used)
	}
	if got, _ := e.store.Get(1); !reflect.DeepEqual(got, next) {
		t.Fatalf("after a failed Replace: %+v", got)
	}

	l := upfxdp.URRLimits{Threshold: [3]uint64{0, 777}}
	check(t, e.store.SetURRLimits(1, 1, l))
	if u := e.urr(t, kept); u.Bytes != counted.Bytes || u.Threshold != l.Threshold || u.Quota != [3]uint64{} {
		t.Fatalf("after SetURRLimits: %+v", u)
	}
	if got, _ := e.store.Get(1); got.URRs[0].Limits != l || next.URRs[0].Limits != quota(2000) {
		t.Fatalf("after SetURRLimits the session has %+v (the caller's copy %+v)", got.URRs, next.URRs)
	}
	for _, c := range []struct {
		seid uint64
		urr  uint32
	}{{seid: 1, urr: 9}, {seid: 2, urr: 1}} {
		if err := e.store.SetURRLimits(c.seid, c.urr, l); !errors.Is(err, ErrNotFound) {
			t.Errorf("SetURRLimits(%d, %d): %v", c.seid, c.urr, err)
		}
		if _, err := e.store.URRUsage(c.seid, c.urr); !errors.Is(err, ErrNotFound) {
			t.Errorf("URRUsage(%d, %d): %v", c.seid, c.urr, err)
		}
	}

	// A restarted daemon finds the URRs where they were.
	restored := e.restart(t)
	if ul := e.uplinkPDR(t); ul.Urr != [upfxdp.URRsPerPDR]uint32{kept, fresh} {
		t.Fatalf("restored uplink PDR URRs %v, want %d and %d", ul.Urr, kept, fresh)
	}
	if u := e.urr(t, kept); u.Bytes != counted.Bytes || u.Threshold != l.Threshold {
		t.Fatalf("restored URR: %+v", u)
	}
	if seid, id, ok := restored.URRBySlot(fresh); !ok || seid != 1 || id != 3 {
		t.Fatalf("restored URRBySlot(%d): %d, %d, %v", fresh, seid, id, ok)
	}
	if restored.urrSlots.InUse() != 2 {
		t.Fatalf("%d URR slots in use after restore, want 2", restored.urrSlots.InUse())
	}
	check(t, restored.Delete(1))
	if _, _, ok := restored.URRBySlot(kept); ok || restored.urrSlots.InUse() != 0 {
		t.Fatalf("after Delete: slot %d still named or %d slots in use", kept, restored.urrSlots.InUse())
	}
}

// pdrCounters writes what the data path counted in PDR slots, on the first
// CPU, as if packets had matched them.
func (e *storeEnv) pdrCounters(t *testing.T, c upfxdp.Counter, slots ...uint32) {
	t.Helper()
	m, err := ebpf.LoadPinnedMap(filepath.Join(e.dp.PinPath(), "pdr_counters"), nil)
	check(t, err)
	defer m.Close()
	for _, slot := range slots {
		check(t, m.Put(slot, c)) // the first row is the first CPU's
	}
}

// zeroCounters fails unless every PDR of a session counts nothing.
func (e *storeEnv) zeroCounters(t *testing.T, store *Store, seid uint64) {
	t.Helper()
	counters, err := store.PDRCounters(seid)
	check(t, err)
	for id, c := range counters {
		if c != (upfxdp.Counter{}) {
			t.Errorf("PDR %d of session %d starts with %+v", id, seid, c)
		}
	}
}

// A new session's PDR counters start at zero: in the slots of a deleted
// session, once the reuse delay has passed, and in slots that a previous
// run counted in before a restart.
func TestStorePDRCountersStartAtZero(t *testing.T) {
	e := newStoreEnv(t)
	now := time.Now()
	// Two PDR slots, figure10's two PDRs: the next session reuses them.
	const pdrSlots = 2
	e.store.pdrSlots = slotpool.New(slotpool.Config{Name: "PDR", Size: pdrSlots, Reset: e.dp.ZeroPDRCounters, Now: func() time.Time { return now }})
	check(t, e.store.Create(figure10()))
	old := e.store.sessions[1].PDRSlots
	e.pdrCounters(t, upfxdp.Counter{Packets: 3, Bytes: 300}, old.sorted()...)
	if counters, err := e.store.PDRCounters(1); err != nil || counters[10].Packets != 3 || counters[20].Packets != 3 {
		t.Fatalf("PDR counters %+v, %v", counters, err)
	}
	check(t, e.store.Delete(1))
	now = now.Add(slotpool.ReuseDelay)
	check(t, e.store.Create(figure10()))
	if reused := e.store.sessions[1].PDRSlots; !reflect.DeepEqual(reused.sorted(), old.sorted()) {
		t.Fatalf("the new session has PDR slots %v, not the deleted one's %v", reused, old)
	}
	e.zeroCounters(t, e.store, 1)

	// A restarted daemon's store takes fresh slots for the session it
	// restores, the lowest that the saved session does not hold, which the
	// previous run may have counted in.
	fresh := []uint32{pdrSlots, pdrSlots + 1}
	e.pdrCounters(t, upfxdp.Counter{Packets: 5, Bytes: 500}, fresh...)
	restored := e.restart(t)
	if moved := restored.sessions[1].PDRSlots; !reflect.DeepEqual(moved.sorted(), fresh) {
		t.Fatalf("the restored session has PDR slots %v, want %v", moved, fresh)
	}
	e.zeroCounters(t, restored, 1)
}

// sorted are the slots, lowest first.
func (r ruleSlots) sorted() []uint32 {
	var slots []uint32
	for _, e := range r {
		slots = append(slots, e.Slot)
	}
	slices.Sort(slots)
	return slots
}

// A tunnel to an IPv6 peer: its FAR says FARGTPUv6, and the slot of its
// next hop holds the endpoints, the peer and the first IPv6 N3 address; a
// restarted store that restores the session writes them again. A store
// without an IPv6 N3 address refuses it and changes nothing.
func TestStoreIPv6Tunnel(t *testing.T) {
	e := newStoreEnv(t)
	gnb6, n3v6 := netip.MustParseAddr("fd13::27"), netip.MustParseAddr("fd13::1")
	s := figure10()
	s.FARs[0].OuterHeaderCreation.Peer = gnb6
	before := e.snapshot(t)
	var fe *fielderr.Error
	if err := e.store.Create(s); !errors.As(err, &fe) || fe.Field != "fars[0].forwardingParameters.outerHeaderCreation" {
		t.Fatalf("without an IPv6 N3 address: %v", err)
	}
	if after := e.snapshot(t); after != before {
		t.Errorf("the refusal changed the data path: %s, was %s", after, before)
	}

	e = newStoreEnvWith(t, n3v6)
	check(t, e.store.Create(s))
	want := upfxdp.Tunnel6{Peer: gnb6.As16(), Local: n3v6.As16()}
	tunnelled := func(st *Store) {
		t.Helper()
		dl, err := e.dp.Downlink(figure10Addr)
		check(t, err)
		p, err := e.dp.PDR(dl.Pdr[0])
		check(t, err)
		if p.Far.Flags != upfxdp.FARGTPUv6 || p.Far.Peer != 0 || p.Far.Local != 0 {
			t.Fatalf("downlink FAR %+v", p.Far)
		}
		if got, err := e.dp.Tunnel6(p.Far.Nexthop); err != nil || got != want {
			t.Errorf("the endpoints at next hop %d: %+v, %v; want %+v", p.Far.Nexthop, got, err, want)
		}
	}
	tunnelled(e.store)
	saved, err := e.store.MarshalState()
	check(t, err)
	check(t, e.store.Delete(s.SEID))
	restored := e.newStore()
	if _, err := restored.Restore(saved, nil); err != nil {
		t.Fatal(err)
	}
	tunnelled(restored)
}

// A PDR written again in other slots, its session modified (a handover
// moving its downlink tunnel), counts on from what it counted: `xdp5g
// sessions get` never shows a PDR's counters going backwards, across a
// restart neither. A PDR the modification adds starts at zero.
func TestStorePDRCountersSurviveModification(t *testing.T) {
	e := newStoreEnv(t)
	check(t, e.store.Create(figure10()))
	before := e.store.sessions[1].PDRSlots
	counted := upfxdp.Counter{Packets: 3, Bytes: 300}
	e.pdrCounters(t, counted, before.sorted()...)

	moved := figure10()
	moved.FARs[0].OuterHeaderCreation.TEID = 101
	moved.PDRs = append(moved.PDRs, PDR{ID: 30, FARID: 100, OuterHeaderRemoval: ptr(RemoveGTPUUDPIPv4), Precedence: 1,
		PDI: PDI{SourceInterface: InterfaceAccess, TEID: 100, UEAddress: netip.MustParsePrefix("10.1.3.27/32")}})
	check(t, e.store.Replace(moved))
	if after := e.store.sessions[1].PDRSlots; slices.ContainsFunc(after, func(s RuleSlot) bool { return slices.Contains(before.sorted(), s.Slot) }) {
		t.Fatalf("the modified session kept PDR slots: %v, before %v", after, before)
	}
	want := map[uint16]upfxdp.Counter{10: counted, 20: counted, 30: {}}
	if got, err := e.store.PDRCounters(1); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("after the modification: PDR counters %+v, %v, want %+v", got, err, want)
	}
	if got, err := e.restart(t).PDRCounters(1); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("after a restart: PDR counters %+v, %v, want %+v", got, err, want)
	}
}

// A PDR or URR a modification creates anew under the ID of one the session
// had (removed and created again in one request) is another rule: it
// counts from zero, in a fresh slot for the URR, while the rules it only
// updated count on; across a restart too. A PDR created again in a later
// request starts at zero as well.
func TestStoreRulesCreatedAgainCountFromZero(t *testing.T) {
	e := newStoreEnv(t)
	sess := withURRs([]URR{{ID: 1}, {ID: 2}}, 1, 2)
	check(t, e.store.Create(sess))
	counted := upfxdp.Counter{Packets: 3, Bytes: 300}
	e.pdrCounters(t, counted, e.store.sessions[1].PDRSlots.sorted()...)
	oldURRs := e.uplinkPDR(t).Urr
	for _, slot := range oldURRs[:2] {
		u := e.urr(t, slot)
		u.Bytes, u.Packets = [3]uint64{300, 300}, [3]uint64{3, 3}
		check(t, e.urrMap(t).Put(slot, u))
	}

	check(t, e.store.Modify(withURRs([]URR{{ID: 1}, {ID: 2}}, 1, 2), Modification{CreatedPDRs: []uint16{20}, CreatedURRs: []uint32{2}}))
	want := map[uint16]upfxdp.Counter{10: counted, 20: {}}
	if got, err := e.store.PDRCounters(1); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("PDR 20 created again: PDR counters %+v, %v, want %+v", got, err, want)
	}
	e.store = e.restart(t)
	if got, err := e.store.PDRCounters(1); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("after a restart: PDR counters %+v, %v, want %+v", got, err, want)
	}
	urrs := e.uplinkPDR(t).Urr
	if urrs[0] != oldURRs[0] || urrs[1] == oldURRs[1] {
		t.Errorf("URR slots %v, were %v: URR 1 keeps its slot, URR 2 created again takes a fresh one", urrs, oldURRs)
	}
	for id, bytes := range map[uint32]uint64{1: 300, 2: 0} {
		if usage, err := e.store.URRUsage(1, id); err != nil || usage.Bytes[0] != bytes {
			t.Errorf("URR %d: usage %+v, %v, want %d bytes", id, usage, err, bytes)
		}
	}

	e.pdrCounters(t, counted, e.store.sessions[1].PDRSlots.sorted()...)
	without := withURRs([]URR{{ID: 1}, {ID: 2}}, 1, 2)
	without.PDRs = without.PDRs[1:] // PDR 10 alone
	check(t, e.store.Replace(without))
	check(t, e.store.Replace(withURRs([]URR{{ID: 1}, {ID: 2}}, 1, 2)))
	if got, err := e.store.PDRCounters(1); err != nil || got[20] != (upfxdp.Counter{}) {
		t.Errorf("PDR 20 created again in a later request: PDR counters %+v, %v", got, err)
	}
}

// shaped is figure10 as session seid with qers QERs and urrs URRs, which
// both its PDRs apply.
func shaped(seid uint64, qers, urrs int) Session {
	s := figure10()
	s.SEID = seid
	for i := range s.PDRs {
		s.PDRs[i].PDI.TEID = 100 + uint32(seid)
		s.PDRs[i].PDI.UEAddress = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 9, byte(seid >> 8), byte(seid)}), 32)
	}
	for id := range uint32(qers) {
		s.QERs = append(s.QERs, QER{ID: id + 1})
		for i := range s.PDRs {
			s.PDRs[i].QERIDs = append(s.PDRs[i].QERIDs, id+1)
		}
	}
	for id := range uint32(urrs) {
		s.URRs = append(s.URRs, URR{ID: id + 1})
		for i := range s.PDRs {
			s.PDRs[i].URRIDs = append(s.PDRs[i].URRIDs, id+1)
		}
	}
	return s
}

// A URR takes the slot of the first QER of a PDR that applies both, so that
// the data path finds both in one usage line, whatever the shapes of the
// sessions before it: one QER and URR, two QERs and a URR, a URR alone, a
// QER alone; at creation, when a modification adds the URR, and after one
// that changes a FAR, which leaves the QER in its slot as the URR. No slot
// goes to two sessions' URRs or QERs.
func TestStorePairsURRsWithQERs(t *testing.T) {
	e := newStoreEnv(t)
	shapes := [][2]int{{1, 1}, {2, 1}, {0, 1}, {1, 0}, {0, 2}, {1, 1}}
	var seids []uint64
	for seid := uint64(1); seid <= 60; seid++ {
		sh := shapes[seid%uint64(len(shapes))]
		check(t, e.store.Create(shaped(seid, sh[0], sh[1])))
		seids = append(seids, seid)
		if seid%10 == 0 { // gives its slots back, to the reuse delay
			check(t, e.store.Delete(seid-5))
			seids = slices.DeleteFunc(seids, func(s uint64) bool { return s == seid-5 })
		}
	}
	for _, seid := range seids {
		switch sh := shapes[seid%uint64(len(shapes))]; {
		case sh == [2]int{1, 0} && seid%4 == 0:
			check(t, e.store.Replace(shaped(seid, 1, 1)))
		case sh == [2]int{1, 1}:
			s := shaped(seid, 1, 1)
			s.FARs[0].OuterHeaderCreation.TEID++
			check(t, e.store.Replace(s))
		}
	}
	if pairs := e.checkPairs(t, seids); pairs < 40 {
		t.Fatalf("only %d PDRs with a QER and a URR", pairs)
	}
}

// In a data path whose tables outgrow the caches, a QER that an uplink
// PDR applies first takes the slot whose usage line the packets of its
// F-TEID read beside their record, and its URR the same; a QER no such
// PDR applies first, a slot out of their way. Sessions of two shapes come
// and go meanwhile.
func TestStoreGivesQERsTheSlotsTheirPacketsReadAhead(t *testing.T) {
	e := newStoreEnvSized(t, 70_000)
	var seids []uint64
	for seid := uint64(1); seid <= 600; seid++ {
		sess := shaped(seid, 1+int(seid%2), 1)
		if seid%5 == 0 { // the QER's only on the downlink PDR
			sess.PDRs[1].QERIDs = nil
		}
		check(t, e.store.Create(sess))
		seids = append(seids, seid)
		if seid%100 == 0 {
			for _, gone := range seids[len(seids)-50 : len(seids)-25] {
				check(t, e.store.Delete(gone))
			}
			seids = slices.Delete(seids, len(seids)-50, len(seids)-25)
			time.Sleep(slotpool.ReuseDelay)
		}
	}
	ahead, apart := 0, 0
	for _, seid := range seids {
		slots, _ := e.store.Slots(seid)
		read, ok := e.dp.UplinkUsageSlot(upfxdp.FTEID{Addr: n3, TEID: 100 + uint32(seid)})
		if !ok {
			t.Fatal("no slot read ahead in a data path of 70,000 sessions")
		}
		for _, q := range slots.QER {
			switch {
			case q.ID == 1 && seid%5 != 0:
				if q.Slot != read {
					t.Errorf("session %d: QER 1 in slot %d, not %d", seid, q.Slot, read)
				}
				ahead++
			case q.Slot == read:
				t.Errorf("session %d: QER %d, which no uplink PDR applies first, in slot %d", seid, q.ID, q.Slot)
			default:
				apart++
			}
		}
	}
	if ahead < 350 || apart < 300 {
		t.Fatalf("%d QERs in slots read ahead, %d apart", ahead, apart)
	}
	e.checkPairs(t, seids)
}

// checkPairs checks that every PDR of the sessions seids with a QER and a
// URR has them in one slot, and that no slot goes to two sessions' QERs
// or URRs; it says how many PDRs have both.
func (e *storeEnv) checkPairs(t *testing.T, seids []uint64) int {
	t.Helper()
	qers, urrs := map[uint32]uint64{}, map[uint32]uint64{}
	pairs := 0
	for _, seid := range seids {
		slots, ok := e.store.Slots(seid)
		if !ok {
			t.Fatalf("session %d missing", seid)
		}
		for kind, owners := range map[string]map[uint32]uint64{"QER": qers, "URR": urrs} {
			rules := slots.QER
			if kind == "URR" {
				rules = slots.URR
			}
			for _, r := range rules {
				if other, taken := owners[r.Slot]; taken {
					t.Fatalf("%s slot %d of sessions %d and %d", kind, r.Slot, other, seid)
				}
				owners[r.Slot] = seid
			}
		}
		for _, pdr := range slots.PDR {
			p, err := e.dp.PDR(pdr.Slot)
			check(t, err)
			if p.Qer[0] != 0 && p.Urr[0] != 0 {
				pairs++
				if p.Urr[0] != p.Qer[0] {
					t.Errorf("session %d: PDR %d's URR in slot %d, its QER in %d", seid, pdr.ID, p.Urr[0], p.Qer[0])
				}
			}
		}
	}
	return pairs
}

// A modification leaves a QER it does not change in its slot and moves one
// it changes to a fresh one; each slot is given back once.
func TestStoreKeepsUnchangedQERs(t *testing.T) {
	e := newStoreEnv(t)
	shaped := func(mbr uint64) Session { // new slices: the store keeps them
		sess := figure10()
		sess.QERs = []QER{{ID: 1, MBRDL: 8_000_000}, {ID: 2, MBRUL: mbr}}
		sess.URRs = []URR{{ID: 1}}
		for i := range sess.PDRs {
			sess.PDRs[i].QERIDs, sess.PDRs[i].URRIDs = []uint32{1, 2}, []uint32{1}
		}
		return sess
	}
	check(t, e.store.Create(shaped(0)))
	before, _ := e.store.Slots(1)
	sess := shaped(16_000_000)
	sess.FARs[0].OuterHeaderCreation.TEID++
	check(t, e.store.Replace(sess))
	after, _ := e.store.Slots(1)
	if after.QER[0] != before.QER[0] || after.URR[0] != before.URR[0] || after.QER[1] == before.QER[1] {
		t.Fatalf("QER slots %v, URR slots %v; before the modification %v, %v", after.QER, after.URR, before.QER, before.URR)
	}
	if q, err := e.dp.QER(after.QER[1].Slot); err != nil || q.Bucket[0].Rate != 16_000_000/8 {
		t.Fatalf("the changed QER: %+v, %v", q, err)
	}
	if n := e.store.qerSlots.InUse(); n != 2 {
		t.Fatalf("%d QER slots in use, want 2", n)
	}
	check(t, e.store.Delete(1))
	if n := e.store.qerSlots.InUse(); n != 0 {
		t.Fatalf("%d QER slots in use after the removal", n)
	}
}

// Pairs form again from slots given back: sessions of every shape come
// and go, and those created past the reuse delay pair their QERs and
// URRs in the slots the others left.
func TestStorePairsURRsWithQERsUnderChurn(t *testing.T) {
	e := newStoreEnv(t)
	shapes := [][2]int{{1, 1}, {2, 1}, {0, 1}, {1, 0}, {1, 1}, {0, 2}, {1, 1}}
	var seids []uint64
	seid := uint64(0)
	for round := range 4 {
		for range 50 {
			seid++
			sh := shapes[seid%uint64(len(shapes))]
			check(t, e.store.Create(shaped(seid, sh[0], sh[1])))
			seids = append(seids, seid)
		}
		for i := round; i < len(seids); i += 2 {
			check(t, e.store.Delete(seids[i]))
			seids[i] = 0
		}
		seids = slices.DeleteFunc(seids, func(s uint64) bool { return s == 0 })
		time.Sleep(slotpool.ReuseDelay)
	}
	e.checkPairs(t, seids)
}

// A QER a PDR names twice applies once: each packet takes its tokens once,
// not twice, which would halve its MBR.
func TestStoreAppliesAQERNamedTwiceOnce(t *testing.T) {
	e := newStoreEnv(t)
	sess := figure10()
	sess.QERs = []QER{{ID: 1, MBRUL: 8_000_000, MBRDL: 8_000_000}}
	for i := range sess.PDRs {
		sess.PDRs[i].QERIDs = []uint32{1, 1}
	}
	check(t, e.store.Create(sess))
	for name, p := range map[string]upfxdp.PDR{"uplink": e.uplinkPDR(t), "downlink": e.downlinkPDR(t)} {
		if p.Qer[0] == 0 || p.Qer[1] != 0 {
			t.Errorf("%s PDR's QER slots %v, want QER 1's once", name, p.Qer)
		}
	}
}

// An uplink PDR whose FAR drops, naming no destination, keeps its packets
// uplink for its QERs and URRs (a URR measuring before QoS enforcement
// counts them there): a FAR's destination is access when none is given,
// and only one that goes to access sends packets towards the UE.
func TestStoreDroppingFARLeavesUplinkUplink(t *testing.T) {
	e := newStoreEnv(t)
	sess := figure10()
	for i, f := range sess.FARs {
		if f.ID == 100 { // the uplink's
			sess.FARs[i] = FAR{ID: 100, Action: ActionDrop}
		}
	}
	check(t, e.store.Create(sess))
	if p := e.uplinkPDR(t); p.Flags&upfxdp.ToUE != 0 {
		t.Errorf("the uplink PDR of a dropping FAR goes towards the UE: flags %#x", p.Flags)
	}
}
