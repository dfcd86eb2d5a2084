package demo

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"runtime"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
)

// The demo network: gNB ──N3── UPF ──N6── DN, one namespace each. Interface
// names only need to be unique inside their namespace.
const (
	N3 = "n3" // the gNB's and the UPF's ends of the N3 link
	N6 = "n6" // the UPF's and the DN's ends of the N6 link
)

var (
	GNBAddr = netip.MustParseAddr("10.100.3.1")
	N3Addr  = netip.MustParseAddr("10.100.3.2") // the UPF's, outer source of downlink tunnels
	N6Addr  = netip.MustParseAddr("10.100.6.1")
	DNAddr  = netip.MustParseAddr("10.100.6.2")
	DN6Addr = netip.MustParseAddr("2001:db8:6::2") // the source of IPv6 downlink packets
	UEAddr  = netip.MustParseAddr("10.45.0.2")
	UE6Addr = netip.MustParseAddr("2001:db8:45::2") // in the UE's /64

	// The links' IPv6 addresses, which EnableIPv6 adds: GTP-U over IPv6
	// on N3, the IPv6 UEs' uplink on N6.
	GNB6Addr = netip.MustParseAddr("2001:db8:3::1")
	N3Addr6  = netip.MustParseAddr("2001:db8:3::2") // the UPF's IPv6 N3 address
	N6Addr6  = netip.MustParseAddr("2001:db8:6::1")
)

const (
	n3Bits, n6Bits = 24, 24
	gtpuPort       = 2152
	AppPort        = 5001 // the DN application's port, where the sinks filter
	UETTL          = 64   // of the packets UEPacket builds for sending

	// PDUSessionContainer is the GTP-U extension header type that carries
	// the QFI (TS 29.281 5.2.1).
	PDUSessionContainer = 0x85
	// DLPDUSession and ULPDUSession are the PDU types of a PDU Session
	// Container (TS 38.415), the high nibble of its first octet.
	DLPDUSession = 0x00
	ULPDUSession = 0x10
)

// Testbed is the demo network with a traffic sink at each far end: veth
// delivers what the UPF redirects only to an end with an XDP program.
type Testbed struct {
	GNB, UPF, DN *namespace.Netns
	// MACs of the veth ends: the gNB's and the UPF's N3, the UPF's and the
	// DN's N6.
	GNBMAC, N3MAC, N6MAC, DNMAC net.HardwareAddr
	// GNBSink counts GTP-U at the gNB, DNSink the UE's traffic in the DN.
	GNBSink, DNSink *trafficgen.Sink
	gnbIndex        int
	dnIndex         int
}

// NewTestbed builds the three namespaces and their links. The UPF knows
// both neighbours statically, so next hops resolve without ARP.
func NewTestbed() (_ *Testbed, err error) {
	tb := &Testbed{}
	defer func() {
		if err != nil {
			err = errors.Join(err, tb.Close())
		}
	}()
	for _, n := range []struct {
		ns     **namespace.Netns
		prefix string
	}{{&tb.GNB, "xdp5g-gnb"}, {&tb.UPF, "xdp5g-upf"}, {&tb.DN, "xdp5g-dn"}} {
		if *n.ns, err = namespace.New(n.prefix); err != nil {
			return nil, err
		}
		// Without IPv6 on the links the stacks stay silent and only the
		// generators fill the veth queues: a router solicitation or MLD
		// report sent from the other CPU can move a queue's NAPI there,
		// where a generator at full speed outruns it.
		if err := (*n.ns).Sysctl("net.ipv6.conf.default.disable_ipv6", "1"); err != nil {
			return nil, err
		}
	}
	if err := errors.Join(namespace.Veth(tb.GNB, N3, tb.UPF, N3), namespace.Veth(tb.UPF, N6, tb.DN, N6)); err != nil {
		return nil, err
	}
	if tb.gnbIndex, tb.GNBMAC, err = tb.GNB.Link(N3); err != nil {
		return nil, err
	}
	if _, tb.N3MAC, err = tb.UPF.Link(N3); err != nil {
		return nil, err
	}
	if _, tb.N6MAC, err = tb.UPF.Link(N6); err != nil {
		return nil, err
	}
	if tb.dnIndex, tb.DNMAC, err = tb.DN.Link(N6); err != nil {
		return nil, err
	}
	err = errors.Join(
		tb.GNB.AddAddr(N3, cidr(GNBAddr, n3Bits)),
		tb.UPF.AddAddr(N3, cidr(N3Addr, n3Bits)),
		tb.UPF.AddAddr(N6, cidr(N6Addr, n6Bits)),
		tb.DN.AddAddr(N6, cidr(DNAddr, n6Bits)),
		tb.UPF.SetNeigh(N3, GNBAddr.String(), tb.GNBMAC),
		tb.UPF.SetNeigh(N6, DNAddr.String(), tb.DNMAC),
	)
	if err != nil {
		return nil, err
	}
	return tb, tb.NewSinks()
}

