package upfxdp

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// testBuffer is the buffer slot of the buffering FAR.
const testBuffer = 1

// bufferTest is the test rules with the FAR of pdrDownVLAN (UE ue4b)
// buffering into testBuffer, and the ring of buffered packets.
type bufferTest struct {
	*upf
	ring *BufferedReader
	far  FAR
}

func newBufferTest(t *testing.T) *bufferTest {
	t.Helper()
	u := newUPF(t, RoleAccess|RoleCore)
	ring, err := u.d.BufferedPackets()
	check(t, err)
	t.Cleanup(func() { ring.Close() })
	far := encap(dlTEID2, n3Addr2, gnb2, nhGNBVLAN)
	far.Action, far.Buffer = FARBuffer, testBuffer
	check(t, u.d.ResetBuffer(testBuffer))
	changePDR(t, u.d, pdrDownVLAN, func(p *PDR) { p.Far = far })
	return &bufferTest{upf: u, ring: ring, far: far}
}

// held returns the packets handed to the ring since the last call.
func (b *bufferTest) held(t *testing.T) []BufferedPacket {
	t.Helper()
	var got []BufferedPacket
	for {
		p, err := b.ring.Read(time.Now())
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return got
		}
		check(t, err)
		got = append(got, p)
	}
}

// A buffering FAR hands downlink frames, as they came, to the ring in
// order; released through the program, each leaves encapsulated like a
// forwarded one, and once the buffer is released (only when the control
// plane has every packet handed over), the FAR forwards.
func TestBufferHoldsAndReleasesInOrder(t *testing.T) {
	b := newBufferTest(t)
	var frames [][]byte
	for i, size := range []int{1, 200, 1400} {
		p := ipPacket{src: dn4, dst: ue4b, ttl: 64, size: size, id: uint16(i)}
		frames = append(frames, p.frame(t, fromDN))
		b.expect(t, frames[i], xdplink.Drop, "buffered")
	}
	held := b.held(t)
	if len(held) != len(frames) {
		t.Fatalf("%d packets held, want %d", len(held), len(frames))
	}
	// A packet counts in its PDR once, when it leaves the buffer.
	b.pdrCounted(t, Counter{})
	slot, _ := b.d.claimSlot(b.ifindex, "lo")
	for i, p := range held {
		if p.Buffer != testBuffer || p.Iface != slot || p.PDR != pdrDownVLAN+1 || p.QFI != 0 {
			t.Errorf("packet %d: buffer %d iface %d PDR %d QFI %d, want %d, %d, %d, 0", i, p.Buffer, p.Iface, p.PDR, p.QFI,
				testBuffer, slot, pdrDownVLAN+1)
		}
		testsupport.EqualFrames(t, p.Frame, frames[i])
	}

	before := b.counters(t)["downlink_forward"]
	p := ipPacket{src: dn4, dst: ue4b, ttl: 64, size: 200, id: 1}
	out, ifindex, err := b.d.Release(held[1].Iface, held[1].Frame)
	check(t, err)
	testsupport.EqualFrames(t, out, encapFrame(t, nhL2(nhGNBVLAN), n3Addr2, gnb2, dlTEID2, -1, p.hop().bytes(t)))
	if ifindex != 10+nhGNBVLAN {
		t.Errorf("released to ifindex %d, want %d", ifindex, 10+nhGNBVLAN)
	}
	if got := b.counters(t)["downlink_forward"].Packets - before.Packets; got != 1 {
		t.Errorf("downlink_forward counted %d released packets, want 1", got)
	}
	released := uint64(len(p.bytes(t))) // its inner IP packet
	b.pdrCounted(t, Counter{Packets: 1, Bytes: released})

	if ok, err := b.d.ReleaseBuffer(testBuffer, 2); err != nil || ok {
		t.Fatalf("released with 2 of 3 packets received: %v, %v", ok, err)
	}
	b.expect(t, frames[0], xdplink.Drop, "buffered")
	if ok, err := b.d.ReleaseBuffer(testBuffer, 4); err != nil || !ok {
		t.Fatalf("release with every packet received: %v, %v", ok, err)
	}
	out = b.expect(t, p.frame(t, fromDN), xdplink.Redirect, "downlink_forward")
	testsupport.EqualFrames(t, out, encapFrame(t, nhL2(nhGNBVLAN), n3Addr2, gnb2, dlTEID2, -1, p.hop().bytes(t)))
	if n := len(b.held(t)); n != 1 {
		t.Errorf("%d packets held after the release, want the 1 before it", n)
	}
	b.pdrCounted(t, Counter{Packets: 2, Bytes: 2 * released})
}

// pdrCounted fails unless the buffering FAR's PDR counted want.
func (b *bufferTest) pdrCounted(t *testing.T, want Counter) {
	t.Helper()
	if c, err := b.d.PDRCounter(pdrDownVLAN); err != nil || c != want {
		t.Errorf("the buffering PDR counted %+v, %v; want %+v", c, err, want)
	}
}

// What the ring cannot take is dropped and counted in the buffer; a
// buffering FAR drops uplink packets, and a frame not marked as released
// goes to the buffer however it came.
func TestBufferDropsAreCounted(t *testing.T) {
	b := newBufferTest(t)
	long := ipPacket{src: dn4, dst: ue4b, ttl: 64, size: 2100}.frame(t, fromDN)
	b.expect(t, long, xdplink.Drop, "drop_buffer_full")
	if got := b.d.BufferDropped(testBuffer); got != 1 {
		t.Errorf("buffer dropped %d packets, want 1", got)
	}
	if n := len(b.held(t)); n != 0 {
		t.Errorf("%d packets held, want none", n)
	}
	b.pdrCounted(t, Counter{})
	changePDR(t, b.d, pdrRoute, func(p *PDR) { p.Far = FAR{Action: FARBuffer, Buffer: testBuffer, Nexthop: NexthopRoute} })
	up := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 20}.bytes(t)
	b.expect(t, gtpFrame(t, fromGNB, n3Addr, gpdu(teidRoute), up), xdplink.Drop, "drop_far")
	if _, _, err := b.d.Release(0, []byte{1, 2, 3}); err == nil {
		t.Error("a 3-byte frame was released")
	}
}
