package e2e

import (
	"cmp"
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/lab/pfcptest"
	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/platform/trafficgen"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// upfNet is a network of namespaces joined by veth links, for sessions
// that several UPFs carry, each a daemon of its own in its namespace: the
// links' ends' indexes and MAC addresses by the end's key ("iupf/n3": the
// I-UPF's n3).
type upfNet struct {
	mac   map[string]net.HardwareAddr
	index map[string]int
}

func newUPFNet(t *testing.T) *upfNet {
	t.Helper()
	testsupport.NeedRoot(t, "namespaces, XDP")
	return &upfNet{mac: map[string]net.HardwareAddr{}, index: map[string]int{}}
}

// netns is a namespace of the network, with IPv6 off on the links that
// get no IPv6 address.
func (n *upfNet) netns(t *testing.T, name string) *namespace.Netns {
	t.Helper()
	ns := testsupport.Netns(t, name)
	check(t, ns.Sysctl("net.ipv6.conf.default.disable_ipv6", "1"))
	return ns
}

// netEnd is one end of a link: its namespace, its key, the link's name
// there and its addresses.
type netEnd struct {
	ns    *namespace.Netns
	key   string
	link  string
	addrs []netip.Addr
}

// link joins two ends with a veth pair and gives each its addresses, IPv4
// ones /24, IPv6 ones /64 (IPv6 on for that link). Each end knows the
// other's addresses: next hops resolve without ARP or NDP.
func (n *upfNet) link(t *testing.T, a, b netEnd) {
	t.Helper()
	check(t, namespace.Veth(a.ns, a.link, b.ns, b.link))
	ends := [2]netEnd{a, b}
	for _, e := range ends {
		i, mac, err := e.ns.Link(e.link)
		check(t, err)
		n.mac[e.key], n.index[e.key] = mac, i
		for _, addr := range e.addrs {
			bits := 24
			if addr.Is6() {
				bits = 64
				check(t, e.ns.Sysctl("net.ipv6.conf."+e.link+".disable_ipv6", "0"))
			}
			check(t, e.ns.AddAddr(e.link, netip.PrefixFrom(addr, bits).String()))
		}
	}
	for i, e := range ends {
		other := ends[1-i]
		for _, addr := range other.addrs {
			check(t, e.ns.SetNeigh(e.link, addr.String(), n.mac[other.key]))
		}
	}
}

// pathNode is a node of a upfPath: its namespace's name, and the key of
// its links' ends (a UPF's: key/link).
type pathNode struct{ name, key string }

// upfPath is a path through two UPFs with its links' addresses,
//
//	gNB ─n3─ first ─n9─ second ─n6─ DN
//
// the first's N9 link named firstN9Link ("": n9), the second's N3 address
// on its loopback: a PSA serves no gNB; it has an N3 address all the same.
type upfPath struct {
	gnb, first, second, dn                        pathNode
	firstN9Link                                   string
	gnbAddr, firstN3, firstN9, secondN9, secondN3 netip.Addr
	secondN6, dnAddrs                             []netip.Addr
}

// path makes the namespaces of p and their links, and returns the
// namespaces: the gNB's, the first UPF's, the second's, the DN's.
func (n *upfNet) path(t *testing.T, p upfPath) (gnb, first, second, dn *namespace.Netns) {
	t.Helper()
	gnb, first, second, dn = n.netns(t, p.gnb.name), n.netns(t, p.first.name), n.netns(t, p.second.name), n.netns(t, p.dn.name)
	n9 := cmp.Or(p.firstN9Link, "n9")
	n.link(t, netEnd{gnb, p.gnb.key, "n3", []netip.Addr{p.gnbAddr}}, netEnd{first, p.first.key + "/n3", "n3", []netip.Addr{p.firstN3}})
	n.link(t, netEnd{first, p.first.key + "/" + n9, n9, []netip.Addr{p.firstN9}}, netEnd{second, p.second.key + "/n9", "n9", []netip.Addr{p.secondN9}})
	n.link(t, netEnd{second, p.second.key + "/n6", "n6", p.secondN6}, netEnd{dn, p.dn.key, "n6", p.dnAddrs})
	check(t, second.AddAddr("lo", netip.PrefixFrom(p.secondN3, p.secondN3.BitLen()).String()))
	return gnb, first, second, dn
}

// upfDaemon starts a UPF daemon in ns serving PFCP on a loopback port of
// its own, and returns its configuration.
func upfDaemon(t *testing.T, ns *namespace.Netns, interfaces []string, n3, n9 netip.Addr) *config.Config {
	t.Helper()
	cfg, _ := stoppableUPFDaemon(t, ns, interfaces, n3, n9)
	return cfg
}

// stoppableUPFDaemon is upfDaemon that returns startDaemon's stop too.
func stoppableUPFDaemon(t *testing.T, ns *namespace.Netns, interfaces []string, n3, n9 netip.Addr) (*config.Config, func() error) {
	t.Helper()
	cfg := writeConfig(t, ns.Name, interfaces, []netip.Addr{n3}, []netip.Addr{n9}, pfcpSection(freeLoopbackUDP(t), "heartbeat_interval: 1h"))
	_, stop := startDaemon(t, cfg)
	return cfg, stop
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// appFilter matches the UE's uplink packets to the DN application.
var appFilter = trafficgen.Filter{IPProto: uint8(layers.IPProtocolUDP), DstPort: demo.AppPort}

// netFlow is a flow through a upfNet: a frame sent from an end, where it
// must arrive (a sink of this filter on toLink) and as what.
type netFlow struct {
	name    string
	from    *namespace.Netns
	fromKey string
	in      []byte
	to      *namespace.Netns
	toLink  string
	filter  trafficgen.Filter
	want    []byte
	// check, if set, checks the frame that arrived further.
	check func(frame []byte) error
}

// carries sends pfcpPackets of each flow and checks that all arrive, the
// first one as the flow wants.
func (n *upfNet) carries(t *testing.T, flows []netFlow) {
	t.Helper()
	for _, f := range flows {
		t.Run(f.name, func(t *testing.T) {
			// A sink of its own: its sample is this flow's first frame.
			sink, err := trafficgen.NewSink(f.to, f.toLink, f.filter, false)
			testsupport.CheckLoad(t, err)
			defer sink.Close()
			if got := send(t, demo.NewDirection(f.name, f.toLink, f.from, n.index[f.fromKey], sink), f.in); got != pfcpPackets {
				t.Errorf("%d of %d packets delivered", got, pfcpPackets)
			}
			got, err := sink.Sample()
			check(t, err)
			testsupport.EqualFrames(t, got, f.want)
			if f.check != nil {
				if err := f.check(got); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// usedExactly deletes a session and checks its usage reports: n (free5GC
// asks for two URRs, one measuring before QoS enforcement and one after),
// each of want, measured as flags say (Volume Measurement flags).
func usedExactly(t *testing.T, what string, smf *pfcptest.SMF, seid uint64, n int, flags uint8, want volumes) {
	t.Helper()
	reports, err := smf.DeleteUsage(seid)
	check(t, err)
	if len(reports) != n {
		t.Errorf("%s: %d usage reports, want %d", what, len(reports), n)
	}
	for _, r := range reports {
		u, err := pfcptest.ParseUsageReport(r)
		check(t, err)
		if got := volumesOf(u.Volume); u.Volume.Flags != flags || got != want {
			t.Errorf("%s, URR %d: measured %v (flags %#x), want %v (flags %#x)", what, u.URRID, got, u.Volume.Flags, want, flags)
		}
	}
}

// packetVolumes are the volumes of up and down packets of size octets
// each.
func packetVolumes(size, up, down uint64) volumes {
	return volumes{(up + down) * size, up * size, down * size, up + down, up, down}
}

// associatedSMFs are an SMF of node for each daemon running cfgs,
// associated with it.
func associatedSMFs(t *testing.T, node netip.Addr, cfgs []*config.Config) []*pfcptest.SMF {
	t.Helper()
	smfs := make([]*pfcptest.SMF, len(cfgs))
	for upf, cfg := range cfgs {
		smf, err := pfcptest.NewSMF(node.String(), netip.MustParseAddrPort(cfg.PFCP.Listen))
		check(t, err)
		t.Cleanup(func() { smf.Close() })
		_, err = smf.Associate()
		check(t, err)
		smfs[upf] = smf
	}
	return smfs
}

// establish sends steps of a session, each to its UPF's SMF, and keeps
// the session's UP SEID at each UPF in seids.
func establish(t *testing.T, smfs []*pfcptest.SMF, seids []uint64, steps []pfcptest.Step) {
	t.Helper()
	for _, step := range steps {
		seid, err := smfs[step.UPF].Step(step, seids[step.UPF])
		if err != nil {
			t.Fatalf("%s: %v", step.Name, err)
		}
		seids[step.UPF] = seid
	}
}
