package upfxdp

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// forwardBothWays is a UPF on both roles that has forwarded a packet of
// the route's PDR (pdrRoute) uplink and one of pdrDownVLAN downlink.
func forwardBothWays(t *testing.T) *upf {
	t.Helper()
	u := newUPF(t, RoleAccess|RoleCore)
	up := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 20}
	down := ipPacket{src: dn4, dst: ue4b, ttl: 64, size: 20}
	u.expect(t, gtpFrame(t, fromGNB, n3Addr, gpdu(teidRoute), up.bytes(t)), xdplink.Redirect, "uplink_forward")
	u.expect(t, down.frame(t, fromDN), xdplink.Redirect, "downlink_forward")
	return u
}

// A PDR counts the packets its QERs let through and its FAR takes, with
// their inner IP packets' bytes, before the hop: also those whose TTL has
// run out (uplink dropped, downlink the kernel's to answer) and those the
// kernel routes.
func TestPDRCountsBeforeTheHop(t *testing.T) {
	u := newUPF(t, RoleAccess|RoleCore)
	up := ipPacket{src: ue4, dst: dn4, ttl: 1, size: 20}
	inner := uint64(len(up.bytes(t)))
	u.expect(t, gtpFrame(t, fromGNB, n3Addr, gpdu(teidRoute), up.bytes(t)), xdplink.Drop, "drop_ttl")
	up.ttl = 64
	u.expect(t, gtpFrame(t, fromGNB, n3Addr, gpdu(teidNoNexthop), up.bytes(t)), xdplink.Pass, "pass_no_route")
	u.expect(t, ipPacket{src: dn4, dst: ue4b, ttl: 1, size: 20}.frame(t, fromDN), xdplink.Pass, "pass_ttl")
	for _, slot := range []uint32{pdrRoute, pdrNoNexthop, pdrDownVLAN} {
		if c, err := u.d.PDRCounter(slot); err != nil || c != (Counter{Packets: 1, Bytes: inner}) {
			t.Errorf("PDR slot %d: %+v, %v; want 1 packet of %d bytes", slot, c, err, inner)
		}
	}
}

// ZeroPDRCounters zeroes what packets counted in the slots it names, and
// in no other slot.
func TestZeroPDRCounters(t *testing.T) {
	u := forwardBothWays(t)
	for _, slot := range []uint32{pdrRoute, pdrDownVLAN} {
		if c, err := u.d.PDRCounter(slot); err != nil || c.Packets != 1 {
			t.Fatalf("PDR slot %d before zeroing: %+v, %v", slot, c, err)
		}
	}
	check(t, u.d.ZeroPDRCounters([]uint32{pdrNoNexthop, pdrRoute}))
	if c, err := u.d.PDRCounter(pdrRoute); err != nil || c != (Counter{}) {
		t.Errorf("pdrRoute after zeroing: %+v, %v", c, err)
	}
	if c, err := u.d.PDRCounter(pdrDownVLAN); err != nil || c.Packets != 1 {
		t.Errorf("pdrDownVLAN, not zeroed: %+v, %v", c, err)
	}
}

// The PDR counters are a row of slots per possible CPU: PDRCounter sums a
// slot over the rows, ZeroPDRCounters zeroes it in every row and leaves the
// slots around it as they were.
func TestPDRCountersOnEveryCPU(t *testing.T) {
	d := openTest(t, Options{MaxSessions: 64})
	slots, cpus := d.maps.Pdrs.MaxEntries(), uint32(ebpf.MustPossibleCPU())
	if n := d.maps.PdrCounters.MaxEntries(); n != slots*cpus {
		t.Fatalf("%d PDR counters, want %d slots × %d CPUs", n, slots, cpus)
	}
	counted := func(cpu, slot uint32) Counter {
		return Counter{Packets: uint64(cpu) + 1, Bytes: 100*(uint64(cpu)+1) + uint64(slot)}
	}
	const last = 9
	for cpu := range cpus {
		for slot := uint32(0); slot <= last; slot++ {
			check(t, d.maps.PdrCounters.Put(cpu*slots+slot, counted(cpu, slot)))
		}
	}
	for slot := uint32(0); slot <= last; slot++ {
		var want Counter
		for cpu := range cpus {
			want.Packets += counted(cpu, slot).Packets
			want.Bytes += counted(cpu, slot).Bytes
		}
		if c, err := d.PDRCounter(slot); err != nil || c != want {
			t.Errorf("PDR slot %d: %+v, %v; want %+v", slot, c, err, want)
		}
	}
	if _, err := d.PDRCounter(slots); err == nil {
		t.Error("read a slot past the table's end")
	}
	if err := d.ZeroPDRCounters([]uint32{1, slots}); err == nil {
		t.Error("zeroed a slot past the table's end")
	}
	if c, err := d.PDRCounter(1); err != nil || c.Packets == 0 {
		t.Errorf("slot 1 after a refused zeroing: %+v, %v; want it untouched", c, err)
	}
	var middle []uint32
	for slot := uint32(1); slot < last; slot++ {
		middle = append(middle, slot)
	}
	check(t, d.ZeroPDRCounters(middle))
	for cpu := range cpus {
		for slot := uint32(0); slot <= last; slot++ {
			var c Counter
			check(t, d.maps.PdrCounters.Lookup(cpu*slots+slot, &c))
			kept := slot == 0 || slot == last
			if kept && c != counted(cpu, slot) || !kept && c != (Counter{}) {
				t.Errorf("slot %d on CPU %d: %+v (kept: %v)", slot, cpu, c, kept)
			}
		}
	}
}

