package upfxdp

// A property test of xdp_upf on mutants of frames it forwards: whatever the
// bytes, the verdict is a real one, exactly one reason counts the frame, and
// a frame the program sends on is well-formed by an independent reading of
// it (gopacket's and this file's), never by the program's own arithmetic.

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

const (
	mutantsPerSeed = 500
	// The most the program adds: a VLAN tag where there was none and
	// IPv6/UDP/GTP-U with a PDU Session Container.
	maxGrowth = 4 + 40 + 8 + 8 + 4 + 4
	// Rules added to the fixture: a relay from the CP function to the UE,
	// into an IPv4 tunnel and into an IPv6 one; a UE whose downlink goes
	// into an IPv6 tunnel.
	teidRelay  = 0x700
	teidRelay6 = 0x701
)

var ue4v6 = mustAddr("10.45.0.8")

// lenField is a length field of a seed frame.
type lenField struct {
	off  int
	kind byte // '4': IPv4 IHL nibble, '1': extension length octet, '2': 16 bits
	// tracks: the field counts the bytes up to the frame's end, so a frame
	// resized consistently changes it by as much.
	tracks bool
}

// seedFrame is a valid frame the test rules act on, and how.
type seedFrame struct {
	name   string
	frame  []byte
	reason string
	fields []lenField
}

func mutationSeeds(t *testing.T) []seedFrame {
	v4 := ipPacket{src: ue4, dst: dn4, ttl: 64, size: 40, id: 7}
	v4opts := v4
	v4opts.options = true
	v6 := ipPacket{src: ue6, dst: dn6, ttl: 64, size: 40}
	down4 := ipPacket{src: dn4, dst: ue4, ttl: 64, size: 40, id: 9}
	down4b := ipPacket{src: dn4, dst: ue4b, ttl: 64, size: 3}
	down4opts := down4
	down4opts.options = true
	down6 := ipPacket{src: dn6, dst: ue6, ttl: 64, size: 40}
	ra := ipPacket{src: mustAddr("fe80::1"), dst: ue6, ttl: 255, size: 16}
	tagged := fromGNB
	tagged.tci = 42
	taggedDN := fromDN
	taggedDN.tci = 5

	flags := gpdu(teidQoS, ext(extRAN, 2), ulPSC(9))
	flags.SequenceNumberFlag, flags.NPDUFlag, flags.SequenceNumber, flags.NPDU = true, true, 0x1234, 0x56
	echo := gtpMsg(1, 0)
	echo.SequenceNumberFlag, echo.SequenceNumber = true, 0x4242
	echoIE := gtpMsg(1, 0)
	echoIE.SequenceNumberFlag = true

	up := func(name string, l l2, g *layers.GTPv1U, p ipPacket, reason string) seedFrame {
		return seedFrame{name: name, frame: gtpFrame(t, l, n3Addr, g, p.bytes(t)), reason: reason}
	}
	up6 := func(name string, l l2, g *layers.GTPv1U, p ipPacket, reason string) seedFrame {
		return seedFrame{name: name, frame: gtp6Frame(t, l, n3Addr6, g, p.bytes(t)), reason: reason}
	}
	down := func(name string, l l2, p ipPacket) seedFrame {
		return seedFrame{name: name, frame: p.frame(t, l), reason: "downlink_forward"}
	}
	seeds := []seedFrame{
		up("uplink IPv4, no extension", fromGNB, gpdu(teidQoS), v4, "uplink_forward"),
		up("uplink IPv4, PSC", fromGNB, gpdu(teidQoS, ulPSC(9)), v4, "uplink_forward"),
		up("uplink IPv4, S, PN, RAN container and PSC", fromGNB, flags, v4, "uplink_forward"),
		up("uplink IPv4 with options, tagged", tagged, gpdu(teidQoS, ulPSC(9)), v4opts, "uplink_forward"),
		up("uplink IPv4, routed", fromGNB, gpdu(teidRoute), v4, "uplink_forward"),
		up("uplink IPv6, PSC", fromGNB, gpdu(teidV6, ulPSC(1)), v6, "uplink_forward"),
		up("uplink to the kernel", fromGNB, gpdu(teidNoNexthop), v4, "pass_no_route"),
		up("relay to the gNB", fromGNB, gpdu(teidRelay, ulPSC(9)), ra, "relay_forward"),
		down("downlink IPv4, QFI", fromDN, down4),
		down("downlink IPv4, tagged next hop", fromDN, down4b),
		down("downlink IPv4 with options, tagged", taggedDN, down4opts),
		down("downlink IPv6", fromDN, down6),
		up6("uplink IPv4 over IPv6, PSC", fromGNB, gpdu(teidQoS, ulPSC(9)), v4, "uplink_forward"),
		up6("uplink IPv6 over IPv6, tagged", tagged, gpdu(teidV6, ulPSC(1)), v6, "uplink_forward"),
		up6("relay over IPv6 to an IPv4 tunnel", fromGNB, gpdu(teidRelay, ulPSC(9)), ra, "relay_forward"),
		up6("relay over IPv6 to an IPv6 tunnel", fromGNB, gpdu(teidRelay6), ra, "relay_forward"),
		down("downlink IPv4 into an IPv6 tunnel", fromDN, ipPacket{src: dn4, dst: ue4v6, ttl: 64, size: 40, id: 3}),
		down("downlink IPv4 into an IPv6 tunnel, tagged", taggedDN, ipPacket{src: dn4, dst: ue4v6, ttl: 9, size: 12}),
		{name: "echo request", frame: gtpFrame(t, fromGNB, n3Addr, echo, nil), reason: "echo_response"},
		{name: "echo request with a Private Extension", reason: "echo_response",
			frame: gtpFrame(t, tagged, n3Addr2, echoIE, []byte{255, 0, 4, 0x12, 0x34, 0xab, 0xcd})},
	}
	for i := range seeds {
		seeds[i].fields = lengthFields(seeds[i].frame)
	}
	return seeds
}

