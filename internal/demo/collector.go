package demo

import (
	"errors"
	"net"
	"net/netip"

	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// The LI collector's link from the UPF, in both namespaces, and its
// addresses.
const CollectorLink = "li"

var (
	CollectorAddr    = netip.MustParseAddr("198.51.100.9")
	CollectorUPFAddr = netip.MustParseAddr("198.51.100.1") // the UPF's end
)

// Collector is where a UPF sends the copies of duplicated packets (DUPL):
// a namespace of its own behind the UPF's link CollectorLink, which the
// UPF knows statically. XDP sends copies out of the data path's own
// interfaces: attach the UPF there (UPF.AttachCollector).
type Collector struct {
	NS          *namespace.Netns
	MAC, UPFMAC net.HardwareAddr
}

// NewCollector builds the collector's namespace and link.
func (tb *Testbed) NewCollector() (_ *Collector, err error) {
	c := &Collector{}
	if c.NS, err = namespace.New("xdp5g-li"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Close())
		}
	}()
	if err := c.NS.Sysctl("net.ipv6.conf.default.disable_ipv6", "1"); err != nil {
		return nil, err
	}
	if err := namespace.Veth(tb.UPF, CollectorLink, c.NS, CollectorLink); err != nil {
		return nil, err
	}
	if _, c.UPFMAC, err = tb.UPF.Link(CollectorLink); err != nil {
		return nil, err
	}
	if _, c.MAC, err = c.NS.Link(CollectorLink); err != nil {
		return nil, err
	}
	return c, errors.Join(tb.UPF.AddAddr(CollectorLink, cidr(CollectorUPFAddr, 24)),
		c.NS.AddAddr(CollectorLink, cidr(CollectorAddr, 24)),
		tb.UPF.SetNeigh(CollectorLink, CollectorAddr.String(), c.MAC))
}

// Close deletes the namespace, the link with it.
func (c *Collector) Close() error { return c.NS.Delete() }

// Copies is a sink of the IPv4 UDP packets that reach the collector, as
// the way they arrive by; it counts until closed.
func (c *Collector) Copies() (Direction, error) {
	s, err := trafficgen.NewSink(c.NS, CollectorLink, trafficgen.Filter{EtherType: uint16(layers.EthernetTypeIPv4),
		IPProto: uint8(layers.IPProtocolUDP)}, false)
	return Direction{Name: "copies", To: "the collector", Sink: s}, err
}

// Tunnelled is the frame of a copy of inner in a GTP-U tunnel with teid
// from the UPF's N3 address to the collector; Plain of one without.
func (c *Collector) Tunnelled(teid uint32, inner []byte) []byte {
	return GTPUFrame(c.MAC, c.UPFMAC, N3Addr, CollectorAddr, teid, nil, inner)
}

func (c *Collector) Plain(inner []byte) []byte { return Ethernet(c.MAC, c.UPFMAC, inner) }

// AttachCollector puts xdp_upf on the collector's link too, so that the
// copies can leave by it; Detach takes it off with the others.
func (u *UPF) AttachCollector() error {
	if err := u.ns.Do(func() error { return u.Datapath.Attach(CollectorLink, upfxdp.RoleCopies, xdplink.ModeNative) }); err != nil {
		return err
	}
	u.attached = append(u.attached, CollectorLink)
	return nil
}
