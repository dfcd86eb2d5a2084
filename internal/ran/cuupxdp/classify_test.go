package cuupxdp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

const (
	teidN3              = 0x10000001
	teidF1U             = 0x20000002
	bearerN3, bearerF1U = 7, 9
)

func newClassifier(t *testing.T) *Datapath {
	t.Helper()
	d := openTest(t, Config{MaxTunnels: 16, Queues: 4})
	withSockets(t, d)
	addTunnels(t, d)
	return d
}

// addTunnels adds an N3 and an F1-U tunnel.
func addTunnels(t *testing.T, d *Datapath) {
	t.Helper()
	for _, tun := range []struct {
		teid   uint32
		role   Role
		bearer uint32
	}{{teid: teidN3, role: N3, bearer: bearerN3}, {teid: teidF1U, role: F1U, bearer: bearerF1U}} {
		if err := d.AddTunnel(tun.teid, tun.role, tun.bearer); err != nil {
			t.Fatal(err)
		}
	}
}

// counter checks that each packet is counted once, for its role and
// reason.
type counter struct {
	d      *Datapath
	before [roles]Counts
}

func (c *counter) snapshot(t *testing.T) {
	for _, role := range []Role{N3, F1U} {
		st, err := c.d.Stats(role)
		if err != nil {
			t.Fatal(err)
		}
		c.before[role-1] = st.Total
	}
}

// check checks that the last packet, of n bytes, was counted for role
// under reason and nowhere else.
func (c *counter) check(t *testing.T, role Role, reason Reason, n int) {
	t.Helper()
	before := c.before
	c.snapshot(t)
	for _, r := range []Role{N3, F1U} {
		for i := range NumReasons {
			want := Counter{}
			if r == role && Reason(i) == reason {
				want = Counter{Packets: 1, Bytes: uint64(n)}
			}
			got := c.before[r-1][i]
			got.Packets -= before[r-1][i].Packets
			got.Bytes -= before[r-1][i].Bytes
			if got != want {
				t.Errorf("%v %v: counted %+v, want %+v", r, Reason(i), got, want)
			}
		}
	}
}

