package pfcp

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wmnsk/go-pfcp/ie"

	"github.com/xdp5g/xdp5g/internal/upf/n4state"
)

// Association is a PFCP association with a CP function (an SMF).
type Association struct {
	NodeID string
	// Addr is where the UPF sends its requests to the peer.
	Addr netip.AddrPort
	// RecoveryTime is when the peer started, from its Recovery Time Stamp.
	RecoveryTime time.Time
	Since        time.Time
	// LastHeartbeat is the last Heartbeat exchange with the peer, either
	// way; zero before the first.
	LastHeartbeat time.Time
	// Lost is set while the peer leaves the UPF's heartbeats unanswered.
	// The association and its sessions stay until the peer restarts or
	// releases it.
	Lost bool
}

// Peer is the association a session request arrived on.
type Peer struct {
	NodeID string
	// Addr is where the UPF sends requests to the peer, such as Session
	// Report Requests.
	Addr netip.AddrPort
}

type association struct {
	nodeID   string
	addr     netip.AddrPort
	recovery uint32 // the peer's Recovery Time Stamp, as sent
	since    time.Time

	// Guarded by associations.mu.
	sources       map[netip.Addr]bool // where requests naming this association came from
	lastHeartbeat time.Time
	lost          bool

	stopHeartbeats context.CancelFunc
	ended          chan struct{} // closed when the association ends
	// releaseAsked is set while the UPF asks the peer to release the
	// association: once released, it is not set up again.
	releaseAsked atomic.Bool
}

func (a *association) peer() Peer { return Peer{NodeID: a.nodeID, Addr: a.addr} }

// associations are the established ones, by the peer's Node ID. Their
// changes are journaled in log (see state.go).
type associations struct {
	mu     sync.Mutex
	byNode map[string]*association
	log    *n4state.Log
}

// put adds a and returns the association it replaces, which has ended.
func (t *associations) put(a *association) (replaced *association) {
	t.mu.Lock()
	defer t.mu.Unlock()
	replaced = t.byNode[a.nodeID]
	if replaced != nil {
		t.end(replaced)
	}
	t.byNode[a.nodeID] = a
	t.putAssociation(a)
	return replaced
}

// remove ends a; false when it had already ended.
func (t *associations) remove(a *association) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byNode[a.nodeID] != a {
		return false
	}
	delete(t.byNode, a.nodeID)
	t.end(a)
	t.dropAssociation(a)
	return true
}

func (t *associations) end(a *association) {
	a.stopHeartbeats()
	close(a.ended)
}

func (t *associations) get(nodeID string) *association {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byNode[nodeID]
}

// named returns the association with nodeID, noting that a request naming
// it came from source.
func (t *associations) named(nodeID string, source netip.Addr) *association {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.byNode[nodeID]
	if a != nil && !a.sources[source] {
		a.sources[source] = true
		t.putAssociation(a)
	}
	return a
}

// from returns an association whose peer uses address ip.
func (t *associations) from(ip netip.Addr) *association {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, a := range t.byNode {
		if a.uses(ip) {
			return a
		}
	}
	return nil
}

// heartbeatFrom returns the association a heartbeat from ip is of. The
// request names no node: when several peers send from ip, the one whose
// Recovery Time Stamp it carries; none when none does, since which of them
// restarted cannot be told (a restarted peer sets up its association again).
func (t *associations) heartbeatFrom(ip netip.Addr, recovery *ie.IE) *association {
	t.mu.Lock()
	defer t.mu.Unlock()
	ts, err := recoveryStamp(recovery)
	var at []*association
	for _, a := range t.byNode {
		if !a.uses(ip) {
			continue
		}
		if err == nil && a.recovery == ts {
			return a
		}
		at = append(at, a)
	}
	if len(at) == 1 {
		return at[0]
	}
	return nil
}

// fromPeer returns the association with nodeID if its peer uses address
// ip.
func (t *associations) fromPeer(nodeID string, ip netip.Addr) *association {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a := t.byNode[nodeID]; a != nil && a.uses(ip) {
		return a
	}
	return nil
}

// uses says a's peer sends from ip; under associations.mu.
func (a *association) uses(ip netip.Addr) bool { return a.addr.Addr() == ip || a.sources[ip] }

// heard records a heartbeat exchange with a's peer and reports whether the
// peer was lost until now, and whether its Recovery Time Stamp shows that
// it restarted. A heartbeat without the IE (malformed, but answered) shows
// no restart.
func (t *associations) heard(a *association, recovery *ie.IE, now time.Time) (wasLost, restarted bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	wasLost, a.lost = a.lost, false
	a.lastHeartbeat = now
	ts, err := recoveryStamp(recovery)
	return wasLost, err == nil && ts != a.recovery
}

// markLost reports whether a's peer has only now been lost.
func (t *associations) markLost(a *association) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a.lost || t.byNode[a.nodeID] != a {
		return false
	}
	a.lost = true
	return true
}

func (t *associations) list() []Association {
	t.mu.Lock()
	defer t.mu.Unlock()
	list := make([]Association, 0, len(t.byNode))
	for _, a := range t.byNode {
		list = append(list, Association{
			NodeID:        a.nodeID,
			Addr:          a.addr,
			RecoveryTime:  recoveryTime(a.recovery),
			Since:         a.since,
			LastHeartbeat: a.lastHeartbeat,
			Lost:          a.lost,
		})
	}
	slices.SortFunc(list, func(a, b Association) int { return strings.Compare(a.NodeID, b.NodeID) })
	return list
}

var errNoRecovery = errors.New("no valid Recovery Time Stamp")

// recoveryStamp reads a Recovery Time Stamp IE as sent.
func recoveryStamp(i *ie.IE) (uint32, error) {
	if i == nil {
		return 0, errNoRecovery
	}
	ts, err := i.ValueAsUint32()
	if err != nil {
		return 0, errNoRecovery
	}
	return ts, nil
}

// recoveryTime decodes a Recovery Time Stamp: seconds since 1900 (TS 29.244
// §8.2.65). Values with the top bit clear are past the 2036 wrap (RFC 4330
// §3).
func recoveryTime(ts uint32) time.Time {
	const unixFrom1900 = 2208988800
	secs := int64(ts) - unixFrom1900
	if ts&0x80000000 == 0 {
		secs += 1 << 32
	}
	return time.Unix(secs, 0)
}