// NewSinks attaches fresh sinks at the far ends, in place of those there
// (closed): a sink samples the first frame it matches, a fresh one the
// next.
func (tb *Testbed) NewSinks() error {
	for _, s := range []*trafficgen.Sink{tb.GNBSink, tb.DNSink} {
		if s != nil {
			if err := s.Close(); err != nil {
				return err
			}
		}
	}
	tb.GNBSink, tb.DNSink = nil, nil
	var err error
	gtpu := trafficgen.Filter{IPProto: uint8(layers.IPProtocolUDP), DstPort: gtpuPort} // over IPv4 or IPv6
	if tb.GNBSink, err = trafficgen.NewSink(tb.GNB, N3, gtpu, false); err != nil {
		return err
	}
	app := trafficgen.Filter{IPProto: uint8(layers.IPProtocolUDP), DstPort: AppPort}
	tb.DNSink, err = trafficgen.NewSink(tb.DN, N6, app, false)
	return err
}

func cidr(a netip.Addr, bits int) string { return netip.PrefixFrom(a, bits).String() }

// EnableIPv6 turns IPv6 on for the links (the testbed leaves it off) and
// gives them IPv6 addresses: N3 between GNB6Addr and N3Addr6, N6 between
// N6Addr6 and DN6Addr, each /64, the UPF's neighbours static as for IPv4.
func (tb *Testbed) EnableIPv6() error {
	var errs []error
	for _, end := range []struct {
		ns     *namespace.Netns
		ifname string
		addr   netip.Addr
	}{{tb.GNB, N3, GNB6Addr}, {tb.UPF, N3, N3Addr6}, {tb.UPF, N6, N6Addr6}, {tb.DN, N6, DN6Addr}} {
		errs = append(errs, end.ns.Sysctl("net.ipv6.conf."+end.ifname+".disable_ipv6", "0"),
			end.ns.AddAddr(end.ifname, cidr(end.addr, 64)))
	}
	errs = append(errs, tb.UPF.SetNeigh(N3, GNB6Addr.String(), tb.GNBMAC), tb.UPF.SetNeigh(N6, DN6Addr.String(), tb.DNMAC))
	return errors.Join(errs...)
}

// Close detaches the sinks and deletes the namespaces, and with them the
// links and whatever is attached to them.
func (tb *Testbed) Close() error {
	var errs []error
	for _, s := range []*trafficgen.Sink{tb.GNBSink, tb.DNSink} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	for _, ns := range []*namespace.Netns{tb.GNB, tb.UPF, tb.DN} {
		if ns != nil {
			errs = append(errs, ns.Delete())
		}
	}
	return errors.Join(errs...)
}

