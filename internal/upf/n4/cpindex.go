package n4

import (
	"net/netip"
	"slices"
)

// cpKey names a session as its SMF does: by its CP F-SEID, a SEID at one
// of the SMF's addresses. A SEID is unique at an address (TS 29.244
// §5.6.2), so no two sessions may share a key. The address is kept as
// bytes: a map key without pointers, which the garbage collector skips.
type cpKey struct {
	seid uint64
	addr [16]byte
}

// cpKeys are the keys of a CP F-SEID: one for each address it has.
func cpKeys(seid uint64, addrs [2]netip.Addr) []cpKey {
	keys := make([]cpKey, 0, 2)
	for _, a := range addrs {
		if a.IsValid() {
			keys = append(keys, cpKey{seid, a.As16()})
		}
	}
	return keys
}

// cpIndex holds the UP SEIDs of the sessions by CP F-SEID. A state written
// by a build that let two sessions share a CP F-SEID may hold several under
// one key: the first owns it, the others wait in shared and take it over
// when it goes, so that the key stays taken while any of them is left.
type cpIndex struct {
	owner  map[cpKey]uint64
	shared map[cpKey][]uint64 // only from such a state
}

func newCPIndex(sessions int) cpIndex {
	return cpIndex{owner: make(map[cpKey]uint64, sessions), shared: map[cpKey][]uint64{}}
}

// add files seid under k, beside the session that owns it already if any.
func (ix cpIndex) add(k cpKey, seid uint64) {
	if owner, ok := ix.owner[k]; ok && owner != seid {
		ix.shared[k] = append(ix.shared[k], seid)
		return
	}
	ix.owner[k] = seid
}

// remove takes seid from under k.
func (ix cpIndex) remove(k cpKey, seid uint64) {
	others := ix.shared[k]
	switch {
	case ix.owner[k] != seid:
		others = slices.DeleteFunc(others, func(o uint64) bool { return o == seid })
	case len(others) > 0:
		ix.owner[k], others = others[0], others[1:]
	default:
		delete(ix.owner, k)
	}
	if len(others) == 0 {
		delete(ix.shared, k)
	} else {
		ix.shared[k] = others
	}
}

// cpOwner is a session that holds a key of s's CP F-SEID which old (s
// before a modification; nil for an establishment) did not hold.
func (h *Handler) cpOwner(s, old *pfcpSession) (uint64, bool) {
	var had []cpKey
	if old != nil {
		had = cpKeys(old.cpSEID, old.cpAddrs)
	}
	for _, k := range cpKeys(s.cpSEID, s.cpAddrs) {
		if owner, ok := h.byCP.owner[k]; ok && !slices.Contains(had, k) {
			return owner, true
		}
	}
	return 0, false
}

// indexCP files s under its CP F-SEID in place of old (nil for none), the
// same session before a change.
func (h *Handler) indexCP(s, old *pfcpSession) {
	if old != nil && s != nil && old.cpSEID == s.cpSEID && old.cpAddrs == s.cpAddrs {
		return
	}
	if old != nil {
		for _, k := range cpKeys(old.cpSEID, old.cpAddrs) {
			h.byCP.remove(k, old.seid)
		}
	}
	if s != nil {
		for _, k := range cpKeys(s.cpSEID, s.cpAddrs) {
			h.byCP.add(k, s.seid)
		}
	}
}

// warnSharedCP logs the CP F-SEIDs that a restored state gave to several
// sessions: all are kept, but their SMF cannot tell them apart.
func (h *Handler) warnSharedCP() {
	for k, others := range h.byCP.shared {
		h.cfg.Log.Warn("restored PFCP sessions share a CP F-SEID, as an earlier build allowed: all are kept and forward, "+
			"but their SMF cannot tell their reports apart; a new session with it is refused while one of them is left",
			"cp_seid", k.seid, "smf_address", netip.AddrFrom16(k.addr).Unmap(), "seids", append([]uint64{h.byCP.owner[k]}, others...))
	}
}
