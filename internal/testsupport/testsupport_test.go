package testsupport

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// FrameDiff is empty for the same bytes, and else names the first byte
// that differs and both lengths.
func TestFrameDiff(t *testing.T) {
	if d := FrameDiff([]byte{1, 2, 3}, []byte{1, 2, 3}); d != "" {
		t.Errorf("equal frames: %q", d)
	}
	for _, c := range []struct {
		name      string
		got, want []byte
		says      []string
	}{
		{name: "a byte differs", got: []byte{1, 2, 3}, want: []byte{1, 9, 3}, says: []string{"from byte 1", "got 3 bytes", "want 3 bytes"}},
		{name: "got is shorter", got: []byte{1, 2}, want: []byte{1, 2, 3}, says: []string{"from byte 2", "got 2 bytes", "want 3 bytes"}},
	} {
		d := FrameDiff(c.got, c.want)
		for _, s := range c.says {
			if !strings.Contains(d, s) {
				t.Errorf("%s: %q does not say %q", c.name, d, s)
			}
		}
	}
}

// Each test gets a pin directory of its own below the bpffs root.
func TestPinDir(t *testing.T) {
	a, b := PinDir(t), PinDir(t)
	if a == b || !strings.HasPrefix(a, "/sys/fs/bpf/xdp5g-test-") {
		t.Errorf("pin directories %q and %q", a, b)
	}
}

// A free address is on loopback, with a port a server can take.
func TestFreeAddr(t *testing.T) {
	for _, network := range []string{"tcp", "udp"} {
		addr := FreeAddr(t, network)
		if ap, err := netip.ParseAddrPort(addr); err != nil || !ap.Addr().IsLoopback() || ap.Port() == 0 {
			t.Errorf("%s: %q (%v)", network, addr, err)
		}
	}
	l, err := net.Listen("tcp", FreeAddr(t, "tcp"))
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
}

// What Go runs has its context cancelled and has returned by the time the
// test ends.
func TestGo(t *testing.T) {
	var returned error
	t.Run("running", func(t *testing.T) {
		Go(t, func(ctx context.Context) error {
			<-ctx.Done()
			returned = ctx.Err()
			return nil
		})
	})
	if !errors.Is(returned, context.Canceled) {
		t.Errorf("Go's function returned after %v, want its context cancelled", returned)
	}
}
