package pfcp

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/message"

	"github.com/xdp5g/xdp5g/internal/testsupport"
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
	open := func(st *State) *n4state.Log { return openJournal(t, dir, st, 0) }
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

// openJournal opens the journal in dir, replaying it into st (nil: none),
// compacting after compactAfter octets (0: the default).
func openJournal(t *testing.T, dir string, st *State, compactAfter int64) *n4state.Log {
	t.Helper()
	l, _, err := n4state.Open(n4state.Options{Dir: dir, CompactAfter: compactAfter}, func(kind byte, value []byte) error {
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

// The server of TestKilledServerKeepsWhatItAnswered, in a process of its
// own: it journals into the directory the environment names, compacting
// every few dozen requests, until killed.
const killedDirEnv, killedListenEnv = "XDP5G_PFCP_KILLED_DIR", "XDP5G_PFCP_KILLED_LISTEN"

// A server killed (SIGKILL) while an SMF establishes sessions, its journal
// compacted again and again meanwhile (snapshots of the responses cached
// included), restarts with every request it answered: each one sent again
// gets the very response it got, and none is served twice.
func TestKilledServerKeepsWhatItAnswered(t *testing.T) {
	if dir := os.Getenv(killedDirEnv); dir != "" {
		l := openJournal(t, dir, nil, 32<<10)
		s, _ := startServer(t, func(c *Config) {
			c.Listen, c.Journal, c.Handler = os.Getenv(killedListenEnv), l, journaling{c.Handler.(*recorder), l}
		})
		l.Compact(s.Snapshot)
		select {} // until killed
	}
	dir, listen := t.TempDir(), netip.MustParseAddrPort(testsupport.FreeAddr(t, "udp"))
	child := exec.Command(os.Args[0], "-test.run=^TestKilledServerKeepsWhatItAnswered$")
	child.Env = append(os.Environ(), killedDirEnv+"="+dir, killedListenEnv+"="+listen.String())
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	m := newSMF(t, listen)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		m.send(associationSetupRequest(1, smfRecovery))
		m.conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, _, err := m.conn.ReadFromUDPAddrPort(make([]byte, maxDatagram)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server in the child process does not answer")
		}
	}
	// Killed after an answer, while the next request is on its way, at a
	// point of the compactions that differs from run to run.
	answered := map[uint32][]byte{}
	seq := uint32(2)
	for kill := seq + 2000 + rand.Uint32N(2000); seq < kill; seq++ {
		answered[seq] = m.exchange(establishmentNumbered(seq)).raw
	}
	m.send(establishmentNumbered(seq))
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	child.Wait()
	// The response to the last request, if the server sent it before it
	// died, is not for what follows.
	for m.conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond)); ; {
		if _, _, err := m.conn.ReadFromUDPAddrPort(make([]byte, maxDatagram)); err != nil {
			break
		}
	}

	st := NewState()
	l := openJournal(t, dir, st, 0)
	t.Cleanup(func() { l.Close() })
	_, rec := startServer(t, func(c *Config) {
		c.Listen, c.Journal, c.Restored, c.Handler = listen.String(), l, st, journaling{c.Handler.(*recorder), l}
	})
	for seq, raw := range answered {
		if again := m.exchange(establishmentNumbered(seq)); !bytes.Equal(again.raw, raw) {
			t.Fatalf("establishment %d, answered before the kill, answered otherwise after it:\n% x\nwas\n% x", seq, again.raw, raw)
		}
	}
	if n := rec.count("establish " + smfName); n != 0 {
		t.Errorf("%d of %d establishments answered before the kill served again after it", n, len(answered))
	}
}

// establishmentNumbered is sessionEstablishmentRequest with sequence
// number seq.
func establishmentNumbered(seq uint32) []byte {
	b := sessionEstablishmentRequest(0)
	b[12], b[13], b[14] = byte(seq>>16), byte(seq>>8), byte(seq)
	return b
}