// The tunnels' G-PDUs go to the socket with their metadata, field for
// field what gopacket finds in them; the frame itself is untouched.
func TestRedirectsWithMetadata(t *testing.T) {
	d := newClassifier(t)
	c := &counter{d: d}
	c.snapshot(t)
	for _, tc := range []struct {
		name   string
		role   Role
		bearer uint32
		frame  frame
	}{
		{name: "N3 DL QFI 9", role: N3, bearer: bearerN3, frame: frame{teid: teidN3, exts: []layers.GTPExtensionHeader{pscDL(9, false, false)}, tpdu: userPacket(t, 100)}},
		{name: "N3 DL RQI PPP", role: N3, bearer: bearerN3, frame: frame{teid: teidN3, exts: []layers.GTPExtensionHeader{pscDL(63, true, true)}, tpdu: userPacket(t, 1400)}},
		{name: "N3 IPv6 QinQ, another extension first", role: N3, bearer: bearerN3, frame: frame{vlans: 2, ipv6: true, teid: teidN3,
			exts: []layers.GTPExtensionHeader{{Type: extPort, Content: []byte{0x08, 0x68}}, pscDL(5, true, false)}, tpdu: userPacket(t, 40)}},
		{name: "N3 one VLAN tag", role: N3, bearer: bearerN3, frame: frame{vlans: 1, teid: teidN3, exts: []layers.GTPExtensionHeader{pscDL(1, false, false)}, tpdu: userPacket(t, 0)}},
		{name: "F1-U data", role: F1U, bearer: bearerF1U, frame: frame{teid: teidF1U, tpdu: []byte{0x80, 0x01, 0x02, 0xaa, 0xbb, 0xcc, 0xdd}}},
		{name: "F1-U data and DDDS", role: F1U, bearer: bearerF1U, frame: frame{teid: teidF1U, exts: []layers.GTPExtensionHeader{ddds()}, tpdu: bytes.Repeat([]byte{0x5a}, 300)}},
		{name: "F1-U DDDS alone", role: F1U, bearer: bearerF1U, frame: frame{teid: teidF1U, exts: []layers.GTPExtensionHeader{ddds()}}},
		{name: "F1-U IPv6", role: F1U, bearer: bearerF1U, frame: frame{ipv6: true, teid: teidF1U, tpdu: []byte{1, 2, 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.frame.bytes(t)
			action, meta, out := run(t, d, tc.role, b)
			if action != xdplink.Redirect {
				t.Fatalf("action %d, want XDP_REDIRECT", action)
			}
			c.check(t, tc.role, Redirect, len(b))
			if diff := testsupport.FrameDiff(out, b); diff != "" {
				t.Errorf("frame changed: %s", diff)
			}
			if len(meta) != MetaLen {
				t.Fatalf("%d bytes of metadata, want %d", len(meta), MetaLen)
			}
			got, err := ParseMeta(meta, len(out))
			if err != nil {
				t.Fatal(err)
			}
			if want := expectedMeta(t, b, tc.role, tc.bearer); got != want {
				t.Errorf("metadata\n got %+v\nwant %+v", got, want)
			}
			if !bytes.Equal(got.TPDU(out), tc.frame.tpdu) {
				t.Errorf("T-PDU % x, want % x", got.TPDU(out), tc.frame.tpdu)
			}
			if ran := got.RANContainer(out); len(tc.frame.exts) > 0 && tc.frame.exts[0].Type == extNRRAN &&
				!bytes.Equal(ran, tc.frame.exts[0].Content) {
				t.Errorf("NR RAN Container % x, want % x", ran, tc.frame.exts[0].Content)
			}
		})
	}
}

// Everything but the tunnels' well-formed G-PDUs goes to the kernel or, if
// malformed in one of the tunnels or without a valid Ethernet header, is
// dropped; each counted by its reason.
func TestVerdicts(t *testing.T) {
	d := newClassifier(t)
	c := &counter{d: d}
	c.snapshot(t)
	psc := []layers.GTPExtensionHeader{pscDL(9, false, false)}
	inner := userPacket(t, 64)
	n3 := frame{teid: teidN3, exts: psc, tpdu: inner}.bytes(t)
	for _, tc := range []struct {
		name   string
		role   Role
		b      []byte
		action xdplink.Action
		reason Reason
	}{
		{name: "unknown TEID", role: N3, b: frame{teid: 0x1234, exts: psc, tpdu: inner}.bytes(t), action: xdplink.Pass, reason: PassUnknownTEID},
		{name: "N3 TEID on F1-U", role: F1U, b: frame{teid: teidN3, tpdu: inner}.bytes(t), action: xdplink.Pass, reason: PassUnknownTEID},
		{name: "echo request", role: N3, b: frame{teid: 0, msgType: 1}.bytes(t), action: xdplink.Pass, reason: PassSignalling},
		{name: "end marker", role: N3, b: frame{teid: teidN3, msgType: 254}.bytes(t), action: xdplink.Pass, reason: PassSignalling},
		{name: "ARP", role: N3, b: arp(t), action: xdplink.Pass, reason: PassNotIP},
		{name: "TCP", role: N3, b: tcp(t), action: xdplink.Pass, reason: PassNotGTPU},
		{name: "fragment", role: N3, b: fragment(t, n3), action: xdplink.Pass, reason: PassFragment},
		{name: "GTPv2 on 2152", role: N3, b: with(n3, 42, 0x48), action: xdplink.Pass, reason: PassNotGTPU},
		{name: "UDP length short of the IP payload", role: N3, b: with(n3, 39, n3[39]-1), action: xdplink.Pass, reason: PassNotGTPU},
		{name: "N3 uplink PDU type", role: N3, b: frame{teid: teidN3, exts: []layers.GTPExtensionHeader{pscUL(9)}, tpdu: inner}.bytes(t), action: xdplink.Drop, reason: DropPDUType},
		{name: "N3 without container", role: N3, b: frame{teid: teidN3, tpdu: inner}.bytes(t), action: xdplink.Drop, reason: DropNoPSC},
		{name: "N3 without T-PDU", role: N3, b: frame{teid: teidN3, exts: psc}.bytes(t), action: xdplink.Drop, reason: DropEmpty},
		{name: "F1-U with a PDU Session Container", role: F1U, b: frame{teid: teidF1U, exts: psc, tpdu: inner}.bytes(t), action: xdplink.Drop, reason: DropUnexpectedPSC},
		{name: "F1-U empty", role: F1U, b: frame{teid: teidF1U}.bytes(t), action: xdplink.Drop, reason: DropEmpty},
		{name: "extension of length 0", role: N3, b: with(n3, 54, 0), action: xdplink.Drop, reason: DropMalformed},
		{name: "chain running past the message", role: N3, b: with(n3, 54, 200), action: xdplink.Drop, reason: DropMalformed},
		{name: "GTP-U length past the datagram", role: N3, b: with(n3, 45, n3[45]+4), action: xdplink.Drop, reason: DropMalformed},
		{name: "GTP-U length short of the datagram", role: N3, b: with(n3, 45, n3[45]-4), action: xdplink.Drop, reason: DropMalformed},
		{name: "multicast source", role: N3, b: with(n3, 6, 0x01), action: xdplink.Drop, reason: DropBadEthernet},
		{name: "zero source", role: N3, b: frame{src: make(net.HardwareAddr, 6), teid: teidN3, exts: psc, tpdu: inner}.bytes(t), action: xdplink.Drop, reason: DropBadEthernet},
		{name: "VLAN tag cut", role: N3, b: append(bytes.Clone(n3[:12]), 0x81, 0x00, 0x00), action: xdplink.Drop, reason: DropBadEthernet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			action, meta, _ := run(t, d, tc.role, tc.b)
			if action != tc.action {
				t.Errorf("action %d, want %d", action, tc.action)
			}
			if len(meta) != 0 {
				t.Errorf("left %d bytes of metadata", len(meta))
			}
			c.check(t, tc.role, tc.reason, len(tc.b))
		})
	}
}