// lengthFields lists the length fields of a valid frame: outer and inner IP,
// UDP, GTP-U and each extension header.
func lengthFields(b []byte) []lenField {
	off, etype := ethLen, binary.BigEndian.Uint16(b[12:])
	if etype == uint16(layers.EthernetTypeDot1Q) {
		off, etype = ethLen+4, binary.BigEndian.Uint16(b[16:])
	}
	var fs []lenField
	ip := func(off int, v4 bool) {
		if v4 {
			fs = append(fs, lenField{off: off, kind: '4', tracks: false}, lenField{off: off + 2, kind: '2', tracks: true})
		} else {
			fs = append(fs, lenField{off: off + 4, kind: '2', tracks: true})
		}
	}
	ip(off, etype == uint16(layers.EthernetTypeIPv4))
	var udp int
	switch {
	case etype == uint16(layers.EthernetTypeIPv4) && b[off+9] == uint8(layers.IPProtocolUDP):
		udp = off + int(b[off]&0xf)*4
	case etype == uint16(layers.EthernetTypeIPv6) && b[off+6] == uint8(layers.IPProtocolUDP):
		udp = off + 40
	default:
		return fs
	}
	gtp := udp + 8
	fs = append(fs, lenField{off: udp + 4, kind: '2', tracks: true}, lenField{off: gtp + 2, kind: '2', tracks: true})
	pos := gtp + 8
	if b[gtp]&0x07 != 0 {
		pos += 4
		for next := b[pos-1]; next != 0 && b[gtp]&0x04 != 0; {
			n := 4 * int(b[pos])
			fs = append(fs, lenField{off: pos, kind: '1', tracks: false})
			next = b[pos+n-1]
			pos += n
		}
	}
	if b[gtp+1] == 255 {
		ip(pos, b[pos]>>4 == 4)
	}
	return fs
}

