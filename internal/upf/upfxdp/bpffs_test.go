package upfxdp

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// inPrivateMounts runs f on a thread of its own in a mount namespace of its
// own that copies the test's and sends none of its mounts back, as `ip
// netns exec` gives a process: with a fresh sysfs over /sys, which hides
// /sys/fs/bpf, and a bpffs of its own at private. The thread ends with f.
func inPrivateMounts(t *testing.T, private string, f func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		for _, step := range []func() error{
			func() error { return unix.Unshare(unix.CLONE_NEWNS) },
			func() error { return unix.Mount("", "/", "", unix.MS_SLAVE|unix.MS_REC, "") },
			func() error { return unix.Unmount("/sys", unix.MNT_DETACH) },
			func() error { return unix.Mount("sysfs", "/sys", "sysfs", 0, "") },
			func() error { return unix.Mount("bpf", private, "bpf", 0, "") },
		} {
			if err := step(); err != nil {
				done <- err
				return
			}
		}
		f()
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Pins outlive the process on a bpffs that PID 1's mount namespace holds
// too, and die with it on one mounted in a private mount namespace, or one
// Open would mount there.
func TestPinsOutlive(t *testing.T) {
	testsupport.NeedRoot(t, "mounts")
	host := testsupport.PinDir(t)
	if err := ensureBPFFS(host); err != nil {
		t.Fatal(err)
	}
	shared := testsupport.BPFFS(t) // in the test's, the host's, mount namespace
	private := t.TempDir()         // gets a bpffs in the private namespace only
	check := func(name, pinPath string, want bool, reason string) {
		t.Helper()
		outlive, why, err := PinsOutlive(pinPath)
		switch {
		case err != nil:
			t.Errorf("%s: %v", name, err)
		case outlive != want:
			t.Errorf("%s: PinsOutlive(%s) = %v (%s), want %v", name, pinPath, outlive, why, want)
		case !strings.Contains(why, reason):
			t.Errorf("%s: why %q, want it to say %q", name, why, reason)
		}
	}
	check("the host's /sys/fs/bpf", filepath.Join(host, "not", "yet"), true, "")
	check("the test's bpffs", filepath.Join(shared, "xdp5g"), true, "")
	inPrivateMounts(t, private, func() {
		check("/sys/fs/bpf under a fresh sysfs", "/sys/fs/bpf/xdp5g", false,
			"no bpf filesystem is mounted at /sys/fs/bpf, and one mounted there would be private to this process's mount namespace")
		check("a private bpffs", filepath.Join(private, "xdp5g"), false, "is mounted in this process's mount namespace only")
		check("the host's bpffs seen from a private namespace", filepath.Join(shared, "xdp5g"), true, "")
	})
	if _, _, err := PinsOutlive(filepath.Join(t.TempDir(), "xdp5g")); err == nil || !strings.Contains(err.Error(), "not on a bpf filesystem") {
		t.Errorf("a pin path on no bpffs: %v", err)
	}
}

// containerBPFFS names, in a test binary run again as a container's PID 1,
// the bpffs the host mounted.
const containerBPFFS = "XDP5G_TEST_CONTAINER_BPFFS"

// In a container (a PID namespace of its own, whose PID 1 is the
// container's) pins outlive the process on a bpffs the container got from
// the host, not on one the daemon would mount in the container.
func TestPinsOutliveInAContainer(t *testing.T) {
	if shared := os.Getenv(containerBPFFS); shared != "" {
		// A fresh /sys, as a container gets.
		if err := unix.Unmount("/sys", unix.MNT_DETACH); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("sysfs", "/sys", "sysfs", 0, ""); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			pinPath string
			want    bool
			reason  string
		}{
			{"/sys/fs/bpf/xdp5g", false, "no bpf filesystem is mounted at /sys/fs/bpf, and one mounted there would be the container's"},
			{filepath.Join(shared, "xdp5g"), true, ""},
		} {
			if outlive, why, err := PinsOutlive(c.pinPath); err != nil || outlive != c.want || why != c.reason {
				t.Errorf("PinsOutlive(%s) = %v, %q, %v; want %v, %q", c.pinPath, outlive, why, err, c.want, c.reason)
			}
		}
		return
	}
	testsupport.NeedRoot(t, "namespaces and mounts")
	cmd := exec.Command("unshare", "--pid", "--fork", "--mount-proc", os.Args[0], "-test.run=^TestPinsOutliveInAContainer$", "-test.v")
	cmd.Env = append(os.Environ(), containerBPFFS+"="+testsupport.BPFFS(t))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestPinsOutliveInAContainer") {
		t.Errorf("in a container: %v\n%s", err, out)
	}
}
