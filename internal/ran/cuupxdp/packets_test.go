package cuupxdp

// Frame builders, the expected metadata computed from gopacket's decoding
// of a frame (never from the program's output), and the BPF_PROG_TEST_RUN
// harness.

import (
	"bytes"
	"net"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/platform/afxdp"
	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

const (
	extPSC   = 0x85
	extNRRAN = 0x84
	extPort  = 0x40 // UDP Port: an extension the program only skips
)

var (
	upfMAC  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}
	cuupMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x02}
)

// pscDL is a downlink PDU Session Container (TS 38.415 5.5.2.1).
func pscDL(qfi uint8, rqi, ppp bool) layers.GTPExtensionHeader {
	b := qfi & 0x3f
	if rqi {
		b |= 0x40
	}
	if ppp {
		b |= 0x80
	}
	return layers.GTPExtensionHeader{Type: extPSC, Content: []byte{0x00, b}}
}

func pscUL(qfi uint8) layers.GTPExtensionHeader {
	return layers.GTPExtensionHeader{Type: extPSC, Content: []byte{0x10, qfi}}
}

// ddds is an NR RAN Container with a DL DATA DELIVERY STATUS (TS 38.425
// 5.5.2.2): PDU type 1, a desired buffer size, padding.
func ddds() layers.GTPExtensionHeader {
	return layers.GTPExtensionHeader{Type: extNRRAN, Content: []byte{0x10, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}}
}

// frame describes a G-PDU (or, with msgType, another GTP-U message).
type frame struct {
	vlans   int // 0, 1 or 2 tags
	ipv6    bool
	src     net.HardwareAddr // upfMAC when nil
	teid    uint32
	msgType uint8 // 0: G-PDU
	exts    []layers.GTPExtensionHeader
	tpdu    []byte
}

// userPacket is a UE's IPv4 packet, the T-PDU of an N3 G-PDU.
func userPacket(t testing.TB, size int) []byte {
	t.Helper()
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP,
		SrcIP: net.IPv4(8, 8, 8, 8), DstIP: net.IPv4(10, 45, 0, 7)}
	udp := &layers.UDP{SrcPort: 53, DstPort: 40000}
	udp.SetNetworkLayerForChecksum(ip)
	payload := make(gopacket.Payload, size)
	for i := range payload {
		payload[i] = byte(i)
	}
	return serialize(t, ip, udp, payload)
}

func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(buf.Bytes())
}

func (f frame) bytes(t testing.TB) []byte {
	t.Helper()
	src := f.src
	if src == nil {
		src = upfMAC
	}
	ipType := layers.EthernetTypeIPv4
	if f.ipv6 {
		ipType = layers.EthernetTypeIPv6
	}
	eth := &layers.Ethernet{DstMAC: cuupMAC, SrcMAC: src, EthernetType: ipType}
	ls := []gopacket.SerializableLayer{eth}
	switch f.vlans {
	case 1:
		eth.EthernetType = layers.EthernetTypeDot1Q
		ls = append(ls, &layers.Dot1Q{VLANIdentifier: 100, Type: ipType})
	case 2:
		eth.EthernetType = layers.EthernetTypeQinQ
		ls = append(ls, &layers.Dot1Q{VLANIdentifier: 10, Type: layers.EthernetTypeDot1Q},
			&layers.Dot1Q{VLANIdentifier: 100, Type: ipType})
	}
	udp := &layers.UDP{SrcPort: 2152, DstPort: 2152}
	if f.ipv6 {
		ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP,
			SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("2001:db8::2")}
		udp.SetNetworkLayerForChecksum(ip)
		ls = append(ls, ip)
	} else {
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP,
			SrcIP: net.IPv4(192, 0, 2, 1), DstIP: net.IPv4(192, 0, 2, 2)}
		udp.SetNetworkLayerForChecksum(ip)
		ls = append(ls, ip)
	}
	msgType := f.msgType
	if msgType == 0 {
		msgType = 255
	}
	gtp := &layers.GTPv1U{Version: 1, ProtocolType: 1, MessageType: msgType, TEID: f.teid,
		GTPExtensionHeaders: f.exts}
	return serialize(t, append(ls, udp, gtp, gopacket.Payload(f.tpdu))...)
}