// mutate applies one to three random changes to a copy of s.frame.
func mutate(r *rand.Rand, s seedFrame) []byte {
	b := bytes.Clone(s.frame)
	for range 1 + r.IntN(3) {
		switch r.IntN(6) {
		case 0, 1: // bytes, mostly in the headers
			for range 1 + r.IntN(4) {
				i := r.IntN(len(b))
				if r.IntN(5) > 0 {
					i = r.IntN(min(len(b), 100))
				}
				if r.IntN(2) == 0 {
					b[i] ^= 1 << r.IntN(8)
				} else {
					b[i] = byte(r.Uint32())
				}
			}
		case 2:
			setLength(r, b, s.fields[r.IntN(len(s.fields))])
		case 3: // the kernel runs nothing shorter than an Ethernet header
			if len(b) > ethLen {
				b = b[:ethLen+r.IntN(len(b)-ethLen)]
			}
		case 4:
			b = appendJunk(r, b, 1+r.IntN(64))
		case 5: // resized with some of the lengths following
			d := r.IntN(121) - 60
			if len(b)+d < ethLen {
				d = ethLen - len(b)
			}
			if d < 0 {
				b = b[:len(b)+d]
			} else {
				b = appendJunk(r, b, d)
			}
			for _, f := range s.fields {
				if f.tracks && f.off+2 <= len(b) && r.IntN(4) > 0 {
					binary.BigEndian.PutUint16(b[f.off:], binary.BigEndian.Uint16(b[f.off:])+uint16(d))
				}
			}
		}
	}
	// Half the mutants get their IPv4 headers' checksums right, so that
	// the program's updates of them are checked on changed headers too.
	if r.IntN(2) == 0 {
		for _, f := range s.fields {
			if hdr := int(b[min(f.off, len(b)-1)]&0xf) * 4; f.kind == '4' && hdr >= 20 && f.off+hdr <= len(b) {
				h := b[f.off : f.off+hdr]
				h[10], h[11] = 0, 0
				binary.BigEndian.PutUint16(h[10:], gopacket.FoldChecksum(gopacket.ComputeChecksum(h, 0)))
			}
		}
	}
	return b
}

func appendJunk(r *rand.Rand, b []byte, n int) []byte {
	for range n {
		b = append(b, byte(r.Uint32()))
	}
	return b
}

// setLength sets a length field to zero, a value near its own, or any.
func setLength(r *rand.Rand, b []byte, f lenField) {
	if f.off+2 > len(b) {
		return
	}
	switch f.kind {
	case '4':
		ihl := b[f.off] & 0xf
		if r.IntN(2) == 0 {
			ihl += byte(r.IntN(3)) - 1
		} else {
			ihl = byte(r.IntN(16))
		}
		b[f.off] = b[f.off]&0xf0 | ihl&0xf
	case '1':
		b[f.off] = []byte{0, 1, 2, b[f.off] - 1, b[f.off] + 1, 255, byte(r.Uint32())}[r.IntN(7)]
	case '2':
		v := binary.BigEndian.Uint16(b[f.off:])
		near := uint16(1 + r.IntN(64))
		v = []uint16{0, 1, v - 1, v + 1, v - near, v + near, 0xffff, uint16(r.Uint32())}[r.IntN(8)]
		binary.BigEndian.PutUint16(b[f.off:], v)
	}
}

func TestMutatedFrames(t *testing.T) {
	u := newMutationUPF(t)
	seeds := mutationSeeds(t)
	r := rand.New(rand.NewPCG(5, 0x5e5))
	failures := 0
	for _, s := range seeds {
		if reason, err := u.checkProperties(t, s.frame); err != nil || reason != s.reason {
			t.Fatalf("seed %q: %s (%v), want %s", s.name, reason, err, s.reason)
		}
		for range mutantsPerSeed {
			in := mutate(r, s)
			if _, err := u.checkProperties(t, in); err != nil {
				t.Errorf("mutant of %q: %v\n%s", s.name, err, hex.Dump(in))
				if failures++; failures == 10 {
					t.FailNow()
				}
			}
		}
	}
}

// newMutationUPF is the fixture of ipv6_test.go (upf_test.go's with IPv6
// N3 addresses) with relay rules, so that mutants reach the tunnels from
// the uplink side too, and a downlink into an IPv6 tunnel.
func newMutationUPF(t *testing.T) *upf {
	u := newUPF6(t, RoleAccess|RoleCore)
	const pdrRelay, pdrRelay6, pdrDownV6 = testPDRs, testPDRs + 1, testPDRs + 2
	for slot, p := range map[uint32]PDR{
		pdrRelay:  {Flags: ToUE | MarkQFI, Qfi: 9, Far: encap(dlTEID, n3Addr, gnb, nhGNB)},
		pdrRelay6: {Flags: ToUE, Far: encap6(dlTEID, nhGNB6VLAN)},
		pdrDownV6: {Flags: MarkQFI, Qfi: 5, Far: encap6(dlTEID2, nhGNB6)},
	} {
		p.Id = uint16(slot + 1)
		check(t, u.d.PutPDR(slot, p))
	}
	check(t, u.d.PutUplink(onN3(teidRelay), pdrSet(pdrRelay)))
	check(t, u.d.PutUplink(FTEID{n3Addr6, teidRelay}, pdrSet(pdrRelay)))
	check(t, u.d.PutUplink(FTEID{n3Addr6, teidRelay6}, pdrSet(pdrRelay6)))
	check(t, u.d.PutDownlink(ue4v6, pdrSet(pdrDownV6)))
	return u
}

