// Package gcpace paces Go's garbage collector for a heap of long-lived
// sessions. Every collection marks every session: at a million, seconds of
// marking on the CPUs that PFCP requests need. Go collects whenever the heap
// has grown by GOGC percent, and at least every two minutes even when it has
// not; the collections that time forces are most of a daemon's at a steady
// request rate. With GOGC off the runtime forces none, and collects only when
// its soft memory limit says so: Start moves that limit after every
// collection to the heap GOGC would allow.
package gcpace

import (
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// Percent is the heap growth allowed between collections, as GOGC:
	// the heap may reach three times the live one.
	Percent = 200
	// headroom is the share of the limit the runtime keeps free of heap
	// (memoryLimitHeapGoalHeadroomPercent in runtime/mgcpacer.go).
	headroom = 3
	// floor keeps a small heap from collecting all the time.
	floor = 64 << 20
	// poll is how soon the limit follows a collection.
	poll = 100 * time.Millisecond
)

// Limit is the soft memory limit under which the runtime lets the heap
// reach what GOGC=Percent would: that heap, grown by the runtime's headroom,
// plus the memory the runtime counts against the limit besides heap objects
// and free pages (overhead: stacks, metadata, free slots of used spans); at
// least floor and at most ceiling.
func Limit(live, overhead, ceiling uint64) int64 {
	heap := live + live*Percent/100
	return int64(min(max(heap*100/(100-headroom)+overhead, floor), ceiling))
}

// read returns the count of finished collections, the heap they last
// found live, and the runtime's overhead as Limit takes it.
func read() (cycles, live, overhead uint64) {
	samples := []metrics.Sample{
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	metrics.Read(samples)
	v := func(i int) uint64 { return samples[i].Value.Uint64() }
	return v(0), v(1), v(2) - v(3) - v(4) - v(5)
}

// startCeiling is the ceiling Start was given: Pause's limit.
var startCeiling atomic.Int64

// Pause stops collections, under Start's ceiling, until resume: for a burst
// of allocations that all stay live, such as a restart restoring a million
// sessions, which each collection meanwhile would only mark again.
func Pause() (resume func()) {
	limit := startCeiling.Load()
	if limit == 0 {
		limit = math.MaxInt64
	}
	oldLimit := debug.SetMemoryLimit(limit)
	oldPercent := debug.SetGCPercent(-1)
	return func() {
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
	}
}

// Start turns GOGC off and keeps the soft memory limit at Limit of each
// collection's live heap, until stop, which restores both.
func Start(ceiling uint64) (stop func()) {
	cycles, live, overhead := read()
	startCeiling.Store(int64(min(ceiling, math.MaxInt64)))
	oldLimit := debug.SetMemoryLimit(Limit(live, overhead, ceiling))
	oldPercent := debug.SetGCPercent(-1)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(poll)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			if c, l, o := read(); c != cycles {
				cycles = c
				debug.SetMemoryLimit(Limit(l, o, ceiling))
			}
		}
	}()
	return func() {
		close(quit)
		<-done
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
	}
}

// Tune sets the collector of a process whose heap is mostly sessions that
// live long: GOGC Percent without the collections time forces (Start), under
// a soft limit of half the machine's memory. GOGC and GOMEMLIMIT win.
func Tune() {
	ceiling := debug.SetMemoryLimit(-1)
	var mem unix.Sysinfo_t
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set && unix.Sysinfo(&mem) == nil {
		ceiling = int64(mem.Totalram) * int64(mem.Unit) / 2
		debug.SetMemoryLimit(ceiling)
	}
	if _, set := os.LookupEnv("GOGC"); !set {
		Start(uint64(ceiling)) // for the process's life
	}
}
