package classifyxdp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// parser runs the data path's classifier on frames (BPF_PROG_TEST_RUN)
// and reads the walk it left: the key, and the rule that matched.
type parser struct {
	*Datapath
	cpu int
}

func newParser(t *testing.T) *parser { return newParserWith(t, Config{MaxMasks: MaxMasks}) }

func newParserWith(t *testing.T, cfg Config) *parser {
	t.Helper()
	testsupport.NeedRoot(t, "BPF")
	d, err := OpenDatapath(cfg)
	testsupport.CheckLoad(t, err)
	t.Cleanup(func() { d.Close() })
	p := &parser{Datapath: d}
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Fatal(err)
	}
	for !allowed.IsSet(p.cpu) {
		p.cpu++
	}
	return p
}

func TestClassifyProgramPassesVerifier(t *testing.T) { newParser(t) }

// parse runs the program on a frame with no rule matching, and returns
// the state of the walk it left.
func (p *parser) parse(t *testing.T, frame []byte) classifyClassifyState {
	t.Helper()
	action, st := p.run(t, frame)
	if action != xdplink.Pass || st.Rule != 0 {
		t.Fatalf("action %d, rule slot %d: want XDP_PASS, no rule", action, st.Rule)
	}
	return st
}

// run runs the program on a frame, on one CPU, and returns its action and
// the state of the walk it left there.
func (p *parser) run(t *testing.T, frame []byte) (xdplink.Action, classifyClassifyState) {
	t.Helper()
	ret, st, err := p.try(frame)
	if err != nil {
		t.Fatal(err)
	}
	return ret, st
}

func (p *parser) try(frame []byte) (xdplink.Action, classifyClassifyState, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		return 0, classifyClassifyState{}, err
	}
	one.Set(p.cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		return 0, classifyClassifyState{}, err
	}
	defer unix.SchedSetaffinity(0, &before)
	ret, err := p.objs.XdpClassify.Run(&ebpf.RunOptions{Data: frame})
	if err != nil {
		return 0, classifyClassifyState{}, err
	}
	var states []classifyClassifyState
	if err := p.objs.ClassifyWalk.Lookup(uint32(0), &states); err != nil {
		return 0, classifyClassifyState{}, err
	}
	return xdplink.Action(ret), states[p.cpu], nil
}

// bytesOf is a key as it lies in the data path's memory.
func bytesOf(k classifyClassifyKey) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, k) // the struct's own memory order
	return b.Bytes()
}

// want is an expected key: fields by name, numbers or addresses.
type want map[string]any

func (w want) key(t *testing.T) Key {
	t.Helper()
	var k Key
	for name, v := range w {
		f, ok := FieldByName(name)
		if !ok {
			t.Fatalf("no field %s", name)
		}
		switch v := v.(type) {
		case string:
			k.SetAddr(f, netip.MustParseAddr(v))
		case int:
			k.SetNumber(f, uint64(v))
		default:
			t.Fatalf("%s: %T", name, v)
		}
	}
	return k
}

// describe names the fields where two keys differ.
func describe(got, want []byte) string {
	out := ""
	for _, f := range Fields {
		g, w := got[f.Offset:f.Offset+f.Size], want[f.Offset:f.Offset+f.Size]
		switch {
		case bytes.Equal(g, w):
		case f.kind == address:
			out += fmt.Sprintf("\n\t%s: got %v, want %v", f.Name, net.IP(g), net.IP(w))
		default:
			out += fmt.Sprintf("\n\t%s: got %x, want %x", f.Name, g, w)
		}
	}
	if out == "" {
		return " in its padding"
	}
	return out
}

var (
	macA = net.HardwareAddr{2, 0, 0, 0, 0, 1}
	macB = net.HardwareAddr{2, 0, 0, 0, 0, 2}
)

func eth(etype layers.EthernetType) *layers.Ethernet {
	return &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: etype}
}

func ipv4(src, dst string, proto layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{Version: 4, IHL: 5, TTL: 64, TOS: 46 << 2, Protocol: proto,
		SrcIP: net.ParseIP(src).To4(), DstIP: net.ParseIP(dst).To4()}
}

func udp(src, dst layers.UDPPort) *layers.UDP { return &layers.UDP{SrcPort: src, DstPort: dst} }

var rtpKey = want{"rtp": 1, "rtpSsrc": 0xcafe, "rtpPayloadType": 96, "h265": 1}

func with(base want, more want) want {
	w := want{}
	for k, v := range base {
		w[k] = v
	}
	for k, v := range more {
		w[k] = v
	}
	return w
}

