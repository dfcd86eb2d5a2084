// Package freebind binds UDP sockets to addresses the host may not have
// yet: a virtual address that keepalived or a Kubernetes service adds
// later. The socket binds at once (IP_FREEBIND, IPV6_FREEBIND) and
// receives once the address is there.
package freebind

import (
	"context"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// ListenUDP binds a UDP socket on network ("udp", "udp4" or "udp6") and
// address ("host:port") with the address's freebind option set.
func ListenUDP(network, address string) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: func(network, _ string, raw syscall.RawConn) error {
		level, option := unix.IPPROTO_IP, unix.IP_FREEBIND
		if network == "udp6" {
			level, option = unix.IPPROTO_IPV6, unix.IPV6_FREEBIND
		}
		var err error
		if cerr := raw.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), level, option, 1) }); cerr != nil {
			return cerr
		}
		return err
	}}
	pc, err := lc.ListenPacket(context.Background(), network, address)
	if err != nil {
		return nil, err
	}
	return pc.(*net.UDPConn), nil
}
