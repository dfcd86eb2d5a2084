package cuupxdp

import (
	"bytes"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/platform/afxdp"
	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// A CU-UP's namespace with its N3 and F1-U veths, the UPF and the DU at
// their other ends in a namespace of their own; one UMEM with a socket on
// each. The UPF and the DU send their tunnels' G-PDUs among other traffic:
// exactly the G-PDUs arrive, byte for byte, with their metadata, on the
// socket of their interface; the rest goes to the kernel.
func TestEndToEnd(t *testing.T) {
	for _, mode := range []xdplink.Mode{xdplink.ModeNative, xdplink.ModeGeneric} {
		t.Run(string(mode), func(t *testing.T) {
			cu, peers := newNetns(t), newNetns(t)
			for _, pair := range [][2]string{{"n3", "upf"}, {"f1", "du"}} {
				if err := namespace.Veth(cu, pair[0], peers, pair[1]); err != nil {
					t.Fatal(err)
				}
			}
			d := openTest(t, Config{Queues: 2})
			addTunnels(t, d)
			var u *afxdp.UMEM
			sockets := map[Role]*afxdp.Socket{}
			err := cu.Do(func() (err error) {
				for ifname, role := range map[string]Role{"n3": N3, "f1": F1U} {
					if _, err := d.Attach(ifname, role, mode); err != nil {
						return err
					}
				}
				if u, err = afxdp.NewUMEM(256, afxdp.UMEMOptions{}); err != nil {
					return err
				}
				for ifname, role := range map[string]Role{"n3": N3, "f1": F1U} {
					index, _, err := cu.Link(ifname)
					if err != nil {
						return err
					}
					s, err := afxdp.NewSocket(u, index, 0, afxdp.Options{FillRing: 64, RxRing: 64, TxRing: 64, CompletionRing: 64})
					if err != nil {
						return err
					}
					sockets[role] = s
					if err := d.RegisterSocket(role, 0, s); err != nil {
						return err
					}
				}
				return nil
			})
			if u != nil {
				defer u.Close()
			}
			if err != nil {
				t.Fatal(err)
			}

			psc := []layers.GTPExtensionHeader{pscDL(9, true, false)}
			ours := map[Role][]byte{
				N3:  frame{teid: teidN3, exts: psc, tpdu: userPacket(t, 500)}.bytes(t),
				F1U: frame{teid: teidF1U, exts: []layers.GTPExtensionHeader{ddds()}, tpdu: bytes.Repeat([]byte{0xa5}, 200)}.bytes(t),
			}
			others := map[Role][][]byte{
				N3:  {frame{teid: 0x999, exts: psc, tpdu: userPacket(t, 10)}.bytes(t), tcp(t)},
				F1U: {frame{teid: teidN3, tpdu: []byte{1, 2, 3}}.bytes(t)},
			}
			for role, peer := range map[Role]string{N3: "upf", F1U: "du"} {
				send := packetSender(t, peers, peer)
				for _, f := range others[role] {
					send(f)
				}
				send(ours[role])
			}

			bearers := map[Role]uint32{N3: bearerN3, F1U: bearerF1U}
			for role, s := range sockets {
				want := ours[role]
				got := receiveOne(t, u, s)
				if diff := testsupport.FrameDiff(u.Frame(got), want); diff != "" {
					t.Errorf("%v: received %s", role, diff)
				}
				m, err := ReadMeta(u, got)
				if err != nil {
					t.Fatalf("%v: %v", role, err)
				}
				if exp := expectedMeta(t, want, role, bearers[role]); m != exp {
					t.Errorf("%v: metadata\n got %+v\nwant %+v", role, m, exp)
				}
				if err := u.Free(got); err != nil {
					t.Fatal(err)
				}
				st, err := d.Stats(role)
				if err != nil {
					t.Fatal(err)
				}
				if st.Total[Redirect].Packets != 1 || st.Total[PassUnknownTEID].Packets+st.Total[PassNotGTPU].Packets != uint64(len(others[role])) {
					t.Errorf("%v counted %+v", role, st.Total)
				}
			}

			// Closed, a socket is out of its map: its queue's packets go to
			// the kernel.
			if err := sockets[N3].Close(); err != nil {
				t.Fatal(err)
			}
			packetSender(t, peers, "upf")(ours[N3])
			deadline := time.Now().Add(5 * time.Second)
			for {
				st, err := d.Stats(N3)
				if err != nil {
					t.Fatal(err)
				}
				if st.Total[PassNoSocket].Packets == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after the socket closed: %+v", st.Total)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

func newNetns(t *testing.T) *namespace.Netns {
	t.Helper()
	ns := testsupport.Netns(t, "cuupxdp")
	testsupport.NoIPv6(t, ns)
	return ns
}

// packetSender sends frames out of an interface of ns.
func packetSender(t *testing.T, ns *namespace.Netns, ifname string) func([]byte) {
	t.Helper()
	index, _, err := ns.Link(ifname)
	if err != nil {
		t.Fatal(err)
	}
	var fd int
	err = ns.Do(func() (err error) {
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return func(f []byte) {
		if err := unix.Sendto(fd, f, 0, &unix.SockaddrLinklayer{Ifindex: index}); err != nil {
			t.Fatal(err)
		}
	}
}

// receiveOne waits for one packet on s.
func receiveOne(t *testing.T, u *afxdp.UMEM, s *afxdp.Socket) afxdp.Desc {
	t.Helper()
	batch := make([]afxdp.Desc, 4)
	// Wait returns while the UMEM's other socket holds packets too.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if err := u.Wait(100 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		n, err := s.Receive(batch)
		if err != nil {
			t.Fatal(err)
		}
		if n > 1 {
			t.Fatalf("received %d packets, want 1", n)
		}
		if n == 1 {
			return batch[0]
		}
	}
	t.Fatal("nothing received")
	return afxdp.Desc{}
}
