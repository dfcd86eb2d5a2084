package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/upf/sdf"
	"github.com/xdp5g/xdp5g/internal/upf/session"
)

// install creates sessions 0 to n-1 and returns how long that took.
func install(ctx context.Context, u *demo.UPF, n int) (time.Duration, error) {
	start := time.Now()
	for i := range n {
		if i%4096 == 0 && ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if err := u.Store.Create(shape(i)); err != nil {
			return 0, fmt.Errorf("installing session %d of %d: %w", i+1, n, err)
		}
	}
	return time.Since(start), nil
}

// attachedProgram opens the XDP program the kernel runs on an interface of
// ns.
func attachedProgram(ns *namespace.Netns, ifname string) (*ebpf.Program, error) {
	var id uint32
	err := ns.Do(func() error {
		l, err := netlink.LinkByName(ifname)
		if err != nil {
			return err
		}
		if x := l.Attrs().Xdp; x != nil && x.Attached {
			id = x.ProgId
			return nil
		}
		return fmt.Errorf("no XDP program on %s in %s", ifname, ns.Name)
	})
	if err != nil {
		return nil, err
	}
	return ebpf.NewProgramFromID(ebpf.ProgramID(id))
}

// benchSession is session i: the demo session's shape (uplink TEID and UE
// address match with QFI, downlink tunnel to the gNB marked with QFI),
// IPv4 UEs (the tunnels over IPv6 with --ipv6-transport), with a TEID and
// a UE address of its own.
func benchSession(i int) session.Session {
	removeGTPU := session.RemoveGTPUUDPIPv4
	ue := netip.PrefixFrom(ueAddr(i), 32)
	const uplinkFAR, downlinkFAR = 1, 2
	return session.Session{
		SEID: seid(i),
		PDRs: []session.PDR{
			{ID: 1, FARID: uplinkFAR, OuterHeaderRemoval: &removeGTPU, PDI: session.PDI{
				SourceInterface: session.InterfaceAccess, TEID: teid(i), LocalAddress: n3Addr(), UEAddress: ue, QFI: demo.QFI}},
			{ID: 2, FARID: downlinkFAR, PDI: session.PDI{
				SourceInterface: session.InterfaceCore, UEAddress: ue, QFI: demo.QFI}},
		},
		FARs: []session.FAR{
			{ID: uplinkFAR, Action: session.ActionForward, Forwarding: session.Forwarding{DestinationInterface: session.InterfaceCore}},
			{ID: downlinkFAR, Action: session.ActionForward, Forwarding: session.Forwarding{DestinationInterface: session.InterfaceAccess,
				OuterHeaderCreation: &session.OuterHeaderCreation{TEID: teid(i), Peer: gnbAddr()}}},
		},
	}
}

// shape is the session the per-packet cost and the rates install as
// session i: benchSession, or with --open5gs open5gsSession (set by Run
// before it measures).
var shape = benchSession

