package upfxdp

// Packet builders and the BPF_PROG_TEST_RUN harness of upf_test.go. Every
// expected packet is built here with gopacket from the test's own data, never
// from the program's output.

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

const (
	gtpuPort    = 2152
	extPSC      = 0x85 // PDU Session Container
	extRAN      = 0x81 // RAN Container: any extension the program only skips
	ethLen      = 14
	gtpOffset   = ethLen + 20 + 8 // GTP-U header of an untagged, option-less frame
	fakeIfindex = 1
)

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
func ipOf(a netip.Addr) net.IP     { return net.IP(a.AsSlice()) }
func mac(b byte) net.HardwareAddr  { return net.HardwareAddr{0x02, 0, 0, 0, 0, b} }

// be16 is the in-memory form of a __be16 such as nexthop.vlan_tci.
func be16(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}

func serialize(t testing.TB, checksums bool, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: checksums}
	if err := gopacket.SerializeLayers(buf, opts, ls...); err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(buf.Bytes())
}

// l2 is an Ethernet header with an optional 802.1Q tag.
type l2 struct {
	dst, src net.HardwareAddr
	tci      uint16 // 0: untagged
}

func (l l2) len() int {
	if l.tci != 0 {
		return ethLen + 4
	}
	return ethLen
}

func (l l2) swapped() l2 { return l2{dst: l.src, src: l.dst, tci: l.tci} }

// frame returns payload behind the header, without the padding gopacket adds
// to short frames (tests add padding explicitly with pad).
func (l l2) frame(t testing.TB, etype layers.EthernetType, payload []byte) []byte {
	t.Helper()
	eth := &layers.Ethernet{DstMAC: l.dst, SrcMAC: l.src, EthernetType: etype}
	ls := []gopacket.SerializableLayer{eth}
	if l.tci != 0 {
		eth.EthernetType = layers.EthernetTypeDot1Q
		ls = append(ls, &layers.Dot1Q{Priority: uint8(l.tci >> 13), DropEligible: l.tci&0x1000 != 0,
			VLANIdentifier: l.tci & 0xfff, Type: etype})
	}
	return serialize(t, false, append(ls, gopacket.Payload(payload))...)[:l.len()+len(payload)]
}

// ipFrame frames an IPv4 or IPv6 packet.
func (l l2) ipFrame(t testing.TB, ip []byte) []byte {
	if ip[0]>>4 == 6 {
		return l.frame(t, layers.EthernetTypeIPv6, ip)
	}
	return l.frame(t, layers.EthernetTypeIPv4, ip)
}

// pad appends n bytes of Ethernet padding.
func pad(b []byte, n int) []byte { return append(bytes.Clone(b), make([]byte, n)...) }

// ipPacket is a UE's UDP packet, IPv4 or IPv6 after its addresses.
type ipPacket struct {
	src, dst netip.Addr
	ttl      uint8  // hop limit for IPv6
	size     int    // UDP payload bytes
	payload  []byte // the UDP payload; nil: size bytes 0, 1, 2, ...
	id       uint16
	options  bool // IPv4: a Router Alert option (IHL 6)
}

func (p ipPacket) hop() ipPacket { p.ttl--; return p }

func (p ipPacket) bytes(t testing.TB) []byte {
	t.Helper()
	payload := gopacket.Payload(p.payload)
	if p.payload == nil {
		payload = make(gopacket.Payload, p.size)
		for i := range payload {
			payload[i] = byte(i)
		}
	}
	udp := &layers.UDP{SrcPort: 40000, DstPort: 53}
	if p.src.Is4() {
		ip := &layers.IPv4{Version: 4, TOS: 0x28, Id: p.id, Flags: layers.IPv4DontFragment, TTL: p.ttl,
			Protocol: layers.IPProtocolUDP, SrcIP: ipOf(p.src), DstIP: ipOf(p.dst)}
		if p.options {
			ip.Options = []layers.IPv4Option{{OptionType: 0x94, OptionLength: 4, OptionData: []byte{0, 0}}}
		}
		udp.SetNetworkLayerForChecksum(ip)
		return serialize(t, true, ip, udp, payload)
	}
	ip := &layers.IPv6{Version: 6, TrafficClass: 0x28, FlowLabel: 0x12345, NextHeader: layers.IPProtocolUDP,
		HopLimit: p.ttl, SrcIP: ipOf(p.src), DstIP: ipOf(p.dst)}
	udp.SetNetworkLayerForChecksum(ip)
	return serialize(t, true, ip, udp, payload)
}