// UEPacket is an IPv4 or IPv6 UDP packet between the UE and the DN: from
// the UE to AppPort in the DN when uplink, the other way round otherwise.
func UEPacket(ue, dn netip.Addr, uplink bool, ttl uint8) []byte {
	src, dst, sport, dport := dn, ue, layers.UDPPort(AppPort), layers.UDPPort(40000)
	if uplink {
		src, dst, sport, dport = ue, dn, dport, sport
	}
	var ip gopacket.NetworkLayer = &layers.IPv4{Version: 4, TTL: ttl, Protocol: layers.IPProtocolUDP,
		SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
	if ue.Is6() {
		ip = &layers.IPv6{Version: 6, HopLimit: ttl, NextHeader: layers.IPProtocolUDP,
			SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
	}
	udp := &layers.UDP{SrcPort: sport, DstPort: dport}
	udp.SetNetworkLayerForChecksum(ip)
	return Serialize(true, ip.(gopacket.SerializableLayer), udp, gopacket.Payload("xdp5g demo: UE <-> data network"))
}

// RTPH265 is an RTP packet (RFC 3550: V=2, PT 96, sequence, timestamp,
// SSRC) carrying an H.265 NAL unit whose payload header (RFC 7798) has
// type nalType, layer id and TID (temporal id + 1), then what follows.
func RTPH265(ssrc uint32, nalType, layerID, tid byte, more ...byte) gopacket.Payload {
	b := []byte{0x80, 96, 0x12, 0x34, 0, 0, 0x10, 0}
	b = binary.BigEndian.AppendUint32(b, ssrc)
	b = append(b, nalType<<1|layerID>>5, layerID<<3|tid)
	return append(b, more...)
}

// Serialize builds a packet from layers, fixing lengths and, when asked,
// checksums.
func Serialize(checksums bool, ls ...gopacket.SerializableLayer) []byte {
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: checksums}
	if err := gopacket.SerializeLayers(buf, opts, ls...); err != nil {
		panic(err) // a layer that cannot be serialized: a programming error
	}
	return bytes.Clone(buf.Bytes())
}

// Ethernet frames an IPv4 or IPv6 packet.
func Ethernet(dst, src net.HardwareAddr, ip []byte) []byte {
	etype := layers.EthernetTypeIPv4
	if ip[0]>>4 == 6 {
		etype = layers.EthernetTypeIPv6
	}
	return Serialize(false, &layers.Ethernet{DstMAC: dst, SrcMAC: src, EthernetType: etype}, gopacket.Payload(ip))
}

// GTPUFrame is the frame from MAC address from to to of inner in a G-PDU
// with teid from src to dst, TTL (hop limit) 64: in UDP/IPv6 with the
// checksum IPv6 requires, or in UDP/IPv4 with none (GTP-U over IPv4 need
// not carry one). psc is the content of its PDU Session Container (TS
// 38.415), the PDU type then the QFI; nil: none.
func GTPUFrame(to, from net.HardwareAddr, src, dst netip.Addr, teid uint32, psc []byte, inner []byte) []byte {
	gtp := &layers.GTPv1U{Version: 1, ProtocolType: 1, MessageType: 255, TEID: teid}
	if psc != nil {
		gtp.GTPExtensionHeaders = []layers.GTPExtensionHeader{{Type: PDUSessionContainer, Content: psc}}
	}
	udp := &layers.UDP{SrcPort: gtpuPort, DstPort: gtpuPort}
	if src.Is6() {
		outer := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
		udp.SetNetworkLayerForChecksum(outer)
		return Ethernet(to, from, Serialize(true, outer, udp, gtp, gopacket.Payload(inner)))
	}
	outer := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
	return Ethernet(to, from, Serialize(true, outer, gopacket.Payload(Serialize(false, udp, gtp, gopacket.Payload(inner)))))
}

// UplinkFrame is what the gNB sends for an uplink packet of the UE: a G-PDU
// with an UL PDU Session Container carrying qfi.
func (tb *Testbed) UplinkFrame(teid uint32, qfi uint8, inner []byte) []byte {
	return GTPUFrame(tb.N3MAC, tb.GNBMAC, GNBAddr, N3Addr, teid, []byte{ULPDUSession, qfi}, inner)
}

// UplinkFrame6 is UplinkFrame over IPv6, from GNB6Addr to N3Addr6.
func (tb *Testbed) UplinkFrame6(teid uint32, qfi uint8, inner []byte) []byte {
	return GTPUFrame(tb.N3MAC, tb.GNBMAC, GNB6Addr, N3Addr6, teid, []byte{ULPDUSession, qfi}, inner)
}

// DownlinkFrame is what the DN sends towards the UE.
func (tb *Testbed) DownlinkFrame(inner []byte) []byte {
	return Ethernet(tb.N6MAC, tb.DNMAC, inner)
}

// Direction is one way through the UPF: the end frames leave from and the
// sink they must reach.
type Direction struct {
	Name, To string
	from     *namespace.Netns
	ifindex  int
	Sink     *trafficgen.Sink
}

// NewDirection is the way from interface ifindex of namespace from, in
// frames that must reach sink; to names where.
func NewDirection(name, to string, from *namespace.Netns, ifindex int, sink *trafficgen.Sink) Direction {
	return Direction{name, to, from, ifindex, sink}
}

// Uplink goes from the gNB to the DN, Downlink the other way.
func (tb *Testbed) Uplink() Direction {
	return Direction{"uplink", "the DN", tb.GNB, tb.gnbIndex, tb.DNSink}
}

func (tb *Testbed) Downlink() Direction {
	return Direction{"downlink", "the gNB", tb.DN, tb.dnIndex, tb.GNBSink}
}

// Send transmits count copies of frame from the direction's end with gen,
// from a thread bound to one CPU: veth serves a queue on the CPU that
// scheduled it for as long as it does not run empty, so a sender that moved
// to the other CPU would fill it faster than it drains while that CPU is
// busy.
func (d Direction) Send(gen *trafficgen.Generator, frame []byte, count uint64, opts trafficgen.Options) (sent uint64, elapsed time.Duration, err error) {
	return d.SendOn(-1, gen, frame, count, opts)
}

// SendOn is Send from CPU cpu; -1 is the first CPU the caller may run on.
func (d Direction) SendOn(cpu int, gen *trafficgen.Generator, frame []byte, count uint64, opts trafficgen.Options) (sent uint64, elapsed time.Duration, err error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err = bindToCPU(cpu); err == nil {
			sent, elapsed, err = gen.Send(d.from, d.ifindex, frame, count, opts)
		}
	}()
	<-done
	return sent, elapsed, err
}