// parserCase is a nested packet built by gopacket and the key the parser
// must fill for it.
type parserCase struct {
	name   string
	layers []gopacket.SerializableLayer
	want   want
	frag   bool
}

// parserCases are the paper's three traffic types and more: every protocol
// the parser knows.
func parserCases() []parserCase {
	const ue, dn, gnb, upf, vtepA, vtepB = "10.45.0.2", "10.100.6.2", "10.100.3.1", "10.100.3.2", "192.0.2.1", "192.0.2.2"
	ip6 := func(src, dst string, next layers.IPProtocol) *layers.IPv6 {
		return &layers.IPv6{Version: 6, TrafficClass: 10 << 2, HopLimit: 64, NextHeader: next,
			SrcIP: net.ParseIP(src), DstIP: net.ParseIP(dst)}
	}
	vxlan := func(vni uint32) *layers.VXLAN { return &layers.VXLAN{ValidIDFlag: true, VNI: vni} }
	gtpu := func(teid uint32, qfi byte) *layers.GTPv1U {
		return &layers.GTPv1U{Version: 1, ProtocolType: 1, MessageType: 255, TEID: teid,
			GTPExtensionHeaders: []layers.GTPExtensionHeader{{Type: 0x85, Content: []byte{0x10, qfi}}}}
	}
	innerUDP := func() []gopacket.SerializableLayer {
		return []gopacket.SerializableLayer{ipv4(ue, dn, layers.IPProtocolUDP), udp(40000, 5004)}
	}
	ipFlow := want{"innerSrc": ue, "innerDst": dn, "outerSrc": ue, "outerDst": dn, "proto": 17, "dscp": 46,
		"srcPort": 40000, "dstPort": 5004}
	inVXLAN := func(w want) want {
		return with(w, want{"outerSrc": vtepA, "outerDst": vtepB, "tunnels": 1, "tunnel1": int(TunnelVXLAN), "tunnel1Id": 0x123456})
	}
	gtpInVXLAN := func(w want) want {
		return with(inVXLAN(w), want{"tunnels": 2, "tunnel2": int(TunnelGTPU), "tunnel2Id": 0x100, "qfi": 9})
	}
	vxlanOuter := []gopacket.SerializableLayer{eth(layers.EthernetTypeIPv4), ipv4(vtepA, vtepB, layers.IPProtocolUDP),
		udp(50000, 4789), vxlan(0x123456), eth(layers.EthernetTypeIPv4)}
	gtpOuter := []gopacket.SerializableLayer{ipv4(gnb, upf, layers.IPProtocolUDP), udp(2152, 2152), gtpu(0x100, 9)}

	return []parserCase{
		{name: "IP flow with H.265 base layer", layers: slices.Concat([]gopacket.SerializableLayer{eth(layers.EthernetTypeIPv4)}, innerUDP(),
			[]gopacket.SerializableLayer{demo.RTPH265(0xcafe, 1, 0, 1)}),
			want: with(with(ipFlow, rtpKey), want{"nalType": 1}), frag: false},
		{name: "VXLAN flow with an enhancement layer", layers: slices.Concat(vxlanOuter, innerUDP(),
			[]gopacket.SerializableLayer{demo.RTPH265(0xcafe, 19, 1, 3)}),
			want: inVXLAN(with(with(ipFlow, rtpKey), want{"nalType": 19, "layerId": 1, "temporalId": 2})), frag: false},
		{name: "GTP-U in VXLAN, a fragmentation unit", layers: slices.Concat(vxlanOuter, gtpOuter, innerUDP(),
			[]gopacket.SerializableLayer{demo.RTPH265(0xcafe, 49, 33, 1, 0x80|21)}),
			want: gtpInVXLAN(with(with(ipFlow, rtpKey), want{"nalType": 21, "layerId": 33})), frag: false},
		{name: "GTP-U in VXLAN, an aggregation packet", layers: slices.Concat(vxlanOuter, gtpOuter, innerUDP(),
			[]gopacket.SerializableLayer{demo.RTPH265(0xcafe, 48, 0, 1, 0, 4, 32<<1, 1, 0, 0)}),
			want: gtpInVXLAN(with(with(ipFlow, rtpKey), want{"nalType": 32})), frag: false},
		{name: "GRE with key, checksum and sequence, IPv6 and TCP inside", layers: []gopacket.SerializableLayer{
			eth(layers.EthernetTypeIPv4), ipv4(vtepA, vtepB, layers.IPProtocolGRE),
			&layers.GRE{ChecksumPresent: true, KeyPresent: true, SeqPresent: true, Key: 0xfeedbeef, Seq: 7, Protocol: layers.EthernetTypeIPv6},
			ip6("2001:db8::1", "2001:db8::2", layers.IPProtocolTCP), &layers.TCP{SrcPort: 443, DstPort: 51000, DataOffset: 5}},
			want: want{"outerSrc": vtepA, "outerDst": vtepB, "innerSrc": "2001:db8::1", "innerDst": "2001:db8::2", "proto": 6, "dscp": 10,
				"srcPort": 443, "dstPort": 51000, "tunnels": 1, "tunnel1": int(TunnelGRE), "tunnel1Id": 0xfeedbeef}, frag: false},
		{name: "GENEVE with options, Ethernet inside, two VLAN tags", layers: []gopacket.SerializableLayer{
			eth(layers.EthernetTypeIPv4), ipv4(vtepA, vtepB, layers.IPProtocolUDP), udp(50000, 6081),
			&layers.Geneve{Protocol: layers.EthernetTypeTransparentEthernetBridging, VNI: 77,
				Options: []*layers.GeneveOption{{Class: 0x0102, Type: 3, Length: 8, Data: []byte{1, 2, 3, 4}}}},
			eth(layers.EthernetTypeQinQ), &layers.Dot1Q{VLANIdentifier: 10, Type: layers.EthernetTypeDot1Q},
			&layers.Dot1Q{VLANIdentifier: 20, Type: layers.EthernetTypeIPv4},
			ipv4(ue, dn, layers.IPProtocolSCTP), &layers.SCTP{SrcPort: 38412, DstPort: 38412}},
			want: want{"outerSrc": vtepA, "outerDst": vtepB, "innerSrc": ue, "innerDst": dn, "proto": 132, "dscp": 46,
				"srcPort": 38412, "dstPort": 38412, "tunnels": 1, "tunnel1": int(TunnelGENEVE), "tunnel1Id": 77}, frag: false},
		{name: "IPv6 with a hop-by-hop header and a first fragment", layers: []gopacket.SerializableLayer{eth(layers.EthernetTypeIPv6),
			ip6("2001:db8::1", "2001:db8::2", layers.IPProtocolIPv6HopByHop),
			&layers.IPv6HopByHop{Options: []*layers.IPv6HopByHopOption{{OptionType: 1, OptionData: []byte{0, 0, 0, 0}}}},
			&layers.IPv6Fragment{NextHeader: layers.IPProtocolUDP, Identification: 9, MoreFragments: true}, udp(1000, 2000)},
			want: want{"outerSrc": "2001:db8::1", "outerDst": "2001:db8::2", "innerSrc": "2001:db8::1", "innerDst": "2001:db8::2",
				"proto": 17, "dscp": 10, "srcPort": 1000, "dstPort": 2000}, frag: false},
		{name: "an IPv4 fragment other than the first", layers: []gopacket.SerializableLayer{eth(layers.EthernetTypeIPv4),
			&layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP, FragOffset: 100,
				SrcIP: net.ParseIP(ue).To4(), DstIP: net.ParseIP(dn).To4()}, gopacket.Payload(make([]byte, 16))},
			want: want{"outerSrc": ue, "outerDst": dn, "innerSrc": ue, "innerDst": dn, "proto": 17}, frag: true},
		{name: "ICMP echo", layers: []gopacket.SerializableLayer{eth(layers.EthernetTypeIPv4), ipv4(ue, dn, layers.IPProtocolICMPv4),
			&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0)}},
			want: want{"outerSrc": ue, "outerDst": dn, "innerSrc": ue, "innerDst": dn, "proto": 1, "dscp": 46, "srcPort": 8}, frag: false},
		{name: "four levels in another order, and a fifth left as UDP", layers: slices.Concat(vxlanOuter, gtpOuter, []gopacket.SerializableLayer{
			ipv4("10.9.0.1", "10.9.0.2", layers.IPProtocolUDP), udp(50001, 6081),
			&layers.Geneve{Protocol: layers.EthernetTypeIPv4, VNI: 5},
			ipv4("10.8.0.1", "10.8.0.2", layers.IPProtocolGRE), &layers.GRE{KeyPresent: true, Key: 6, Protocol: layers.EthernetTypeIPv4},
			ipv4("10.7.0.1", "10.7.0.2", layers.IPProtocolUDP), udp(50002, 4789), vxlan(8)}, vxlanOuter[4:], innerUDP()),
			want: with(gtpInVXLAN(want{"innerSrc": "10.7.0.1", "innerDst": "10.7.0.2", "proto": 17, "dscp": 46, "srcPort": 50002, "dstPort": 4789}),
				want{"tunnels": 4, "tunnel3": int(TunnelGENEVE), "tunnel3Id": 5, "tunnel4": int(TunnelGRE), "tunnel4Id": 6}), frag: false},
		{name: "UDP that is not RTP", layers: slices.Concat([]gopacket.SerializableLayer{eth(layers.EthernetTypeIPv4)}, innerUDP(),
			[]gopacket.SerializableLayer{gopacket.Payload([]byte{0x45, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2})}), want: ipFlow, frag: false},
	}
}

