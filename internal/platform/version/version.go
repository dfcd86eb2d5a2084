// Package version says which build of xdp5g is running: the version
// `make build` stamps into every binary (git describe), else the
// revision the Go toolchain recorded, else "devel".
package version

import (
	"runtime/debug"
	"sync"
)

// stamped is set at link time: -ldflags '-X <this package>.stamped=v1.2.3'.
var stamped string

// String is this build's version.
var String = sync.OnceValue(func() string {
	if stamped != "" {
		return stamped
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	var revision, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if revision == "" {
		return "devel"
	}
	if len(revision) > 12 {
		revision = revision[:12]
	}
	if modified == "true" {
		revision += "-dirty"
	}
	return revision
})
