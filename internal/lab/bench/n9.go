package bench

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/upf/sdf"
	"github.com/xdp5g/xdp5g/internal/upf/session"
)

// Sessions of a UPF in a chain, measured next to the plain ones: an
// I-UPF's, whose uplink is relayed over N9 to the next UPF (GTP-U in,
// GTP-U out), and a branching point's, whose uplink has two PDRs on one
// F-TEID: the first, by its SDF filter, breaks the local destination out
// to N6, the second relays the rest over N9. The next UPF is the DN's
// address here: any peer with a next hop will do.

// n9Cost is the per-packet cost of the N9 sessions.
type n9Cost struct {
	relay, relaySpread rounds
	// branchLocal takes the first of the branching PDRs, branchCentral
	// the second, past the first one's filter.
	branchLocal, branchCentral rounds
}

// n9Frames are the frames of the N9 sessions: of the last relay session,
// of relay sessions spread over those installed, and of the last branching
// session to each branch.
type n9Frames struct {
	relayOne, relay, branchLocal, branchCentral [][]byte
}

// centralAddr is a destination of the DN's subnet that the branching
// PDRs send on over N9.
var centralAddr = netip.MustParseAddr("10.100.6.3")

// installN9 creates k relay sessions and k branching sessions, numbered
// from n on, after the plain ones, and returns their frames.
func installN9(ctx context.Context, tb *demo.Testbed, u *demo.UPF, n, k int) (f n9Frames, err error) {
	for i := n; i < n+2*k; i++ {
		if i%4096 == 0 && ctx.Err() != nil {
			return f, ctx.Err()
		}
		s := relaySession(i)
		if i >= n+k {
			s = branchingSession(i)
		}
		if err := u.Store.Create(s); err != nil {
			return f, fmt.Errorf("installing N9 session %d of %d: %w", i-n+1, 2*k, err)
		}
	}
	for i := n; i < n+k; i++ {
		f.relay = append(f.relay, uplinkFrame(tb, teid(i), i))
	}
	last := n + 2*k - 1
	f.relayOne = [][]byte{uplinkFrame(tb, teid(n+k-1), n+k-1)}
	f.branchLocal = [][]byte{uplinkFrame(tb, teid(last), last)}
	f.branchCentral = [][]byte{uplinkFrameTo(tb, teid(last), last, centralAddr)}
	return f, nil
}

// relaySession is benchSession i with its uplink tunnelled over N9, in an
// UL PDU Session Container with its QFI.
func relaySession(i int) session.Session {
	s := benchSession(i)
	s.FARs[0].OuterHeaderCreation = &session.OuterHeaderCreation{TEID: teid(i), Peer: demo.DNAddr}
	return s
}

// branchingSession is relaySession i with a PDR before the uplink's, as
// free5GC's SMF puts it at a branching point: precedence 30, the local
// destination (the DN's address) by its filter, to N6.
func branchingSession(i int) session.Session {
	s := relaySession(i)
	filter, _ := sdf.Parse("permit out ip from " + demo.DNAddr.String() + " to assigned") // valid
	s.PDRs[0].Precedence = 255
	local := s.PDRs[0]
	local.ID, local.FARID, local.Precedence = 3, 3, 30
	local.PDI.SDFFilters = []session.SDFFilter{{Filter: filter}}
	s.PDRs = append(s.PDRs, local)
	s.FARs = append(s.FARs, session.FAR{ID: 3, Action: session.ActionForward, Forwarding: session.Forwarding{DestinationInterface: session.InterfaceCore}})
	return s
}
