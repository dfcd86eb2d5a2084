package upfxdp

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// openTest opens a data path pinned in a directory of its own, removed with
// the test.
func openTest(t *testing.T, opts Options) *Datapath {
	t.Helper()
	testsupport.NeedRoot(t, "BPF")
	opts.PinPath = testsupport.PinDir(t)
	if len(opts.N3Addresses) == 0 {
		opts.N3Addresses = []netip.Addr{netip.MustParseAddr("192.0.2.1")}
	}
	d, err := Open(opts)
	testsupport.CheckLoad(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

func TestProgramPassesVerifier(t *testing.T) {
	d := openTest(t, Options{MaxSessions: 1024})
	// The copy program, one for every interface.
	_, err := d.copyProgram()
	testsupport.CheckLoad(t, err)
	for _, roles := range []Role{RoleAccess, RoleCore, RoleAccess | RoleCore} {
		t.Run(fmt.Sprintf("roles %d", roles), func(t *testing.T) {
			var progs ifacePrograms
			testsupport.CheckLoad(t, d.loadPrograms(0, roles, &progs))
			progs.UPF.Close()
			// The stage of a chain, and its CPU-map variant, which a
			// chain that steers runs.
			var stage chainPrograms
			testsupport.CheckLoad(t, d.loadPrograms(0, roles, &stage))
			stage.close()
		})
	}
}

// The maps are unused until the first PDR, and only when Open created them:
// a restarted daemon finds what the previous run counted.
func TestUnused(t *testing.T) {
	d := openTest(t, Options{MaxSessions: 64})
	if !d.Unused() {
		t.Fatal("new maps are not unused")
	}
	const slot, id = 3, 7 // any PDR
	if err := d.PutPDR(slot, PDR{Id: id}); err != nil {
		t.Fatal(err)
	}
	if d.Unused() {
		t.Fatal("unused after a PDR")
	}
	again, err := Open(d.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.Unused() {
		t.Fatal("pinned maps opened again are unused")
	}
	if p, err := again.PDR(slot); err != nil || p.Id != id {
		t.Fatalf("PDR slot %d read back as %+v, %v; want ID %d", slot, p, err, id)
	}
}

// Maps pinned for another max_sessions are refused with a message that
// names the command that starts afresh.
func TestPinnedForAnotherSize(t *testing.T) {
	d := openTest(t, Options{MaxSessions: 1024})
	_, err := Open(Options{PinPath: d.opts.PinPath, MaxSessions: 2048, N3Addresses: d.opts.N3Addresses})
	if err == nil || !strings.Contains(err.Error(), "another size or version") || !strings.Contains(err.Error(), "xdp5g detach --config FILE") {
		t.Fatalf("maps pinned for 1024 sessions opened for 2048: %v; want a refusal that names xdp5g detach", err)
	}
}