// checkProperties runs in and returns the reason that counted it, and what
// is wrong if anything is.
func (u *upf) checkProperties(t *testing.T, in []byte) (string, error) {
	before := u.counters(t)
	act, out := u.run(t, in)
	var counted []string
	for name, c := range u.counters(t) {
		if c != before[name] {
			counted = append(counted, fmt.Sprintf("%s+%d/%dB", name, c.Packets-before[name].Packets, c.Bytes-before[name].Bytes))
		}
	}
	if len(counted) != 1 {
		return "", fmt.Errorf("%v: counted as %v, want one reason", act, counted)
	}
	reason, _, _ := strings.Cut(counted[0], "+")
	if want := fmt.Sprintf("%s+1/%dB", reason, len(in)); counted[0] != want {
		return reason, fmt.Errorf("%v: counted as %s, want %s", act, counted[0], want)
	}
	if want := verdictOf(reason); act != want {
		return reason, fmt.Errorf("%v counted as %s, want %v", act, reason, want)
	}
	if len(out) > len(in)+maxGrowth {
		return reason, fmt.Errorf("%s: %d bytes out of %d", reason, len(out), len(in))
	}
	if err := checkOutput(in, out, reason); err != nil {
		return reason, fmt.Errorf("%s: %v\nout:\n%s", reason, err, hex.Dump(out))
	}
	return reason, nil
}

func verdictOf(reason string) xdplink.Action {
	switch {
	case strings.HasPrefix(reason, "pass_"):
		return xdplink.Pass
	case reason == "echo_response":
		return xdplink.TX
	case strings.HasSuffix(reason, "_forward"):
		return xdplink.Redirect
	}
	return xdplink.Drop // drop_* and buffered
}

// checkOutput checks the frame left behind for the reason that counted it.
func checkOutput(in, out []byte, reason string) error {
	switch reason {
	case "uplink_forward":
		l2, err := l2Len(out)
		if err != nil {
			return err
		}
		return checkInner(in, out[l2:], 1)
	case "pass_no_route":
		// The kernel gets the decapsulated packet untagged, TTL as received.
		if len(out) < ethLen || binary.BigEndian.Uint16(out[12:]) == uint16(layers.EthernetTypeDot1Q) {
			return fmt.Errorf("no untagged Ethernet header")
		}
		return checkInner(in, out[ethLen:], 0)
	case "downlink_forward":
		return checkTunnel(in, out, 1)
	case "relay_forward": // the relayed packet is the peers', hop limit included
		return checkTunnel(in, out, 0)
	case "echo_response":
		return checkEcho(out)
	}
	if verdictOf(reason) == xdplink.Pass {
		if diff := testsupport.FrameDiff(out, in); diff != "" {
			return fmt.Errorf("a frame passed to the kernel changed: %s", diff)
		}
	}
	return nil // a dropped frame's bytes go nowhere
}

