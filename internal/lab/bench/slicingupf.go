package bench

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/lab/videonet"
	"github.com/xdp5g/xdp5g/internal/upf/session"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// gtpHeaders are the outer headers the UPF takes off a G-PDU of gtpFrame
// (IPv4, UDP, GTP-U): the sink finds the stamp that much earlier.
const gtpHeaders = 20 + 8 + 8

// upfRouter is the router of videonet's segment running the UPF on its
// edge (N3, the receiving interface), its core N6 towards the sink: one
// session per service, whose uplink F-TEID is the service's TEID at the
// router's address and whose FAR forwards the UE's packet to the sink.
// Over cpus, the classify and steer stages run in front of the UPF, the
// classify stage's rules steering the services (steerServices); without
// steering, the UPF runs alone, all of it on the receiving CPU, and its
// PDRs count each class.
func upfRouter(cpus []int) (r prioRouter, err error) {
	n, err := videonet.New(nil, videonet.Stamps{Forwarded: gtpStampAt - gtpHeaders, Offloaded: gtpStampAt})
	if err != nil {
		return r, err
	}
	var u *demo.UPF
	var d *classifyxdp.Datapath
	// The UPF first: its chain holds the classifier's stages.
	closeAll := func() error {
		var errs []error
		if u != nil {
			errs = append(errs, u.Close())
		}
		if d != nil {
			errs = append(errs, d.Close())
		}
		return errors.Join(append(errs, n.Close())...)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, closeAll())
		}
	}()
	if u, err = demo.OpenUPF(n.Router, []netip.Addr{netip.MustParseAddr(videonet.RouterAddr)}, "core", prioServices); err != nil {
		return r, err
	}
	for i := range prioServices {
		if err := u.Store.Create(serviceSession(i)); err != nil {
			return r, fmt.Errorf("installing the session of service %d: %w", i, err)
		}
	}
	r = prioRouter{n: n, to: videonet.RouterAddr, received: func() ([2]uint64, error) { return pdrCounts(u) }, close: closeAll}
	if cpus == nil {
		return r, u.AttachChain("edge", upfxdp.RoleAccess, upfxdp.Chain{})
	}
	if d, err = classifyxdp.OpenDatapath(classifyxdp.Config{Chain: u.Datapath.ChainMaps()}); err != nil {
		return r, err
	}
	r.d, r.received = d, func() ([2]uint64, error) { return ruleCounts(d) }
	return r, u.AttachChain("edge", upfxdp.RoleAccess, upfxdp.NewChain(d, true, true, otherSlice))
}

// pdrCounts are the packets the PDRs of the prioritised services'
// sessions and of the others' matched.
func pdrCounts(u *demo.UPF) (received [2]uint64, err error) {
	for i := range prioServices {
		slots, ok := u.Store.Slots(uint64(i) + 1)
		if !ok {
			return received, fmt.Errorf("no session for service %d", i)
		}
		for _, s := range slots.PDR {
			c, err := u.Datapath.PDRCounter(s.Slot)
			if err != nil {
				return received, err
			}
			received[i/prioFirst] += c.Packets
		}
	}
	return received, nil
}

// serviceSession is service i's session: its G-PDUs to the router's
// address, decapsulated, to the sink.
func serviceSession(i int) session.Session {
	removeGTPU := session.RemoveGTPUUDPIPv4
	return session.Session{
		SEID: uint64(i) + 1,
		PDRs: []session.PDR{{ID: 1, FARID: 1, OuterHeaderRemoval: &removeGTPU, PDI: session.PDI{
			SourceInterface: session.InterfaceAccess, TEID: prioTEID + uint32(i),
			LocalAddress: netip.MustParseAddr(videonet.RouterAddr)}}},
		FARs: []session.FAR{{ID: 1, Action: session.ActionForward, Forwarding: session.Forwarding{DestinationInterface: session.InterfaceCore}}},
	}
}

// upfText describes the UPF with its stages on the router's receiving
// interface.
var upfText = prioText{
	heading: "Priority and offload through the UPF (Table 1 of " + smartNIC + ", GTP-U through the UPF)",
	router: fmt.Sprintf(" The router runs the UPF on its receiving interface (N3): %d "+
		"sessions, one per service, whose uplink F-TEID is the service's TEID at the router's address (the G-PDUs' outer "+
		"destination), each forwarding the decapsulated packet out of N6 to the sink. The alternative node stands for another UPF holding the same sessions: it "+
		"receives the G-PDUs as they came, counted there.", prioServices),
	receiving:  "the first stage, and in the baseline all of the UPF's work,",
	classifier: "the first stage (the UPF's PDRs in the baseline, else the classify stage's rules)",
	setups: fmt.Sprintf("Baseline: no steering, the UPF alone on CPU %d. xdp5g, 1 CPU: the stages classify, steer, upf, "+
		"the classify stage's rules steering the prioritised services to a prioritised slice and the others to another, "+
		"both on CPU %d, where the UPF forwards them behind the CPU map. xdp5g, 2 CPUs: both slices over CPUs 0 and 1, CPU 0 "+
		"shared with the generator and the sinks.", prioReceiveCPU, prioReceiveCPU),
	local: "arrived at the sink decapsulated, forwarded by the UPF",
}
