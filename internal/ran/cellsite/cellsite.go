// Package cellsite is the CU-UP's cell site in network namespaces: a UPF,
// the CU-UP and a DU on veth pairs, for the demo, tests and benchmarks.
package cellsite

import (
	"errors"
	"net"
	"net/netip"

	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/upf/gtpu"
)

// The cell site's interfaces and addresses: N3 between the UPF and the
// CU-UP, F1-U between the CU-UP and the DU, an interface of each name in
// each namespace on the link.
const (
	N3  = "n3"
	F1U = "f1u"
)

var (
	UPFAddr   = netip.MustParseAddr("10.61.0.1")
	CUN3Addr  = netip.MustParseAddr("10.61.0.2")
	CUF1UAddr = netip.MustParseAddr("10.62.0.2")
	DUAddr    = netip.MustParseAddr("10.62.0.1")
)

// Site is a UPF, a CU-UP and a DU, each in a network namespace, on veth
// pairs: the testbed of the CU-UP's demo, end-to-end tests and benchmarks.
type Site struct {
	UPF, CU, DU *namespace.Netns
}

// New builds the namespaces and links; prefix starts their names.
func New(prefix string) (_ *Site, err error) {
	s := &Site{}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Close())
		}
	}()
	for _, ns := range []**namespace.Netns{&s.UPF, &s.CU, &s.DU} {
		if *ns, err = namespace.New(prefix); err != nil {
			return nil, err
		}
	}
	for _, step := range []func() error{
		func() error { return namespace.Veth(s.UPF, N3, s.CU, N3) },
		func() error { return namespace.Veth(s.CU, F1U, s.DU, F1U) },
		func() error { return s.UPF.AddAddr(N3, UPFAddr.String()+"/24") },
		func() error { return s.CU.AddAddr(N3, CUN3Addr.String()+"/24") },
		func() error { return s.CU.AddAddr(F1U, CUF1UAddr.String()+"/24") },
		func() error { return s.DU.AddAddr(F1U, DUAddr.String()+"/24") },
	} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Close deletes the namespaces, and so everything in them.
func (s *Site) Close() error {
	var errs []error
	for _, ns := range []*namespace.Netns{s.UPF, s.CU, s.DU} {
		if ns != nil {
			errs = append(errs, ns.Delete())
		}
	}
	return errors.Join(errs...)
}

// ListenGTPU opens a GTP-U socket on addr in a namespace: the UPF's or the
// DU's end of the tunnels.
func ListenGTPU(ns *namespace.Netns, addr netip.Addr) (conn *net.UDPConn, err error) {
	err = ns.Do(func() (err error) {
		conn, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, gtpu.Port)))
		return err
	})
	return conn, err
}
