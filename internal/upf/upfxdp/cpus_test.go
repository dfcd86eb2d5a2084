package upfxdp

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// testCPUs skips a test unless the host has the two CPUs it runs the
// program on.
func testCPUs(t *testing.T) {
	t.Helper()
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: nothing counts apart")
	}
}

// onCPU calls f on CPU cpu: a test run of the program runs on the calling
// thread's CPU.
func onCPU(t *testing.T, cpu int, f func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before, one unix.CPUSet
	check(t, unix.SchedGetaffinity(0, &before))
	one.Set(cpu)
	check(t, unix.SchedSetaffinity(0, &one))
	defer unix.SchedSetaffinity(0, &before)
	f()
}
