package upfxdp

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/platform/ipheader"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
)

// InjectGPDU runs a G-PDU that the kernel put together from its fragments
// through the UPF's program of iface, an interface this process attached,
// as if it had come in there whole, and lets it leave where the program
// sends it (a live run: a redirect transmits). XDP sees a fragmented
// datagram only in pieces, and passes them to the kernel, whose socket on
// port 2152 receives the whole. datagram is the UDP payload, sent from
// from to to. A frame the program hands back to the kernel goes on there
// as one that came in by iface (its Ethernet destination is iface's
// address): an uplink packet the kernel routes, as when no next hop is
// resolved yet. Handed back whole, the G-PDU comes from UDP port 0, which
// no peer sends from, so that the caller knows it should it reach the
// socket. Call it in the interface's network namespace, where the kernel
// finds its index.
func (d *Datapath) InjectGPDU(iface *net.Interface, from, to netip.Addr, datagram []byte) error {
	frame := gpduFrame(iface.HardwareAddr, from, to, datagram)
	d.staged.mu.Lock()
	defer d.staged.mu.Unlock()
	i := d.staged.ifaces[iface.Name]
	if i == nil {
		return fmt.Errorf("%s: not attached by this process", iface.Name)
	}
	_, err := i.upf.Run(&ebpf.RunOptions{Data: frame, Flags: unix.BPF_F_TEST_XDP_LIVE_FRAMES,
		Context: xdplink.Context{DataEnd: uint32(len(frame)), IngressIfindex: i.ifindex}})
	return err
}

// gpduFrame is datagram behind Ethernet to dst, IP from from to to, and UDP
// from port 0 to 2152, without a UDP checksum (the data path verifies none).
func gpduFrame(dst net.HardwareAddr, from, to netip.Addr, datagram []byte) []byte {
	const ethLen, udpLen = 14, 8
	ipLen, etherType := 20, uint16(unix.ETH_P_IP)
	if !from.Is4() {
		ipLen, etherType = 40, unix.ETH_P_IPV6
	}
	b := make([]byte, ethLen+ipLen+udpLen+len(datagram))
	copy(b, dst)
	binary.BigEndian.PutUint16(b[12:], etherType)
	ip, udp := b[ethLen:ethLen+ipLen], b[ethLen+ipLen:]
	if from.Is4() {
		ipheader.PutIPv4(ip, from, to, ipLen+udpLen+len(datagram), 0)
	} else {
		ipheader.PutIPv6(ip, from, to, udpLen+len(datagram))
	}
	binary.BigEndian.PutUint16(udp[2:], 2152)
	binary.BigEndian.PutUint16(udp[4:], uint16(udpLen+len(datagram)))
	copy(udp[udpLen:], datagram)
	return b
}
