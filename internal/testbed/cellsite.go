package testbed

import (
	"errors"
	"net"
	"net/netip"
)

// The cell site's interfaces and addresses: N3 between the UPF and the
// CU-UP, F1-U between the CU-UP and the DU, an interface of each name in
// each namespace on the link.
const (
	CellN3  = "n3"
	CellF1U = "f1u"
)

var (
	CellUPF   = netip.MustParseAddr("10.61.0.1")
	CellCUN3  = netip.MustParseAddr("10.61.0.2")
	CellCUF1U = netip.MustParseAddr("10.62.0.2")
	CellDU    = netip.MustParseAddr("10.62.0.1")
)

// CellSite is a UPF, a CU-UP and a DU, each in a network namespace, on veth
// pairs: the testbed of the CU-UP's demo, end-to-end tests and benchmarks.
type CellSite struct {
	UPF, CU, DU *Netns
}

// NewCellSite builds the namespaces and links; prefix starts their names.
func NewCellSite(prefix string) (_ *CellSite, err error) {
	s := &CellSite{}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Close())
		}
	}()
	for _, ns := range []**Netns{&s.UPF, &s.CU, &s.DU} {
		if *ns, err = New(prefix); err != nil {
			return nil, err
		}
	}
	for _, step := range []func() error{
		func() error { return Veth(s.UPF, CellN3, s.CU, CellN3) },
		func() error { return Veth(s.CU, CellF1U, s.DU, CellF1U) },
		func() error { return s.UPF.AddAddr(CellN3, CellUPF.String()+"/24") },
		func() error { return s.CU.AddAddr(CellN3, CellCUN3.String()+"/24") },
		func() error { return s.CU.AddAddr(CellF1U, CellCUF1U.String()+"/24") },
		func() error { return s.DU.AddAddr(CellF1U, CellDU.String()+"/24") },
	} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Close deletes the namespaces, and so everything in them.
func (s *CellSite) Close() error {
	var errs []error
	for _, ns := range []*Netns{s.UPF, s.CU, s.DU} {
		if ns != nil {
			errs = append(errs, ns.Delete())
		}
	}
	return errors.Join(errs...)
}

// gtpuPort is GTP-U's UDP port (TS 29.281 4.4.2).
const gtpuPort = 2152

// ListenGTPU opens a GTP-U socket on addr in a namespace: the UPF's or the
// DU's end of the tunnels.
func ListenGTPU(ns *Netns, addr netip.Addr) (conn *net.UDPConn, err error) {
	err = ns.Do(func() (err error) {
		conn, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, gtpuPort)))
		return err
	})
	return conn, err
}
