package session

import (
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/xdp5g/xdp5g/internal/upf/buffer"
)

// unreachable is a resolver that finds no next hop.
type unreachable struct{}

func (unreachable) Acquire(netip.Addr) (uint32, error)       { return 0, errors.New("unreachable") }
func (unreachable) Adopt(netip.Addr, uint32) (uint32, error) { return 0, errors.New("unreachable") }
func (unreachable) ReleasePrevious()                         {}
func (unreachable) Release(netip.Addr)                       {}
func (unreachable) SetStatic(netip.Addr, net.HardwareAddr)   {}
func (unreachable) ClearStatic(netip.Addr)                   {}

// An install that fails after arming a buffer gives the buffer back: no
// slot taken, nothing armed.
func TestFailedInstallReleasesItsBuffer(t *testing.T) {
	e := newStoreEnv(t)
	buffers, err := buffer.New(e.dp, buffer.Config{})
	check(t, err)
	t.Cleanup(func() { buffers.Close() })
	store := NewStore(e.dp, unreachable{}, nil)
	store.SetBuffers(buffers)
	sess := figure10()
	sess.PDRs[0].FARID = 300
	sess.FARs = append([]FAR{{ID: 300, Action: ActionBuffer}}, sess.FARs...) // armed before FAR 200 fails
	if err := store.Create(sess); err == nil {
		t.Fatal("a session whose gNB has no next hop was installed")
	}
	if n := store.bufSlots.InUse(); n != 0 {
		t.Errorf("after the failure: %d buffer slots in use", n)
	}
	for slot := range e.dp.BufferCapacity() {
		if buffers.Pending(slot) {
			t.Errorf("after the failure: buffer %d is armed", slot)
		}
	}
}
