package afxdp_test

// The test network: the socket's namespace ("dut") with veths x0 and x1,
// their peers p0 and p1 in the peer's namespace, IPv6 off so that nothing
// but the tests' frames crosses them; an XDP program that redirects every
// frame into an XSKMAP; packet sockets on the peers.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/platform/afxdp"
	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

type network struct {
	dut, peer *namespace.Netns
	// Interfaces by name: x0, x1 in dut, p0, p1 in peer.
	index map[string]int
	mac   map[string]net.HardwareAddr
}

func newNetwork(t testing.TB) *network {
	t.Helper()
	testsupport.NeedRoot(t, "namespaces, XDP, AF_XDP")
	n := &network{dut: testsupport.Netns(t, "afxdp"), peer: testsupport.Netns(t, "afxdp"),
		index: map[string]int{}, mac: map[string]net.HardwareAddr{}}
	testsupport.NoIPv6(t, n.dut)
	testsupport.NoIPv6(t, n.peer)
	for _, pair := range [][2]string{{"x0", "p0"}, {"x1", "p1"}} {
		if err := namespace.Veth(n.dut, pair[0], n.peer, pair[1]); err != nil {
			t.Fatal(err)
		}
	}
	for name, ns := range map[string]*namespace.Netns{"x0": n.dut, "x1": n.dut, "p0": n.peer, "p1": n.peer} {
		index, mac, err := ns.Link(name)
		if err != nil {
			t.Fatal(err)
		}
		n.index[name], n.mac[name] = index, mac
	}
	return n
}

// redirector is an XDP program that sends every frame to the socket of its
// receive queue in xsks, and to the kernel where there is none.
type redirector struct {
	prog *ebpf.Program
	xsks *ebpf.Map
}

// newRedirected is a network whose x0 runs a redirector, in generic or
// native mode.
func newRedirected(t testing.TB, generic bool) (*network, *redirector) {
	t.Helper()
	n := newNetwork(t)
	r := newRedirector(t)
	l, err := n.dut.AttachXDP("x0", r.prog, generic)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return n, r
}

func newRedirector(t testing.TB) *redirector {
	t.Helper()
	xsks, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { xsks.Close() })
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:    ebpf.XDP,
		License: "GPL",
		Instructions: asm.Instructions{
			asm.LoadMem(asm.R2, asm.R1, int16(unsafe.Offsetof(xdplink.Context{}.RxQueueIndex)), asm.Word),
			asm.LoadMapPtr(asm.R1, xsks.FD()),
			asm.Mov.Imm(asm.R3, int32(xdplink.Pass)),
			asm.FnRedirectMap.Call(),
			asm.Return(),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Close() })
	return &redirector{prog: prog, xsks: xsks}
}

func (r *redirector) register(t testing.TB, queue int, s *afxdp.Socket) {
	t.Helper()
	if err := r.xsks.Update(uint32(queue), uint32(s.FD()), ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}
}

// newUMEM makes a UMEM in ns, where its first socket must bind.
func newUMEM(t testing.TB, ns *namespace.Netns, frames int, opts afxdp.UMEMOptions) *afxdp.UMEM {
	t.Helper()
	var u *afxdp.UMEM
	err := ns.Do(func() (err error) {
		u, err = afxdp.NewUMEM(frames, opts)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	return u
}

func newSocket(t testing.TB, ns *namespace.Netns, u *afxdp.UMEM, ifindex int, opts afxdp.Options) *afxdp.Socket {
	t.Helper()
	var s *afxdp.Socket
	err := ns.Do(func() (err error) {
		s, err = afxdp.NewSocket(u, ifindex, 0, opts)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// packetSocket is a raw AF_PACKET socket on one interface.
type packetSocket struct{ fd int }

func openPacketSocket(t *testing.T, ns *namespace.Netns, ifindex int) *packetSocket {
	t.Helper()
	all := int(htons(unix.ETH_P_ALL))
	var fd int
	err := ns.Do(func() (err error) {
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, all); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex})
	})
	if err == nil {
		tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
		err = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return &packetSocket{fd: fd}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (p *packetSocket) send(t *testing.T, frame []byte) {
	t.Helper()
	if _, err := unix.Write(p.fd, frame); err != nil {
		t.Fatal(err)
	}
}

// receive returns the frames that arrive until want have or a second
// passes without one.
func (p *packetSocket) receive(want int) [][]byte {
	var got [][]byte
	buf := make([]byte, 9000)
	for quiet := 0; len(got) < want && quiet < 10; {
		n, from, err := unix.Recvfrom(p.fd, buf, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			quiet++
			continue
		}
		if err != nil {
			break
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		quiet = 0
		got = append(got, bytes.Clone(buf[:n]))
	}
	return got
}

// testFrame is a UDP/IPv4 frame of about size bytes that carries its
// sequence number.
func testFrame(t testing.TB, src, dst net.HardwareAddr, seq, size int) []byte {
	t.Helper()
	payload := make([]byte, max(size-14-20-8, 8))
	binary.BigEndian.PutUint64(payload, uint64(seq))
	for i := 8; i < len(payload); i++ {
		payload[i] = byte(seq + i)
	}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP,
		SrcIP: net.IPv4(10, 0, 0, 1), DstIP: net.IPv4(10, 0, 0, 2)}
	udp := &layers.UDP{SrcPort: 40000, DstPort: 40001}
	udp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{SrcMAC: src, DstMAC: dst, EthernetType: layers.EthernetTypeIPv4}, ip, udp,
		gopacket.Payload(payload))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(buf.Bytes())
}

// receiveAll receives want packets on s, frees their frames and returns
// their bytes, or fails after a quiet spell.
func receiveAll(t *testing.T, u *afxdp.UMEM, s *afxdp.Socket, want int) [][]byte {
	t.Helper()
	var got [][]byte
	batch := make([]afxdp.Desc, 64)
	for quiet := 0; len(got) < want && quiet < 20; {
		if err := u.Wait(100 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		n, err := s.Receive(batch)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			quiet++
			continue
		}
		quiet = 0
		for _, d := range batch[:n] {
			if h := u.Headroom(d); h != u.RxOffset() {
				t.Errorf("packet at %d bytes into its frame, want %d", h, u.RxOffset())
			}
			got = append(got, bytes.Clone(u.Frame(d)))
		}
		if err := u.Free(batch[:n]...); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// sameFrames compares frames in order.
func sameFrames(got, want [][]byte) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d frames, want %d", len(got), len(want))
	}
	for i := range want {
		if diff := testsupport.FrameDiff(got[i], want[i]); diff != "" {
			return fmt.Errorf("frame %d: %s", i, diff)
		}
	}
	return nil
}
