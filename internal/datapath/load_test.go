package datapath

import (
	"fmt"
	"net/netip"
	"os"
	"testing"

	"github.com/xdp5g/xdp5g/internal/testbed"
)

// openTest opens a data path pinned in a directory of its own, removed with
// the test.
func openTest(t *testing.T, opts Options) *Datapath {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	opts.PinPath = fmt.Sprintf("/sys/fs/bpf/xdp5g-test-%d-%s", os.Getpid(), t.Name())
	if len(opts.N3Addresses) == 0 {
		opts.N3Addresses = []netip.Addr{netip.MustParseAddr("192.0.2.1")}
	}
	d, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Close()
		os.RemoveAll(opts.PinPath)
	})
	return d
}

func TestProgramPassesVerifier(t *testing.T) {
	d := openTest(t, Options{MaxSessions: 1024})
	for _, roles := range []Role{RoleAccess, RoleCore, RoleAccess | RoleCore} {
		t.Run(fmt.Sprintf("roles %d", roles), func(t *testing.T) {
			prog, err := d.loadProgram(0, roles)
			testbed.CheckLoad(t, err)
			prog.Close()
		})
	}
}

// A restarted daemon finds the maps the previous run pinned: a PDR slot
// keeps its PDR and its generation, which the next write goes past.
func TestPinnedMapsKept(t *testing.T) {
	d := openTest(t, Options{MaxSessions: 64})
	check(t, d.PutPDR(3, PDR{Id: 7}))
	check(t, d.PutPDR(3, PDR{Id: 7}))
	again, err := Open(d.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if p, err := again.PDR(3); err != nil || p.Id != 7 || p.Generation != 2 {
		t.Fatalf("PDR slot 3 read back as %+v, %v; want ID 7, generation 2", p, err)
	}
	check(t, again.PutPDR(3, PDR{Id: 8}))
	if p, err := again.PDR(3); err != nil || p.Generation != 3 {
		t.Fatalf("PDR slot 3 written again: %+v, %v; want generation 3", p, err)
	}
}
