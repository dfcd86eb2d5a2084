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
