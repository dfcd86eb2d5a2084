package session

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/xdp5g/xdp5g/internal/platform/slotpool"
)

// Origin is the interface a session was created through.
type Origin uint8

const (
	// OriginREST is also the origin of sessions saved before origins
	// were recorded.
	OriginREST Origin = iota
	OriginPFCP
)

var originNames = []string{OriginREST: "rest", OriginPFCP: "pfcp"}

func (o Origin) MarshalText() ([]byte, error) {
	if int(o) >= len(originNames) {
		return nil, fmt.Errorf("unknown session origin %d", o)
	}
	return []byte(originNames[o]), nil
}

func (o *Origin) UnmarshalText(b []byte) error {
	i := slices.Index(originNames, string(b))
	if i < 0 {
		return fmt.Errorf("unknown session origin %q", b)
	}
	*o = Origin(i)
	return nil
}

// state is what a restarted daemon needs to take over the running data
// path: every session and the slots it occupies.
type state struct {
	Sessions []*installed `json:"sessions"`
}

// MarshalState encodes the store for Restore.
func (s *Store) MarshalState() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := state{Sessions: make([]*installed, 0, len(s.sessions))}
	for _, in := range s.sessions {
		st.Sessions = append(st.Sessions, in)
	}
	return json.Marshal(st)
}

// Restore takes over the sessions a previous run left in the pinned maps,
// without a gap: keys no saved session owns (left by a run that stopped
// before saving) are removed first, since their slots may be reused; then
// each session is written into fresh slots and its keys switched
// atomically, and the old slots are freed. URRs keep their slots, and so
// their counts. The store must be empty.
//
// Sessions created over PFCP are dropped, keys and slots, as a UP function
// that restarts without its PFCP state does (TS 23.007 §19A): their
// associations, CP F-SEIDs and usage meters are gone, so nobody could
// change, delete or report on them. Their SMFs learn of the restart from
// the new Recovery Time Stamp and establish them again. dropped is how
// many there were.
func (s *Store) Restore(data []byte) (dropped int, err error) {
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return 0, fmt.Errorf("reading saved sessions: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sessions) != 0 {
		return 0, fmt.Errorf("restore into a store with %d sessions", len(s.sessions))
	}
	owned := map[dpKey]bool{}
	// Buffers are not kept: the packets they held went with the process.
	used := map[*slotpool.Pool]map[uint32]bool{s.pdrSlots: {}, s.qerSlots: {}, s.sdfSlots: {}, s.bufSlots: {}}
	urrs := map[uint32]bool{}
	var kept, gone []*installed
	for _, in := range st.Sessions {
		// A dropped session's slots too are freed only after the reuse
		// delay: packets may still be reading them.
		markUsed(used[s.pdrSlots], in.PDRSlots)
		markUsed(used[s.qerSlots], in.QERSlots)
		markUsed(urrs, in.URRSlots)
		markUsed(used[s.sdfSlots], in.SDFSlots)
		markUsed(used[s.bufSlots], in.BufferSlots)
		if in.Origin == OriginPFCP {
			gone = append(gone, in)
			continue
		}
		kept = append(kept, in)
		for _, k := range keysOf(&in.Session) {
			owned[k] = true
		}
	}
	if err := s.removeStrayKeys(owned); err != nil {
		return 0, err
	}
	for pool, slots := range used {
		pool.Adopt(slots)
	}
	s.urrSlots.Adopt(urrs)
	for _, in := range kept {
		if err := s.install(in.Session, nil, in, false); err != nil {
			return 0, fmt.Errorf("restoring session %d: %w", in.SEID, err)
		}
	}
	for pool, slots := range used {
		for slot := range slots {
			pool.Release(slot)
		}
	}
	for _, in := range gone {
		releaseAll(s.urrSlots, in.URRSlots, false)
	}
	return len(gone), nil
}

func markUsed(used map[uint32]bool, slots ruleSlots) {
	for _, e := range slots {
		used[e.slot] = true
	}
}

// removeStrayKeys deletes the map keys that are not owned.
func (s *Store) removeStrayKeys(owned map[dpKey]bool) error {
	for _, teid := range s.dp.UplinkTEIDs() {
		if !owned[teidKey(teid)] {
			if err := s.dp.DeleteUplink(teid); err != nil {
				return err
			}
		}
	}
	for _, ue := range s.dp.DownlinkUEs() {
		if !owned[dpKey{ue: ue}] {
			if err := s.dp.DeleteDownlink(ue); err != nil {
				return err
			}
		}
	}
	return nil
}
