package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/upf/n4"
	"github.com/xdp5g/xdp5g/internal/upf/n4state"
	"github.com/xdp5g/xdp5g/internal/upf/pfcp"
	"github.com/xdp5g/xdp5g/internal/upf/session"
)

// pfcpState is the PFCP state a previous run kept (pfcp.state_dir): the
// server's (its Recovery Time Stamp, its associations) and the sessions'.
// With server and sessions nil, the run starts without: the previous
// run's SMF sessions are dropped and the Recovery Time Stamp is new.
type pfcpState struct {
	log      *n4state.Log
	server   *pfcp.State
	sessions *n4.Saved
	// repaired are the sessions the store installed again in new slots,
	// for the handler to record with those.
	repaired []uint64
	// why it was not restored, when there was a state; "" otherwise.
	discarded string
	read      time.Duration
}

// openPFCPState reads the PFCP state of the previous run and opens its
// journal for this one.
func openPFCPState(p *config.PFCP, log *slog.Logger) (*pfcpState, error) {
	began := time.Now()
	st := &pfcpState{server: pfcp.NewState(), sessions: n4.NewSaved()}
	l, rec, err := n4state.Open(n4state.Options{Dir: p.StateDir, Sync: p.StateSync, Log: log},
		func(kind byte, value []byte) error {
			if ok, err := st.server.Replay(kind, value); ok {
				return err
			}
			if ok, err := st.sessions.Replay(kind, value); ok {
				return err
			}
			return fmt.Errorf("unknown kind of op %d", kind)
		})
	if err != nil {
		return nil, fmt.Errorf("pfcp.state_dir: %w", err)
	}
	unreadable := st.sessions.Finish()
	st.log, st.read = l, time.Since(began)
	switch {
	case !rec.Found:
		st.server, st.sessions = nil, nil
	case !rec.Restored:
		st.server, st.sessions, st.discarded = nil, nil, rec.Reason
	case unreadable == nil && st.server.Recovery == 0 && st.server.Associations() == 0 && len(st.sessions.Peers()) == 0:
		// A run that stopped before it served PFCP (a start that failed
		// at attaching the data path) left the empty state it opened:
		// nothing to restore, nothing to set aside, a clean start.
		st.server, st.sessions = nil, nil
	default:
		if reason := errors.Join(unreadable, st.check()); reason != nil {
			if err := st.discard(reason.Error()); err != nil {
				return nil, fmt.Errorf("pfcp.state_dir: %w", err)
			}
		}
	}
	return st, nil
}

// check finds what makes a state that was read whole unusable.
func (st *pfcpState) check() error {
	if st.server.Recovery == 0 {
		return errors.New("it has no Recovery Time Stamp")
	}
	for _, node := range slices.Sorted(maps.Keys(st.sessions.Peers())) {
		if !st.server.Has(node) {
			return fmt.Errorf("sessions of %s, with which it has no association", node)
		}
	}
	return nil
}

// discard starts afresh, for a reason.
func (st *pfcpState) discard(reason string) error {
	st.server, st.sessions, st.discarded = nil, nil, reason
	return st.log.Discard()
}

// kept are the sessions for the store to take over.
func (st *pfcpState) kept() []session.Kept {
	if st == nil || st.sessions == nil {
		return nil
	}
	return st.sessions.Kept()
}

// restored says whether the run takes up the previous one's state.
func (st *pfcpState) restored() bool { return st != nil && st.server != nil }

// restoreSessions has the store take over the REST API's sessions (saved) and the
// PFCP state's. A store that cannot take the PFCP sessions over is
// replaced by one that restores without them; saved sessions that cannot
// be restored fail the start and leave the PFCP state for the next.
func restoreSessions(newStore func() *session.Store, saved []byte, st *pfcpState, log *slog.Logger) (*session.Store, session.Restored, error) {
	store := newStore()
	res, err := store.Restore(saved, st.kept())
	if err == nil && st.restored() {
		st.repaired = res.Repaired
	}
	var savedErr *session.SavedError
	if err == nil || !st.restored() || errors.As(err, &savedErr) {
		return store, res, err
	}
	log.Error("the PFCP sessions could not be taken over: starting without them", "err", err)
	if err := st.discard(err.Error()); err != nil {
		return nil, res, err
	}
	store = newStore()
	res, err = store.Restore(saved, nil)
	return store, res, err
}

// logRestore says what became of the previous run's sessions.
func logRestore(log *slog.Logger, cfg *config.Config, res session.Restored, st *pfcpState) {
	attrs := []any{"sessions", res.Sessions, "state_file", cfg.StateFile}
	if res.Dropped > 0 {
		attrs = append(attrs, "pfcp_sessions_dropped", res.Dropped)
	}
	if res.StrayKeys > 0 {
		// Keys of PFCP sessions the state does not have: all of them
		// when it was not restored.
		attrs = append(attrs, "stray_keys_removed", res.StrayKeys)
	}
	log.Info("sessions restored", attrs...)
	if st == nil {
		return
	}
	for _, seid := range res.Repaired {
		log.Warn("PFCP session installed again: the data path had it otherwise than the PFCP state (a request applied as the previous run stopped, or its pinned maps detached or removed)", "seid", seid)
	}
	if res.BufferedLost > 0 {
		log.Warn("downlink packets the previous run buffered were lost with it", "packets", res.BufferedLost)
	}
	switch {
	case st.restored():
		log.Info("PFCP state restored: the SMFs see no restart", "pfcp_sessions", res.Kept+len(res.Repaired),
			"repaired", len(res.Repaired), "associations", st.server.Associations(), "state_dir", cfg.PFCP.StateDir,
			"read", st.read.Round(time.Millisecond))
	case st.discarded != "":
		log.Warn("PFCP state not restored: starting without it, with a new Recovery Time Stamp", "reason", st.discarded,
			"state_dir", cfg.PFCP.StateDir)
	}
}
