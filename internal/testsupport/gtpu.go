package testsupport

import (
	"net"
	"net/netip"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// ReceiveGTPU reads a datagram within wait and decodes it as GTP-U with
// gopacket, an encoder of its own.
func ReceiveGTPU(conn *net.UDPConn, wait time.Duration) (*layers.GTPv1U, netip.AddrPort, error) {
	buf := make([]byte, 64<<10)
	conn.SetReadDeadline(time.Now().Add(wait))
	n, from, err := conn.ReadFromUDPAddrPort(buf)
	if err != nil {
		return nil, from, err
	}
	g := &layers.GTPv1U{}
	return g, from, g.DecodeFromBytes(buf[:n], gopacket.NilDecodeFeedback)
}