// bindToCPU binds the calling thread to CPU cpu, or with -1 to the first
// CPU it may run on.
func bindToCPU(cpu int) error {
	var allowed, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		return err
	}
	for c := 0; cpu < 0 && one.Count() == 0; c++ {
		if allowed.IsSet(c) {
			one.Set(c)
		}
	}
	if cpu >= 0 {
		one.Set(cpu)
	}
	return unix.SchedSetaffinity(0, &one)
}

// Delivered waits until the sink has matched want packets in all, or until
// its count stops growing for 2 s, and returns how many it matched. The
// count must stand still for long: on a busy host packets may wait their
// turn in a queue (a CPU's, a veth's) for hundreds of milliseconds.
func (d Direction) Delivered(want uint64) (uint64, error) {
	return d.DeliveredQuiet(want, 2*time.Second)
}

// DeliveredQuiet is Delivered with the count standing still for quiet.
func (d Direction) DeliveredQuiet(want uint64, quiet time.Duration) (uint64, error) {
	const poll = 10 * time.Millisecond
	var last uint64
	lastChange := time.Now()
	for {
		c, err := d.Sink.Counts()
		if err != nil || c.MatchPackets >= want {
			return c.MatchPackets, err
		}
		if c.MatchPackets != last {
			last, lastChange = c.MatchPackets, time.Now()
		} else if time.Since(lastChange) > quiet {
			return last, nil
		}
		time.Sleep(poll)
	}
}
