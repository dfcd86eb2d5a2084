package pfcp

import (
	"bytes"
	"testing"

	"github.com/wmnsk/go-pfcp/message"

	"github.com/xdp5g/xdp5g/internal/upf/n4state"
)

// journaling is the recorder, recording its establishments in the
// request's transaction as the n4 handler records its sessions.
type journaling struct {
	*recorder
	log *n4state.Log
}

func (j journaling) Establish(p Peer, req *message.SessionEstablishmentRequest) *message.SessionEstablishmentResponse {
	j.log.Request().Put(n4state.KindSession, func(e *n4state.Enc) { e.Uint(1) })
	return j.recorder.Establish(p, req)
}

// A server started from the state a previous one journaled is the same
// node to its peers: its Recovery Time Stamp, its associations, and the
// response to a request that changed the state, which a retransmission
// after the restart gets again rather than being served twice.
func TestRestartKeepsTheNode(t *testing.T) {
	dir := t.TempDir()
	open := func(st *State) *n4state.Log {
		l, _, err := n4state.Open(n4state.Options{Dir: dir}, func(kind byte, value []byte) error {
			if st == nil {
				return nil
			}
			_, err := st.Replay(kind, value)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := open(nil)
	before, _ := startServer(t, func(c *Config) { c.Journal, c.Handler = l, journaling{c.Handler.(*recorder), l} })
	m := newSMF(t, before.Addr())
	m.associate()
	first := m.exchange(sessionEstablishmentRequest(0x10))
	if err := before.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	st := NewState()
	l = open(st)
	t.Cleanup(func() { l.Close() })
	after, rec := startServer(t, func(c *Config) {
		c.Listen, c.Journal, c.Restored, c.Handler = before.Addr().String(), l, st, journaling{c.Handler.(*recorder), l}
	})
	if !after.Recovery().Equal(before.Recovery()) {
		t.Errorf("Recovery Time Stamp %v after the restart, %v before", after.Recovery(), before.Recovery())
	}
	if a := after.Associations(); len(a) != 1 || a[0].NodeID != smfName || a[0].Addr.Addr() != m.addr().Addr() {
		t.Errorf("associations %+v after the restart, want %s's", a, smfName)
	}
	again := m.exchange(sessionEstablishmentRequest(0x10))
	if !bytes.Equal(first.raw, again.raw) || rec.count("establish "+smfName) != 0 {
		t.Errorf("the retransmission was served %d times more, answered\n% x\nfirst\n% x", rec.count("establish "+smfName), again.raw, first.raw)
	}
}
