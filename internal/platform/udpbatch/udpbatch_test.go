package udpbatch

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"
)

// A batch written is read back whole, each datagram with its sender, over
// IPv4 and IPv6 loopback; Close ends a blocked read.
func TestBatches(t *testing.T) {
	for _, host := range []string{"127.0.0.1", "::1"} {
		a, err := Listen(netip.AddrPortFrom(netip.MustParseAddr(host), 0), 16)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Listen(netip.AddrPortFrom(netip.MustParseAddr(host), 0), 16)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]Message, 40) // more than a batch
		for i := range out {
			p := []byte(fmt.Sprintf("datagram %d", i))
			out[i] = Message{Buf: p, N: len(p), Addr: b.LocalAddr()}
		}
		if n, err := a.WriteBatch(out); n != len(out) || err != nil {
			t.Fatalf("%s: wrote %d of %d: %v", host, n, len(out), err)
		}
		in := make([]Message, 16)
		for i := range in {
			in[i].Buf = make([]byte, 2048)
		}
		var got int
		for got < len(out) {
			n, err := b.ReadBatch(in)
			if err != nil || n == 0 {
				t.Fatalf("%s: read %d: %v", host, n, err)
			}
			for _, m := range in[:n] {
				if !bytes.Equal(m.Buf[:m.N], out[got].Buf) || m.Addr != a.LocalAddr() {
					t.Fatalf("%s: read %q from %v, want %q from %v", host, m.Buf[:m.N], m.Addr, out[got].Buf, a.LocalAddr())
				}
				got++
			}
		}
		done := make(chan error)
		go func() {
			_, err := b.ReadBatch(in)
			done <- err
		}()
		time.Sleep(10 * time.Millisecond)
		b.Close()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s: a read on a closed socket succeeded", host)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: Close did not end a blocked read", host)
		}
		a.Close()
	}
}

// LocalAddr is the address the socket is bound to.
func (c *Conn) LocalAddr() netip.AddrPort { return c.conn.LocalAddr().(*net.UDPAddr).AddrPort() }