// with is b with byte i set to v.
func with(b []byte, i int, v byte) []byte {
	b = bytes.Clone(b)
	b[i] = v
	return b
}

func arp(t *testing.T) []byte {
	return serialize(t, &layers.Ethernet{DstMAC: layers.EthernetBroadcast, SrcMAC: upfMAC, EthernetType: layers.EthernetTypeARP},
		&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: layers.ARPRequest, SourceHwAddress: upfMAC, SourceProtAddress: []byte{192, 0, 2, 1},
			DstHwAddress: make([]byte, 6), DstProtAddress: []byte{192, 0, 2, 2}})
}

func tcp(t *testing.T) []byte {
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: net.IPv4(192, 0, 2, 1), DstIP: net.IPv4(192, 0, 2, 2)}
	tcp := &layers.TCP{SrcPort: 2152, DstPort: 2152, SYN: true, Window: 1000}
	tcp.SetNetworkLayerForChecksum(ip)
	return serialize(t, &layers.Ethernet{DstMAC: cuupMAC, SrcMAC: upfMAC, EthernetType: layers.EthernetTypeIPv4}, ip, tcp)
}

// fragment is the first fragment of an IPv4 G-PDU frame: more fragments.
func fragment(t *testing.T, b []byte) []byte {
	p := gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.Default)
	ip := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	ip.Flags = layers.IPv4MoreFragments
	return serialize(t, p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet), ip, gopacket.Payload(ip.Payload))
}

