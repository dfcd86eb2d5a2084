// Package demotest gives tests the demo testbed and its UPF, removed when
// the test ends. Only tests import it.
package demotest

import (
	"testing"

	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/testsupport"
	"github.com/xdp5g/xdp5g/internal/upf/buffer"
)

// Testbed builds the demo testbed, skipping a test not run as root.
func Testbed(t testing.TB) *demo.Testbed {
	t.Helper()
	testsupport.NeedRoot(t, "network namespaces and XDP")
	tb, err := demo.NewTestbed()
	if err != nil {
		t.Fatal(err)
	}
	testsupport.Cleanup(t, tb.Close)
	return tb
}

// UPF starts the testbed's UPF.
func UPF(t testing.TB, tb *demo.Testbed) *demo.UPF {
	t.Helper()
	upf, err := tb.StartUPF()
	testsupport.CheckLoad(t, err)
	testsupport.Cleanup(t, upf.Close)
	return upf
}

// WithBuffers is the testbed and its UPF as the daemon runs it, with a
// buffer manager over its data path, its raw socket for released frames in
// the UPF's namespace, handed to the store; the caller runs and closes it.
func WithBuffers(t testing.TB, cfg buffer.Config) (*demo.Testbed, *demo.UPF, *buffer.Manager) {
	t.Helper()
	tb := Testbed(t)
	upf := UPF(t, tb)
	var buffers *buffer.Manager
	if err := tb.UPF.Do(func() (err error) {
		buffers, err = buffer.New(upf.Datapath, cfg)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	upf.Store.SetBuffers(buffers)
	return tb, upf, buffers
}