// decoded decodes a frame as gopacket does, up to the layer of type last.
func decoded(out []byte, last gopacket.LayerType) (gopacket.Packet, error) {
	p := gopacket.NewPacket(out, layers.LayerTypeEthernet, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
	if p.Layer(last) == nil {
		if e := p.ErrorLayer(); e != nil {
			return nil, fmt.Errorf("no %v: %v", last, e.Error())
		}
		return nil, fmt.Errorf("no %v", last)
	}
	return p, nil
}

func l2Len(out []byte) (int, error) {
	p := gopacket.NewPacket(out, layers.LayerTypeEthernet, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
	n := 0
	for _, l := range p.Layers() {
		if l.LayerType() != layers.LayerTypeEthernet && l.LayerType() != layers.LayerTypeDot1Q {
			break
		}
		n += len(l.LayerContents())
	}
	if n < ethLen {
		return 0, fmt.Errorf("no Ethernet header")
	}
	return n, nil
}

func checksumOK(h []byte) bool { return gopacket.FoldChecksum(gopacket.ComputeChecksum(h, 0)) == 0 }

// checkIPv4 checks an IPv4 header the program wrote or kept: the checksum
// verifies and the total length is exactly the bytes that follow in pkt.
func checkIPv4(ip *layers.IPv4, pkt []byte) error {
	if !checksumOK(ip.Contents) {
		return fmt.Errorf("IPv4 header checksum %#04x does not verify", ip.Checksum)
	}
	if int(ip.Length) != len(pkt) {
		return fmt.Errorf("IPv4 total length %d, %d bytes", ip.Length, len(pkt))
	}
	return nil
}

// gtpuFrame decodes a GTP-U frame the program wrote and checks its outer
// IPv4 header (checksum, IHL 5, total length) or IPv6 header (payload
// length, hop limit 64, the UDP checksum verifying) and its UDP length; it
// returns the UDP and GTP-U layers and the bytes after the GTP-U header.
func gtpuFrame(out []byte) (*layers.UDP, *layers.GTPv1U, int, error) {
	p, err := decoded(out, layers.LayerTypeGTPv1U)
	if err != nil {
		return nil, nil, 0, err
	}
	l2, err := l2Len(out)
	if err != nil {
		return nil, nil, 0, err
	}
	udp := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
	ipLen := 20
	if ip, ok := p.NetworkLayer().(*layers.IPv6); ok { // the outer one: the inner may be IPv6 too
		ipLen = 40
		if int(ip.Length) != len(out)-l2-40 || ip.HopLimit != 64 || ip.NextHeader != layers.IPProtocolUDP {
			return nil, nil, 0, fmt.Errorf("outer IPv6 payload length %d, hop limit %d, next header %d; %d bytes",
				ip.Length, ip.HopLimit, ip.NextHeader, len(out)-l2-40)
		}
		if err := testsupport.UDP6Checksum(out[l2-ethLen:]); err != nil && !innerDamaged(p) {
			return nil, nil, 0, fmt.Errorf("outer %w", err)
		}
	} else {
		ip, ok := p.NetworkLayer().(*layers.IPv4)
		if !ok {
			return nil, nil, 0, fmt.Errorf("outer %v", p.NetworkLayer().LayerType())
		}
		if err := checkIPv4(ip, out[l2:]); err != nil {
			return nil, nil, 0, fmt.Errorf("outer %v", err)
		}
		if ip.IHL != 5 {
			return nil, nil, 0, fmt.Errorf("outer IHL %d", ip.IHL)
		}
	}
	after := len(out) - l2 - ipLen - 8 - 8
	if int(udp.Length) != 16+after {
		return nil, nil, 0, fmt.Errorf("outer UDP length %d, %d bytes", udp.Length, 16+after)
	}
	return udp, p.Layer(layers.LayerTypeGTPv1U).(*layers.GTPv1U), after, nil
}

// innerDamaged says the packet inside a GTP-U frame shows itself damaged:
// one of its own checksums (IPv4 header, TCP, UDP, ICMP, ICMPv6) fails.
// Over IPv6 the program derives the tunnel's checksum from these, so such a
// packet's tunnel checksum fails too: it stays detectably damaged.
func innerDamaged(p gopacket.Packet) bool {
	var network gopacket.NetworkLayer
	inside := false
	for _, l := range p.Layers() {
		switch l := l.(type) {
		case *layers.GTPv1U:
			inside = true
			continue
		case gopacket.NetworkLayer:
			network = l
		case interface {
			SetNetworkLayerForChecksum(gopacket.NetworkLayer) error
		}:
			if network == nil || l.SetNetworkLayerForChecksum(network) != nil {
				return false
			}
		}
		if v, ok := l.(interface {
			VerifyChecksum() (error, gopacket.ChecksumVerificationResult)
		}); ok && inside {
			if err, res := v.VerifyChecksum(); err == nil && !res.Valid {
				return true
			}
		}
	}
	return false
}

// checkTunnel checks a GTP-U frame the program built: outer IPv4 and UDP,
// GTP-U length and extension chain, and the packet inside (see checkInner).
func checkTunnel(in, out []byte, hops int) error {
	udp, gtp, after, err := gtpuFrame(out)
	if err != nil {
		return err
	}
	if udp.SrcPort != gtpuPort || udp.DstPort != gtpuPort {
		return fmt.Errorf("outer UDP %d->%d", udp.SrcPort, udp.DstPort)
	}
	if int(gtp.MessageLength) != after || gtp.MessageType != 255 || gtp.Version != 1 {
		return fmt.Errorf("GTP-U v%d type %d length %d, %d bytes after its header", gtp.Version, gtp.MessageType, gtp.MessageLength, after)
	}
	return checkInner(in, gtp.Payload, hops)
}

// checkInner checks a packet the program decapsulated or encapsulated: its
// length field counts exactly the bytes it has, and it is a packet of the
// input with its hop count lowered by hops (the IPv4 checksum updated)
// and nothing else changed.
func checkInner(in, pkt []byte, hops int) error {
	if len(pkt) == 0 {
		return fmt.Errorf("no inner packet")
	}
	switch pkt[0] >> 4 {
	case 4:
		// Read here rather than by gopacket, which refuses IPv4 options
		// that the program rightly does not look at.
		if len(pkt) < 20 {
			return fmt.Errorf("inner IPv4 header of %d bytes", len(pkt))
		}
		hdr, tot := int(pkt[0]&0xf)*4, int(binary.BigEndian.Uint16(pkt[2:]))
		if hdr < 20 || hdr > len(pkt) || tot != len(pkt) {
			return fmt.Errorf("inner IPv4 IHL %d, total length %d, %d bytes", hdr/4, tot, len(pkt))
		}
		for _, src := range sourcesOf(in, pkt, 8, hops, []int{8, 10, 11}) {
			// Narrowed from "verifies": the program does not verify
			// checksums, it updates them (RFC 1624), so a header received
			// corrupt must stay detectably corrupt, and a good one good.
			if checksumOK(src[:hdr]) == checksumOK(pkt[:hdr]) {
				return nil
			}
		}
		return fmt.Errorf("inner IPv4 header: no packet of the input with TTL+%d, or the checksum's validity changed", hops)
	case 6:
		if len(pkt) < 40 || 40+int(binary.BigEndian.Uint16(pkt[4:])) != len(pkt) {
			return fmt.Errorf("inner IPv6 payload length does not match its %d bytes", len(pkt))
		}
		if len(sourcesOf(in, pkt, 7, hops, []int{7})) == 0 {
			return fmt.Errorf("inner IPv6 packet: not in the input with hop limit+%d", hops)
		}
		return nil
	}
	return fmt.Errorf("inner packet of version %d", pkt[0]>>4)
}

// sourcesOf returns the places of in holding pkt, but for the bytes at
// changed, where the byte at hop is hops higher in the input.
func sourcesOf(in, pkt []byte, hop, hops int, changed []int) [][]byte {
	last := changed[len(changed)-1] + 1
	var found [][]byte
	for from := 0; ; from++ {
		i := bytes.Index(in[from:], pkt[last:])
		if i < 0 {
			return found
		}
		from += i
		start := from - last
		if start < 0 {
			continue
		}
		src := in[start : start+len(pkt)]
		same := int(src[hop]) == int(pkt[hop])+hops
		for j := range last {
			same = same && (src[j] == pkt[j] || slices.Contains(changed, j))
		}
		if same && (hops != 0 || bytes.Equal(src, pkt)) {
			found = append(found, src)
		}
	}
}

// checkEcho checks an Echo Response: headers and lengths of the 14 bytes of
// GTP-U (header, sequence number, Recovery IE) the program writes.
func checkEcho(out []byte) error {
	_, gtp, after, err := gtpuFrame(out)
	if err != nil {
		return err
	}
	if int(gtp.MessageLength) != after || gtp.MessageType != 2 || !gtp.SequenceNumberFlag ||
		!bytes.Equal(gtp.Payload, []byte{14, 0}) {
		return fmt.Errorf("GTP-U type %d length %d (%d bytes after the header), IEs %x", gtp.MessageType, gtp.MessageLength, after, gtp.Payload)
	}
	return nil
}
