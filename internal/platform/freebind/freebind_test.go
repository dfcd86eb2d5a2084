package freebind_test

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/xdp5g/xdp5g/internal/platform/freebind"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// A socket binds an address the host does not have, where a plain bind
// fails, and receives once the address is added.
func TestBindsBeforeTheAddressIsThere(t *testing.T) {
	for _, local := range []netip.AddrPort{netip.MustParseAddrPort("198.51.100.7:8805"), netip.MustParseAddrPort("[2001:db8:77::7]:8805")} {
		t.Run(local.Addr().String(), func(t *testing.T) {
			ns := testsupport.Netns(t, "freebind-")
			err := ns.Do(func() error {
				if plain, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(local)); err == nil {
					plain.Close()
					t.Fatalf("a plain bind of %v succeeded: the test's address is on the host", local)
				}
				conn, err := freebind.ListenUDP("udp", local.String())
				if err != nil {
					t.Fatalf("binding %v: %v", local, err)
				}
				defer conn.Close()
				if err := ns.AddAddr("lo", netip.PrefixFrom(local.Addr(), local.Addr().BitLen()).String()); err != nil {
					t.Fatal(err)
				}
				client, err := net.ListenUDP("udp", nil)
				if err != nil {
					t.Fatal(err)
				}
				defer client.Close()
				// An IPv6 address takes a moment to become the host's
				// after it is added: sent again until then.
				buf := make([]byte, 16)
				for deadline := time.Now().Add(5 * time.Second); ; {
					if _, err := client.WriteToUDPAddrPort([]byte("hello"), local); err != nil {
						t.Fatal(err)
					}
					conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
					n, _, err := conn.ReadFromUDPAddrPort(buf)
					if err == nil && string(buf[:n]) == "hello" {
						return nil
					}
					if time.Now().After(deadline) {
						t.Fatalf("received %q, %v", buf[:n], err)
					}
				}
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
