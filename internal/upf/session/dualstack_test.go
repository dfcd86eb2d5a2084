package session

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"testing"

	"github.com/cilium/ebpf"
)

// withIPv6Prefix is figure10 for a dual-stack UE: its PDRs have the IPv6
// prefix p beside the IPv4 address.
func withIPv6Prefix(p string) Session {
	s := figure10()
	for i := range s.PDRs {
		s.PDRs[i].PDI.UEIPv6Prefix = netip.MustParsePrefix(p)
	}
	return s
}

// A dual-stack UE's downlink PDR is found by both its addresses: both keys
// are installed, taken by no other session, kept by a restart, moved by a
// replacement that keeps the other one, and freed by the deletion.
func TestStoreDualStackUE(t *testing.T) {
	e := newStoreEnv(t)
	ue6, moved := netip.MustParseAddr("2001:db8:45:1::"), netip.MustParseAddr("2001:db8:45:2::")
	keys := func(store *Store) map[netip.Addr]string {
		t.Helper()
		out := map[netip.Addr]string{}
		for _, ue := range []netip.Addr{figure10Addr, ue6, moved} {
			set, err := store.dp.Downlink(ue)
			switch {
			case errors.Is(err, ebpf.ErrKeyNotExist):
				out[ue] = "absent"
			case err != nil:
				t.Fatal(err)
			default:
				out[ue] = fmt.Sprint(set.Pdr[:set.Count])
			}
		}
		return out
	}
	// both checks that the IPv4 address and the prefix p6 are keys to the
	// same set, the other prefix none.
	both := func(store *Store, p6, other netip.Addr, when string) map[netip.Addr]string {
		t.Helper()
		got := keys(store)
		if got[figure10Addr] == "absent" || got[p6] != got[figure10Addr] || got[other] != "absent" {
			t.Errorf("downlink keys %s: %v; want %v and %v to the downlink PDR", when, got, figure10Addr, p6)
		}
		return got
	}
	check(t, e.store.Create(withIPv6Prefix("2001:db8:45:1::/64")))
	installed := both(e.store, ue6, moved, "installed")

	other := withIPv6Prefix("2001:db8:45:1::/64")
	other.SEID = 2
	other.PDRs[0].PDI.UEAddress = netip.MustParsePrefix("10.1.3.28/32")
	other.PDRs[1].PDI.TEID, other.PDRs[0].PDI.TEID = 200, 200
	if err := e.store.Create(other); !errors.As(err, new(*ConflictError)) {
		t.Errorf("a session taking the IPv6 prefix: %v, want a conflict", err)
	}
	if got := keys(e.store); !reflect.DeepEqual(got, installed) || e.store.Len() != 1 {
		t.Errorf("the refused session changed the keys %v or the store", got)
	}

	restored := e.restart(t)
	if got := restored.List(); len(got) != 1 || !reflect.DeepEqual(got[0], withIPv6Prefix("2001:db8:45:1::/64")) {
		t.Fatalf("restored %+v", got)
	}
	both(restored, ue6, moved, "after the restart")
	check(t, restored.Replace(withIPv6Prefix("2001:db8:45:2::/64")))
	both(restored, moved, ue6, "after moving the prefix")
	check(t, restored.Delete(1))
	for ue, set := range keys(restored) {
		if set != "absent" {
			t.Errorf("%v still a key after the deletion: %s", ue, set)
		}
	}
}