// open5gsSession is session i shaped as Open5GS's SMF establishes a PDU
// session (as pfcptest's PDUSessionRequest, which the PFCP suite sends):
// benchSession's uplink and downlink PDRs, at Open5GS's default
// precedence, under the session's QER (its AMBR, the gate open) and URR
// (volume, no limit); the SMF's own PDRs, one from the CP function on an
// F-TEID of its own to the downlink FAR, one of router solicitations on
// the uplink F-TEID (an SDF filter, precedence 255: it comes first) to a
// FAR tunnelling to the SMF.
func open5gsSession(i int) session.Session {
	const (
		qer, urr                     = 1, 1
		cpFAR                        = 3
		cpPrecedence, userPrecedence = 255, 65535
		ambr                         = 10_000_000_000 // bits/s: no bench packet waits for it
	)
	s := benchSession(i)
	removeGTPU := session.RemoveGTPUUDPIPv4
	routerSolicitations, err := sdf.Parse("permit out 58 from ff02::2/128 to assigned")
	if err != nil {
		panic(err) // a constant
	}
	for k := range s.PDRs {
		s.PDRs[k].Precedence, s.PDRs[k].QERIDs, s.PDRs[k].URRIDs = userPrecedence, []uint32{qer}, []uint32{urr}
	}
	uplink, downlinkFAR := s.PDRs[0].PDI, s.PDRs[1].FARID
	s.PDRs = append(s.PDRs,
		session.PDR{ID: 5, Precedence: cpPrecedence, FARID: downlinkFAR, OuterHeaderRemoval: &removeGTPU, PDI: session.PDI{
			SourceInterface: session.InterfaceCPFunction, TEID: cpTEID(i), LocalAddress: n3Addr()}},
		session.PDR{ID: 6, Precedence: cpPrecedence, FARID: cpFAR, OuterHeaderRemoval: &removeGTPU, PDI: session.PDI{
			SourceInterface: session.InterfaceAccess, TEID: uplink.TEID, LocalAddress: uplink.LocalAddress,
			SDFFilters: []session.SDFFilter{{Filter: routerSolicitations}}}})
	s.FARs = append(s.FARs, session.FAR{ID: cpFAR, Action: session.ActionForward, Forwarding: session.Forwarding{DestinationInterface: session.InterfaceCPFunction,
		OuterHeaderCreation: &session.OuterHeaderCreation{TEID: uint32(i) + 1, Peer: smfAddr}}})
	s.QERs = []session.QER{{ID: qer, MBRUL: ambr, MBRDL: ambr, QFI: demo.QFI}}
	s.URRs = []session.URR{{ID: urr}}
	return s
}

// smfAddr is where the SMF's own traffic with the UEs goes.
var smfAddr = netip.MustParseAddr("192.0.2.10")

// seid is session i's SEID.
func seid(i int) uint64 { return uint64(i) + 1 }

// cpTEID is the TEID of session i's F-TEID for the SMF's packets to the
// UE, apart from every uplink TEID.
func cpTEID(i int) uint32 { return 1<<31 | uint32(i) + 1 }

// teid is session i's TEID, the same both ways (they are different
// peers' TEIDs).
func teid(i int) uint32 { return uint32(i) + 1 }

// ueAddr is session i's UE address, from the shared address space
// 100.64.0.0/10 (4 million addresses).
func ueAddr(i int) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], 100<<24|64<<16+uint32(i)+1)
	return netip.AddrFrom4(b)
}

// overIPv6 says that the tunnels between the gNB and the UPF are over IPv6
// (--ipv6-transport): set by Run before it measures.
var overIPv6 bool

// n3Addr is the UPF's end of the tunnels: the address of the uplink
// F-TEIDs.
func n3Addr() netip.Addr {
	if overIPv6 {
		return demo.N3Addr6
	}
	return demo.N3Addr
}

// gnbAddr is the gNB's end of the tunnels.
func gnbAddr() netip.Addr {
	if overIPv6 {
		return demo.GNB6Addr
	}
	return demo.GNBAddr
}

// uplinkFrame and downlinkFrame are what the gNB and the DN send for
// session i, whose uplink TEID is teid.
func uplinkFrame(tb *demo.Testbed, teid uint32, i int) []byte {
	return uplinkFrameTo(tb, teid, i, demo.DNAddr)
}

// uplinkFrameTo is uplinkFrame of a packet to dst.
func uplinkFrameTo(tb *demo.Testbed, teid uint32, i int, dst netip.Addr) []byte {
	inner := demo.UEPacket(ueAddr(i), dst, true, demo.UETTL)
	if overIPv6 {
		return tb.UplinkFrame6(teid, demo.QFI, inner)
	}
	return tb.UplinkFrame(teid, demo.QFI, inner)
}

func downlinkFrame(tb *demo.Testbed, i int) []byte {
	return tb.DownlinkFrame(demo.UEPacket(ueAddr(i), demo.DNAddr, false, demo.UETTL))
}