// A data path whose PDR counters would not fit a map is refused, with the
// reason.
func TestTooManyCountersRefused(t *testing.T) {
	cpus := uint64(ebpf.MustPossibleCPU())
	if cpus == 1 {
		t.Skip("one CPU: the PDR table overflows before its counters do")
	}
	// Rule slots that fit a map alone (3/4 of its most, with the spare),
	// but not once per CPU; half of them do.
	sessions := uint32(math.MaxUint32 / (3 * cpus))
	if _, _, err := sizedSpec(sessions); err == nil || !strings.Contains(err.Error(), "configure fewer sessions") {
		t.Fatalf("%d sessions on %d CPUs: %v", sessions, cpus, err)
	}
	if _, _, err := sizedSpec(sessions / 2); err != nil {
		t.Fatalf("%d sessions on %d CPUs: %v", sessions/2, cpus, err)
	}
}

// Every reason the data path counts has its name, and no other.
func TestReasonNamesAreTheDataPaths(t *testing.T) {
	spec, err := loadUpf()
	if err != nil {
		t.Fatal(err)
	}
	testsupport.CheckEnumNames(t, spec, "reason", "REASON_", "REASON_COUNT", ReasonNames[:])
}

// The forwarded uplink packets, counted apart from the other reasons, are
// found again by a restarted data path that reattaches the interface, and
// start at zero for an interface that takes a freed slot.
func TestUplinkForwardAfterRestart(t *testing.T) {
	u := newUPF(t, RoleAccess)
	up := gtpFrame(t, fromGNB, n3Addr, gpdu(teidRoute), ipPacket{src: ue4, dst: dn4, ttl: 64, size: 20}.bytes(t))
	for range 2 {
		u.expect(t, up, xdplink.Redirect, "uplink_forward")
	}
	want := Counter{Packets: 2, Bytes: 2 * uint64(len(up))}
	d, err := Open(u.d.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	again := attachTest(t, d, fakeIfindex, "lo", RoleAccess)
	if c := again.counters(t)["uplink_forward"]; c != want {
		t.Errorf("uplink_forward after a restart: %+v, want %+v", c, want)
	}
	slot, err := d.claimSlot(fakeIfindex, "lo")
	if err != nil {
		t.Fatal(err)
	}
	check(t, d.releaseSlot(slot))
	other := attachTest(t, d, fakeIfindex+1, "other", RoleAccess)
	if c := other.counters(t)["uplink_forward"]; c != (Counter{}) {
		t.Errorf("uplink_forward of an interface in a freed slot: %+v, want none", c)
	}
}

func TestUpgradeRemovesRetiredPins(t *testing.T) {
	u := newUPF(t, RoleAccess)
	for _, name := range retiredMaps {
		m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
		if err != nil {
			t.Fatal(err)
		}
		check(t, m.Pin(filepath.Join(u.d.opts.PinPath, name)))
		check(t, m.Close())
	}
	d, err := Open(u.d.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, name := range retiredMaps {
		if _, err := os.Stat(filepath.Join(u.d.opts.PinPath, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the pin of the retired map %s is still there after a restart (%v)", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(u.d.opts.PinPath, "pdrs")); err != nil {
		t.Errorf("a map this version uses lost its pin: %v", err)
	}
}

// What a build that counted the forwarded uplink only beside its PDR
// copies left in iface_lines is still in uplink_forward, beside what the
// lines of this build count of each forwarding reason.
func TestForwardedCountsOfAnOlderBuild(t *testing.T) {
	u := forwardBothWays(t)
	before := u.counters(t)
	slot, _, err := u.d.slotOf("lo") // newUPF's
	check(t, err)
	old := make([]upfIfaceLine, ebpf.MustPossibleCPU())
	var want Counter
	for cpu := range old {
		old[cpu].UplinkForward = Counter{Packets: uint64(cpu) + 1, Bytes: 100 * (uint64(cpu) + 1)}
		want.Packets += old[cpu].UplinkForward.Packets
		want.Bytes += old[cpu].UplinkForward.Bytes
	}
	check(t, u.d.maps.IfaceLines.Put(slot, old))
	after := u.counters(t)
	for name, c := range after {
		added := Counter{Packets: c.Packets - before[name].Packets, Bytes: c.Bytes - before[name].Bytes}
		if name == "uplink_forward" && added != want {
			t.Errorf("uplink_forward gained %+v from the older lines, want %+v", added, want)
		} else if name != "uplink_forward" && added != (Counter{}) {
			t.Errorf("%s gained %+v from the older lines", name, added)
		}
	}
}
