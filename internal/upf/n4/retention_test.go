package n4

import (
	"net/netip"
	"testing"
)

// Replacing an association with retention keeps the sessions of the CP
// PFCP entities listed, and those whose CP F-SEID address a restored record
// lacks; dropping the peer removes every session, those too.
func TestDropPeerRetention(t *testing.T) {
	e := newEnv(t)
	establish := func(cpSEID uint64, cpAddr, ue string) uint64 {
		t.Helper()
		ies := open5gs(cpSEID, fixedUE(ue), uint32(cpSEID))
		ies[atCPFSEID] = cpFSEID(cpSEID, cpAddr)
		return e.establish("smf1", ies...).upSEID(t)
	}
	dropped, retained, restored := establish(0x1001, "127.0.0.4", "10.60.0.1"), establish(0x1002, "127.0.0.5", "10.60.0.2"), establish(0x1003, "127.0.0.4", "10.60.0.3")
	e.h.mu.Lock()
	e.h.sessions[restored].cpAddrs = [2]netip.Addr{} // as read from a record of an earlier version
	e.h.mu.Unlock()
	exists := func(seid uint64) bool {
		_, ok := e.store.Get(seid)
		return ok
	}

	e.h.DropPeerExcept("smf1", []netip.Addr{netip.MustParseAddr("127.0.0.5")})
	if exists(dropped) || !exists(retained) || !exists(restored) {
		t.Errorf("after retaining 127.0.0.5's sessions: %#x exists %v (want false), %#x %v, %#x %v (want true)",
			dropped, exists(dropped), retained, exists(retained), restored, exists(restored))
	}
	e.h.DropPeer("smf1")
	if exists(retained) || exists(restored) || len(e.h.sessions) != 0 {
		t.Errorf("after dropping the peer: %#x exists %v, %#x %v, the handler has %d sessions (want none)",
			retained, exists(retained), restored, exists(restored), len(e.h.sessions))
	}
}