// No prefix of a tunnel's frames is redirected, or crashes anything.
func TestTruncatedFramesNeverRedirect(t *testing.T) {
	d := newClassifier(t)
	for _, tc := range []struct {
		role Role
		f    frame
	}{
		{role: N3, f: frame{vlans: 2, teid: teidN3, exts: []layers.GTPExtensionHeader{{Type: extPort, Content: []byte{8, 0x68}}, pscDL(9, true, false)}, tpdu: userPacket(t, 20)}},
		{role: N3, f: frame{ipv6: true, teid: teidN3, exts: []layers.GTPExtensionHeader{pscDL(9, false, false)}, tpdu: userPacket(t, 20)}},
		{role: F1U, f: frame{teid: teidF1U, exts: []layers.GTPExtensionHeader{ddds()}}},
		{role: F1U, f: frame{teid: teidF1U, exts: []layers.GTPExtensionHeader{ddds()}, tpdu: []byte{1, 2, 3, 4}}},
	} {
		b := tc.f.bytes(t)
		if action, _, _ := run(t, d, tc.role, b); action != xdplink.Redirect {
			t.Fatalf("whole frame: action %d, want XDP_REDIRECT", action)
		}
		for n := 14; n < len(b); n++ { // the kernel runs nothing shorter
			if action, meta, _ := run(t, d, tc.role, b[:n]); action == xdplink.Redirect || len(meta) != 0 {
				t.Errorf("%v frame cut to %d of %d bytes: action %d, %d bytes of metadata", tc.role, n, len(b), action, len(meta))
			}
		}
	}
}

// Tunnels are checked on the way in, kept apart by role, and go away.
func TestTunnels(t *testing.T) {
	d := openTest(t, Config{MaxTunnels: 2, Queues: 1})
	if err := d.AddTunnel(0, N3, 1); err == nil {
		t.Error("added TEID 0")
	}
	if err := d.AddTunnel(1, 3, 1); err == nil {
		t.Error("added a tunnel of role 3")
	}
	if err := d.AddTunnel(5, N3, 1); err != nil {
		t.Fatal(err)
	}
	if err := d.AddTunnel(5, F1U, 2); err != nil {
		t.Fatalf("the same TEID on the other role: %v", err)
	}
	if err := d.AddTunnel(5, N3, 3); err == nil {
		t.Error("added a tunnel twice")
	}
	if err := d.AddTunnel(6, N3, 3); err == nil {
		t.Error("added a tunnel to a full table")
	}
	if b, err := d.Tunnel(5, F1U); b != 2 || err != nil {
		t.Errorf("F1-U tunnel 5: bearer %d, %v; want 2", b, err)
	}
	if err := d.DeleteTunnel(5, N3); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteTunnel(5, N3); !errors.Is(err, ErrNoTunnel) {
		t.Errorf("deleting a deleted tunnel: %v", err)
	}
	if _, err := d.Tunnel(5, N3); !errors.Is(err, ErrNoTunnel) {
		t.Errorf("looking a deleted tunnel up: %v", err)
	}
	if err := d.RegisterSocket(N3, 1, nil); err == nil {
		t.Error("registered a socket for queue 1 of a map of 1")
	}
}

// Metadata that is not the classifier's, or points outside the packet,
// is refused.
func TestParseMetaRefuses(t *testing.T) {
	valid := Meta{Magic: uint32(cuupCuupMetaMagicCUUP_META_MAGIC), TpduOff: 50, TpduLen: 10, RanOff: 40, RanLen: 8, Flags: MetaNRRAN}
	b := metaBytes(valid)
	if _, err := ParseMeta(b, 60); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		b      []byte
		pktLen int
		want   error
	}{
		{b: b[1:], pktLen: 60, want: ErrNoMeta},
		{b: with(b, 0, 0), pktLen: 60, want: ErrNoMeta},
		{b: b, pktLen: 59, want: ErrBadMeta},
		{b: metaBytes(Meta{Magic: valid.Magic, RanOff: 60, RanLen: 1, Flags: MetaNRRAN}), pktLen: 60, want: ErrBadMeta},
	} {
		if _, err := ParseMeta(tc.b, tc.pktLen); !errors.Is(err, tc.want) {
			t.Errorf("ParseMeta(% x, %d): %v, want %v", tc.b, tc.pktLen, err, tc.want)
		}
	}
	if MetaLen != 28 || MetaLen%4 != 0 {
		t.Errorf("metadata of %d bytes: XDP takes multiples of 4 up to 32", MetaLen)
	}
}

func metaBytes(m Meta) []byte {
	var buf bytes.Buffer
	binary.Write(&buf, binary.NativeEndian, m)
	return buf.Bytes()
}
