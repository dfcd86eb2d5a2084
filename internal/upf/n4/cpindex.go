package n4

import "net/netip"

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

// cpOwner is the session other than self (a UP SEID, 0 for none) whose CP
// F-SEID shares a key with seid at addrs.
func (h *Handler) cpOwner(seid uint64, addrs [2]netip.Addr, self uint64) (uint64, bool) {
	for _, k := range cpKeys(seid, addrs) {
		if owner, ok := h.byCP[k]; ok && owner != self {
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
			if h.byCP[k] == old.seid {
				delete(h.byCP, k)
			}
		}
	}
	if s != nil {
		for _, k := range cpKeys(s.cpSEID, s.cpAddrs) {
			h.byCP[k] = s.seid
		}
	}
}
