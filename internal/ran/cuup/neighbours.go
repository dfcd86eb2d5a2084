package cuup

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// neighbourRefresh is how often the MAC addresses of the peers are read
// again from the kernel: a changed one is used within this time.
const neighbourRefresh = time.Second

// neighbours gives the AF_XDP path the Ethernet addresses of its peers
// (UPFs, DUs, or the gateways towards them) from the kernel's routes and
// neighbour table, and asks the kernel to resolve those it lacks.
type neighbours struct {
	nl *netlink.Handle // in the CU-UP's namespace

	mu   sync.RWMutex
	macs map[netip.Addr]net.HardwareAddr // by peer
	want chan netip.Addr                 // peers missed, to resolve now
}

func newNeighbours() (*neighbours, error) {
	nl, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, err
	}
	return &neighbours{nl: nl, macs: map[netip.Addr]net.HardwareAddr{}, want: make(chan netip.Addr, 64)}, nil
}

// lookup is the MAC address to send to peer with; false when it is not
// known yet, and the kernel is then asked to resolve it.
func (n *neighbours) lookup(peer netip.Addr) (net.HardwareAddr, bool) {
	n.mu.RLock()
	mac, ok := n.macs[peer]
	n.mu.RUnlock()
	if !ok {
		select {
		case n.want <- peer:
		default: // already asked
		}
	}
	return mac, ok
}

// run keeps the addresses fresh until stop is closed.
func (n *neighbours) run(stop <-chan struct{}) {
	refresh := time.NewTicker(neighbourRefresh)
	defer refresh.Stop()
	for {
		select {
		case <-stop:
			return
		case peer := <-n.want:
			n.resolve(peer)
		case <-refresh.C:
			n.mu.RLock()
			peers := make([]netip.Addr, 0, len(n.macs))
			for p := range n.macs {
				peers = append(peers, p)
			}
			n.mu.RUnlock()
			for _, p := range peers {
				n.resolve(p)
			}
		}
	}
}

// resolve reads the MAC address of the next hop towards peer, or pokes
// the kernel to find it (as if it had a packet to send).
func (n *neighbours) resolve(peer netip.Addr) {
	routes, err := n.nl.RouteGet(peer.AsSlice())
	if err != nil || len(routes) == 0 {
		return
	}
	hop := peer
	if gw, ok := netip.AddrFromSlice(routes[0].Gw); ok && routes[0].Gw != nil {
		hop = gw.Unmap()
	}
	family := netlink.FAMILY_V4
	if hop.Is6() {
		family = netlink.FAMILY_V6
	}
	neighs, err := n.nl.NeighList(routes[0].LinkIndex, family)
	if err != nil {
		return
	}
	const usable = netlink.NUD_REACHABLE | netlink.NUD_STALE | netlink.NUD_DELAY | netlink.NUD_PROBE | netlink.NUD_PERMANENT
	for _, nb := range neighs {
		if a, ok := netip.AddrFromSlice(nb.IP); ok && a.Unmap() == hop && nb.State&usable != 0 && len(nb.HardwareAddr) == 6 {
			n.mu.Lock()
			n.macs[peer] = nb.HardwareAddr
			n.mu.Unlock()
			return
		}
	}
	// NTF_USE has the kernel resolve the neighbour without changing it.
	n.nl.NeighSet(&netlink.Neigh{LinkIndex: routes[0].LinkIndex, Family: family, IP: hop.AsSlice(), Flags: netlink.NTF_USE})
}

func (n *neighbours) close() { n.nl.Close() }