// Each nested packet gives the key its fields say.
func TestParserFillsTheKey(t *testing.T) {
	p := newParser(t)
	for _, c := range parserCases() {
		t.Run(c.name, func(t *testing.T) {
			st := p.parse(t, demo.Serialize(false, c.layers...))
			got, want := bytesOf(st.Key), c.want.key(t)
			if !bytes.Equal(got, want[:]) {
				t.Errorf("key differs:%s", describe(got, want[:]))
			}
			if (st.Frag != 0) != c.frag {
				t.Errorf("fragment %d, want %t", st.Frag, c.frag)
			}
		})
	}
}

// Every truncation of every parser case, and random damage to the deepest
// packet: the parser never fails, and a frame cut short never shows more
// levels than the whole one.
func TestParserTakesDamage(t *testing.T) {
	p := newParser(t)
	for _, c := range parserCases() {
		frame := demo.Serialize(false, c.layers...)
		whole := p.parse(t, frame).Key.Tunnels
		for n := 14; n < len(frame); n++ { // the kernel runs no shorter frame than an Ethernet header
			if got := p.parse(t, frame[:n]).Key.Tunnels; got > whole {
				t.Fatalf("%s cut to %d octets: %d levels, the whole %d", c.name, n, got, whole)
			}
		}
	}
	frame := demo.Serialize(false, eth(layers.EthernetTypeIPv4), ipv4("192.0.2.1", "192.0.2.2", layers.IPProtocolUDP),
		udp(50000, 4789), &layers.VXLAN{ValidIDFlag: true, VNI: 1}, eth(layers.EthernetTypeIPv4),
		ipv4("10.100.3.1", "10.100.3.2", layers.IPProtocolUDP), udp(2152, 2152),
		&layers.GTPv1U{Version: 1, ProtocolType: 1, MessageType: 255, TEID: 1,
			GTPExtensionHeaders: []layers.GTPExtensionHeader{{Type: 0x85, Content: []byte{0x10, 9}}}},
		ipv4("10.45.0.2", "10.100.6.2", layers.IPProtocolUDP), udp(40000, 5004), demo.RTPH265(1, 49, 1, 1, 0x81))
	random := rand.New(rand.NewPCG(3, 5))
	for range 5000 {
		damaged := slices.Clone(frame)
		for range 1 + random.IntN(4) {
			damaged[random.IntN(len(damaged))] = byte(random.Uint32())
		}
		p.parse(t, damaged)
	}
}