// expectedMeta is the metadata of a redirected frame, from gopacket's
// decoding of it: the offset of each layer is the sum of the lengths of
// the layers before it.
func expectedMeta(t *testing.T, b []byte, role Role, bearer uint32) Meta {
	t.Helper()
	p := gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.Default)
	m := Meta{Magic: uint32(cuupCuupMetaMagicCUUP_META_MAGIC), Bearer: bearer, Role: uint8(role)}
	off := 0
	for _, l := range p.Layers() {
		switch l := l.(type) {
		case *layers.IPv4:
			m.IpOff, m.IpVersion = uint16(off), 4
		case *layers.IPv6:
			m.IpOff, m.IpVersion = uint16(off), 6
		case *layers.GTPv1U:
			m.Teid = l.TEID
			m.GtpuOff = uint16(off)
			m.TpduOff = uint16(off + len(l.LayerContents()))
			m.TpduLen = uint16(len(l.LayerPayload()))
			ext := off + 12
			for _, eh := range l.GTPExtensionHeaders {
				switch eh.Type {
				case extPSC:
					m.Flags |= MetaPSC
					m.Qfi = eh.Content[1] & 0x3f
					if eh.Content[1]&0x40 != 0 {
						m.Flags |= MetaRQI
					}
					if eh.Content[1]&0x80 != 0 {
						m.Flags |= MetaPPP
					}
				case extNRRAN:
					m.Flags |= MetaNRRAN
					m.RanOff, m.RanLen = uint16(ext+1), uint16(len(eh.Content))
				}
				ext += len(eh.Content) + 2
			}
			return m
		}
		off += len(l.LayerContents())
	}
	t.Fatalf("no GTP-U layer in % x", b)
	return m
}

// run runs a role's program on a frame and returns its action, the
// metadata it left (empty if none) and the frame after it.
func run(t *testing.T, d *Datapath, role Role, b []byte) (xdplink.Action, []byte, []byte) {
	t.Helper()
	prog, err := d.Program(role)
	if err != nil {
		t.Fatal(err)
	}
	var out xdplink.Context
	opts := ebpf.RunOptions{Data: b, DataOut: make([]byte, len(b)+256), Context: xdplink.Context{DataEnd: uint32(len(b))}, ContextOut: &out}
	action, err := prog.Run(&opts)
	if err != nil {
		t.Fatalf("running on % x: %v", b, err)
	}
	return xdplink.Action(action), opts.DataOut[:out.Data], opts.DataOut[out.Data:]
}

// withSockets puts a socket into both roles' queue 0, so that a test run
// of a packet of ours redirects: a socket bound to a veth queue in a
// namespace of the test's own.
func withSockets(t *testing.T, d *Datapath) {
	t.Helper()
	ns := testsupport.Netns(t, "cuupxdp")
	if err := namespace.Veth(ns, "c0", ns, "c1"); err != nil {
		t.Fatal(err)
	}
	index, _, err := ns.Link("c0")
	if err != nil {
		t.Fatal(err)
	}
	var u *afxdp.UMEM
	err = ns.Do(func() error {
		if u, err = afxdp.NewUMEM(64, afxdp.UMEMOptions{}); err != nil {
			return err
		}
		s, err := afxdp.NewSocket(u, index, 0, afxdp.Options{FillRing: 32, RxRing: 32, TxRing: afxdp.NoRing})
		if err != nil {
			return err
		}
		for _, role := range []Role{N3, F1U} {
			if err := d.RegisterSocket(role, 0, s); err != nil {
				return err
			}
		}
		return nil
	})
	if u != nil {
		t.Cleanup(func() { u.Close() })
	}
	if err != nil {
		t.Fatal(err)
	}
}
