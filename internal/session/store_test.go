package session

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"reflect"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/xdp5g/xdp5g/internal/datapath"
	"github.com/xdp5g/xdp5g/internal/nexthop"
	"github.com/xdp5g/xdp5g/internal/testbed"
)

type storeEnv struct {
	dp    *datapath.Datapath
	nh    *nexthop.Resolver
	store *Store
}

// newStoreEnv gives a store over a real data path and a real resolver in a
// throw-away namespace where the gNB 10.1.3.27 is reachable.
func newStoreEnv(t *testing.T) *storeEnv {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	a, err := testbed.New("sess")
	check(t, err)
	t.Cleanup(func() { a.Delete() })
	b, err := testbed.New("sess")
	check(t, err)
	t.Cleanup(func() { b.Delete() })
	check(t, testbed.Veth(a, "n3", b, "gnb"))
	check(t, a.AddAddr("n3", "10.1.3.1/24"))
	check(t, b.AddAddr("gnb", "10.1.3.27/24"))

	pin := fmt.Sprintf("/sys/fs/bpf/xdp5g-session-test-%d", os.Getpid())
	dp, err := datapath.Open(datapath.Options{PinPath: pin, MaxSessions: 1024})
	check(t, err)
	t.Cleanup(func() { dp.Close(); os.RemoveAll(pin) })
	ns, err := netns.GetFromName(a.Name)
	check(t, err)
	defer ns.Close()
	nh, err := nexthop.New(dp, ns, nil)
	check(t, err)
	t.Cleanup(func() { nh.Close() })
	return &storeEnv{dp: dp, nh: nh, store: NewStore(dp, nh, netip.MustParseAddr("10.1.3.1"), nil)}
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
	ul, ulErr := e.dp.Uplink(100)
	dl, dlErr := e.dp.Downlink(netip.MustParseAddr("10.1.3.27"))
	return fmt.Sprintf("%v %v %v %v %v", ul, ulErr, dl, dlErr, e.store.List())
}

func TestStoreLifecycle(t *testing.T) {
	e := newStoreEnv(t)
	check(t, e.store.Create(figure10()))
	ul, err := e.dp.Uplink(100)
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
	dl, err := e.dp.Downlink(netip.MustParseAddr("10.1.3.27"))
	check(t, err)
	if after := e.snapshot(t); after == before || dl.Count != 1 {
		t.Fatalf("replace changed nothing: %s", after)
	}
	got, _ := e.store.Get(1)
	if !reflect.DeepEqual(got, next) {
		t.Fatalf("Get after Replace: %+v", got)
	}

	check(t, e.store.Delete(1))
	if _, err := e.dp.Uplink(100); err == nil {
		t.Fatal("the TEID outlived its session")
	}
	if err := e.store.Delete(1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleting twice: %v", err)
	}
	// The freed keys can be taken by another session.
	check(t, e.store.Create(other))
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
	var invalid *ValidationError
	if err := e.store.Create(bad); !errors.As(err, &invalid) || invalid.Field != "pdrs[0].qerIds" {
		t.Fatalf("a PDR naming a missing QER: %v", err)
	}
	check(t, e.store.Create(sess))
	pdr := func(set datapath.PDRSet, err error) datapath.PDR {
		t.Helper()
		check(t, err)
		p, err := e.dp.PDR(set.Pdr[0])
		check(t, err)
		return p
	}
	ul := pdr(e.dp.Uplink(100))
	dl := pdr(e.dp.Downlink(netip.MustParseAddr("10.1.3.27")))
	if ul.Qer[0] == 0 || ul.Qer != dl.Qer || dl.Qfi != 5 || dl.Flags != datapath.MarkQFI|datapath.MarkRQI || ul.Flags&datapath.MarkRQI != 0 {
		t.Fatalf("uplink PDR %+v, downlink PDR %+v", ul, dl)
	}
	q, err := e.dp.QER(ul.Qer[0])
	check(t, err)
	const rate = 8_000_000 / 8
	if q.GateClosed != 1 || q.Bucket[1].Rate != rate || q.Bucket[1].Burst != rate*uint64(qerBurst) ||
		q.Bucket[1].Tokens != q.Bucket[1].Burst || q.Bucket[0].Rate != 0 {
		t.Fatalf("QER %+v", q)
	}
	saved, err := e.store.MarshalState()
	check(t, err)
	restored := NewStore(e.dp, e.nh, netip.MustParseAddr("10.1.3.1"), nil)
	check(t, restored.Restore(saved))
	if got, _ := restored.Get(1); !reflect.DeepEqual(got, sess) {
		t.Fatalf("restored %+v", got)
	}
	if moved := pdr(e.dp.Uplink(100)); moved.Qer[0] == 0 || moved.Qer[0] == ul.Qer[0] {
		t.Fatalf("restored PDR %+v: the QER is not in a fresh slot", moved)
	}
}

func TestStoreRestore(t *testing.T) {
	e := newStoreEnv(t)
	check(t, e.store.Create(figure10()))
	saved, err := e.store.MarshalState()
	check(t, err)
	check(t, e.dp.PutUplink(999, datapath.PDRSet{})) // a key no session owns

	restored := NewStore(e.dp, e.nh, netip.MustParseAddr("10.1.3.1"), nil)
	check(t, restored.Restore(saved))
	if got := restored.List(); len(got) != 1 || !reflect.DeepEqual(got[0], figure10()) {
		t.Fatalf("restored %+v", got)
	}
	if _, err := e.dp.Uplink(100); err != nil {
		t.Fatalf("the session's TEID is gone after restore: %v", err)
	}
	if _, err := e.dp.Uplink(999); err == nil {
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