// The common G-PDU (untagged, outer IPv4 without options, IPv4 inside) is
// walked in one piece, every other frame step by step: each variant of it,
// whole and cut at every length, leaves the walk the same key and outcome
// as the same frame with a VLAN tag, which the steps take.
func TestGPDUWalkedAsTheSteps(t *testing.T) {
	p := newParser(t)
	const ue, dn = "10.45.0.2", "10.100.6.2"
	gtpu := func(qfi bool, seq bool, msg byte) *layers.GTPv1U {
		g := &layers.GTPv1U{Version: 1, ProtocolType: 1, MessageType: msg, TEID: 0x1234, SequenceNumberFlag: seq, SequenceNumber: 7}
		if qfi {
			g.GTPExtensionHeaders = []layers.GTPExtensionHeader{{Type: 0x85, Content: []byte{0x10, 9}}}
		}
		return g
	}
	inner := func(proto layers.IPProtocol) *layers.IPv4 { return ipv4(ue, dn, proto) }
	rtp := demo.RTPH265(0xcafe, 19, 1, 3)
	variants := []struct {
		name   string
		g      *layers.GTPv1U
		layers []gopacket.SerializableLayer
	}{
		{"UDP with RTP and H.265", gtpu(true, false, 255), []gopacket.SerializableLayer{inner(layers.IPProtocolUDP), udp(40000, 5004), rtp}},
		{"UDP, no extension header", gtpu(false, false, 255), []gopacket.SerializableLayer{inner(layers.IPProtocolUDP), udp(40000, 5004), gopacket.Payload([]byte{1, 2, 3})}},
		{"UDP, a sequence number", gtpu(true, true, 255), []gopacket.SerializableLayer{inner(layers.IPProtocolUDP), udp(40000, 5004), rtp}},
		{"TCP", gtpu(true, false, 255), []gopacket.SerializableLayer{inner(layers.IPProtocolTCP), &layers.TCP{SrcPort: 443, DstPort: 51000, DataOffset: 5}}},
		{"ICMP", gtpu(true, false, 255), []gopacket.SerializableLayer{inner(layers.IPProtocolICMPv4), &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0)}}},
		{"IPv4 options inside", gtpu(true, false, 255), []gopacket.SerializableLayer{
			&layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.ParseIP(ue).To4(), DstIP: net.ParseIP(dn).To4(),
				Options: []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}}, udp(40000, 5004), rtp}},
		{"VXLAN inside", gtpu(true, false, 255), []gopacket.SerializableLayer{inner(layers.IPProtocolUDP), udp(50000, 4789),
			&layers.VXLAN{ValidIDFlag: true, VNI: 5}, eth(layers.EthernetTypeIPv4), ipv4("10.7.0.1", "10.7.0.2", layers.IPProtocolUDP), udp(1, 2)}},
		{"GRE inside", gtpu(true, false, 255), []gopacket.SerializableLayer{inner(layers.IPProtocolGRE),
			&layers.GRE{KeyPresent: true, Key: 6, Protocol: layers.EthernetTypeIPv4}, ipv4("10.7.0.1", "10.7.0.2", layers.IPProtocolTCP)}},
		{"IPv6 inside", gtpu(true, false, 255), []gopacket.SerializableLayer{
			&layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP, SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("2001:db8::2")},
			udp(40000, 5004), rtp}},
		{"a first fragment inside", gtpu(true, false, 255), []gopacket.SerializableLayer{
			&layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP, Flags: layers.IPv4MoreFragments,
				SrcIP: net.ParseIP(ue).To4(), DstIP: net.ParseIP(dn).To4()}, udp(40000, 5004), rtp}},
		{"an echo request", gtpu(false, true, 1), []gopacket.SerializableLayer{gopacket.Payload([]byte{0x80, 96, 0, 1})}},
	}
	outer := func(tagged bool, g *layers.GTPv1U) []gopacket.SerializableLayer {
		ls := []gopacket.SerializableLayer{eth(layers.EthernetTypeIPv4)}
		if tagged {
			ls = []gopacket.SerializableLayer{eth(layers.EthernetTypeDot1Q), &layers.Dot1Q{VLANIdentifier: 10, Type: layers.EthernetTypeIPv4}}
		}
		return append(ls, ipv4("10.100.3.1", "10.100.3.2", layers.IPProtocolUDP), udp(2152, 2152), g)
	}
	// A walk that leaves every field of the key set, and a fragment's
	// state: what it leaves behind must not show in the next.
	last := variants[len(variants)-2]
	rich := demo.Serialize(false, slices.Concat(outer(true, last.g), last.layers)...)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			plain := demo.Serialize(false, slices.Concat(outer(false, v.g), v.layers)...)
			tagged := demo.Serialize(false, slices.Concat(outer(true, v.g), v.layers)...)
			for n := len(plain); n >= 14; n-- {
				p.parse(t, rich)
				got, want := p.parse(t, plain[:n]), p.parse(t, tagged[:n+4])
				if g, w := bytesOf(got.Key), bytesOf(want.Key); !bytes.Equal(g, w) {
					t.Fatalf("cut to %d octets: key differs:%s", n, describe(g, w))
				}
				if got.Ips != want.Ips || got.Frag != want.Frag || got.First != want.First {
					t.Fatalf("cut to %d octets: IP headers, fragment, first %d %d %d, tagged %d %d %d",
						n, got.Ips, got.Frag, got.First, want.Ips, want.Frag, want.First)
				}
				if got.First != 0 && got.FragId != want.FragId {
					t.Fatalf("cut to %d octets: fragment id %+v, tagged %+v", n, got.FragId, want.FragId)
				}
				gg, wg := got.Outer.Gtpu, want.Outer.Gtpu
				if wg.Off != 0 {
					wg.Off -= 4 // behind the tag
				}
				if gg != wg || got.Outer.Proto != want.Outer.Proto {
					t.Fatalf("cut to %d octets: the GTP-U message handed on %+v (EtherType %#x), tagged %+v (%#x)",
						n, gg, got.Outer.Proto, wg, want.Outer.Proto)
				}
			}
		})
	}
}