func (p ipPacket) frame(t testing.TB, l l2) []byte { return l.ipFrame(t, p.bytes(t)) }

// ip4 is an outer IPv4 header template.
func ip4(src, dst netip.Addr, ttl uint8, id uint16) *layers.IPv4 {
	return &layers.IPv4{Version: 4, TTL: ttl, Id: id, SrcIP: ipOf(src), DstIP: ipOf(dst)}
}

// udp4 is IPv4/UDP around payload, with a correct IPv4 checksum and a zero
// UDP checksum (as GTP-U over IPv4 sends it).
func udp4(t testing.TB, ip *layers.IPv4, sport, dport uint16, payload []byte) []byte {
	t.Helper()
	ip.Protocol = layers.IPProtocolUDP
	u := serialize(t, false, &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}, gopacket.Payload(payload))
	return serialize(t, true, ip, gopacket.Payload(u))
}

func gtpMsg(typ uint8, teid uint32, exts ...layers.GTPExtensionHeader) *layers.GTPv1U {
	return &layers.GTPv1U{Version: 1, ProtocolType: 1, MessageType: typ, TEID: teid, GTPExtensionHeaders: exts}
}

func gpdu(teid uint32, exts ...layers.GTPExtensionHeader) *layers.GTPv1U {
	return gtpMsg(255, teid, exts...)
}

// ulPSC is an UL PDU SESSION INFORMATION container (TS 38.415) with qfi.
func ulPSC(qfi uint8) layers.GTPExtensionHeader {
	return layers.GTPExtensionHeader{Type: extPSC, Content: []byte{0x10, qfi}}
}

// dlPSC is a DL PDU SESSION INFORMATION container with qfi, as a source
// gNB forwards downlink data in.
func dlPSC(qfi uint8) layers.GTPExtensionHeader {
	return layers.GTPExtensionHeader{Type: extPSC, Content: []byte{0x00, qfi}}
}

// ext is an extension header of words*4 bytes.
func ext(typ uint8, words int) layers.GTPExtensionHeader {
	c := make([]byte, 4*words-2)
	for i := range c {
		c[i] = 0xe0 + byte(i)
	}
	return layers.GTPExtensionHeader{Type: typ, Content: c}
}

// gtpFrame is a GTP-U message from the gNB to dst (an N3 address).
func gtpFrame(t testing.TB, l l2, dst netip.Addr, g *layers.GTPv1U, payload []byte) []byte {
	t.Helper()
	gtp := serialize(t, false, g, gopacket.Payload(payload))
	return l.frame(t, layers.EthernetTypeIPv4, udp4(t, gnbHdr(dst), gtpuPort, gtpuPort, gtp))
}

// gnbHdr is the outer IPv4 header the gNB sends to dst.
func gnbHdr(dst netip.Addr) *layers.IPv4 {
	h := ip4(gnb, dst, 62, 0x4d2)
	h.TOS = 0xb8
	h.Flags = layers.IPv4DontFragment
	return h
}

// encapFrame is the downlink packet the UPF must send: inner in GTP-U (with
// a DL PDU Session Container when qfi >= 0) from local to peer.
func encapFrame(t testing.TB, l l2, local, peer netip.Addr, teid uint32, qfi int, inner []byte) []byte {
	t.Helper()
	return markedEncapFrame(t, 0, l, local, peer, teid, qfi, inner)
}

// markedEncapFrame is encapFrame with the outer IPv4 ToS tos.
func markedEncapFrame(t testing.TB, tos uint8, l l2, local, peer netip.Addr, teid uint32, qfi int, inner []byte) []byte {
	t.Helper()
	var psc *layers.GTPExtensionHeader
	if qfi >= 0 {
		h := dlPSC(uint8(qfi))
		psc = &h
	}
	return tunnelFrame(t, tos, l, local, peer, teid, psc, inner)
}

// tunnelFrame is a G-PDU from local to peer carrying inner, with an
// extension header psc (nil: none) and the outer IPv4 ToS tos: what the
// UPF sends into a tunnel over IPv4.
func tunnelFrame(t testing.TB, tos uint8, l l2, local, peer netip.Addr, teid uint32, psc *layers.GTPExtensionHeader, inner []byte) []byte {
	t.Helper()
	g := gpdu(teid)
	if psc != nil {
		g.GTPExtensionHeaders = []layers.GTPExtensionHeader{*psc}
	}
	gtp := serialize(t, false, g, gopacket.Payload(inner))
	outer := ip4(local, peer, 64, 0)
	outer.TOS = tos
	return l.frame(t, layers.EthernetTypeIPv4, udp4(t, outer, gtpuPort, gtpuPort, gtp))
}

