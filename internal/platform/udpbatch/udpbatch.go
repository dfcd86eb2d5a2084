// Package udpbatch reads and writes UDP datagrams in batches, one system
// call for many (recvmmsg, sendmmsg): the CU-UP's socket path, and the
// baseline its AF_XDP path is measured against.
package udpbatch

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Message is one datagram: Buf holds it, N is its length, Addr the peer.
type Message struct {
	Buf  []byte
	N    int
	Addr netip.AddrPort
}

// mmsghdr is struct mmsghdr of recvmmsg(2).
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
	_   [4]byte
}

// Conn is a UDP socket bound to one address, read and written in batches
// through Go's poller: Close ends a blocked ReadBatch.
type Conn struct {
	udp syscall.RawConn
	// One goroutine may read while another writes: each has its headers.
	read, write batch
	conn        *net.UDPConn
}

// batch is the headers of a recvmmsg or sendmmsg call.
type batch struct {
	hdrs  []mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrAny
}

func newBatch(n int) batch {
	return batch{hdrs: make([]mmsghdr, n), iovs: make([]unix.Iovec, n), names: make([]unix.RawSockaddrAny, n)}
}

// Listen opens a socket bound to addr for batches of up to batch messages.
func Listen(addr netip.AddrPort, batch int) (*Conn, error) {
	udp, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return nil, err
	}
	raw, err := udp.SyscallConn()
	if err != nil {
		udp.Close()
		return nil, err
	}
	return &Conn{conn: udp, udp: raw, read: newBatch(batch), write: newBatch(batch)}, nil
}

// SetReadDeadline has ReadBatch give up at t with os.ErrDeadlineExceeded.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.conn.SetReadDeadline(t) }

// Close closes the socket.
func (c *Conn) Close() error { return c.conn.Close() }

// ReadBatch waits for datagrams and reads as many as are there, up to
// len(msgs) and the batch size, each into its Buf; it returns how many.
func (c *Conn) ReadBatch(msgs []Message) (int, error) {
	b := &c.read
	n := b.prepare(msgs, false)
	got, err := c.mmsg(unix.SYS_RECVMMSG, b.hdrs[:n])
	if err != nil {
		return 0, fmt.Errorf("recvmmsg: %w", err)
	}
	for i := range got {
		msgs[i].N = int(b.hdrs[i].len)
		msgs[i].Addr = addrPort(&b.names[i])
	}
	return got, nil
}

// WriteBatch sends msgs[i].Buf[:N] to msgs[i].Addr, waiting while the
// socket's buffer is full; it returns how many were sent.
func (c *Conn) WriteBatch(msgs []Message) (int, error) {
	b := &c.write
	sent := 0
	for sent < len(msgs) {
		n := b.prepare(msgs[sent:], true)
		got, err := c.mmsg(unix.SYS_SENDMMSG, b.hdrs[:n])
		if err != nil {
			return sent, fmt.Errorf("sendmmsg: %w", err)
		}
		sent += got
	}
	return sent, nil
}

// prepare fills the headers for msgs, as many as a batch holds, with
// their buffers (and addresses, to send).
func (c *batch) prepare(msgs []Message, send bool) int {
	n := min(len(msgs), len(c.hdrs))
	for i := range n {
		buf := msgs[i].Buf
		if send {
			buf = buf[:msgs[i].N]
		}
		c.iovs[i] = unix.Iovec{Base: unsafe.SliceData(buf)}
		c.iovs[i].SetLen(len(buf))
		namelen := uint32(unsafe.Sizeof(c.names[i]))
		if send {
			namelen = putSockaddr(&c.names[i], msgs[i].Addr)
		}
		c.hdrs[i] = mmsghdr{hdr: unix.Msghdr{Name: (*byte)(unsafe.Pointer(&c.names[i])), Namelen: namelen,
			Iov: &c.iovs[i], Iovlen: 1}}
	}
	return n
}

// mmsg calls recvmmsg or sendmmsg (trap) through Go's poller, which waits
// while the socket would block.
func (c *Conn) mmsg(trap uintptr, hdrs []mmsghdr) (int, error) {
	var got int
	var opErr error
	call := func(fd uintptr) bool {
		got, opErr = mmsgOnce(trap, fd, hdrs)
		return !errors.Is(opErr, unix.EAGAIN)
	}
	var err error
	if trap == unix.SYS_SENDMMSG {
		err = c.udp.Write(call)
	} else {
		err = c.udp.Read(call)
	}
	return got, cmp.Or(err, opErr)
}

func mmsgOnce(trap uintptr, fd uintptr, hdrs []mmsghdr) (int, error) {
	if len(hdrs) == 0 {
		return 0, nil
	}
	n, _, errno := unix.Syscall6(trap, fd, uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)), unix.MSG_DONTWAIT, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

func putSockaddr(sa *unix.RawSockaddrAny, ap netip.AddrPort) uint32 {
	if ap.Addr().Is4() {
		in := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		*in = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: ap.Addr().As4()}
		binary.BigEndian.PutUint16(portBytes(&in.Port), ap.Port())
		return unix.SizeofSockaddrInet4
	}
	in := (*unix.RawSockaddrInet6)(unsafe.Pointer(sa))
	*in = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: ap.Addr().As16()}
	binary.BigEndian.PutUint16(portBytes(&in.Port), ap.Port())
	return unix.SizeofSockaddrInet6
}

func addrPort(sa *unix.RawSockaddrAny) netip.AddrPort {
	switch sa.Addr.Family {
	case unix.AF_INET:
		in := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(in.Addr), binary.BigEndian.Uint16(portBytes(&in.Port)))
	case unix.AF_INET6:
		in := (*unix.RawSockaddrInet6)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom16(in.Addr).Unmap(), binary.BigEndian.Uint16(portBytes(&in.Port)))
	}
	return netip.AddrPort{}
}

// portBytes is a sockaddr's port field, which holds network byte order.
func portBytes(port *uint16) []byte { return (*[2]byte)(unsafe.Pointer(port))[:] }
