package upfxdp

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// bpffsRoot is where a machine mounts bpffs, and where Open mounts one when
// the pin path lies below it and none is mounted there.
const bpffsRoot = "/sys/fs/bpf"

// initPIDNamespace is the inode number of the initial PID namespace (the
// kernel's PROC_PID_INIT_INO): the host's, not a container's.
const initPIDNamespace = 0xEFFFFFFC

// initMountinfo lists the mounts of PID 1's mount namespace.
const initMountinfo = "/proc/1/mountinfo"

// ErrNotBPFFS is PinsOutlive's for a pin path that can hold no pins.
var ErrNotBPFFS = errors.New("not on a bpf filesystem")

// ensureBPFFS mounts bpffs at /sys/fs/bpf when the pin path lies below it
// and nothing is mounted there yet (a fresh machine), then makes the path.
func ensureBPFFS(pinPath string) error {
	if below(pinPath, bpffsRoot) {
		var st unix.Statfs_t
		if err := unix.Statfs(bpffsRoot, &st); err != nil || uint32(st.Type) != unix.BPF_FS_MAGIC {
			if err := os.MkdirAll(bpffsRoot, 0o755); err != nil {
				return err
			}
			if err := unix.Mount("bpf", bpffsRoot, "bpf", 0, ""); err != nil {
				return fmt.Errorf("mounting bpffs at %s: %w", bpffsRoot, err)
			}
		}
	}
	return errors.Join(os.MkdirAll(filepath.Join(pinPath, linksDirName), 0o755),
		os.MkdirAll(filepath.Join(pinPath, mirrorLinksDirName), 0o755))
}

// PinsOutlive tells whether what is pinned under pinPath outlives this
// process. A bpf filesystem lives as long as a mount of it does: pins
// outlive the process when the bpffs under pinPath (or the one Open would
// mount at /sys/fs/bpf) is mounted in PID 1's mount namespace too. Under
// `ip netns exec` the process has a mount namespace of its own, with a fresh
// /sys; in a container PID 1 is the container's, and a bpffs mounted by the
// container runtime from the host counts as shared, one mounted in the
// container does not. When the pins die with the process, why says why.
func PinsOutlive(pinPath string) (outlive bool, why string, err error) {
	dir, err := existingAncestor(pinPath)
	if err != nil {
		return false, "", err
	}
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, dir, 0, unix.STATX_MNT_ID, &st); err != nil {
		return false, "", fmt.Errorf("%s: %w", dir, err)
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err != nil {
		return false, "", fmt.Errorf("%s: %w", dir, err)
	}
	mounts, err := readMountinfo(initMountinfo)
	if err != nil {
		return false, "", err
	}
	if uint32(sfs.Type) == unix.BPF_FS_MAGIC {
		dev := fmt.Sprintf("%d:%d", st.Dev_major, st.Dev_minor)
		for _, m := range mounts {
			if m.fsType == "bpf" && m.dev == dev {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("the bpf filesystem holding %s is mounted in this process's mount namespace only", pinPath), nil
	}
	if !below(pinPath, bpffsRoot) {
		return false, "", fmt.Errorf("%s is %w", pinPath, ErrNotBPFFS)
	}
	// Open would mount bpffs in this process's mount namespace: one that
	// outlives it if it is PID 1's (it then holds the mount /sys/fs/bpf is
	// on now) and PID 1 is the host's init.
	var pidNS unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &pidNS); err != nil {
		return false, "", err
	}
	if pidNS.Ino != initPIDNamespace {
		return false, fmt.Sprintf("no bpf filesystem is mounted at %s, and one mounted there would be the container's", bpffsRoot), nil
	}
	for _, m := range mounts {
		if m.id == st.Mnt_id {
			return true, "", nil
		}
	}
	return false, fmt.Sprintf("no bpf filesystem is mounted at %s, and one mounted there would be private to this process's mount namespace", bpffsRoot), nil
}

// existingAncestor is path or its nearest ancestor that exists.
func existingAncestor(path string) (string, error) {
	for {
		_, err := os.Stat(path)
		if err == nil || !errors.Is(err, fs.ErrNotExist) || path == "/" {
			return path, err
		}
		path = filepath.Dir(path)
	}
}

// below says whether path lies below dir.
func below(path, dir string) bool { return strings.HasPrefix(path, dir+"/") }

// mount is a line of a mountinfo file (proc_pid_mountinfo(5)).
type mount struct {
	id     uint64
	dev    string // major:minor of the filesystem
	fsType string
}

func readMountinfo(path string) ([]mount, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mounts []mount
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		// ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
		fields := strings.Fields(lines.Text())
		sep := -1
		for i := 6; i < len(fields); i++ {
			if fields[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(fields) {
			return nil, fmt.Errorf("%s: unexpected line %q", path, lines.Text())
		}
		id, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: unexpected line %q", path, lines.Text())
		}
		mounts = append(mounts, mount{id: id, dev: fields[2], fsType: fields[sep+1]})
	}
	return mounts, lines.Err()
}

// ErrPinsInUse is LockPins's error when the lock is held.
var ErrPinsInUse = errors.New("the pins are in use")

// LockPins takes the pin path for its owner: an exclusive lock on its
// directory (made, with bpffs mounted, as Open would), which any other
// LockPins, in this process or another, finds taken (ErrPinsInUse) until
// the returned file is closed or the process ends, however it ends. Opening the maps takes no
// lock: the lock is for the processes that own the data path, not for
// those that only look at it.
func LockPins(pinPath string) (*os.File, error) {
	if err := ensureBPFFS(pinPath); err != nil {
		return nil, err
	}
	dir, err := os.Open(pinPath)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(dir.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		dir.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, ErrPinsInUse
		}
		return nil, fmt.Errorf("locking %s: %w", pinPath, err)
	}
	return dir, nil
}
