package testsupport

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
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

// UDP6Checksum takes the checksum gopacket computes, and refuses one off
// by a bit, 0, and a frame too short for the headers.
func TestUDP6Checksum(t *testing.T) {
	ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP,
		SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("2001:db8::2")}
	udp := &layers.UDP{SrcPort: 2152, DstPort: 2152}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv6}, ip, udp, gopacket.Payload("payload")); err != nil {
		t.Fatal(err)
	}
	frame := buf.Bytes()
	if err := UDP6Checksum(frame); err != nil {
		t.Errorf("gopacket's checksum: %v", err)
	}
	const at = 14 + 40 + 6 // the checksum's offset
	for name, edit := range map[string]func(f []byte){
		"off by a bit": func(f []byte) { f[at+1] ^= 1 },
		"0":            func(f []byte) { f[at], f[at+1] = 0, 0 },
	} {
		f := slices.Clone(frame)
		edit(f)
		if err := UDP6Checksum(f); err == nil {
			t.Errorf("a checksum %s verifies", name)
		}
	}
	if err := UDP6Checksum(frame[:at]); err == nil {
		t.Error("a frame short of a UDP header verifies")
	}
}
