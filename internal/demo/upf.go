package demo

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/vishvananda/netns"

	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/upf/nexthop"
	"github.com/xdp5g/xdp5g/internal/upf/session"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// The demo's PDU session.
const (
	SEID         = 1
	UplinkTEID   = 0x100
	DownlinkTEID = 0x200
	QFI          = 9
)

// Session is the UE's dual-stack session: uplink G-PDUs with TEID
// UplinkTEID and QFI go to the data network; downlink packets to UEAddr or
// UE6Addr's /64 are tunnelled to the gNB with DownlinkTEID and marked QFI.
func Session() session.Session {
	removeGTPU := session.RemoveGTPUUDPIPv4
	const uplinkFAR, downlinkFAR = 1, 2
	downlink := func(id uint16, ue netip.Prefix) session.PDR {
		return session.PDR{ID: id, Precedence: 100, FARID: downlinkFAR,
			PDI: session.PDI{SourceInterface: session.InterfaceCore, UEAddress: ue, QFI: QFI}}
	}
	return session.Session{
		SEID: SEID,
		PDRs: []session.PDR{
			{ID: 1, Precedence: 100, FARID: uplinkFAR, OuterHeaderRemoval: &removeGTPU,
				PDI: session.PDI{SourceInterface: session.InterfaceAccess, TEID: UplinkTEID,
					UEAddress: netip.PrefixFrom(UEAddr, 32), QFI: QFI}},
			downlink(2, netip.PrefixFrom(UEAddr, 32)),
			downlink(3, netip.PrefixFrom(UE6Addr, 64).Masked()),
		},
		FARs: []session.FAR{
			{ID: uplinkFAR, Action: session.ActionForward, Forwarding: session.Forwarding{DestinationInterface: session.InterfaceCore}},
			{ID: downlinkFAR, Action: session.ActionForward, Forwarding: session.Forwarding{DestinationInterface: session.InterfaceAccess,
				OuterHeaderCreation: &session.OuterHeaderCreation{TEID: DownlinkTEID, Peer: GNBAddr, Port: gtpuPort}}},
		},
	}
}

// UPF is the demo's control plane in the UPF namespace: xdp_upf on N3
// (access) and N6 (core), the next-hop resolver and a session store, over
// maps pinned in a directory of its own.
type UPF struct {
	Datapath *upfxdp.Datapath
	Resolver *nexthop.Resolver
	Store    *session.Store
	ns       *namespace.Netns
	pinPath  string
	attached []string
}

// Interfaces are the UPF's interfaces and what each carries.
var Interfaces = []struct {
	Name string
	Role upfxdp.Role
}{{N3, upfxdp.RoleAccess}, {N6, upfxdp.RoleCore}}

// StartUPF opens a UPF sized for the demo and attaches it.
func (tb *Testbed) StartUPF() (*UPF, error) {
	u, err := tb.OpenUPF(16)
	if err != nil {
		return nil, err
	}
	if err := u.Attach(); err != nil {
		return nil, errors.Join(err, u.Close())
	}
	return u, nil
}

// OpenUPF opens maps sized for maxSessions and starts resolving next hops;
// Attach puts xdp_upf on the interfaces; Close undoes it all.
func (tb *Testbed) OpenUPF(maxSessions uint32) (*UPF, error) {
	// The IPv6 address is the testbed's after EnableIPv6.
	return OpenUPF(tb.UPF, []netip.Addr{N3Addr, N3Addr6}, N6, maxSessions)
}

// OpenUPF opens a UPF in ns whose N3 addresses are n3 and whose N6
// interface is core, with maps sized for maxSessions, and starts resolving
// its next hops; AttachChain puts it on interfaces; Close undoes it all.
func OpenUPF(ns *namespace.Netns, n3 []netip.Addr, core string, maxSessions uint32) (_ *UPF, err error) {
	u := &UPF{ns: ns, pinPath: filepath.Join("/sys/fs/bpf", namespace.UniqueName("xdp5g-demo-"))}
	defer func() {
		if err != nil {
			err = errors.Join(err, u.Close())
		}
	}()
	u.Datapath, err = upfxdp.Open(upfxdp.Options{PinPath: u.pinPath, MaxSessions: maxSessions, N3Addresses: n3})
	if err != nil {
		return nil, err
	}
	handle, err := netns.GetFromName(ns.Name)
	if err != nil {
		return nil, err
	}
	defer handle.Close() // the resolver keeps a duplicate
	if u.Resolver, err = nexthop.New(u.Datapath, handle, []string{core}); err != nil {
		return nil, err
	}
	u.Store = session.NewStore(u.Datapath, u.Resolver, nil)
	return u, nil
}

// Attach puts xdp_upf on N3 (access) and N6 (core) in native mode.
func (u *UPF) Attach() error {
	for _, iface := range Interfaces {
		if err := u.AttachChain(iface.Name, iface.Role, upfxdp.Chain{}); err != nil {
			return err
		}
	}
	return nil
}

// AttachChain puts the UPF, with the stages of c before it, on an
// interface of its namespace in native mode.
func (u *UPF) AttachChain(ifname string, roles upfxdp.Role, c upfxdp.Chain) error {
	if err := u.ns.Do(func() error { return u.Datapath.AttachChain(ifname, roles, xdplink.ModeNative, c) }); err != nil {
		return err
	}
	u.attached = append(u.attached, ifname)
	return nil
}

// Detach removes xdp_upf from the interfaces it is on.
func (u *UPF) Detach() error {
	var errs []error
	for _, name := range u.attached {
		errs = append(errs, u.ns.Do(func() error { return u.Datapath.Detach(name) }))
	}
	u.attached = nil
	return errors.Join(errs...)
}

// Install creates the demo session and checks that both directions have a
// valid next hop: the tunnel's to the gNB and the route's to the DN.
func (u *UPF) Install() error {
	if err := u.Store.Create(Session()); err != nil {
		return err
	}
	valid := map[netip.Addr]bool{}
	for _, s := range u.Resolver.Slots() {
		valid[s.Dst] = valid[s.Dst] || s.Valid
	}
	if !valid[GNBAddr] {
		return fmt.Errorf("no valid next hop for the downlink tunnel to %s", GNBAddr)
	}
	if slot := u.Resolver.Routes()[netip.PrefixFrom(DNAddr, 32)]; slot == nexthop.KernelSlot || !valid[DNAddr] {
		return fmt.Errorf("no valid uplink route to %s", DNAddr)
	}
	return nil
}

// Close stops the resolver, detaches the data path and removes its pinned
// maps and links.
func (u *UPF) Close() error {
	var errs []error
	if u.Resolver != nil {
		errs = append(errs, u.Resolver.Close())
	}
	if u.Datapath != nil {
		errs = append(errs, u.Detach())
		errs = append(errs, u.Datapath.Close())
	}
	return errors.Join(append(errs, os.RemoveAll(u.pinPath))...)
}