// fixIPv4 rewrites the total length and checksum of the IPv4 header at off.
func fixIPv4(b []byte, off, totLen int) {
	h := b[off : off+20]
	binary.BigEndian.PutUint16(h[2:], uint16(totLen))
	h[10], h[11] = 0, 0
	binary.BigEndian.PutUint16(h[10:], gopacket.FoldChecksum(gopacket.ComputeChecksum(h, 0)))
}

// withBytes returns a copy of b with vals written at off.
func withBytes(b []byte, off int, vals ...byte) []byte {
	b = bytes.Clone(b)
	copy(b[off:], vals)
	return b
}

func with16(b []byte, off int, v uint16) []byte {
	return withBytes(b, off, byte(v>>8), byte(v))
}

// upf is one data path with the fixture's rules and the program of one
// interface (fake ifindex, so the counters appear in Counters()).
type upf struct {
	d       *Datapath
	prog    *ebpf.Program
	ifindex uint32
}

func newUPF(t *testing.T, roles Role) *upf {
	t.Helper()
	d := openTest(t, Options{MaxSessions: 64, N3Addresses: []netip.Addr{n3Addr, n3Addr2}})
	installRules(t, d)
	return attachTest(t, d, fakeIfindex, "lo", roles)
}

// attachTest loads the program for a fake interface of d.
func attachTest(t *testing.T, d *Datapath, ifindex uint32, name string, roles Role) *upf {
	t.Helper()
	slot, err := d.claimSlot(ifindex, name)
	if err != nil {
		t.Fatal(err)
	}
	var progs ifacePrograms
	if err := d.loadPrograms(slot, roles, &progs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { progs.UPF.Close() })
	return &upf{d: d, prog: progs.UPF, ifindex: ifindex}
}

// run runs the program once on in and returns its verdict and frame. The
// kernel refuses frames shorter than an Ethernet header (EINVAL), so those
// cannot be run.
func (u *upf) run(t testing.TB, in []byte) (xdplink.Action, []byte) {
	t.Helper()
	opts := &ebpf.RunOptions{Data: in, DataOut: make([]byte, len(in)+256)}
	ret, err := u.prog.Run(opts)
	if err != nil {
		t.Fatalf("test run of %d bytes: %v", len(in), err)
	}
	return xdplink.Action(ret), opts.DataOut
}

// counters are the outcome counters of u's interface.
func (u *upf) counters(t testing.TB) map[string]Counter {
	t.Helper()
	all, err := u.d.Counters()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range all {
		if c.Ifindex == u.ifindex {
			return c.Reasons
		}
	}
	t.Fatalf("Counters() has no interface %d", u.ifindex)
	return nil
}

// expect runs in and checks the verdict and that exactly the counters of
// reasons (one, but for the copies of duplicating FARs) counted the frame.
func (u *upf) expect(t testing.TB, in []byte, act xdplink.Action, reasons ...string) []byte {
	t.Helper()
	before := u.counters(t)
	for _, reason := range reasons {
		if _, ok := before[reason]; !ok {
			t.Fatalf("no reason %q", reason)
		}
	}
	got, out := u.run(t, in)
	if got != act {
		t.Errorf("%d-byte frame: %v, want %v (%s)", len(in), got, act, reasons)
	}
	for name, c := range u.counters(t) {
		diff := Counter{Packets: c.Packets - before[name].Packets, Bytes: c.Bytes - before[name].Bytes}
		want := Counter{}
		if slices.Contains(reasons, name) {
			want = Counter{Packets: 1, Bytes: uint64(len(in))}
		}
		if diff != want {
			t.Errorf("%d-byte frame: counter %s grew by %+v, want %+v", len(in), name, diff, want)
		}
	}
	return out
}

// pktCase is one frame and what the program must make of it.
type pktCase struct {
	name   string
	in     []byte
	act    xdplink.Action
	reason string
	out    []byte // the frame left behind; nil: for XDP_PASS the input unchanged, else not checked
}

func (u *upf) runCases(t *testing.T, cases []pktCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.out == nil && (c.act == xdplink.TX || c.act == xdplink.Redirect) {
				t.Fatal("test case without the expected frame")
			}
			out := u.expect(t, c.in, c.act, c.reason)
			want := c.out
			if want == nil && c.act == xdplink.Pass {
				want = c.in
			}
			if want != nil {
				testsupport.EqualFrames(t, out, want)
			}
		})
	}
}
