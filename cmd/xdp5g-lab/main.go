// Command xdp5g-lab is the lab of xdp5g: the benchmarks that measure the
// product's data paths and control plane against baselines of the same run.
// It is kept apart from the xdp5g binary, which links none of it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/xdp5g/xdp5g/internal/lab/bench"
	"github.com/xdp5g/xdp5g/internal/platform/gcpace"
)

func main() {
	// A reader of the output that goes away (`xdp5g-lab bench | head`)
	// must not kill the process before it removes its namespaces and pins.
	signal.Ignore(syscall.SIGPIPE)
	if len(os.Args) < 2 || os.Args[1] != "bench" {
		fmt.Fprintln(os.Stderr, "usage: xdp5g-lab bench [FLAGS]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	gcpace.Tune() // the benchmarks measure the daemon's code, so with its collector
	err := bench.Run(ctx, os.Stdout, os.Args[2:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "xdp5g-lab:", err)
		os.Exit(1)
	}
}
